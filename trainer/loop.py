"""The RL loop: sample tasks -> rollouts -> verify -> advantages -> learner step -> weight sync.

`train(cfg, store, run_id)` runs one post-training job in this process and writes its
metrics, trajectories, evaluations and checkpoints to the store as it goes (each step in
its own transactions, so an interrupted run keeps every completed step). The run's status
is the caller's business (`backend.runs`).

Data flow of one step (DESIGN.md): tasks come from the run's mix (`backend.domains`), are
rendered through the model's chat template, sampled G times by the rollout engine, scored
by the domain's verifier, turned into group-relative advantages, and trained on by the
DeepSpeed learner; the new weights go into the running engine in place.

Each task's level comes from its domain's range in the mix: uniform, or the domain's
current level under `trainer.curriculum` (`curriculum: true`). Groups whose rewards are all
equal carry no GRPO signal; `zero_variance` keeps them (advantage 0), skips them, or
resamples their tasks (DAPO's dynamic sampling, Yu et al., 2025, arXiv:2503.14476).
Truncated samples are kept, masked or penalized as `overlong` says (`trainer.overlong`).

Sandboxed domains (humaneval, terminal_*) are scored through a `trainer.episodes.SandboxRuntime`
opened for the run when its mix needs one.

A run resumes from one of its checkpoints (`ResumePoint`): the policy's weights, the
task sampler's RNG state and the curriculum's state are in the checkpoint, so the resumed
run samples the same tasks at the same levels as an uninterrupted one; AdamW's moments and
the rollout engine's sampling RNG start afresh (completions may differ).

With ``overlap: true`` the next step's rollout runs behind the learner, one step off-policy
(`trainer.pipeline`).
"""

from __future__ import annotations

import random
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from backend.config import RunConfig
from backend.domains import Task, get_domain, train_seed
from backend.errors import ConfigError, GenerationTimeout
from trainer.checkpoints import TRAINER_STATE, ResumePoint, checkpoint_dir, trainer_state
from trainer.algorithms.grpo import group_advantages, leave_one_out_advantages
from trainer.audit import audit_metrics
from trainer.curriculum import Curriculum, passed
from trainer.episodes import maybe_runtime
from trainer.overlong import masked, overlong_metrics, treat_overlong
from trainer.prompts import render_prompt
from trainer.types import Completion, Sample

StepCallback = Callable[[int, dict[str, float]], None]


def sample_tasks(cfg: RunConfig, rng: random.Random, k: int, curriculum: Curriculum | None = None) -> list[Task]:
    """Draw `k` training tasks from the mix (`cfg.domain_specs()`).

    Each task: a domain by weight, then its level (the curriculum's level for the domain
    if `curriculum` is given, else uniform over the domain's [lo, hi] range), then a
    training seed. Deterministic for a given `rng` state.

    Raises:
        ConfigError: the run's mix is not resolved yet.
    """
    specs = cfg.domain_specs()
    names = list(specs)
    picks = rng.choices(names, weights=[specs[n][0] for n in names], k=k)
    tasks = []
    for name in picks:
        _, lo, hi = specs[name]
        if curriculum is not None:
            level = curriculum.level(name)
        else:  # a one-level range draws nothing, so fixed-difficulty runs keep their task stream
            level = lo if lo == hi else rng.randint(lo, hi)
        tasks.append(_make_task(get_domain(name), rng, level))
    return tasks


def _make_task(domain, rng: random.Random, level: int, attempts: int = 3) -> Task:
    """A training task of `domain` at `level`; a seed whose generation times out (some
    upstream generators loop on rare seeds) is replaced by a fresh one, up to `attempts`.

    Raises:
        GenerationTimeout: every attempt timed out.
    """
    for attempt in range(attempts):
        try:
            return domain.make_task(train_seed(rng), level)
        except GenerationTimeout:
            if attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")


