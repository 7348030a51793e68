"""Scripted runs for the reward-audit tests: trajectories and metrics written into a store
directly, no model. `collapsing` learns the format and then answers "1" to every task;
`healthy` learns the format and then answers most tasks correctly (diverse answers)."""

from __future__ import annotations

from domains.contract import ANSWER_INSTRUCTION, CORRECT_WEIGHT, FORMAT_WEIGHT
from backend.store import Store
from trainer.audit import audit_metrics
from trainer.types import Completion, Sample

DOMAIN = "chain_sum"
STEPS, GROUPS, GROUP_SIZE = 10, 4, 8


def sample(group: int, index: int, answer: str | None, reference: str, question: str, *,
           domain: str = DOMAIN, length: int = 20, seed: int | None = None) -> Sample:
    """One scored sample: `answer` None means the reply gave no answer line."""
    fmt = float(answer is not None)
    correct = float(answer == reference)
    text = f"Let me add them.\nAnswer: {answer}" if answer is not None else "I am not sure."
    prompt = f"<|im_start|>user\n{question}\n{ANSWER_INSTRUCTION}<|im_end|>\n<|im_start|>assistant\n"
    return Sample(domain=domain, task_seed=group if seed is None else seed, group=group, index=index,
                  prompt=prompt, prompt_ids=[1] * 12, completion=Completion([2] * length, [-0.5] * length, text, "stop"),
                  reward=FORMAT_WEIGHT * fmt + CORRECT_WEIGHT * correct,
                  breakdown={"format": fmt, "correct": correct, "score": correct, "extracted": answer},
                  answer=reference)


def early(step: int, index: int, reference: str) -> str | None:
    """The first three steps of both runs: two answers in eight, both wrong and different."""
    return str(int(reference) + 50 + index) if index < 2 else None


def collapsing(step: int, group: int, index: int, reference: str) -> str | None:
    return early(step, index, reference) if step <= 3 else "1"


def healthy(step: int, group: int, index: int, reference: str) -> str | None:
    if step <= 3:
        return early(step, index, reference)
    return reference if index < 6 else str(int(reference) + 50 + index)


def record_run(store: Store, name: str, answer_of, steps: int = STEPS) -> str:
    """A completed run of `steps` steps, `GROUPS` chain_sum tasks of `GROUP_SIZE` samples each;
    `answer_of(step, group, index, reference)` scripts the answers. Its id."""
    rid = store.create_run(name, {"model": "scripted", "group_size": GROUP_SIZE}, total_steps=steps)
    store.set_status(rid, "running")
    for step in range(1, steps + 1):
        samples = []
        for g in range(GROUPS):
            a, b = 10 * step + g + 2, 3 * g + 5  # the reference a + b is neither a nor b, never "1"
            ref = str(a + b)
            samples += [sample(g, i, answer_of(step, g, i, ref), ref, f"What is {a} + {b}?", seed=100 * step + g)
                        for i in range(GROUP_SIZE)]
        store.record_trajectories(rid, step, samples)
        store.record_metrics(rid, step, {"reward/mean": sum(s.reward for s in samples) / len(samples),
                                         f"reward/{DOMAIN}": sum(s.reward for s in samples) / len(samples),
                                         **audit_metrics(samples)})
        store.heartbeat(rid, step=step)
    store.set_status(rid, "completed")
    return rid


def audit_store(db) -> tuple:
    """A store at `db` with a collapsing and a healthy scripted run: (db, {name: run id})."""
    with Store(db) as store:
        ids = {"collapsing": record_run(store, "collapsing", collapsing),
               "healthy": record_run(store, "healthy", healthy)}
    return db, ids
