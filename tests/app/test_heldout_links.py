"""Links into the held-out views that must still show what they name: an in-run evaluation
older than the Evaluation page's list, a bad id or domain in a link (a warning, never a
traceback), and the Runs page's held-out figures after an evaluation is recorded again."""

from backend.store import Store
from tests.app.test_heldout_pages import _evaluation_page, _runs_page, _table
from tests.backend.heldout_runs import DOMAINS, before, heldout_store, run_config, scripted_samples
from trainer.evaluate import record_heldout


def _newer_evaluations(db, n: int = 200) -> None:
    """`n` completed `rlwb eval` evaluations, all newer than the run's (bare rows, no samples)."""
    with Store(db) as store:
        store.db["eval_runs"].insert_all(
            [{"id": f"e29990101-000000-{i:04x}", "model": f"m{i}", "model_path": f"/m{i}", "identity": "{}",
              "suite": "{}", "status": "completed", "created_at": f"2999-01-01T00:00:{i % 60:02d}.{i:03d}+00:00"}
             for i in range(n)])


def test_a_link_to_in_run_evaluations_older_than_the_list_still_opens_them(tmp_path, monkeypatch):
    db = tmp_path / "held.db"
    _, ids = heldout_store(db, tasks=12)
    _newer_evaluations(db)
    at = _evaluation_page(db, monkeypatch, a=ids["before"], b=ids["after"], domain="chain_sum")
    assert at.selectbox(key="eval_a").value == ids["before"] and at.selectbox(key="eval_b").value == ids["after"]
    assert len(_table(at, "answer A")) == 12
    at.run()  # the user's next interaction keeps them
    assert at.selectbox(key="eval_b").value == ids["after"]


def test_a_link_with_an_unknown_id_or_domain_says_so(tmp_path, monkeypatch):
    db = tmp_path / "held.db"
    _, ids = heldout_store(db, tasks=12)
    at = _evaluation_page(db, monkeypatch, a="e-nope", b=ids["after"], domain="no_such_domain")
    warnings = " ".join(w.value for w in at.warning)
    assert "'e-nope' is not in this store" in warnings
    assert "domain 'no_such_domain' is not one of" in warnings
    assert at.selectbox(key="eval_b").value == ids["after"]


def test_the_runs_page_shows_an_evaluation_recorded_again(tmp_path, monkeypatch):
    db = tmp_path / "held.db"
    rid, ids = heldout_store(db, tasks=12)
    at = _runs_page(db, monkeypatch, rid)
    assert _table(at, "accuracy after").set_index("domain").loc["basic_arithmetic", "accuracy after"] == (
        "100.0% [100.0, 100.0]")
    with Store(db) as store:  # "after" recorded again (a resumed run), now answering as before training
        record_heldout(store, rid, "after", "again", run_config(12), dict.fromkeys(DOMAINS, 1),
                       scripted_samples(DOMAINS, 12, before))
    at.run()
    assert _table(at, "accuracy after").set_index("domain").loc["basic_arithmetic", "accuracy after"] == (
        "0.0% [0.0, 0.0]")