def rollout(engine, tokenizer, tasks: list[Task], group_size: int, max_new_tokens: int,
            temperature: float, top_p: float, runtime=None, cfg: RunConfig | None = None,
            timings: dict[str, float] | None = None) -> list[Sample]:
    """Sample `group_size` completions (or episodes) per task and score them.

    Single-turn tasks are generated in one engine call; reasoning-gym answers are scored
    in-process, code (humaneval) by its tests in the sandbox pool; multi-turn tasks are
    played as episodes in sandboxes (`trainer.episodes`). Verification streams: each
    group is scored, or its sandbox jobs submitted, the moment the engine finishes it
    (`RolloutEngine.generate`'s ``on_group``), while the other groups still generate.

    Args:
        runtime: a `trainer.episodes.SandboxRuntime`, required when a task needs a sandbox.
        cfg: the run config (multi-turn budgets), required for multi-turn tasks.
        timings: if given, ``timings["verify"]`` grows by the seconds verification of
            single-turn samples added to the step: scoring inside the engine's callbacks
            plus the wait for sandbox jobs after generation ended (jobs that finished while
            generation ran cost nothing here; multi-turn episodes verify turn by turn,
            inside generation).

    Returns:
        len(tasks) * group_size scored samples, grouped task by task (advantages not set).

    Raises:
        ConfigError: a sandboxed task without a runtime.
    """
    kinds = [get_domain(t.domain).kind for t in tasks]
    if runtime is None and any(get_domain(t.domain).needs_sandbox for t in tasks):
        raise ConfigError("this mix has sandboxed domains (humaneval, terminal_*): open a sandbox runtime")
    single = [g for g, k in enumerate(kinds) if k != "multi_turn"]
    multi = [g for g, k in enumerate(kinds) if k == "multi_turn"]
    samples: list[Sample] = []
    if single:
        budget = cfg.context_budget_tokens if cfg is not None else None
        rendered = [render_prompt(tokenizer, tasks[g], budget) for g in single]
        groups: dict[int, list[Sample]] = {}
        scorings: list[_Scoring] = []
        scoring = 0.0

        def on_group(j: int, comps: list) -> None:  # streamed: prompt j's group is done
            nonlocal scoring
            t0 = time.perf_counter()
            g, (text, ids) = single[j], rendered[j]
            retrieval = _retrieval_record(tasks[g], tokenizer, budget)
            groups[j] = [Sample(domain=tasks[g].domain, task_seed=tasks[g].seed, group=g, index=i, prompt=text,
                                prompt_ids=list(ids), completion=comp, answer=tasks[g].answer,
                                difficulty=tasks[g].difficulty, retrieval=retrieval) for i, comp in enumerate(comps)]
            scorings.append(_Scoring(groups[j], tasks[g], runtime))
            scoring += time.perf_counter() - t0

        window = engine.window
        fits = [j for j, (_, ids) in enumerate(rendered) if window is None or len(ids) + max_new_tokens <= window]
        for j in sorted(set(range(len(single))) - set(fits)):  # never sent: vLLM would refuse or shorten it
            g = single[j]
            groups[j] = [_over_window(tasks[g], g, i, *rendered[j], max_new_tokens, window) for i in range(group_size)]
        try:
            outs = engine.generate([rendered[j][1] for j in fits], n=group_size, max_new_tokens=max_new_tokens,
                                   temperature=temperature, top_p=top_p,
                                   on_group=lambda k, comps: on_group(fits[k], comps))
            for k, comps in enumerate(outs):  # an engine that didn't hand a group over
                if fits[k] not in groups:
                    on_group(fits[k], comps)
            t_wait = time.perf_counter()
            for s in scorings:
                s.finish()
        except BaseException:  # sandbox jobs not started yet are dropped, not left to a later step
            for s in scorings:
                s.cancel()
            raise
        samples += [s for j in range(len(single)) for s in groups[j]]
        if timings is not None:
            timings["verify"] = timings.get("verify", 0.0) + scoring + time.perf_counter() - t_wait
    if multi:
        from trainer.episodes import rollout_episodes

        samples += rollout_episodes(
            engine, tokenizer, [tasks[g] for g in multi], group_size, runtime, max_turns=cfg.max_turns,
            max_new_tokens=max_new_tokens, max_episode_tokens=cfg.max_episode_tokens, temperature=temperature,
            top_p=top_p, command_timeout_s=cfg.command_timeout_s, groups=multi)
    return sorted(samples, key=lambda s: (s.group, s.index))


