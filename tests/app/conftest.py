"""Fixtures for the page tests: a store filled through the `Store` API.

`filled_db` is a stand-in until a tiny real training run fills the database; it has a
completed run (metrics overall and per domain, trajectories, evaluations, checkpoints), a
failed run and a pending run with nothing recorded.
"""

from pathlib import Path

import pytest

from backend.store import Store
from trainer.types import Completion, Sample

DOMAINS = ("basic_arithmetic", "chain_sum")
GROUP_SIZE = 4


def _samples(step: int) -> list[Sample]:
    samples = []
    for group, domain in enumerate(DOMAINS):
        rewards = [float((step + i) % 2) for i in range(GROUP_SIZE)]
        mean = sum(rewards) / len(rewards)
        for i, r in enumerate(rewards):
            text = f"Let me add.\nAnswer: {step + group + i}"
            samples.append(Sample(
                domain=domain, task_seed=1000 * step + group, group=group, index=i,
                prompt=f"<|user|>What is {step} + {group}?<|assistant|>", prompt_ids=[1] * 12,
                completion=Completion([2] * (5 + i), [-0.5] * (5 + i), text,
                                      "stop" if i else "length"),
                reward=r, breakdown={"format": 1.0, "correct": r}, advantage=r - mean,
                answer=str(step + group),
            ))
    return samples


@pytest.fixture
def filled_db(tmp_path) -> Path:
    """A tmp database with three runs: 'demo' (completed, 3 steps), 'broken', 'queued'."""
    path = tmp_path / "filled.db"
    with Store(path) as store:
        rid = store.create_run("demo", {"model": "tiny", "group_size": GROUP_SIZE}, total_steps=3)
        store.set_status(rid, "running")
        for step in (1, 2, 3):
            store.record_trajectories(rid, step, _samples(step))
            store.record_metrics(rid, step, {
                "reward/mean": 0.1 * step, "reward/basic_arithmetic": 0.15 * step,
                "reward/chain_sum": 0.05 * step, "kl": 0.01 * step, "response_length": 20 - step,
                "rollout_tokens_per_s": 100.0, "learner_tokens_per_s": 300.0,
                "entropy": 1.0 / step, "loss": -0.1 * step,
                "zero_variance/groups": 0.5, "zero_variance_groups": 0.5,  # old name, kept for old pages
                **{f"{kind}/{d}": 0.1 * step * (i + 1)
                   for i, d in enumerate(DOMAINS) for kind in ("accuracy", "response_length", "zero_variance",
                                                               "curriculum/pass_rate")},
                **{f"curriculum/level/{d}": float(min(step, 2 + i)) for i, d in enumerate(DOMAINS)},
            })
            store.heartbeat(rid, step=step)
        store.record_checkpoint(rid, 3, str(tmp_path / "ckpt" / "step-3"))
        for phase, acc in (("before", 0.1), ("after", 0.4)):
            for domain in DOMAINS:
                store.record_evaluation(rid, phase, domain, 20, acc, acc, 0.9, "tiny")
        store.set_status(rid, "completed")

        broken = store.create_run("broken", {"model": "tiny"}, total_steps=5)
        store.set_status(broken, "running")
        store.record_metrics(broken, 1, {"reward/mean": 0.0})
        store.set_status(broken, "failed", error="EngineError: rollout engine died",
                         traceback="Traceback (most recent call last):\n  ...\nEngineError")
        store.create_run("queued", {}, total_steps=2)
    return path
