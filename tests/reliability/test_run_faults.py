"""Runs under faults: kill -9 of the training process (aimed at a checkpoint being written),
then `rlwb runs resume`; a full disk (a real 32 MiB tmpfs filled up) while a checkpoint is
written. Each uses the tiny model and a real background or CLI process."""

from __future__ import annotations

import errno
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from trainer.config import parse_config
from backend.runs import process_alive, refresh_liveness
from backend.store import Store
from tests.reliability.conftest import mounted_tmpfs
from trainer.checkpoints import TRAINER_STATE, ResumePoint

STEPS = 4
PROMPTS, GROUP = 2, 2


def _config(model_dir: Path, out: Path, name: str, steps: int = STEPS):
    return parse_config({
        "name": name, "model": str(model_dir), "steps": steps, "domains": ["chain_sum", "basic_arithmetic"],
        "prompts_per_step": PROMPTS, "group_size": GROUP, "micro_batch_size": 2, "max_new_tokens": 8,
        "checkpoint_every": 1, "vllm_compile": False, "vllm_memory_fraction": 0.05, "seed": 11,
        "output_dir": str(out),
    })


def _wait(what: str, done, timeout_s: float = 300.0, poll_s: float = 0.2):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = done()
        if value:
            return value
        time.sleep(poll_s)
    raise AssertionError(f"{what} did not happen within {timeout_s:.0f} s")


def _rows_key(rows: list[dict]) -> set[tuple]:
    return {(r["step"], r["group_idx"], r["sample_idx"], r["domain"], r["task_seed"], r["completion"])
            for r in rows}


def _check_complete_run(store: Store, run_id: str, cfg, fault, kept_before: set[tuple]) -> None:
    """Every step recorded once, in the sampler's task order, checkpoints 1..steps loadable,
    and every row kept before the fault still there (else counted as lost)."""
    from safetensors import safe_open

    from trainer.groups import sample_tasks

    rows = store.trajectories(run_id, limit=10_000)
    after = _rows_key(rows)
    fault.lost(len(kept_before - after))
    assert kept_before <= after, "rows written before the fault are gone"
    keys = [(r["step"], r["group_idx"], r["sample_idx"]) for r in rows]
    assert len(keys) == len(set(keys)) == cfg.steps * PROMPTS * GROUP  # no duplicate, none missing
    rng = random.Random(cfg.seed)  # the data order of an uninterrupted run
    for step in range(1, cfg.steps + 1):
        planned = [(t.domain, t.seed) for t in sample_tasks(cfg, rng, cfg.prompts_per_step)]
        recorded = sorted({(r["group_idx"], r["domain"], r["task_seed"]) for r in rows if r["step"] == step})
        assert [(d, s) for _, d, s in recorded] == planned, f"step {step} sampled other tasks"
    ckpts = store.checkpoints(run_id)
    assert [c["step"] for c in ckpts] == list(range(1, cfg.steps + 1))
    for c in ckpts:
        assert ResumePoint.load(c["path"]).step == c["step"]
        with safe_open(str(Path(c["path"]) / "model.safetensors"), "pt") as f:
            assert list(f.keys())  # a complete safetensors file (its header parses)
    leftovers = sorted(p.name for p in Path(ckpts[-1]["path"]).parent.iterdir() if p.name.endswith(".tmp"))
    assert leftovers == [], leftovers


def _kill_mid_checkpoint(store: Store, run_id: str, ckpt_root: Path, steps: int) -> tuple[int, bool]:
    """Wait for the first checkpoint, then kill -9 the run's process the moment a later
    checkpoint's temporary directory appears. Returns (the step it was writing, whether the
    kill landed mid-write: the temporary directory is still there and the step's is not)."""
    _wait("a first checkpoint", lambda: store.checkpoints(run_id) or store.get_run(run_id)["status"] == "failed",
          poll_s=0.005)
    run = store.get_run(run_id)
    assert run["status"] == "running", run
    pid = run["pid"]
    for step in range(store.checkpoints(run_id)[-1]["step"] + 1, steps):
        tmp, final = ckpt_root / f"step-{step}.tmp", ckpt_root / f"step-{step}"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not final.exists():
            if tmp.exists():
                os.kill(pid, signal.SIGKILL)
                _wait("the process to die", lambda: not process_alive(pid), timeout_s=30, poll_s=0.05)
                return step, tmp.exists() and not final.exists()
            time.sleep(0.0005)
    os.kill(pid, signal.SIGKILL)  # every later write was missed: a plain kill -9 between steps
    _wait("the process to die", lambda: not process_alive(pid), timeout_s=30, poll_s=0.05)
    return -1, False


