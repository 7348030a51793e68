"""The RL loop: sample tasks -> rollouts -> verify -> advantages -> learner step -> weight sync.

`train(cfg, store, run_id)` runs one post-training job in this process and writes its
metrics, trajectories, evaluations and checkpoints to the store as it goes (each step in
its own transactions, so an interrupted run keeps every completed step). The run's status
is the caller's business (`backend.runs`).

Data flow of one step (DESIGN.md): tasks come from the run's mix (`backend.domains`), are
rendered through the model's chat template, sampled G times by the rollout engine, scored
by the domain's verifier, turned into group-relative advantages, and trained on by the
DeepSpeed learner; the new weights go into the running engine in place.

Not covered: multi-turn episodes, asynchronous (off-policy) overlap, curriculum.
"""

from __future__ import annotations

import random
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import platformdirs
import torch

from backend.config import RunConfig
from backend.domains import Task, build_messages, get_domain, train_seed
from trainer.algorithms.grpo import group_advantages
from trainer.types import LearnerBatch, Sample

StepCallback = Callable[[int, dict[str, float]], None]


def render_prompt(tokenizer, task: Task) -> tuple[str, list[int]]:
    """Render a task through the model's chat template.

    Returns:
        The prompt text (generation prompt appended) and its token ids.
    """
    text = tokenizer.apply_chat_template(build_messages(task), add_generation_prompt=True, tokenize=False)
    return text, tokenizer(text, add_special_tokens=False)["input_ids"]


def sample_tasks(cfg: RunConfig, rng: random.Random, k: int) -> list[Task]:
    """Draw `k` training tasks from the mix: a domain by weight, then a training seed."""
    names = list(cfg.domains)
    weights = [cfg.domains[n] for n in names]
    picks = rng.choices(names, weights=weights, k=k)
    return [get_domain(n).make_task(train_seed(rng), cfg.difficulty) for n in picks]


def rollout(engine, tokenizer, tasks: list[Task], group_size: int, max_new_tokens: int,
            temperature: float, top_p: float) -> list[Sample]:
    """Sample `group_size` completions per task and score them with the domain verifiers.

    Returns:
        len(tasks) * group_size scored samples, grouped task by task (advantages not set).
    """
    rendered = [render_prompt(tokenizer, t) for t in tasks]
    outs = engine.generate([ids for _, ids in rendered], n=group_size, max_new_tokens=max_new_tokens,
                           temperature=temperature, top_p=top_p)
    samples = []
    for g, (task, (text, ids), comps) in enumerate(zip(tasks, rendered, outs)):
        domain = get_domain(task.domain)
        for i, comp in enumerate(comps):
            reward, breakdown = domain.score(task, comp.text)
            samples.append(Sample(domain=task.domain, task_seed=task.seed, group=g, index=i, prompt=text,
                                  prompt_ids=list(ids), completion=comp, reward=float(reward),
                                  breakdown=breakdown, answer=task.answer))
    return samples


def assign_advantages(samples: list[Sample], group_size: int, algorithm: str) -> int:
    """Fill `Sample.advantage` group by group (GRPO or Dr. GRPO).

    Returns:
        The number of groups whose rewards were all equal (they carry no GRPO signal).
    """
    rewards = torch.tensor([s.reward for s in samples], dtype=torch.float32).view(-1, group_size)
    adv = group_advantages(rewards, normalize_std=(algorithm == "grpo"))
    for s, a in zip(samples, adv.flatten().tolist()):
        s.advantage = a
    return int((rewards.max(dim=1).values == rewards.min(dim=1).values).sum())


def rollout_metrics(samples: list[Sample]) -> dict[str, float]:
    """Reward, accuracy, format rate and response length, overall and per domain."""
    out: dict[str, float] = {}
    by_domain: dict[str, list[Sample]] = defaultdict(list)
    for s in samples:
        by_domain[s.domain].append(s)
    for key, group in [("mean", samples), *sorted(by_domain.items())]:
        n = len(group)
        out[f"reward/{key}"] = sum(s.reward for s in group) / n
        out[f"accuracy/{key}"] = sum(float(s.breakdown.get("correct", 0.0)) >= 0.999 for s in group) / n
        out[f"format/{key}"] = sum(float(s.breakdown.get("format", 0.0)) for s in group) / n
        out[f"response_length/{key}"] = sum(len(s.completion.token_ids) for s in group) / n
    out["response_length"] = out["response_length/mean"]
    out["truncated_frac"] = sum(s.completion.finish_reason == "length" for s in samples) / len(samples)
    return out


