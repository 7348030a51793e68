"""bench/peer_trl.py's workload: the quickstart's config at the bench's size, one both sides
can run (the benchmark itself installs TRL and trains; run it with --quick, it is not a test)."""

import argparse

from bench.peer_trl import QUICK, workload
from trainer.config import load_config, parse_config


def test_the_peer_workload_is_the_quickstarts_at_the_benchs_size():
    quickstart = load_config("configs/quickstart.yaml")
    full = parse_config(workload(argparse.Namespace(quick=False, steps=3, warmup=1)))
    assert full.steps == 4 and full.eval_tasks_per_domain == 0
    for field in ("domains", "prompts_per_step", "group_size", "max_new_tokens", "temperature", "learning_rate",
                  "kl_coef", "clip_eps", "lora_rank", "lora_alpha", "dtype", "seed"):
        assert getattr(full, field) == getattr(quickstart, field), field
    quick = parse_config(workload(argparse.Namespace(quick=True, steps=1, warmup=1)))
    assert quick.steps == 2 and quick.sequences_per_step == QUICK["prompts_per_step"] * QUICK["group_size"]
