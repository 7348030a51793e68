"""`rlwb eval RUN_ID`: a real evaluation of the tiny run's checkpoint on vLLM, checked from the store."""

import pytest

from backend.cli import main
from domains.splits import is_heldout
from trainer.eval_stats import pass_at_k, task_results
from backend.store import Store
from tests.conftest import TINY_RUN_STEPS


@pytest.fixture(scope="module")
def evaluated(tiny_run):
    db, run_id = tiny_run
    code = main(["--db", str(db), "eval", run_id, "--tasks", "3", "--samples", "4", "--k", "1,4",
                 "--max-new-tokens", "8"])
    assert code == 0
    store = Store(db)
    return store, run_id, store.list_evals()[0]


def test_evaluation_of_a_run_checkpoint_is_stored_with_identity_and_exact_seeds(evaluated):
    store, run_id, ev = evaluated
    assert ev["status"] == "completed" and ev["run_id"] == run_id and ev["step"] == TINY_RUN_STEPS
    assert ev["model_path"] == store.checkpoints(run_id)[-1]["path"]
    assert len(ev["identity"]["sha256"]) == 64 and ev["identity"]["bytes"] > 0
    suite = ev["suite"]
    run_domains = set(store.get_run(run_id)["config"]["domains"])
    assert set(suite["domains"]) == run_domains  # no --mix: the run's own domains
    rows = store.eval_samples(ev["id"], with_completions=True)
    assert len(rows) == len(run_domains) * 3 * 4
    assert {r["task_seed"] for r in rows} == set(suite["seeds"]) and all(is_heldout(s) for s in suite["seeds"])
    assert {r["sample_idx"] for r in rows} == {0, 1, 2, 3}
    assert all(isinstance(r["completion"], str) for r in rows)


def test_stored_summary_is_the_estimator_over_the_stored_samples(evaluated):
    store, _, ev = evaluated
    rows = store.eval_samples(ev["id"])
    for domain, per in ev["summary"]["domains"].items():
        tasks = [t for k, t in task_results(rows).items() if k[0] == domain]
        assert per["tasks"] == 3 and per["samples"] == 12
        assert per["pass@1"]["value"] == pytest.approx(sum(t["c"] / t["n"] for t in tasks) / 3)
        assert per["pass@4"]["value"] == pytest.approx(sum(pass_at_k(4, t["c"], 4) for t in tasks) / 3)
        assert per["pass@1"]["low"] <= per["pass@1"]["value"] <= per["pass@1"]["high"]


def test_report_of_two_checkpoints_of_the_run(evaluated, tiny_run, capsys, tmp_path):
    store, run_id, ev = evaluated
    db, _ = tiny_run
    assert main(["--db", str(db), "eval", f"{run_id}:2", "--tasks", "3", "--samples", "4", "--k", "1,4",
                 "--max-new-tokens", "8"]) == 0
    first = store.list_evals()[0]
    assert first["step"] == 2 and first["suite"]["seeds"] == ev["suite"]["seeds"]  # the same held-out tasks
    capsys.readouterr()
    html = tmp_path / "report.html"
    assert main(["--db", str(db), "eval", "report", first["id"], ev["id"], "--html", str(html)]) == 0
    out = capsys.readouterr().out
    for domain in ev["suite"]["domains"]:
        assert domain in out
    assert html.is_file() and "<html" in html.read_text()[:500].lower()