def test_kill_9_of_the_training_process_mid_checkpoint_then_cli_resume(tiny_model_dir, tmp_path, fault):
    from backend.runs import launch

    steps = 2 * STEPS  # checkpoint writes to aim at: on a fast host a tiny run's write takes milliseconds
    cfg = _config(tiny_model_dir, tmp_path / "out", "kill9", steps=steps)
    db = tmp_path / "wb.db"
    with Store(db) as store:
        run_id = launch(cfg, store)
        ckpt_root = tmp_path / "out" / run_id / "checkpoints"
        try:
            step, mid_write = _kill_mid_checkpoint(store, run_id, ckpt_root, steps)
            fault.inject(f"kill -9 of the background training process while writing checkpoint step-{step}"
                         if mid_write else "kill -9 of the background training process (between checkpoints)")
            # its heartbeat stops; the liveness check (page, CLI) marks it failed with the last step
            assert store.get_run(run_id)["status"] == "running"  # until someone looks
            assert refresh_liveness(store) == [run_id]
            failed = store.get_run(run_id)
            assert failed["status"] == "failed"
            assert f"last completed step {failed['step']} of {steps}" in failed["error"]
            assert f"rlwb runs resume {run_id}" in failed["error"]
            point = ResumePoint.latest(store.checkpoints(run_id))
            assert (point.path / TRAINER_STATE).is_file()
            if mid_write:  # the torn checkpoint is only a .tmp directory, never recorded
                assert point.step == step - 1 and not (ckpt_root / f"step-{step}").exists()
            kept = _rows_key([r for r in store.trajectories(run_id, limit=10_000) if r["step"] <= point.step])
            assert len(kept) == point.step * PROMPTS * GROUP

            out = subprocess.run([sys.executable, "-m", "backend.cli", "--db", str(db), "runs", "resume", run_id],
                                 capture_output=True, text=True, timeout=400)
            assert out.returncode == 0, out.stderr[-3000:]
            assert f"resumed after step {point.step}" in out.stdout
            done = store.get_run(run_id)
            assert done["status"] == "completed", done["error"]
            _check_complete_run(store, run_id, cfg, fault, kept)
        finally:
            pid = store.get_run(run_id)["pid"]
            if pid and pid != os.getpid() and process_alive(pid):
                os.kill(pid, signal.SIGKILL)
    assert mid_write, "the kill never landed while a checkpoint was being written (each write was too quick)"


@pytest.fixture
def small_disk(tmp_path):
    """A real 32 MiB tmpfs mounted for the test (needs root and mount rights; else skipped)."""
    with mounted_tmpfs(tmp_path / "disk", "32m") as mnt:
        yield mnt


def _fill(disk: Path) -> Path:
    """Write zeros until the file system says ENOSPC; returns the filler file."""
    filler = disk / "filler"
    chunk = b"\0" * (256 * 1024)
    with open(filler, "wb") as f:
        try:
            while True:
                f.write(chunk)
                f.flush()
        except OSError as e:
            assert e.errno == errno.ENOSPC, e
    return filler


