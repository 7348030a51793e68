"""A training run's held-out evaluations stored with every completion (`trainer.evaluate`),
read back as answers side by side and as figures with intervals, baselines and verdicts
(`backend.heldout`), kept consistent across resume, and shown by the CLI."""

import json

import pytest

from backend.cli import main
from backend.store import Store
from tests.backend.heldout_runs import after, before, heldout_store, run_config, scripted_rollout
from tests.backend.test_eval_report import add_eval, eval_rows


@pytest.fixture
def held(tmp_path):
    path = tmp_path / "held.db"
    rid, ids = heldout_store(path, tasks=12)
    return path, rid, ids


def test_the_loops_evaluation_stores_every_completion_as_an_evaluation(tmp_path, monkeypatch):
    """`run_evaluation` (what `train` calls before, every `eval_every` steps and after)
    stores an evaluation of its phase with one greedy sample per task and its completion,
    and the aggregates the curves use agree with them."""
    import trainer.evaluate
    import trainer.loop

    cfg = run_config(tasks=5)
    with Store(tmp_path / "wb.db") as store:
        rid = store.create_run("r", cfg.model_dump(mode="json"), total_steps=cfg.steps)
        for phase, reply in (("before", before), ("step-2", before), ("after", after)):
            monkeypatch.setattr(trainer.evaluate, "rollout", scripted_rollout(reply))
            trainer.loop.run_evaluation(None, None, cfg, store, rid, phase, f"model {phase}")
        evals = store.list_evals(run_id=rid)
        assert sorted((e["phase"], e["step"]) for e in evals) == [("after", 4), ("before", 0), ("step-2", 2)]
        ev = next(e for e in evals if e["phase"] == "after")
        assert ev["status"] == "completed" and ev["suite"]["in_run"] and ev["suite"]["samples"] == 1
        assert ev["suite"]["temperature"] == 0.0 and ev["suite"]["domains"] == {"chain_sum": [1, 1],
                                                                                "basic_arithmetic": [1, 1]}
        rows = store.eval_samples(ev["id"], with_completions=True)
        assert len(rows) == 2 * 5 and {r["sample_idx"] for r in rows} == {0}
        assert all(r["completion"].startswith("Let me think.\nAnswer: ") for r in rows)
        assert {r["finish_reason"] for r in rows} == {"stop"}
        by_domain = {e["domain"]: e for e in store.evaluations(rid) if e["phase"] == "after"}
        for d, agg in by_domain.items():
            mine = [r for r in rows if r["domain"] == d]
            assert agg["n"] == len(mine) and agg["accuracy"] == sum(r["correct"] for r in mine) / len(mine)
        assert by_domain["basic_arithmetic"]["accuracy"] == 1.0
        assert store.list_evals(run_id=rid, in_run=False) == []  # not taken for `rlwb eval`'s


def test_a_phase_evaluated_again_replaces_its_evaluation(held):
    from tests.backend.heldout_runs import DOMAINS, scripted_samples
    from trainer.evaluate import record_heldout

    path, rid, ids = held
    with Store(path) as store:
        again = record_heldout(store, rid, "after", "m", run_config(12), dict.fromkeys(DOMAINS, 1),
                               scripted_samples(DOMAINS, 12, before))
        assert [e["id"] for e in store.list_evals(run_id=rid) if e["phase"] == "after"] == [again]
        orphans = store.db.execute("SELECT count(*) FROM eval_samples WHERE eval_id = ?", [ids["after"]]).fetchone()
        assert orphans[0] == 0


def test_answers_side_by_side_for_the_same_task(held):
    from backend.heldout import filter_pairs, task_pairs

    path, _, ids = held
    with Store(path) as store:
        pairs = task_pairs(store, ids["after"], "chain_sum", vs=ids["before"])
    assert len(pairs) == 12
    first = pairs[0]
    assert first["question"].startswith("State the final answer") and first["reference"]
    assert first["prompt"].startswith("system: ") and f"user: {first['question']}\n" in first["prompt"]
    assert first["prompt"].endswith("Answer: <answer>")  # the format instruction the model was given
    assert first["a"]["answer"] == "0" and first["a"]["completion"] == "Let me think.\nAnswer: 0"
    assert first["b"]["answer"] == first["reference"] and first["b"]["correct"]  # seed 1000000000 is even
    fixed = filter_pairs(pairs, "fixed")
    assert fixed and all(p["seed"] % 2 == 0 and not p["a"]["correct"] and p["b"]["correct"] for p in fixed)
    wrong = filter_pairs(pairs, "wrong after")
    assert wrong and all(p["seed"] % 2 == 1 and p["b"]["answer"] == "0" for p in wrong)
    assert filter_pairs(pairs, "broken") == []
    assert {p["seed"] for p in filter_pairs(pairs, "changed")} == {p["seed"] for p in fixed}


def test_a_runs_figures_come_from_the_evaluation_report(held):
    """The Runs page's rows: intervals, format rate, best baseline and verdict, the same
    numbers the Evaluation page's report of the same two evaluations gives."""
    from backend.eval_report import build_report
    from backend.eval_tables import headline_rows
    from backend.heldout import run_heldout

    path, rid, ids = held
    with Store(path) as store:
        figures = run_heldout(store, rid)
        assert figures["ids"] == [ids["before"], ids["after"]] and figures["phases"] == ["before", "after"]
        rows = {r["domain"]: r for r in figures["rows"]}
        page = {r["domain"]: r for r in headline_rows(build_report(store, figures["ids"]))}
    arith = rows["basic_arithmetic"]
    assert arith["accuracy before"] == "0.0% [0.0, 0.0]" and arith["accuracy after"] == "100.0% [100.0, 100.0]"
    assert arith["format rate"] == "100% → 100%" and arith["verdict"] == "improvement"
    assert arith["best baseline"].startswith("answering '") and arith["best baseline"] == \
        page["basic_arithmetic"]["best baseline"]
    assert rows["chain_sum"]["accuracy after"].startswith("50.0% [") == page["chain_sum"]["pass@1 B"].startswith("50.0% [")
    assert rows["chain_sum"]["verdict"] == page["chain_sum"]["verdict"]
    assert rows["all domains"]["tasks"] == 24


