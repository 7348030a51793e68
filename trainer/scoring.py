"""Rollout and scoring: G samples (or episodes) per task, each scored by its domain's verifier.

`rollout(engine, tokenizer, tasks, group_size, ...)` renders each single-turn task through
the model's chat template (`trainer.prompts.render_prompt`), asks the rollout engine for
`group_size` completions and scores every group the moment the engine hands it over:
in-process verifiers (reasoning-gym answers) at once, sandboxed ones (humaneval's tests)
as jobs on the run's sandbox scheduler. Multi-turn tasks are played as episodes
(`trainer.episodes.rollout_episodes`). A prompt too long for the engine's window is never
sent: its samples carry the fault "context".

Training (`trainer.pipeline`), the in-run evaluation (`trainer.evaluate`) and `rlwb eval`
(`backend.evaluation`) all roll out through here; `trainer.loop.train` stands above them.

Not covered: advantages and zero-variance handling (`trainer.groups`), the step's metrics
(`trainer.metrics`).
"""

from __future__ import annotations

import time

from trainer.config import RunConfig
from domains.contract import RetrievalDomain, Task
from domains.registry import get_domain
from core.errors import ConfigError
from trainer.episodes import rollout_episodes
from trainer.prompts import render_prompt
from trainer.types import Completion, Sample


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
    if not isinstance(domain, RetrievalDomain):
        return None
    return (domain.context(task, tokenizer) if budget is None else domain.context(task, tokenizer, budget)).record()


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
