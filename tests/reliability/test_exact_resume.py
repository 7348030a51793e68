"""A resumed run equals the uninterrupted one: 6 steps straight against 3 steps, kill -9 of
the background process, `rlwb runs resume` for the rest; the same tasks, completions and
rewards step by step, the same losses, and final weights equal within float tolerance. With
and without overlap (one step off-policy: the checkpoint carries the next step's rollout).
The exactness comes from the optimizer's state in the checkpoint and each step's sampling
seeded from (run seed, step) (`trainer.rollout.base.RolloutEngine.reseed`)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from backend.runs import process_alive, refresh_liveness
from backend.store import Store
from tests.reliability.test_run_faults import _wait
from trainer.config import parse_config

STEPS, CHECKPOINT = 6, 3
#: A user domain the random tiny model scores on about a third of the time (a reply with a digit
#: in it): groups with unequal rewards, so the learner really steps (a reasoning-gym domain gives
#: it 0 everywhere, every group is skipped, and equal weights would prove nothing).
DOMAIN = {"name": "has_digit", "columns": {"prompt": "question", "answer": "answer", "id": "id"},
          "verifier": {"kind": "regex", "pattern": r"(?s).*[0-9].*"}, "extraction": "whole"}


def _config(model_dir: Path, out: Path, overlap: bool):
    return parse_config({
        "name": "exact", "model": str(model_dir), "steps": STEPS, "domains": [DOMAIN["name"]],
        "prompts_per_step": 2, "group_size": 4, "micro_batch_size": 4, "max_new_tokens": 8, "learning_rate": 1e-3,
        "checkpoint_every": CHECKPOINT, "eval_tasks_per_domain": 0, "vllm_compile": False, "overlap": overlap,
        "vllm_memory_fraction": 0.05, "seed": 5, "output_dir": str(out)})


def _record(store: Store, run_id: str) -> tuple[list[tuple], dict[int, float]]:
    rows = sorted((r["step"], r["group_idx"], r["sample_idx"], r["domain"], r["task_seed"], r["completion"],
                   r["reward"]) for r in store.trajectories(run_id, limit=10_000))
    loss = {m["step"]: m["value"] for m in store.run_metrics(run_id) if m["name"] == "loss"}
    return rows, loss


def _weights(store: Store, run_id: str) -> dict:
    from safetensors.torch import load_file

    last = store.checkpoints(run_id)[-1]
    assert last["step"] == STEPS
    return load_file(str(Path(last["path"]) / "model.safetensors"))


@pytest.mark.parametrize("overlap", [False, True], ids=["on-policy", "overlap"])
def test_a_run_killed_after_its_checkpoint_and_resumed_equals_the_uninterrupted_run(tiny_model_dir, tmp_path,
                                                                                      fault, overlap, request):
    from backend.runs import launch, run_foreground

    from domains import registry
    from domains.user import library

    db = tmp_path / "wb.db"
    with Store(db) as store:
        library.add_domain(store, DOMAIN, rows=[{"id": f"r{i}", "question": f"Say something about {i}.",
                                                 "answer": "0"} for i in range(80)])
        request.addfinalizer(lambda: registry.unregister(DOMAIN["name"]))
        straight = run_foreground(_config(tiny_model_dir, tmp_path / "straight", overlap), store)
        assert store.get_run(straight)["status"] == "completed"

        run_id = launch(_config(tiny_model_dir, tmp_path / "killed", overlap), store)
        try:
            _wait("the step-3 checkpoint", lambda: store.checkpoints(run_id) or
                  store.get_run(run_id)["status"] in ("failed", "completed"), poll_s=0.005)
            run = store.get_run(run_id)
            assert run["status"] == "running", run
            os.kill(run["pid"], signal.SIGKILL)
            _wait("the process to die", lambda: not process_alive(run["pid"]), timeout_s=30, poll_s=0.05)
            fault.inject(f"kill -9 of the training process after its step-{CHECKPOINT} checkpoint "
                         f"({'overlap' if overlap else 'on-policy'})")
            assert refresh_liveness(store) == [run_id]
            assert store.checkpoints(run_id)[-1]["step"] == CHECKPOINT
            out = subprocess.run([sys.executable, "-m", "backend.cli", "--db", str(db), "runs", "resume", run_id],
                                 capture_output=True, text=True, timeout=600)
            assert out.returncode == 0, out.stderr[-3000:]
            assert f"resumed after step {CHECKPOINT}" in out.stdout
            assert "AdamW's moments start from zero" not in out.stderr  # the optimizer state loaded
        finally:
            pid = store.get_run(run_id)["pid"]
            if pid and pid != os.getpid() and process_alive(pid):
                os.kill(pid, signal.SIGKILL)
        assert store.get_run(run_id)["status"] == "completed"
        (rows_a, loss_a), (rows_b, loss_b) = _record(store, straight), _record(store, run_id)
        weights_a, weights_b = _weights(store, straight), _weights(store, run_id)

    assert len(rows_a) == STEPS * 2 * 4 and len({r[5] for r in rows_a}) > 8  # sampled, not one answer
    for step in range(1, STEPS + 1):  # task stream, completions and rewards, step by step
        assert [r for r in rows_b if r[0] == step] == [r for r in rows_a if r[0] == step], f"step {step} differs"
    assert sorted(loss_b) == list(range(1, STEPS + 1))
    assert loss_b == pytest.approx(loss_a, abs=1e-5)
    assert weights_a.keys() == weights_b.keys()
    worst = max(float((weights_a[k] - weights_b[k]).abs().max()) for k in weights_a)
    assert worst < 1e-5, f"final weights differ by up to {worst}"
    moved = max(float((weights_a[k] - _base(tiny_model_dir)[k]).abs().max()) for k in weights_a)
    assert moved > 1e-4  # the run trained: equal weights are not both the base


def _base(model_dir: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(model_dir / "model.safetensors"))
