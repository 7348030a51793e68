"""The run manager: Ctrl-C and SIGTERM stop a run and keep what was written; background
runs survive kill -9 (marked failed) and resume from their last checkpoint."""

import os
import signal
import subprocess
import sys
import time

import pytest

from backend.runs import log_path
from backend.store import Store


def _wait_for_trajectories(db, proc, timeout_s: float = 300.0) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"run exited early with {proc.returncode}: {proc.stderr.read()[-2000:]}")
        if db.exists():
            with Store(db) as store:
                runs = store.list_runs()
                if runs and store.trajectories(runs[0]["id"], limit=1):
                    return runs[0]["id"]
        time.sleep(0.5)
    raise AssertionError("no step was written in time")


def test_ctrl_c_marks_run_stopped_and_keeps_data(tiny_model_dir, tmp_path):
    cfg = tmp_path / "long.yaml"
    cfg.write_text(
        f"name: interrupted\nmodel: {tiny_model_dir}\nsteps: 500\ndomains: [chain_sum]\n"
        "prompts_per_step: 2\ngroup_size: 2\nmicro_batch_size: 2\nmax_new_tokens: 8\n"
        f"vllm_compile: false\noutput_dir: {tmp_path / 'out'}\n"
    )
    db = tmp_path / "wb.db"
    # SIG_DFL for SIGINT in the child: a pytest started from a background shell inherits an
    # ignored SIGINT, and Python then never turns Ctrl-C into KeyboardInterrupt
    proc = subprocess.Popen([sys.executable, "-m", "backend.cli", "--db", str(db), "run", str(cfg)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        run_id = _wait_for_trajectories(db, proc)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 130, err[-2000:]
    assert "marked stopped" in err
    with Store(db) as store:
        run = store.get_run(run_id)
        assert run["status"] == "stopped" and run["finished_at"]
        assert "Ctrl-C" in run["error"]
        kept = store.trajectories(run_id, limit=10_000)
        assert kept and run["step"] >= 1
        assert len(kept) >= run["step"] * 2 * 2  # every completed step's samples are kept
        assert not [r for r in store.list_runs() if r["status"] == "running"]


def _wait(store: Store, run_id: str, done, what: str, timeout_s: float = 400.0) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        run = store.get_run(run_id)
        if done(run):
            return run
        time.sleep(0.5)
    log = log_path(store, run_id)
    raise AssertionError(f"{what} did not happen in time; run {run}; log tail:\n"
                         f"{log.read_text()[-3000:] if log.exists() else '(no log)'}")


def test_background_run_survives_kill_9_and_resumes_with_the_same_task_stream(tiny_model_dir, tmp_path):
    """launch -> kill -9 after its first checkpoint -> marked failed with the last step ->
    resume from the checkpoint -> completed; every step recorded once, tasks as planned."""
    from trainer.config import parse_config
    from backend.runs import launch, process_alive

    cfg = parse_config({
        "name": "bg", "model": str(tiny_model_dir), "steps": 4, "domains": ["chain_sum", "basic_arithmetic"],
        "prompts_per_step": 2, "group_size": 2, "micro_batch_size": 2, "max_new_tokens": 8,
        "checkpoint_every": 1, "vllm_compile": False, "seed": 7, "output_dir": str(tmp_path / "out"),
        "algorithm": "rloo",  # the leave-one-out baseline end to end
    })
    with Store(tmp_path / "wb.db") as store:
        run_id = launch(cfg, store)
        try:
            assert _kill_then_resume(store, run_id, cfg)["status"] == "completed"
        finally:  # a failed test leaves no training process behind
            pid = store.get_run(run_id)["pid"]
            if pid != os.getpid() and process_alive(pid):
                os.kill(pid, signal.SIGKILL)


def _kill_then_resume(store: Store, run_id: str, cfg) -> dict:
    """kill -9 after the first checkpoint, resume, check the steps; returns the final run."""
    import random

    from backend.runs import refresh_liveness, resume
    from trainer.groups import sample_tasks

    assert store.get_run(run_id)["pid"]  # the worker's pid is on the row at once
    run = _wait(store, run_id, lambda r: store.checkpoints(run_id) or r["status"] in ("failed", "completed"),
                "a first checkpoint")
    assert run["status"] == "running", run
    os.kill(run["pid"], signal.SIGKILL)
    _wait(store, run_id, lambda r: bool(refresh_liveness(store)) or r["status"] == "failed",
          "being marked failed", timeout_s=60)
    failed = store.get_run(run_id)
    assert failed["status"] == "failed"
    assert f"last completed step {failed['step']}" in failed["error"]
    point = resume(store, run_id)
    assert point.step == store.checkpoints(run_id)[-1]["step"] >= 1
    done = _wait(store, run_id, lambda r: r["status"] in ("completed", "failed", "stopped"), "completion")
    assert done["status"] == "completed", done["error"]
    rows = store.trajectories(run_id, limit=1000)
    per_step = {s: [r for r in rows if r["step"] == s] for s in range(1, 5)}
    assert all(len(v) == 2 * 2 for v in per_step.values()), {s: len(v) for s, v in per_step.items()}
    assert len(rows) == 4 * 2 * 2  # no step recorded twice
    assert [c["step"] for c in store.checkpoints(run_id)] == [1, 2, 3, 4]
    # the task stream is the sampler's, step after step, across the kill and the resume
    rng = random.Random(cfg.seed)
    for step in range(1, 5):
        planned = [(t.domain, t.seed) for t in sample_tasks(cfg, rng, cfg.prompts_per_step)]
        recorded = sorted({(r["group_idx"], r["domain"], r["task_seed"]) for r in per_step[step]})
        assert [(d, s) for _, d, s in recorded] == planned, step
    log = log_path(store, run_id).read_text()
    assert "resuming" in log and "completed" in log
    return done


def test_stop_and_resume_refuse_runs_in_the_wrong_state(tmp_path):
    from core.errors import WorkbenchError
    from backend.runs import resume, stop

    with Store(tmp_path / "wb.db") as store:
        rid = store.create_run("x", {"model": "tiny"}, total_steps=3)
        store.set_status(rid, "completed")
        with pytest.raises(WorkbenchError, match="only a pending or running run can be stopped"):
            stop(store, rid)
        with pytest.raises(WorkbenchError, match="completed; clone its config"):
            resume(store, rid)
        other = store.create_run("y", {"model": "tiny"}, total_steps=3)
        store.set_status(other, "stopped")
        with pytest.raises(WorkbenchError, match="no checkpoint to resume from"):
            resume(store, other)
        assert store.get_run(other)["status"] == "stopped"  # nothing changed


def test_refresh_liveness_fails_runs_whose_process_is_gone(tmp_path):
    from backend.runs import refresh_liveness

    with Store(tmp_path / "wb.db") as store:
        dead = subprocess.Popen([sys.executable, "-c", "pass"])
        dead.wait()
        rid = store.create_run("gone", {"model": "tiny"}, total_steps=5)
        store.update_run(rid, pid=dead.pid)
        store.set_status(rid, "running")
        store.heartbeat(rid, step=2)
        alive = store.create_run("alive", {"model": "tiny"}, total_steps=5)
        store.update_run(alive, pid=os.getpid())
        store.set_status(alive, "running")
        fresh = store.create_run("launching", {"model": "tiny"}, total_steps=5)  # no pid yet, just created
        assert refresh_liveness(store) == [rid]
        run = store.get_run(rid)
        assert run["status"] == "failed" and "last completed step 2 of 5" in run["error"]
        assert store.get_run(alive)["status"] == "running"
        assert store.get_run(fresh)["status"] == "pending"


def test_a_reused_pid_is_not_the_runs_process(tmp_path):
    """A run whose process died long ago, its pid since taken by an unrelated process: Stop
    must not signal that process, and the run is marked as ended."""
    from backend.runs import refresh_liveness, stop

    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with Store(tmp_path / "wb.db") as store:
            long_ago = "2020-01-01T00:00:00.000+00:00"  # the run's last heartbeat, before the stranger started
            a = store.create_run("a", {"model": "tiny"}, total_steps=5)
            b = store.create_run("b", {"model": "tiny"}, total_steps=5)
            for rid in (a, b):
                store.set_status(rid, "running")
                store.update_run(rid, pid=stranger.pid, heartbeat_at=long_ago)
            assert stop(store, a) == "marked"
            assert store.get_run(a)["status"] == "stopped"
            assert refresh_liveness(store) == [b]
            assert store.get_run(b)["status"] == "failed"
        assert stranger.poll() is None  # never signalled
    finally:
        stranger.kill()
        stranger.wait()


def record_checkpoint(store: Store, rid: str, root, step: int) -> None:
    """A checkpoint row of `step` whose directory under `root` holds just its trainer state
    (enough for `ResumePoint.latest`)."""
    import json

    path = root / f"step-{step}"
    path.mkdir()
    (path / "trainer_state.json").write_text(json.dumps(
        {"step": step, "rng_state": [3, [0] * 625, None], "curriculum": None, "learner_steps": step}))
    store.record_checkpoint(rid, step, str(path))


def test_resume_skips_a_deleted_last_checkpoint(tmp_path):
    """The newest checkpoint's directory removed (to free space): the run resumes from the
    one before it, and the missing one's row goes with the steps after that."""
    from backend.runs import resume

    with Store(tmp_path / "wb.db") as store:
        rid = store.create_run("x", {"model": "tiny"}, total_steps=5)
        for step in (1, 2):
            record_checkpoint(store, rid, tmp_path, step)
        store.set_status(rid, "stopped")
        (tmp_path / "step-2" / "trainer_state.json").unlink()
        (tmp_path / "step-2").rmdir()
        assert resume(store, rid, background=False).step == 1
        assert [c["step"] for c in store.checkpoints(rid)] == [1]
        assert store.get_run(rid)["status"] == "pending"


def test_resume_refuses_a_stored_config_that_no_longer_validates(tmp_path):
    """An export edited by hand and imported: resume names the field and changes nothing,
    instead of a pydantic traceback."""
    from core.errors import ConfigError
    from backend.runs import resume

    with Store(tmp_path / "wb.db") as store:
        rid = store.create_run("x", {"model": "tiny", "lora_rank": -1}, total_steps=5)
        record_checkpoint(store, rid, tmp_path, 1)
        store.set_status(rid, "stopped")
        with pytest.raises(ConfigError, match=f"run {rid}'s stored config: field 'lora_rank': .*greater than or "
                                              "equal to 0; it can't be resumed: start a new run from a corrected"):
            resume(store, rid, background=False)
        assert store.get_run(rid)["status"] == "stopped"


def test_resume_removes_the_evaluations_of_the_discarded_steps(tmp_path):
    """Resumed from step 2's checkpoint (step 4's directory is gone), the run's evaluations
    of step 4 and its previous attempt's "after" go with the other rows of steps 3+: the
    Runs page shows no point of a step that no longer exists."""
    from backend import views
    from backend.runs import resume

    with Store(tmp_path / "wb.db") as store:
        rid = store.create_run("x", {"model": "tiny"}, total_steps=5)
        for step in (2, 4):
            record_checkpoint(store, rid, tmp_path, step)
            store.record_metrics(rid, step, {"kl": 0.1})
        for phase in ("before", "step-2", "step-4", "after"):
            store.record_evaluation(rid, phase, "chain_sum", 4, 0.5, 0.5, 1.0, "m")
        store.set_status(rid, "failed")
        (tmp_path / "step-4" / "trainer_state.json").unlink()
        assert resume(store, rid, background=False).step == 2
        assert [e["phase"] for e in store.evaluations(rid)] == ["before", "step-2"]
        assert sorted(set(views.evaluation_curves(store, rid)["step"])) == [0, 2]
        assert [m["step"] for m in store.run_metrics(rid)] == [2]


def test_a_second_resume_is_refused_while_the_first_is_starting(tmp_path):
    """Two resumes of one run (two tabs): the run is claimed in one compare-and-set, and the
    claimer's live pid makes the second refuse, whatever the interleaving."""
    import json
    import random

    from core.errors import WorkbenchError
    from backend.runs import resume

    ckpt = tmp_path / "step-2"
    ckpt.mkdir()
    version, internal, gauss = random.Random(3).getstate()
    (ckpt / "trainer_state.json").write_text(json.dumps({"step": 2, "rng_state": [version, list(internal), gauss]}))
    with Store(tmp_path / "wb.db") as store:
        rid = store.create_run("r", {"model": "tiny"}, total_steps=5)
        store.record_checkpoint(rid, 2, str(ckpt))
        store.set_status(rid, "stopped")
        stale = store.get_run(rid)
        point = resume(store, rid, background=False)  # claims the run; nothing spawned
        assert point.step == 2
        run = store.get_run(rid)
        assert run["status"] == "pending" and run["pid"] == os.getpid()
        with pytest.raises(WorkbenchError, match="stop it before resuming"):
            resume(store, rid, background=False)
        # a resume that read the row before the claim loses the compare-and-set
        assert not store.update_run_if(rid, {"status": stale["status"], "pid": stale["pid"]}, status="pending")
        assert store.update_run_if(rid, {"status": "pending", "pid": os.getpid()}, error="x")
        assert store.get_run(rid)["error"] == "x"


def test_cli_detach_then_stop_with_the_printed_command(tiny_model_dir, tmp_path, capsys):
    """`rlwb --db X run CFG --detach` returns at once and prints commands that work as printed."""
    import shlex

    from backend.cli import main
    from backend.runs import process_alive, refresh_liveness

    cfg = tmp_path / "bg.yaml"
    cfg.write_text(f"name: detached\nmodel: {tiny_model_dir}\nsteps: 100\ndomains: [chain_sum]\n"
                   "prompts_per_step: 2\ngroup_size: 2\nmicro_batch_size: 2\nmax_new_tokens: 8\n"
                   f"vllm_compile: false\noutput_dir: {tmp_path / 'out'}\n")
    db = tmp_path / "wb.db"
    assert main(["--db", str(db), "run", str(cfg), "--detach"]) == 0
    out = capsys.readouterr().out
    with Store(db) as store:
        (run,) = store.list_runs()
    try:
        stop_cmd = next(part for part in out.split("`") if part.endswith(f"runs stop {run['id']}"))
        assert stop_cmd.startswith(f"rlwb --db {db}")
        assert main(shlex.split(stop_cmd)[1:]) == 0  # exactly as printed, minus the program name
        deadline = time.monotonic() + 120
        while process_alive(run["pid"]) and time.monotonic() < deadline:
            time.sleep(0.5)
    finally:
        if process_alive(run["pid"]):
            os.kill(run["pid"], signal.SIGKILL)
    with Store(db) as store:
        refresh_liveness(store)
        assert store.get_run(run["id"])["status"] == "stopped"


@pytest.mark.parametrize("signal_lands", ["right after BEGIN", "mid-write"])
def test_a_stop_landing_inside_a_write_still_records_the_run_stopped(tiny_model_dir, tmp_path, monkeypatch,
                                                                    signal_lands):
    """SIGTERM raises RunStopped at whatever bytecode runs; one landing between a write's
    BEGIN and its COMMIT leaves the transaction open. The stopped status is written after it
    is rolled back, not inside it (where it was lost when the process ended)."""
    import trainer.loop
    from trainer.config import parse_config
    from backend.runs import RunStopped, run_foreground

    cfg = parse_config({"name": "stop-mid-write", "model": str(tiny_model_dir), "steps": 2,
                        "domains": ["chain_sum"], "output_dir": str(tmp_path / "out")})

    def train(cfg, store, run_id, **kw):
        store.db.conn.execute("BEGIN IMMEDIATE")
        if signal_lands == "mid-write":
            store.db.execute("INSERT INTO metrics (run_id, step, name, value) VALUES (?, 1, 'half', 1.0)", [run_id])
        raise RunStopped("by request (test)")

    monkeypatch.setattr(trainer.loop, "train", train)
    db = tmp_path / "wb.db"
    with Store(db) as store:
        rid = store.create_run(cfg.name, cfg.model_dump(mode="json"), cfg.steps)
        with pytest.raises(RunStopped):
            run_foreground(cfg, store, run_id=rid)
    with Store(db) as other:  # what another process (the page) sees after this one ends
        run = other.get_run(rid)
        assert run["status"] == "stopped" and run["error"] == "stopped: by request (test)", run
        assert other.db.execute("SELECT count(*) FROM metrics WHERE run_id = ?", [rid]).fetchone() == (0,)


def test_a_foreground_run_ends_with_its_held_out_figures(tiny_model_dir, tmp_path, capsys):
    """`rlwb run` (the quickstart's command) ends with what the run learned: held-out accuracy
    before and after, per domain and overall, as `runs show` gives it."""
    from backend.cli import main

    cfg = tmp_path / "short.yaml"
    cfg.write_text(f"name: short\nmodel: {tiny_model_dir}\nsteps: 1\ndomains: [chain_sum]\nprompts_per_step: 2\n"
                   "group_size: 2\nmicro_batch_size: 2\nmax_new_tokens: 8\neval_tasks_per_domain: 2\n"
                   f"eval_max_new_tokens: 8\nvllm_compile: false\noutput_dir: {tmp_path / 'out'}\n")
    db = tmp_path / "wb.db"
    assert main(["--db", str(db), "run", str(cfg)]) == 0
    out = capsys.readouterr().out
    with Store(db) as store:
        [run] = store.list_runs()
        ids = [e["id"] for e in store.in_run_evals(run["id"])]
    assert f"held-out (before vs after; before = evaluation {ids[0]}, after = evaluation {ids[-1]})" in out
    assert "chain_sum" in out and "2 tasks: accuracy before" in out
    assert out.strip().splitlines()[-1].startswith(f"run {run['id']} completed: 1 steps")
