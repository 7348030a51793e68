"""`StepPipeline`: the order of one training step's phases, on-policy or one step off-policy.

On-policy (``overlap: false``): roll out step t with the current weights, train on it,
sync the new weights into the rollout engine, record. With ``engine_sleep`` (the default)
the engine releases its weights and KV cache while the learner trains (`RolloutEngine.sleep`)
and the sync loads them back: the learner phase's peak memory lacks the engine's share,
recorded as ``memory/engine_released_gb`` (the process's resident memory it gave back). Only
an engine in this process that can sleep does (vLLM's CPU build: not the transformers engine,
Ray's rollout workers or vLLM on GPUs), and with overlap only where no rollout was prefetched.

One step off-policy (``overlap: true``): while the learner trains on step t, a background
thread already rolls out step t+1 with the weights the engine holds, those of step t-1.
The weight sync waits for that rollout to finish (the engine is never updated while it
generates), so every batch after the first is exactly one optimizer step stale. The
learner's PPO-clipped importance ratio pi_theta / pi_old uses the rollout engine's
logprobs as pi_old, the behaviour policy that actually sampled the tokens, so the
staleness is corrected for rather than ignored; it is recorded per step as
``off_policy/staleness`` (optimizer steps between the policy that sampled the batch and
the one trained on it: 0 on-policy, 1 overlapped, 0 again for a step whose previous
batch was empty). This is the one-step-off-policy scheme of verl's "one step off async
trainer" and of Noukhovitch et al., "Asynchronous RLHF" (2024, arXiv:2410.18252).

What overlaps is the whole rollout phase (task sampling, generation, verification in
sandboxes, multi-turn episodes) with the learner step; how much wall time that saves
depends on both phases sharing the machine's cores (``time/rollout_wait`` is the part of
the rollout the learner did not hide).

Determinism and resume: the task sampler's RNG and the curriculum are only touched by
the rollout thread while it runs, and the curriculum is updated with step t's samples
before step t+1's tasks are drawn, so a run samples the same tasks with or without
overlap. `saved_state` is the sampler and curriculum as they were *before* the next
step's rollout began: a checkpoint of step t stores it, and a resumed run rolls step t+1
out again, on-policy, from the checkpoint's weights. That holds for a checkpoint of the
last step; for the others `checkpoint_state` also hands over the rollout of step t+1, which
the run had generated one step stale, and a resumed run trains on it (`prime`), so the
resumed run is the uninterrupted one. Each step's sampling is seeded from (run seed, step)
(`trainer.rollout.base.RolloutEngine.reseed`).
"""

from __future__ import annotations

import copy
import random
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from trainer.config import RunConfig
from trainer.curriculum import Curriculum
from trainer.groups import StepGroups, collect_groups
from trainer.metrics import (PeakRSS, release_free_memory, resident_gb, rollout_metrics, sandbox_executions,
                             sandbox_metrics)
from trainer.rollout.base import derive_seed
from trainer.scoring import rollout
from trainer.types import LearnerBatch, Sample


@dataclass
class StepRollout:
    """One step's rollouts, as the rollout phase hands them to the learner.

    Attributes:
        step: the training step these rollouts belong to.
        groups: the step's groups after zero-variance handling.
        policy_version: learner optimizer steps taken when the rollout began: the engine's
            weights are those of this many steps.
        seconds: wall-clock seconds of the whole rollout phase (generation + verification).
        verify_seconds: of which scoring single-turn samples.
        executions: sandbox execution rows of this rollout (`sandbox_executions`).
        sandbox: ``sandbox/*`` metrics of this rollout, empty without sandboxes.
    """

    step: int
    groups: StepGroups
    policy_version: int
    seconds: float
    verify_seconds: float
    executions: list[dict] = field(default_factory=list)
    sandbox: dict[str, float] = field(default_factory=dict)