def test_full_disk_during_a_checkpoint_keeps_the_previous_one_and_fails_clearly(tiny_model_dir, tmp_path, small_disk,
                                                                               fault):
    steps = 6  # six tiny checkpoints (1.7 MB of weights each, and the newest two also ~5 MB of optimizer state
    # while one is written) fit the 32 MiB disk: only the filler fills it
    cfg_path = tmp_path / "run.yaml"
    cfg_path.write_text(
        f"name: fulldisk\nmodel: {tiny_model_dir}\nsteps: {steps}\ndomains: [chain_sum, basic_arithmetic]\n"
        f"prompts_per_step: {PROMPTS}\ngroup_size: {GROUP}\nmicro_batch_size: 2\nmax_new_tokens: 8\n"
        f"checkpoint_every: 1\nvllm_compile: false\nvllm_memory_fraction: 0.05\nseed: 11\n"
        f"output_dir: {small_disk}\n")
    cfg = _config(tiny_model_dir, small_disk, "fulldisk", steps=steps)
    db = tmp_path / "wb.db"  # the store is on another disk; the run's checkpoints fill this one
    log = open(tmp_path / "cli.log", "w+")
    proc = subprocess.Popen([sys.executable, "-m", "backend.cli", "--db", str(db), "run", str(cfg_path)],
                            stdout=log, stderr=subprocess.STDOUT, text=True)
    try:
        with Store(db) as store:
            run_id = _wait("the run row", lambda: (store.list_runs() or [{}])[0].get("id"))
            _wait("a first checkpoint", lambda: store.checkpoints(run_id) or proc.poll() is not None, poll_s=0.005)
            os.kill(proc.pid, signal.SIGSTOP)  # a fast host would finish the run while the disk fills
            try:
                filler = _fill(small_disk)
            finally:
                os.kill(proc.pid, signal.SIGCONT)
            fault.inject("ENOSPC: the run's checkpoint disk (32 MiB tmpfs) filled up mid-run")
            proc.wait(timeout=300)
            log.seek(0)
            output = log.read()
            run = store.get_run(run_id)
            assert run["status"] == "failed", (run["status"], output[-2000:])
            assert proc.returncode == 1 and "Traceback" not in output, output[-2000:]
            assert run["error"].startswith("disk full: no space left"), run["error"]
            assert f"rlwb runs resume {run_id}" in run["error"] and f"error: run {run_id} failed: disk full" in output
            ckpts = store.checkpoints(run_id)
            assert ckpts and ckpts[-1]["step"] < steps
            point = ResumePoint.latest(ckpts)  # the previous checkpoint is whole
            assert point.step == ckpts[-1]["step"]
            from safetensors.torch import load_file

            weights = load_file(str(point.path / "model.safetensors"))
            assert weights and all(t.isfinite().all() for t in weights.values())
            kept = _rows_key([r for r in store.trajectories(run_id, limit=10_000) if r["step"] <= point.step])

            filler.unlink()  # the user frees space and resumes
            out = subprocess.run([sys.executable, "-m", "backend.cli", "--db", str(db), "runs", "resume", run_id],
                                 capture_output=True, text=True, timeout=400)
            assert out.returncode == 0, out.stderr[-3000:]
            assert store.get_run(run_id)["status"] == "completed"
            _check_complete_run(store, run_id, cfg, fault, kept)
    finally:
        if proc.poll() is None:
            proc.kill()
        log.close()


def test_a_torn_trainer_state_falls_back_to_the_previous_checkpoint(tmp_path, fault):
    """A power cut before the page cache reached the disk can leave a checkpoint's trainer
    state cut short (what `replace_durably`'s fsyncs prevent): resume takes the one before."""
    import json

    from core.errors import ConfigError
    from trainer.checkpoints import replace_durably, trainer_state

    rows = []
    for step in (1, 2, 3):
        tmp, final = tmp_path / f"step-{step}.tmp", tmp_path / f"step-{step}"
        tmp.mkdir()
        (tmp / TRAINER_STATE).write_text(json.dumps(trainer_state(step, random.Random(step), None, step)))
        (tmp / "model.safetensors").write_bytes(b"\0" * 64)
        replace_durably(tmp, final)
        rows.append({"step": step, "path": str(final)})
    assert not list(tmp_path.glob("*.tmp"))
    state = tmp_path / "step-3" / TRAINER_STATE
    state.write_bytes(state.read_bytes()[:40])  # torn mid-write
    (tmp_path / "step-2" / TRAINER_STATE).write_bytes(b"\xff\xfe\x00garbage")  # and garbage in the one before
    fault.inject("trainer_state.json of the last two checkpoints torn (cut short) and overwritten with garbage",
                 times=2)
    point = ResumePoint.latest(rows)
    assert point.step == 1 and point.rng_state == random.Random(1).getstate()
    with pytest.raises(ConfigError, match="unreadable"):
        ResumePoint.load(tmp_path / "step-3")
