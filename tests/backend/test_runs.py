"""Ctrl-C during a real run marks it `stopped` and keeps what was written."""

import signal
import subprocess
import sys
import time

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