def _over_window(task: Task, group: int, index: int, text: str, ids: list[int], max_new_tokens: int,
                 window: int) -> Sample:
    """The sample of a prompt too long for the engine's window: not generated, fault
    "context" (no reward, no part in the loss or its group's statistics), the reason in
    its breakdown."""
    reason = (f"prompt of {len(ids)} tokens + max_new_tokens {max_new_tokens} exceed the engine's window of "
              f"{window} tokens; the task was not sent")
    return Sample(domain=task.domain, task_seed=task.seed, group=group, index=index, prompt=text,
                  prompt_ids=list(ids), completion=Completion([], [], "", "length"), answer=task.answer,
                  difficulty=task.difficulty, fault="context",
                  breakdown={"fault": "context", "truncated": reason, "format": 0.0, "correct": 0.0})


def _retrieval_record(task: Task, tokenizer, budget: int | None) -> dict | None:
    """For retrieval domains, what the prompt's context was built from (see
    `retrieval.context.Context.record`); None for the others."""
    domain = get_domain(task.domain)
    if domain.kind != "retrieval":
        return None
    return (domain.context(task, tokenizer) if budget is None else domain.context(task, tokenizer, budget)).record()


def check_model_fits(cfg: RunConfig) -> int | None:
    """Refuse a run whose prompts can't fit the model's window, before its run row exists:
    every level of every domain in the mix is measured in the policy's tokens
    (`trainer.window.run_window`). A no-op for models not fetched yet (the run reports
    those itself).

    Returns:
        The engine window the run will use (tokens), or None when the model isn't fetched.

    Raises:
        ConfigError: a domain level whose prompt (or episode budget, or retrieval context)
            plus the answer needs more tokens than the model's window; the message names the
            domain, the level and the token counts.
    """
    from transformers import AutoTokenizer

    from backend.errors import ModelNotFound
    from backend.models import resolve_model
    from trainer.window import run_window

    try:
        model_path = resolve_model(cfg.model)
    except ModelNotFound:
        return None
    return run_window(cfg, model_path, AutoTokenizer.from_pretrained(model_path))


class _Scoring:
    """Scoring of one group of single-turn samples, started at once.

    In-process verifiers (reasoning-gym answers) score in the constructor; sandboxed ones
    (humaneval's tests) are submitted to the sandbox scheduler there and run while the
    engine generates other groups; `finish` waits for them and fills reward, breakdown and
    fault; `cancel` drops the jobs that haven't started.
    """

    def __init__(self, group: list[Sample], task: Task, runtime) -> None:
        self.group, self.task, self.domain = group, task, get_domain(task.domain)
        self.futures: list = []
        if not self.domain.needs_sandbox:
            for s in group:
                s.reward, s.breakdown = self.domain.score(task, s.completion.text)
        else:
            self.futures = [runtime.scheduler.submit(self.domain.verification_job(task, s.completion.text))
                            for s in group]

    def finish(self) -> None:
        for s, future in zip(self.group, self.futures):
            reward, s.breakdown = self.domain.score_result(self.task, s.completion.text, future.result())
            s.reward, s.fault = float(reward), s.breakdown.get("fault")

    def cancel(self) -> None:
        for future in self.futures:
            future.cancel()


def by_group(samples: list[Sample]) -> dict[int, list[Sample]]:
    """Samples keyed by their `group`, in order of first appearance."""
    out: dict[int, list[Sample]] = defaultdict(list)
    for s in samples:
        out[s.group].append(s)
    return dict(out)


def zero_variance(group: list[Sample]) -> bool:
    """True if a group gives GRPO no signal: its scored rewards (no harness fault, not
    masked as overlong) are all equal, or fewer than two of its samples were scored."""
    rewards = [s.reward for s in group if s.fault is None and not masked(s)]
    return len(rewards) < 2 or len(set(rewards)) == 1


