"""bench/weight_sync.py: its pure helpers and the read-only view of a recorded run's step times.
(The benchmark itself starts vLLM and DeepSpeed; run it with --quick, it is not a test.)"""

import argparse

import pytest

from backend.store import Store
from bench.weight_sync import (
    QUICK_CONFIG,
    recorded_times,
    run_config,
    share,
    spread,
    sync_share_line,
)


def test_share_and_spread():
    assert share(0.5, 50.0) == pytest.approx(0.01)
    assert share(1.0, 0.0) == 0.0
    assert spread([0.4, 0.62, 0.52]) == "0.52 s (0.4-0.62)"
    assert spread([3.0], unit="x") == "3 x (3-3)"


def test_recorded_times_reads_a_run_step_by_step_without_writing(tmp_path):
    db = tmp_path / "s.db"
    with Store(db) as store:
        rid = store.create_run("q", {}, total_steps=2)
        other = store.create_run("o", {}, total_steps=1)
        for step, (sync, total) in enumerate([(0.6, 60.0), (0.4, 40.0)], start=1):
            store.record_metrics(rid, step, {"time/sync": sync, "time/step": total, "reward/mean": 0.1})
        store.record_metrics(other, 1, {"time/sync": 9.0, "time/step": 10.0})
    before = db.stat().st_mtime_ns
    times = recorded_times(db, rid)
    assert times == {"time/step": [60.0, 40.0], "time/sync": [0.6, 0.4]}
    assert db.stat().st_mtime_ns == before
    line = sync_share_line(times)
    assert "2 steps" in line and "sync share 1.00%" in line


def test_recorded_times_missing_store_or_run(tmp_path):
    assert recorded_times(tmp_path / "none.db", "r1") == {}
    with Store(tmp_path / "s.db"):
        pass
    assert recorded_times(tmp_path / "s.db", "r-missing") == {}
    assert sync_share_line({}) is None
    assert sync_share_line({"time/sync": [0.5]}) is None


def test_quick_config_is_the_tiny_run(tiny_model_dir):
    cfg = run_config(argparse.Namespace(quick=True, model=tiny_model_dir))
    assert cfg.model == str(tiny_model_dir)
    assert cfg.prompts_per_step == QUICK_CONFIG["prompts_per_step"] and not cfg.vllm_compile
    assert cfg.eval_tasks_per_domain == 0


def test_full_config_keeps_the_run_and_drops_evaluations(tiny_model_dir, tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text(f"model: {tiny_model_dir}\ndomains: [basic_arithmetic]\nsteps: 4\nprompts_per_step: 3\n"
                    "group_size: 4\nmicro_batch_size: 4\neval_tasks_per_domain: 5\neval_every: 2\n")
    cfg = run_config(argparse.Namespace(quick=False, config=path, memory_fraction=None))
    assert (cfg.prompts_per_step, cfg.group_size, cfg.vllm_compile) == (3, 4, True)
    assert cfg.eval_tasks_per_domain == 0 and cfg.eval_every == 0
    assert cfg.vllm_memory_fraction == 0.3
    assert run_config(argparse.Namespace(quick=False, config=path, memory_fraction=0.1)).vllm_memory_fraction == 0.1
