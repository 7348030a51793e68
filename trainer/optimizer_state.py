"""The learner's optimizer state across a resume: the learning-rate schedule, and DeepSpeed's
checkpoint of AdamW and the scheduler inside a run's checkpoint.

A checkpoint's ``optimizer/`` folder (`trainer.checkpoints.OPTIMIZER_DIR`) holds DeepSpeed's
own checkpoint under the tag `OPTIMIZER_TAG` (the fp32 master weights, AdamW's two moments and
step count, the scheduler) and `LAYOUT_FILE`, the ZeRO stage and number of learner processes
that wrote it. `restore` loads it back exactly when the resumed run has the same layout, and
otherwise returns why AdamW's moments start from zero, with the setting that would continue
exactly (DeepSpeed can neither re-partition ZeRO's state nor read one stage's layout into
another), for the run's one [resume] note. Used by `trainer.learner.DeepSpeedLearner`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

from core.errors import ConfigError
from trainer.checkpoints import OPTIMIZER_DIR
from trainer.config import RunConfig

OPTIMIZER_TAG = "state"  # DeepSpeed's checkpoint tag inside optimizer/
LAYOUT_FILE = "layout.json"  # beside DeepSpeed's state in optimizer/: the ZeRO stage and processes that wrote it


def lr_lambda(cfg: RunConfig) -> Callable[[int], float]:
    """The learning-rate multiplier after `step` optimizer steps, for torch's ``LambdaLR``:
    linear warm-up over ``cfg.warmup_steps``, then ``cfg.lr_schedule`` ("constant",
    "linear" decay to 0, or "cosine" decay to 0) over the remaining ``cfg.steps``."""
    def fn(step: int) -> float:
        if cfg.warmup_steps and step < cfg.warmup_steps:
            return (step + 1) / cfg.warmup_steps
        span = max(cfg.steps - cfg.warmup_steps, 1)
        progress = min(max(step - cfg.warmup_steps, 0) / span, 1.0)
        if cfg.lr_schedule == "linear":
            return 1.0 - progress
        if cfg.lr_schedule == "cosine":
            return 0.5 * (1.0 + math.cos(math.pi * progress))
        return 1.0

    return fn


def restore(engine, scheduler, init_from: str | Path | None, cfg: RunConfig, world: int, steps_done: int,
            lora: bool) -> str | None:
    """Bring a resumed learner's optimizer and schedule to where the run left them.

    Args:
        engine: the learner's DeepSpeed engine (its optimizer and scheduler load in place).
        scheduler: its ``LambdaLR`` (`lr_lambda`), moved to `steps_done` when no state loads.
        init_from: the checkpoint the run resumes from, or None (a fresh run: nothing to do
            unless `steps_done`).
        cfg: the run config (its ZeRO stage).
        world: learner processes of this run.
        steps_done: optimizer steps already taken.
        lora: a LoRA run (its checkpoint holds the adapters' states only).

    Returns:
        None when AdamW's moments, its step and the scheduler were loaded exactly; else why
        the moments start from zero, said of the checkpoint ("holds no optimizer state ...",
        "holds ZeRO-2 optimizer state and this run uses ZeRO-0 (resume with zero_stage: 2 to
        continue exactly)"), for the run's [resume] note; "is no checkpoint: a fresh run" when
        `init_from` is None.

    Raises:
        ConfigError: the saved state is there but DeepSpeed could not read it (the message
            names the two ways on).
    """
    saved = Path(init_from) / OPTIMIZER_DIR if init_from is not None else None
    shards = len(list((saved / OPTIMIZER_TAG).glob("*zero_pp_rank_*optim_states.pt"))) if saved is not None else 0
    layout = saved / LAYOUT_FILE if saved is not None else None
    stage = json.loads(layout.read_text())["zero_stage"] if layout is not None and layout.exists() else None
    if saved is None:
        why = "is no checkpoint: a fresh run"
    elif shards and shards != world:  # DeepSpeed can't re-partition ZeRO's optimizer state
        why = (f"holds the optimizer state of {shards} learner processes and this run has {world} (resume with "
               f"learner_processes: {shards} to continue exactly)")
    elif stage is not None and stage != cfg.zero_stage:  # nor read one stage's layout into another
        why = (f"holds ZeRO-{stage} optimizer state and this run uses ZeRO-{cfg.zero_stage} (resume with "
               f"zero_stage: {stage} to continue exactly)")
    elif (saved / OPTIMIZER_TAG).is_dir():
        # DeepSpeed's own checkpoint: the fp32 master weights, AdamW's moments and step, the scheduler
        loaded, _ = engine.load_checkpoint(str(saved), tag=OPTIMIZER_TAG, load_module_strict=not lora,
                                           load_optimizer_states=True, load_lr_scheduler_states=True)
        if loaded is None:
            raise ConfigError(f"{saved}: DeepSpeed could not read the optimizer state; resume from an earlier "
                              "checkpoint, or delete its optimizer/ folder to resume with fresh AdamW moments")
        return None
    else:
        why = "holds no optimizer state (written before checkpoints kept it, or not the newest)"
    if steps_done:  # LambdaLR keeps its position in last_epoch; the optimizer's lr follows it
        scheduler.last_epoch = steps_done
        for group, base, fn in zip(scheduler.optimizer.param_groups, scheduler.base_lrs, scheduler.lr_lambdas):
            group["lr"] = base * fn(steps_done)
        scheduler._last_lr = [g["lr"] for g in scheduler.optimizer.param_groups]
    return why


def save(engine, checkpoint: Path, cfg: RunConfig, world: int, lora: bool, lead: bool) -> None:
    """Write DeepSpeed's optimizer and scheduler state into ``checkpoint/optimizer/`` (every
    rank writes its partition; rank 0, `lead`, also the `LAYOUT_FILE`). For a 135M-parameter
    float32 model about 2.2 GB (bytes on disk): the fp32 master weights, AdamW's two moments,
    the module. LoRA: only the adapters' states (the frozen base is the model's own files)."""
    engine.save_checkpoint(str(checkpoint / OPTIMIZER_DIR), tag=OPTIMIZER_TAG, save_latest=False,
                           exclude_frozen_parameters=lora)
    if lead:
        (checkpoint / OPTIMIZER_DIR / LAYOUT_FILE).write_text(json.dumps({"zero_stage": cfg.zero_stage,
                                                                         "learner_processes": world}))
