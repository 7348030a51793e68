"""`rlwb eval samples --vs` refuses two evaluations with no task in common (a clear error,
exit 2), instead of a table with one side missing on every row."""

from backend.cli import main
from backend.store import Store
from tests.backend.heldout_runs import heldout_store
from tests.backend.test_eval_report import add_eval, eval_rows


def test_cli_eval_samples_vs_an_evaluation_of_other_tasks_is_refused(tmp_path, capsys):
    path = tmp_path / "held.db"
    _, ids = heldout_store(path, tasks=4)
    with Store(path) as store:
        other = add_eval(store, "base", eval_rows({"chain_sum": 1}))  # seeds 0.., not the held-out range
    assert main(["--db", str(path), "eval", "samples", ids["after"], "--domain", "chain_sum", "--vs", other]) == 2
    err = capsys.readouterr().err
    assert f"{other} (--vs) and {ids['after']} share no chain_sum task" in err and "Traceback" not in err
    assert main(["--db", str(path), "eval", "samples", ids["after"], "--domain", "chain_sum", "--vs", "e-nope"]) == 2
    assert "'e-nope' not found" in capsys.readouterr().err


def test_eval_show_of_an_in_run_evaluation_names_the_policy_not_a_hash(tmp_path, capsys):
    path = tmp_path / "held.db"
    _, ids = heldout_store(path, tasks=4)
    assert main(["--db", str(path), "eval", "show", ids["after"]]) == 0
    out = capsys.readouterr().out
    assert "weights: the run's policy at that step (an in-run evaluation)" in out and "sha256 ?" not in out


def test_runs_show_mid_run_says_only_the_before_evaluation_exists(tmp_path, capsys):
    from tests.backend.heldout_runs import DOMAINS, before, run_config, scripted_samples
    from trainer.evaluate import record_heldout

    path = tmp_path / "mid.db"
    cfg = run_config(4)
    with Store(path) as store:
        rid = store.create_run("mid", cfg.model_dump(mode="json"), total_steps=cfg.steps)
        eid = record_heldout(store, rid, "before", "base", cfg, dict.fromkeys(DOMAINS, 1),
                             scripted_samples(DOMAINS, 4, before))
    assert main(["--db", str(path), "runs", "show", rid]) == 0
    out = capsys.readouterr().out
    assert f"held-out, before only (evaluation {eid}; later evaluations are compared with it" in out