def assign_advantages(samples: list[Sample], group_size: int, algorithm: str, overlong: str = "keep") -> int:
    """Fill `Sample.advantage` group by group (GRPO, Dr. GRPO or RLOO).

    Truncated samples are first masked or penalized as `overlong` says
    (`trainer.overlong.treat_overlong`). Samples with a harness fault (they are not the
    model's failure) and masked samples get advantage 0 and take no part in their group's
    statistics.

    Returns:
        The number of groups whose scored rewards were all equal (no GRPO signal).
    """
    treat_overlong(samples, overlong)
    zero_var = 0
    for group in by_group(samples).values():
        scored = [s for s in group if s.fault is None and not masked(s)]
        for s in group:
            s.advantage = 0.0
        if zero_variance(group):
            zero_var += 1
            continue
        rewards = torch.tensor([[s.reward for s in scored]], dtype=torch.float32)
        if algorithm == "rloo":
            adv = leave_one_out_advantages(rewards)
        else:
            adv = group_advantages(rewards, normalize_std=(algorithm == "grpo"))
        for s, a in zip(scored, adv.flatten().tolist()):
            s.advantage = a
    return zero_var


def rollout_metrics(samples: list[Sample]) -> dict[str, float]:
    """Reward, accuracy, format rate and response length, overall and per domain, over the
    scored samples (harness faults are counted apart, in `sandbox/harness_faults`, and prompts too
    long for the engine's window in `context/over_window`); turns
    per episode for multi-turn domains; the answer audit per domain (`trainer.audit`)."""
    out: dict[str, float] = {"sandbox/harness_faults": float(sum(s.fault not in (None, "context") for s in samples)),
                             "context/over_window": float(sum(s.fault == "context" for s in samples))}
    scored = [s for s in samples if s.fault is None]
    by_domain: dict[str, list[Sample]] = defaultdict(list)
    for s in scored:
        by_domain[s.domain].append(s)
    for key, group in [("mean", scored), *sorted(by_domain.items())]:
        n = len(group)
        if not n:
            continue
        out[f"reward/{key}"] = sum(s.reward for s in group) / n
        out[f"accuracy/{key}"] = sum(passed(s) for s in group) / n
        out[f"format/{key}"] = sum(float(s.breakdown.get("format", 0.0)) for s in group) / n
        out[f"response_length/{key}"] = sum(sum(s.completion.mask or [1] * len(s.completion.token_ids))
                                            for s in group) / n
        if "turns" in group[0].breakdown:  # multi-turn episodes
            out[f"turns/{key}"] = sum(len(s.turns) for s in group) / n
        out.update(tool_metrics(group, key))
    out.setdefault("reward/mean", 0.0)
    out.setdefault("accuracy/mean", 0.0)
    out["response_length"] = out.get("response_length/mean", 0.0)
    generated = [s for s in samples if s.fault != "context"]  # a prompt over the window has no completion to cut
    out["truncated_frac"] = sum(s.completion.finish_reason == "length" for s in generated) / max(len(generated), 1)
    out.update(audit_metrics(scored))
    return out


def tool_metrics(samples: list[Sample], key: str) -> dict[str, float]:
    """Tool-call metrics of tool-use episodes (breakdowns with "calls"), under `key` (a
    domain or "mean"): tools/call_validity (valid calls / calls, `backend.tool_env.call_stats`;
    absent when no call was made), tools/calls_per_episode, tools/ok_rate (calls that ran
    without an error code / calls), and for "mean" tools/errors/<code> (counts)."""
    episodes = [s for s in samples if "calls" in s.breakdown]
    if not episodes:
        return {}
    calls = sum(s.breakdown["calls"] for s in episodes)
    out = {f"tools/calls_per_episode/{key}": calls / len(episodes)}
    if calls:
        out[f"tools/call_validity/{key}"] = sum(s.breakdown["valid_calls"] for s in episodes) / calls
        out[f"tools/ok_rate/{key}"] = sum(s.breakdown.get("ok_calls", 0) for s in episodes) / calls
    if key == "mean":
        codes: dict[str, int] = defaultdict(int)
        for s in episodes:
            for code, count in (s.breakdown.get("error_codes") or {}).items():
                codes[code] += count
        out.update({f"tools/errors/{code}": float(c) for code, c in sorted(codes.items())})
    return out