def checkpoint_dir(cfg: RunConfig, run_id: str) -> Path:
    """Where a run's checkpoints go: cfg.output_dir or the user data dir, per run."""
    base = Path(cfg.output_dir) if cfg.output_dir else Path(platformdirs.user_data_dir("rlwb")) / "runs"
    return base / run_id / "checkpoints"


def run_evaluation(engine, tokenizer, cfg: RunConfig, store, run_id: str, phase: str, model: str) -> dict:
    """Greedy held-out evaluation of every domain in the mix; results go to the store."""
    from trainer.evaluate import evaluate

    results = evaluate(engine, tokenizer, list(cfg.domains), cfg.eval_tasks_per_domain, cfg.difficulty,
                       cfg.eval_max_new_tokens)
    for domain, r in results.items():
        store.record_evaluation(run_id, phase, domain, r["n"], r["accuracy"], r["mean_reward"], r["format_rate"], model)
    return results


def train(cfg: RunConfig, store, run_id: str, on_step: StepCallback | None = None) -> None:
    """Run a whole post-training job in this process.

    Args:
        cfg: the validated run config.
        store: a `backend.store.Store`; receives metrics, trajectories, evaluations, checkpoints.
        run_id: the run's id in the store (its status is managed by the caller).
        on_step: called after each step with (step, metrics), e.g. to drive a progress bar.

    Raises:
        ModelNotFound, EngineError: when the model or engines can't start.
    """
    from transformers import AutoTokenizer

    from backend.models import resolve_model
    from trainer.learner import DeepSpeedLearner
    from trainer.rollout import open_engine

    model_path = resolve_model(cfg.model)
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    rng = random.Random(cfg.seed)
    engine_kw = {}
    if cfg.rollout_engine == "vllm":
        engine_kw = {"gpu_memory_utilization": cfg.vllm_memory_fraction, "enforce_eager": not cfg.vllm_compile}
    engine = open_engine(cfg.rollout_engine, model_path, seed=cfg.seed, dtype=cfg.dtype, **engine_kw)
    learner = None
    try:
        learner = DeepSpeedLearner(model_path, cfg)
        if cfg.eval_tasks_per_domain:
            run_evaluation(engine, tokenizer, cfg, store, run_id, "before", str(model_path))
        ckpt_root = checkpoint_dir(cfg, run_id)
        for step in range(1, cfg.steps + 1):
            metrics = train_step(cfg, engine, learner, tokenizer, rng, pad_id, store, run_id, step)
            if cfg.checkpoint_every and step % cfg.checkpoint_every == 0 and step < cfg.steps:
                path = learner.save_checkpoint(ckpt_root / f"step-{step}", tokenizer)
                store.record_checkpoint(run_id, step, str(path))
            if on_step:
                on_step(step, metrics)
        path = learner.save_checkpoint(ckpt_root / f"step-{cfg.steps}", tokenizer)
        store.record_checkpoint(run_id, cfg.steps, str(path))
        if cfg.eval_tasks_per_domain:
            run_evaluation(engine, tokenizer, cfg, store, run_id, "after", str(path))
    finally:
        engine.close()
        if learner is not None:
            learner.close()


def train_step(cfg: RunConfig, engine, learner, tokenizer, rng: random.Random, pad_id: int,
               store, run_id: str, step: int) -> dict[str, float]:
    """One training step; writes its trajectories and metrics and returns the metrics."""
    t0 = time.perf_counter()
    tasks = sample_tasks(cfg, rng, cfg.prompts_per_step)
    samples = rollout(engine, tokenizer, tasks, cfg.group_size, cfg.max_new_tokens, cfg.temperature, cfg.top_p)
    t1 = time.perf_counter()
    zero_var = assign_advantages(samples, cfg.group_size, cfg.algorithm)
    t2 = time.perf_counter()
    learn = learner.step(LearnerBatch.from_samples(samples, pad_id))
    t3 = time.perf_counter()
    engine.update_weights(learner.named_weights())
    t4 = time.perf_counter()
    gen_tokens = sum(len(s.completion.token_ids) for s in samples)
    metrics = rollout_metrics(samples)
    metrics.update(learn)
    metrics.update({
        "zero_variance_groups": zero_var / cfg.prompts_per_step,
        "rollout_tokens": float(gen_tokens),
        "rollout_tokens_per_s": gen_tokens / max(t1 - t0, 1e-9),
        "time/generate": t1 - t0,
        "time/advantage": t2 - t1,
        "time/learn": t3 - t2,
        "time/sync": t4 - t3,
        "time/step": t4 - t0,
    })
    store.record_trajectories(run_id, step, samples)
    store.record_metrics(run_id, step, metrics)
    store.heartbeat(run_id, step=step)
    return metrics
