"""The RL loop: sample tasks -> rollouts -> verify -> advantages -> learner step -> weight sync.

`train(cfg, store, run_id)` runs one post-training job in this process and writes its
metrics, trajectories, evaluations and checkpoints to the store as it goes (each step in
its own transactions, so an interrupted run keeps every completed step). The run's status
is the caller's business (`backend.runs`).

Data flow of one step (DESIGN.md): tasks come from the run's mix (`domains.registry`), are
rendered through the model's chat template, sampled G times by the rollout engine, scored
by the domain's verifier, turned into group-relative advantages, and trained on by the
DeepSpeed learner; the new weights go into the running engine in place.

Each task's level comes from its domain's range in the mix: uniform, or the domain's
current level under `trainer.curriculum` (`curriculum: true`). Groups whose rewards are all
equal carry no GRPO signal; `zero_variance` keeps them (advantage 0), skips them, or
resamples their tasks (DAPO's dynamic sampling, Yu et al., 2025, arXiv:2503.14476).
Truncated samples are kept, masked or penalized as `overlong` says (`trainer.overlong`).

The floors below `train`: `trainer.pipeline` orders a step's phases; `trainer.groups` draws
the tasks and sets the advantages; `trainer.scoring` rolls out and scores (training and
`trainer.evaluate` alike); `trainer.metrics` summarizes a step; `trainer.placement` opens
the engine and sandboxes here or on Ray.

Sandboxed domains (humaneval, terminal_*) are scored through a `trainer.episodes.SandboxRuntime`
opened for the run when its mix needs one.

A run resumes from one of its checkpoints (`ResumePoint`): the policy's weights, the
task sampler's RNG state and the curriculum's state are in the checkpoint, so the resumed
run samples the same tasks at the same levels as an uninterrupted one. The newest checkpoint
also holds the optimizer's state and each step's sampling is seeded from (run seed, step),
so the resumed run's completions, rewards and weights are the uninterrupted run's
(`tests/reliability/test_exact_resume.py`).

With ``overlap: true`` the next step's rollout runs behind the learner, one step off-policy
(`trainer.pipeline`).
"""

from __future__ import annotations

import functools
import pickle
import random
import sys
from collections.abc import Callable
from pathlib import Path

from trainer.config import RunConfig
from core.errors import ConfigError, ModelNotFound
from core.paths import run_dir
from trainer.models import resolve_model
from trainer.checkpoints import (NEXT_ROLLOUT, TRAINER_STATE, ResumePoint, checkpoint_dir,
                                 drop_old_optimizer_states, trainer_state)
from trainer.curriculum import Curriculum
from trainer.evaluate import evaluate_samples, record_heldout
from trainer.learner_group import open_learner
from trainer.metrics import PeakRSS, release_free_memory
from trainer.phases import evaluation_step
from trainer.pipeline import StepPipeline
from trainer.placement import maybe_runtime, open_run_engine
from trainer.rollout.base import KV_FLOOR_TOKENS, kv_memory_problem
from trainer.window import run_sizes, run_window