def engine_options(cfg: RunConfig, model_path, tokenizer=None) -> dict:
    """The rollout engine's options for a run (`open_engine`'s **kw): vLLM's memory share,
    eager mode, tensor parallel size and the context window the mix's prompts need
    (`trainer.window.run_window`, checked against the model's before anything starts).

    Args:
        tokenizer: the policy's tokenizer (None: loaded from `model_path`).

    Raises:
        ConfigError: a mix whose prompts don't fit the model's window.
    """
    from trainer.window import run_window

    if tokenizer is None:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(model_path)
    window = run_window(cfg, model_path, tokenizer)
    if cfg.rollout_engine != "vllm":
        return {}
    return {"gpu_memory_utilization": cfg.vllm_memory_fraction, "enforce_eager": not cfg.vllm_compile,
            "tensor_parallel_size": cfg.tensor_parallel_size, "max_model_len": window}


def run_evaluation(engine, tokenizer, cfg: RunConfig, store, run_id: str, phase: str, model: str,
                   runtime=None) -> str:
    """Greedy held-out evaluation of every domain in the mix, each at the lowest level of its
    range (the same `eval_tasks_per_domain` tasks every time); its completions and per-domain
    results go to the store under `phase` ("before", "step-N", "after"): `trainer.evaluate.record_heldout`.
    Returns the evaluation's id."""
    from trainer.evaluate import evaluate_samples, record_heldout

    levels = {d: lo for d, (_, lo, _) in cfg.domain_specs().items()}
    samples = evaluate_samples(engine, tokenizer, cfg.domain_list, cfg.eval_tasks_per_domain, levels,
                               cfg.eval_max_new_tokens, runtime=runtime, cfg=cfg)
    return record_heldout(store, run_id, phase, model, cfg, levels, samples)


def train(cfg: RunConfig, store, run_id: str, on_step: StepCallback | None = None,
          resume: ResumePoint | None = None) -> None:
    """Run a whole post-training job in this process.

    Args:
        cfg: the validated run config.
        store: a `backend.store.Store`; receives metrics, trajectories, evaluations, checkpoints.
        run_id: the run's id in the store (its status is managed by the caller).
        on_step: called after each step with (step, metrics), e.g. to drive a progress bar.
        resume: continue after this checkpoint (no "before" evaluation; steps from
            ``resume.step + 1``). The caller removes rows of later steps first.

    Raises:
        ModelNotFound, EngineError: when the model or engines can't start.
    """
    from transformers import AutoTokenizer

    from backend.models import resolve_model
    from trainer.learner import DeepSpeedLearner
    from trainer.pipeline import StepPipeline
    from trainer.rollout import open_run_engine

    model_path = resolve_model(cfg.model)
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    rng = random.Random(cfg.seed)
    curriculum = Curriculum.from_config(cfg) if cfg.curriculum else None
    first = 1
    if resume is not None:
        rng.setstate(resume.rng_state)
        if curriculum is not None and resume.curriculum:
            curriculum.restore(resume.curriculum)
        first = resume.step + 1
    engine_kw = engine_options(cfg, model_path, tokenizer)
    # sandboxes first: a missing Docker engine fails the run before the engines spend a minute starting
    with maybe_runtime(cfg) as runtime:
        if runtime is not None:
            store.record_pool_state(run_id, runtime.pool.state())
        engine = open_run_engine(cfg, model_path, **engine_kw)
        learner = pipe = None
        try:
            if resume is None:
                learner = DeepSpeedLearner(model_path, cfg)
                if cfg.eval_tasks_per_domain:
                    run_evaluation(engine, tokenizer, cfg, store, run_id, "before", str(model_path), runtime)
            else:  # the policy's weights from the checkpoint, into the engine in place
                learner = DeepSpeedLearner(model_path, cfg, init_from=resume.path, steps_done=resume.optimizer_steps)
                engine.update_weights(learner.named_weights())
            ckpt_root = checkpoint_dir(cfg, run_id)
            pipe = StepPipeline(cfg, engine, learner, tokenizer, rng, pad_id, store, run_id, runtime, curriculum)

            def save(step: int) -> Path:
                # with overlap the sampler has already drawn the next step: store it as it was before
                at_rng, at_curriculum = pipe.saved_state()
                state = trainer_state(step, at_rng, at_curriculum, learner.steps_done)
                path = learner.save_checkpoint(ckpt_root / f"step-{step}", tokenizer, extra={TRAINER_STATE: state})
                store.record_checkpoint(run_id, step, str(path))
                return path

            for step in range(first, cfg.steps + 1):
                metrics = pipe.step(step, prefetch_next=step < cfg.steps)
                # evaluate before checkpointing: a run stopped in between resumes from the
                # previous checkpoint and evaluates this step again, leaving no gap in the curve.
                # The engine is idle here: a prefetched rollout has finished before the sync.
                if cfg.eval_every and step % cfg.eval_every == 0 and step < cfg.steps:
                    run_evaluation(engine, tokenizer, cfg, store, run_id, f"step-{step}",
                                   f"{run_id} policy at step {step}", runtime)
                if cfg.checkpoint_every and step % cfg.checkpoint_every == 0 and step < cfg.steps:
                    save(step)
                if on_step:
                    on_step(step, metrics)
            path = save(cfg.steps)
            if cfg.eval_tasks_per_domain:
                run_evaluation(engine, tokenizer, cfg, store, run_id, "after", str(path), runtime)
        finally:
            if pipe is not None:
                pipe.close()  # a rollout still in flight ends before the engine closes
            engine.close()
            if learner is not None:
                learner.close()
            if runtime is not None:
                store.record_pool_state(run_id, {**runtime.pool.state(), "idle": 0, "busy": 0}, status="closed")