def test_too_few_tasks_get_no_interval(tmp_path):
    from backend.heldout import run_heldout

    rid, _ = heldout_store(tmp_path / "few.db", tasks=4)
    with Store(tmp_path / "few.db") as store:
        rows = {r["domain"]: r for r in run_heldout(store, rid)["rows"]}
    assert rows["basic_arithmetic"]["accuracy after"] == "100.0% (too few tasks: 4)"
    assert rows["basic_arithmetic"]["verdict"] == "too few tasks"
    assert "[" not in rows["basic_arithmetic"]["change"]


def test_resume_drops_the_in_run_evaluations_of_discarded_steps(held):
    """Resumed from step 2's checkpoint, "after" (step 4) goes with its samples; "before"
    (step 0) and "step-2" stay, and the figures compare before with step-2."""
    from backend.heldout import run_heldout

    path, rid, ids = held
    with Store(path) as store:
        store.truncate_after(rid, 2)
        assert [e["phase"] for e in store.in_run_evals(rid)] == ["before", "step-2"]
        gone = store.db.execute("SELECT count(*) FROM eval_samples WHERE eval_id = ?", [ids["after"]]).fetchone()
        assert gone[0] == 0
        assert len(store.eval_samples(ids["step-2"])) == 24
        assert run_heldout(store, rid)["phases"] == ["before", "step-2"]


def test_migration_to_version_11_keeps_rlwb_evals_apart(tmp_path):
    from tests.backend.test_store import old_store

    db = old_store(tmp_path / "v10.db", 10)
    db["eval_runs"].insert({"id": "e1", "model": "m", "suite": "{}", "status": "completed", "created_at": "2025"})
    db.conn.commit()
    db.close()
    with Store(tmp_path / "v10.db") as store:
        assert [e["id"] for e in store.list_evals(in_run=False)] == ["e1"]
        assert store.list_evals(in_run=True) == [] and store.list_evals()[0]["phase"] is None


def test_a_run_id_names_its_checkpoints_rlwb_eval_not_its_in_run_ones(held):
    from backend.evaluation import resolve_eval_ref

    path, rid, _ = held
    with Store(path) as store:
        ckpt = add_eval(store, f"{rid}:4", eval_rows({"chain_sum": 1}), run_id=rid, step=4)
        assert resolve_eval_ref(store, rid) == ckpt


def test_cli_eval_samples_prints_both_sides(held, capsys):
    path, _, ids = held
    assert main(["--db", str(path), "eval", "samples", ids["after"], "--domain", "chain_sum", "--vs", ids["before"],
                 "--filter", "fixed", "--limit", "1"]) == 0
    out = capsys.readouterr().out
    assert "before · step 0 (in-run, greedy)" in out and "after · step 4 (in-run, greedy)" in out
    assert "chain_sum: 1 tasks (fixed)" in out and "A (wrong, reward" in out and "B (right, reward 1.000" in out
    assert "| Answer: 0" in out

    assert main(["--db", str(path), "eval", "samples", ids["after"], "--domain", "chain_sum", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["b"] == ids["after"] and data["a"] is None and len(data["tasks"]) == 12
    assert data["tasks"][0]["b"]["completion"].startswith("Let me think.")

    assert main(["--db", str(path), "eval", "samples", ids["after"], "--domain", "humaneval"]) == 2
    assert "no held-out task of domain 'humaneval'" in capsys.readouterr().err


def test_cli_runs_show_prints_the_held_out_figures(held, capsys):
    path, rid, ids = held
    with Store(path) as store:
        ckpt = add_eval(store, f"{rid}:4", eval_rows({"chain_sum": 1}), run_id=rid, step=4)
    assert main(["--db", str(path), "runs", "show", rid]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.strip().startswith("basic_arithmetic"))
    assert "accuracy before 0.0% [0.0, 0.0]" in line and "format rate 100% → 100%" in line
    assert "best baseline answering '" in line and "verdict improvement" in line
    assert f"eval samples {ids['after']} --domain DOMAIN --vs {ids['before']}" in out
    assert f"rlwb eval {ckpt} of step 4: completed" in out and "samples, T=1.0" in out


def test_the_html_report_shows_held_out_answers_changed_ones_first(held, tmp_path):
    from backend.eval_html import write_html
    from backend.heldout import answer_examples

    path, _, ids = held
    with Store(path) as store:
        report = write_html(store, [ids["before"], ids["after"]], tmp_path / "r.html", resamples=50,
                            answers=lambda s, r: answer_examples(s, r, per_domain=3))
        examples = dict(answer_examples(store, report, per_domain=3))
    html = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert "<h2>Held-out answers</h2>" in html and "<h3>chain_sum</h3>" in html
    rows = examples["chain_sum"]
    assert len(rows) == 3 and all(r["changed"] for r in rows)  # fixed tasks (even seeds) come first
    assert all(r["answer A"] == "0" and r["answer B"] == r["reference"] and r["correct B"] == "right" for r in rows)
    assert f"<td>{rows[0]['seed']}</td>" in html and f"<td>{rows[0]['reference']}</td>" in html

