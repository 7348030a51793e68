"""Scripted in-run held-out evaluations for the held-out tests: a run whose "before" and
"after" evaluations are recorded through `trainer.evaluate.record_heldout` (the loop's own
recording) from samples scored by the real verifiers, no model.

`heldout_store(path, tasks)` writes one completed run: before training it answers "0" to
every task (wrong, right format); after training it answers chain_sum correctly on even
seeds and "0" otherwise, and basic_arithmetic correctly everywhere."""

from __future__ import annotations

from trainer.config import parse_config
from domains.registry import get_domain
from domains.splits import heldout_seeds
from backend.store import Store
from trainer.evaluate import record_heldout
from trainer.types import Completion, Sample

DOMAINS = ("chain_sum", "basic_arithmetic")


def before(task) -> str:
    return "0"


def after(task) -> str:
    if task.domain == "chain_sum" and task.seed % 2:
        return "0"
    return task.answer


def scored(tasks, reply) -> list[Sample]:
    """One scored greedy sample per task: the text ``"Let me think.\\nAnswer: <reply(task)>"``
    scored by the task's domain's verifier."""
    out = []
    for g, task in enumerate(tasks):
        domain = get_domain(task.domain)
        text = f"Let me think.\n{domain.wrap_answer(reply(task))}"
        reward, breakdown = domain.score(task, text)
        out.append(Sample(domain=task.domain, task_seed=task.seed, group=g, index=0, prompt=task.question,
                          prompt_ids=[1] * 8, completion=Completion([2] * 6, [-0.5] * 6, text, "stop"), reward=reward,
                          breakdown=breakdown, answer=task.answer, difficulty=task.difficulty))
    return out


def scripted_samples(domains, n: int, reply, level: int = 1) -> list[Sample]:
    """`scored` samples of the first `n` held-out tasks of each domain at `level`."""
    return scored([get_domain(d).make_task(s, level) for d in domains for s in heldout_seeds(n)], reply)


def scripted_rollout(reply):
    """A stand-in for `trainer.scoring.rollout` (same arguments) whose model replies `reply(task)`."""
    def rollout(engine, tokenizer, tasks, group_size, *args, **kwargs):
        assert group_size == 1
        return scored(tasks, reply)
    return rollout


def run_config(tasks: int, steps: int = 4):
    return parse_config({"name": "heldout", "model": "smollm2-135m", "steps": steps, "domains": list(DOMAINS),
                         "eval_tasks_per_domain": tasks, "eval_every": 2})


def heldout_store(path, tasks: int = 12) -> tuple[str, dict[str, str]]:
    """A store at `path` with one completed 4-step run and its in-run evaluations
    ("before", "step-2" = before's answers, "after"); returns (run id, phase -> eval id)."""
    cfg = run_config(tasks)
    levels = dict.fromkeys(DOMAINS, 1)
    with Store(path) as store:
        rid = store.create_run("heldout", cfg.model_dump(mode="json"), total_steps=cfg.steps)
        store.set_status(rid, "running")
        ids = {}
        for phase, reply in (("before", before), ("step-2", before), ("after", after)):
            ids[phase] = record_heldout(store, rid, phase, f"model at {phase}", cfg, levels,
                                        scripted_samples(DOMAINS, tasks, reply))
        store.set_status(rid, "completed")
    return rid, ids