@dataclass
class StepGroups:
    """The groups of one step after zero-variance handling (see `collect_groups`).

    Attributes:
        samples: the step's final `prompts_per_step` groups (a resampled group's last
            replacement in its place), advantages set: what the store records.
        batch: the samples the learner trains on: `samples` minus the skipped groups, the
            samples masked as overlong and the prompts too long for the engine's window
            (fault "context"); may be empty (then the step takes no learner step).
        rolled: every sample rolled out in the step, replaced groups included (rollout
            metrics, the curriculum's pass rates, sandbox executions).
        metrics: ``zero_variance/*`` metrics (shares in [0, 1], counts of groups or samples)
            and ``overlong/*`` (counts of samples).
    """

    samples: list[Sample]
    batch: list[Sample]
    rolled: list[Sample]
    metrics: dict[str, float]


def collect_groups(cfg: RunConfig, rng: random.Random, play: Callable[[list[Task]], list[Sample]],
                   curriculum: Curriculum | None = None) -> StepGroups:
    """Sample a step's tasks, roll them out with `play` and treat zero-variance groups as
    `cfg.zero_variance` says.

    keep: they stay in the batch with advantage 0. skip: they leave the learner batch (their
    trajectories are still recorded). resample: their tasks are redrawn and rolled out
    again, up to `cfg.max_resample_rounds` rounds, and whatever is still zero-variance is
    skipped (DAPO's dynamic sampling, arXiv:2503.14476). Truncated samples are treated as
    `cfg.overlong` says before advantages (`trainer.overlong`); masked ones leave the batch.

    Args:
        play: k tasks -> k * group_size scored samples with `group` 0..k-1 (e.g. `rollout`).
        curriculum: sets each domain's level (see `sample_tasks`).

    Returns:
        The final groups, the learner batch, every rolled-out sample and the metrics
        ``zero_variance/groups`` (share of the originally sampled groups with zero variance,
        also as ``zero_variance_groups``), ``zero_variance/<domain>`` (that share per domain),
        ``zero_variance/resampled`` (groups redrawn, all rounds), ``zero_variance/skipped``
        (groups left out of the batch), ``zero_variance/discarded_samples`` (rolled out,
        replaced, not recorded) and, unless ``overlong: keep``, ``overlong/masked`` or
        ``overlong/penalized`` (recorded samples treated).
    """
    rolled = play(sample_tasks(cfg, rng, cfg.prompts_per_step, curriculum))
    assign_advantages(rolled, cfg.group_size, cfg.algorithm, cfg.overlong)
    groups = by_group(rolled)
    zero = sorted(g for g, group in groups.items() if zero_variance(group))
    domains: dict[str, list[bool]] = defaultdict(list)
    for g, group in groups.items():
        domains[group[0].domain].append(g in zero)
    metrics = {"zero_variance/groups": len(zero) / len(groups), "zero_variance_groups": len(zero) / len(groups)}
    metrics.update({f"zero_variance/{d}": sum(z) / len(z) for d, z in sorted(domains.items())})
    resampled = 0
    for _ in range(cfg.max_resample_rounds if cfg.zero_variance == "resample" else 0):
        if not zero:
            break
        fresh = play(sample_tasks(cfg, rng, len(zero), curriculum))
        for s in fresh:
            s.group = zero[s.group]  # take the place of the group it replaces
        assign_advantages(fresh, cfg.group_size, cfg.algorithm, cfg.overlong)
        rolled = rolled + fresh
        resampled += len(zero)
        groups.update(by_group(fresh))
        zero = [g for g in zero if zero_variance(groups[g])]
    skipped = set() if cfg.zero_variance == "keep" else set(zero)
    samples = [s for g in sorted(groups) for s in groups[g]]
    metrics.update({"zero_variance/resampled": float(resampled), "zero_variance/skipped": float(len(skipped)),
                    "zero_variance/discarded_samples": float(len(rolled) - len(samples))})
    metrics.update(overlong_metrics(samples, cfg.overlong))
    # a prompt over the engine's window was never generated: it has nothing to train on
    batch = [s for s in samples if s.group not in skipped and not masked(s) and s.fault != "context"]
    return StepGroups(samples, batch, rolled, metrics)