StepCallback = Callable[[int, dict[str, float]], None]


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
            domain, the level and the token counts. Or, for vLLM on the CPU, a
            ``vllm_memory_fraction`` of RAM too small for one sequence of that window's KV
            cache (vLLM would refuse to start after the run row exists).
    """
    from transformers import AutoTokenizer  # transformers takes seconds to import

    try:
        model_path = resolve_model(cfg.model)
    except ModelNotFound:
        return None
    window = run_window(cfg, model_path, AutoTokenizer.from_pretrained(model_path))
    # the engines run here (not on a Ray cluster's nodes, which check their own RAM) and on the CPU
    if cfg.rollout_engine == "vllm" and not (cfg.scheduler == "ray" and cfg.ray_address) and not _cuda():
        import psutil  # on first use: only a vLLM run on the CPU sizes its KV cache from RAM

        private = cfg.scheduler == "ray" and not cfg.ray_address  # every rollout worker on this machine
        problem = kv_memory_problem(cfg.vllm_memory_fraction, window, model_path, cfg.dtype,
                                    psutil.virtual_memory().total, engines=cfg.rollout_workers if private else 1)
        if problem:
            raise ConfigError(problem)
    return window


def _cuda() -> bool:
    """Whether the rollout engine would run on a CUDA GPU (its memory share is then the GPU's)."""
    import torch  # on first use: with the rest of the learner

    return torch.cuda.is_available()


def engine_options(cfg: RunConfig, model_path, tokenizer=None) -> dict:
    """The rollout engine's options for a run (`open_engine`'s **kw): vLLM's memory share,
    eager mode, tensor parallel size and the context window the mix's prompts need
    (`trainer.window.run_window`, checked against the model's before anything starts).

    Args:
        tokenizer: the policy's tokenizer (None: loaded from `model_path`).

    Raises:
        ConfigError: a mix whose prompts don't fit the model's window.
    """
    if tokenizer is None:
        from transformers import AutoTokenizer  # transformers takes seconds to import

        tokenizer = AutoTokenizer.from_pretrained(model_path)
    window, sequence = run_sizes(cfg, model_path, tokenizer)
    if cfg.rollout_engine != "vllm":
        return {}
    # the KV cache holds a step's sequences at the longest the mix makes, one full window
    # (vLLM's minimum) and KV_FLOOR_TOKENS (room for the held-out evaluation's batches of a small
    # run), capped at vllm_memory_fraction of RAM; sequences beyond it wait their turn
    return {"gpu_memory_utilization": cfg.vllm_memory_fraction, "enforce_eager": not cfg.vllm_compile,
            "tensor_parallel_size": cfg.tensor_parallel_size, "max_model_len": window,
            "kv_cache_tokens": max(window, cfg.sequences_per_step * sequence, KV_FLOOR_TOKENS)}


def run_evaluation(engine, tokenizer, cfg: RunConfig, store, run_id: str, phase: str, model: str,
                   runtime=None) -> str:
    """Greedy held-out evaluation of every domain in the mix, each at the lowest level of its
    range (the same `eval_tasks_per_domain` tasks every time); its completions and per-domain
    results go to the store under `phase` ("before", "step-N", "after"): `trainer.evaluate.record_heldout`;
    its peak RSS (GiB) as the metric ``memory/eval_peak_gb`` at the step it stands at.
    Returns the evaluation's id."""
    levels = {d: lo for d, (_, lo, _) in cfg.domain_specs().items()}
    rss = PeakRSS()
    rss.reset()
    samples = evaluate_samples(engine, tokenizer, cfg.domain_list, cfg.eval_tasks_per_domain, levels,
                               cfg.eval_max_new_tokens, runtime=runtime, cfg=cfg)
    eval_id = record_heldout(store, run_id, phase, model, cfg, levels, samples)
    store.record_metrics(run_id, evaluation_step(phase, cfg.steps), {"memory/eval_peak_gb": rss.read_gb()})
    return eval_id


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
    from transformers import AutoTokenizer  # transformers takes seconds to import

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
    # the page says what the process is doing: each phase is recorded as it starts
    enter = functools.partial(store.enter_phase, run_id)
    if cfg.needs_sandbox:
        enter("sandboxes", first - 1)
    # sandboxes first: a missing Docker engine fails the run before the engines spend a minute starting
    with maybe_runtime(cfg) as runtime:
        if runtime is not None:
            store.record_pool_state(run_id, runtime.pool.state())
        enter("engine start", first - 1)
        engine = open_run_engine(cfg, model_path, **engine_kw)
        learner = pipe = None
        learners_log = None  # learner_processes > 1: the ranks' log beside the run's checkpoints
        if cfg.learner_processes > 1:
            learners_log = run_dir(cfg.output_dir, run_id) / "learners.log"
            learners_log.parent.mkdir(parents=True, exist_ok=True)
        try:
            enter("learner start", first - 1)
            if resume is None:
                learner = open_learner(model_path, cfg, log_path=learners_log)
                if cfg.eval_tasks_per_domain:
                    enter("baseline evaluation", 0)
                    run_evaluation(engine, tokenizer, cfg, store, run_id, "before", str(model_path), runtime)
            else:  # the policy's weights (and the optimizer's state) from the checkpoint, into the engine in place
                learner = open_learner(model_path, cfg, init_from=resume.path, steps_done=resume.optimizer_steps,
                                       log_path=learners_log)
                enter("resume", first - 1)
                if not learner.optimizer_restored:
                    print(f"[resume] {resume.path} {learner.optimizer_note}: AdamW's moments start from zero, so this "
                          "run will differ from an uninterrupted one; the learning-rate schedule continues at its step",
                          file=sys.stderr, flush=True)
                engine.update_weights(learner.named_weights())
            ckpt_root = checkpoint_dir(cfg, run_id)
            pipe = StepPipeline(cfg, engine, learner, tokenizer, rng, pad_id, store, run_id, runtime, curriculum)
            if resume is not None and resume.next_rollout is not None and cfg.overlap:
                pipe.prime(pickle.loads(resume.next_rollout.read_bytes()))  # as the uninterrupted run trained on it

            def save(step: int) -> Path:
                enter("checkpoint", step)
                # with overlap the next step is already rolled out: it goes into the checkpoint
                at_rng, at_curriculum, rolled = pipe.checkpoint_state()
                blobs = {NEXT_ROLLOUT: pickle.dumps(rolled, protocol=5)} if rolled is not None else {}
                state = trainer_state(step, at_rng, at_curriculum, learner.steps_done, NEXT_ROLLOUT if blobs else None)
                # the engine is idle (a prefetched rollout has finished): it sleeps while the merged weights
                # are written (awake, the quickstart's checkpoint was its process's peak: 3.48 GiB, any step 3.07)
                slept = cfg.engine_sleep and engine.sleep()
                rss = PeakRSS()
                rss.reset()
                try:
                    path = learner.save_checkpoint(ckpt_root / f"step-{step}", tokenizer,
                                                   extra={TRAINER_STATE: state}, blobs=blobs)
                    peak = rss.read_gb()
                finally:
                    if slept:
                        engine.update_weights(learner.named_weights())
                store.record_checkpoint(run_id, step, str(path))
                if cfg.learner_processes == 1:  # else the learner's rank processes write it, not this one
                    store.record_metrics(run_id, step, {"memory/checkpoint_peak_gb": peak})
                drop_old_optimizer_states(ckpt_root, keep=path)
                return path

            for step in range(first, cfg.steps + 1):
                enter("step", step)
                metrics = pipe.step(step, prefetch_next=step < cfg.steps)
                # evaluate before checkpointing: a run stopped in between resumes from the
                # previous checkpoint and evaluates this step again, leaving no gap in the curve.
                # The engine is idle here: a prefetched rollout has finished before the sync.
                if cfg.eval_every and step % cfg.eval_every == 0 and step < cfg.steps:
                    enter("evaluation", step)
                    run_evaluation(engine, tokenizer, cfg, store, run_id, f"step-{step}",
                                   f"{run_id} policy at step {step}", runtime)
                if cfg.checkpoint_every and step % cfg.checkpoint_every == 0 and step < cfg.steps:
                    save(step)
                if on_step:
                    on_step(step, metrics)
            path = save(cfg.steps)
            # the learner's part is done: its weights, gradients and optimizer state go back before the
            # final evaluation, where the engine decodes hundreds of requests at once (the quickstart's
            # process peaked there, 3.72 GiB, with the learner still open; 3.32 GiB without, then at the
            # baseline evaluation)
            pipe.close()
            learner.close()
            pipe = learner = None
            release_free_memory()
            if cfg.eval_tasks_per_domain:
                enter("final evaluation", cfg.steps)
                run_evaluation(engine, tokenizer, cfg, store, run_id, "after", str(path), runtime)
        finally:
            if pipe is not None:
                pipe.close()  # a rollout still in flight ends before the engine closes
            if learner is not None:  # first: DeepSpeed's destroy needs the world an in-process vLLM engine ends
                learner.close()
            engine.close()
            if runtime is not None:
                store.record_pool_state(run_id, {**runtime.pool.state(), "idle": 0, "busy": 0}, status="closed")


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
    cfg = cfg.model_copy(update={"overlap": False})
    with StepPipeline(cfg, engine, learner, tokenizer, rng, pad_id, store, run_id, runtime, curriculum) as pipe:
        return pipe.step(step, prefetch_next=False)