def roll(cfg: RunConfig, engine, tokenizer, rng: random.Random, step: int, runtime=None,
         curriculum: Curriculum | None = None, policy_version: int = 0) -> StepRollout:
    """Sample a step's tasks, roll them out and score them (see `trainer.groups.collect_groups`)."""
    t0 = time.perf_counter()
    timings = {"verify": 0.0}

    def play(tasks) -> list[Sample]:
        return rollout(engine, tokenizer, tasks, cfg.group_size, cfg.max_new_tokens, cfg.temperature, cfg.top_p,
                       runtime=runtime, cfg=cfg, timings=timings)

    engine.reseed(derive_seed(cfg.seed, step))  # the step's samples depend on (seed, step) alone: resume redoes them
    got = collect_groups(cfg, rng, play, curriculum)
    seconds = time.perf_counter() - t0
    executions = sandbox_executions(got.rolled, runtime)
    sandbox = sandbox_metrics(executions, runtime) if runtime is not None else {}
    return StepRollout(step, got, policy_version, seconds, timings["verify"], executions, sandbox)


class StepPipeline:
    """Runs training steps in order, overlapping each step's learner with the next step's
    rollout when ``cfg.overlap`` (see the module docstring).

    Args:
        cfg: the run config (``overlap``, sizes, sampling).
        engine: the rollout engine (`trainer.rollout.RolloutEngine`).
        learner: the `trainer.learner.DeepSpeedLearner` (or anything with ``step``,
            ``named_weights`` and ``steps_done``).
        rng: the task sampler's RNG; curriculum: the run's curriculum or None.
        runtime: the sandbox runtime or None.

    Use as a context manager, or call `close`: it waits for a rollout still in flight
    before the engine may be closed.
    """

    def __init__(self, cfg: RunConfig, engine, learner, tokenizer, rng: random.Random, pad_id: int, store,
                 run_id: str, runtime=None, curriculum: Curriculum | None = None) -> None:
        self.cfg, self.engine, self.learner, self.tokenizer = cfg, engine, learner, tokenizer
        self.rng, self.pad_id, self.store, self.run_id = rng, pad_id, store, run_id
        self.runtime, self.curriculum = runtime, curriculum
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="rollout") if cfg.overlap else None
        self._rss = PeakRSS()  # peak RSS per phase of a step
        self._pending: Future | None = None
        self.saved_rng_state = rng.getstate()
        self.saved_curriculum = copy.deepcopy(curriculum)

    def __enter__(self) -> StepPipeline:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _roll(self, step: int) -> StepRollout:
        return roll(self.cfg, self.engine, self.tokenizer, self.rng, step, self.runtime, self.curriculum,
                    policy_version=getattr(self.learner, "steps_done", 0))

    def checkpoint_state(self) -> tuple[random.Random, Curriculum | None, StepRollout | None]:
        """What a checkpoint of the last finished step stores so a resumed run goes on as this
        one does: the task sampler and curriculum, and with overlap the next step's rollout.

        With a prefetched rollout (waited for here; it was generated with the weights of the
        step before, and the learner will train on it as it is) the sampler and curriculum
        are as that rollout left them. Without one, or if it failed (its error is raised in
        the step that needs it), they are as they were before the next step's rollout drew
        anything, and a resumed run rolls that step out again."""
        rng = random.Random()
        pending = self._pending
        if pending is not None and pending.exception() is None:
            rng.setstate(self.rng.getstate())
            return rng, copy.deepcopy(self.curriculum), pending.result()
        rng.setstate(self.saved_rng_state)
        return rng, self.saved_curriculum, None

    def prime(self, rolled: StepRollout) -> None:
        """Take `rolled` as the next step's rollout (a resumed run's, from its checkpoint's
        `checkpoint_state`) instead of rolling that step out."""
        done: Future = Future()
        done.set_result(rolled)
        self._pending = done

    def step(self, step: int, prefetch_next: bool = True) -> dict[str, float]:
        """Run training step `step` and return its metrics (also written to the store).

        Args:
            prefetch_next: with overlap, start step+1's rollout behind this step's learner
                (False for the last step).

        Raises:
            whatever the rollout or the learner raised (a background rollout's error is
            raised here, in the step that needed it).
        """
        t0 = time.perf_counter()
        memory = {}
        self._rss.reset()
        if self._pending is not None:
            rolled = self._pending.result()
            self._pending = None
        else:
            rolled = self._roll(step)
        exposed = time.perf_counter() - t0  # rollout time the learner did not hide
        memory["memory/rollout_peak_gb"] = self._rss.read_gb()
        if self.curriculum is not None:
            self.curriculum.update(rolled.groups.rolled)
        self.saved_rng_state = self.rng.getstate()
        self.saved_curriculum = copy.deepcopy(self.curriculum)
        if self._pool is not None and prefetch_next:
            self._pending = self._pool.submit(self._roll, step + 1)
        got = rolled.groups
        learn: dict[str, float] = {}
        staleness = getattr(self.learner, "steps_done", 0) - rolled.policy_version
        slept = False
        if self.cfg.engine_sleep and self._pending is None and got.batch:  # nothing generates until the sync
            release_free_memory()  # the rollout's freed heap first: what follows is the engine's alone
            before = resident_gb()
            slept = self.engine.sleep()
        self._rss.reset()  # trims the heap again: the engine's freed memory is back with the system
        if slept:
            memory["memory/engine_released_gb"] = max(before - resident_gb(), 0.0)
        t1 = time.perf_counter()
        if got.batch:
            learn = self.learner.step(LearnerBatch.from_samples(got.batch, self.pad_id))
        t2 = time.perf_counter()
        memory["memory/learn_peak_gb"] = self._rss.read_gb()
        if self._pending is not None and got.batch:  # never change the weights under a running rollout
            self._pending.exception()
        self._rss.reset()
        t3 = time.perf_counter()
        if got.batch:
            self.engine.update_weights(self.learner.named_weights())
        t4 = time.perf_counter()
        memory["memory/sync_peak_gb"] = self._rss.read_gb()
        metrics = self._metrics(rolled, learn, staleness)
        metrics.update({
            "time/learn": t2 - t1,
            "time/sync": t4 - t3,
            "time/rollout_wait": exposed + (t3 - t2),
            **memory,
        })
        self.store.record_trajectories(self.run_id, step, got.samples)
        if self.runtime is not None:
            self.store.record_sandbox_executions(rolled.executions, run_id=self.run_id, step=step)
            self.store.record_pool_state(self.run_id, self.runtime.pool.state())
        # wall time of this step on the main thread: with overlap the rollout it hid behind
        # the previous step's learner is not in it, so the steps' times add up to the run's
        metrics["time/step"] = time.perf_counter() - t0
        self.store.record_metrics(self.run_id, step, metrics)
        self.store.heartbeat(self.run_id, step=step)
        return metrics

    def _metrics(self, rolled: StepRollout, learn: dict[str, float], staleness: int) -> dict[str, float]:
        got = rolled.groups
        gen_seconds = rolled.seconds - rolled.verify_seconds
        gen_tokens = sum(sum(s.completion.mask or [1] * len(s.completion.token_ids)) for s in got.rolled)
        metrics = rollout_metrics(got.rolled)
        metrics.update(learn)
        metrics.update(got.metrics)
        if self.curriculum is not None:
            metrics.update(self.curriculum.state())
        metrics.update(rolled.sandbox)
        metrics.update({
            "learner_sequences": float(len(got.batch)),
            "rollout_tokens": float(gen_tokens),
            "rollout_tokens_per_s": gen_tokens / max(gen_seconds, 1e-9),
            "time/generate": gen_seconds,
            "time/verify": rolled.verify_seconds,
            "off_policy/staleness": float(staleness),
        })
        return metrics

    def close(self) -> None:
        """Wait for a rollout still running (its result is dropped) and stop the thread.

        A rollout can't be cut short inside the engine, so a stop waits for it (at most one
        step's rollout)."""
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.exception()  # wait; its error, if any, no longer matters
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