def train_step(cfg: RunConfig, engine, learner, tokenizer, rng: random.Random, pad_id: int,
               store, run_id: str, step: int, runtime=None, curriculum: Curriculum | None = None) -> dict[str, float]:
    """One on-policy training step; writes its trajectories, metrics and sandbox executions and
    returns the metrics (`trainer.pipeline.StepPipeline.step` without overlap).

    Rollout metrics are over every sample rolled out (resampled groups included), the
    recorded trajectories are the step's final groups. When zero-variance handling leaves
    the batch empty, the learner step and the weight sync are skipped (``learner_sequences``
    is 0). With a `curriculum`, it is updated with the step's samples and its state
    (``curriculum/level/<domain>``, ``curriculum/pass_rate/<domain>``) joins the metrics.
    """
    from trainer.pipeline import StepPipeline

    cfg = cfg.model_copy(update={"overlap": False})
    with StepPipeline(cfg, engine, learner, tokenizer, rng, pad_id, store, run_id, runtime, curriculum) as pipe:
        return pipe.step(step, prefetch_next=False)


def sandbox_executions(samples: list[Sample], runtime) -> list[dict]:
    """One row per sandbox execution of a step: the scheduler's verification jobs and the
    commands of multi-turn episodes (checker runs are part of the episode's reward)."""
    rows = runtime.scheduler.drain_records() if runtime is not None else []
    backend = runtime.pool.backend if runtime is not None else ""
    for s in samples:
        for t in s.turns:
            if t.get("action") == "command":
                rows.append({"kind": s.domain, "outcome": t["outcome"], "exit_code": t.get("exit_code"),
                             "latency_ms": t.get("duration_ms"), "backend": backend,
                             "command": str(t.get("command", ""))[:500]})
    return rows


def sandbox_metrics(executions: list[dict], runtime) -> dict[str, float]:
    """Queue depth, latency p50/p99 (ms) and failures by kind over a step's executions."""
    from sandboxes.pool import percentile

    lat = [r["latency_ms"] for r in executions if r.get("latency_ms") is not None]
    out = {"sandbox/executions": float(len(executions)),
           "sandbox/queue_depth": runtime.scheduler.metrics(reset=True)["queue_depth"],
           "sandbox/latency_p50_ms": percentile(lat, 50), "sandbox/latency_p99_ms": percentile(lat, 99),
           "sandbox/pool_replaced": float(runtime.pool.state()["replaced"])}
    for kind in ("error", "timeout", "oom", "harness"):
        out[f"sandbox/failures/{kind}"] = float(sum(r["outcome"] == kind for r in executions))
    return out
