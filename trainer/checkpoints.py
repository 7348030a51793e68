"""A run's checkpoints and what a resumed run starts from.

Each checkpoint directory holds the policy's HF weights and `TRAINER_STATE`, the state a
resumed run needs to sample the tasks an uninterrupted run would: the task sampler's RNG
state, the curriculum's state and the optimizer steps taken (`trainer_state`, read back by
`ResumePoint`). Torch-free, so the page and the CLI can pick a resume point cheaply.

Checkpoints are written atomically: into a temporary sibling directory, made durable
(`fsync_tree`: every file, every directory), then renamed into place (`replace_durably`,
which also syncs the parent so the rename itself survives a power cut). A crash or a full
disk in the middle leaves the previous checkpoint as it was and at most a ``*.tmp``
directory that the next write of that step removes; `ResumePoint.latest` skips a
checkpoint whose trainer state is missing or unreadable.

Not covered: writing the weights (`trainer.learner.DeepSpeedLearner.save_checkpoint`).
"""

from __future__ import annotations

import json
import os
import random
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from trainer.config import RunConfig
from core.errors import ConfigError
from core.paths import run_dir

if TYPE_CHECKING:  # trainer.curriculum imports torch through trainer.types
    from trainer.curriculum import Curriculum

TRAINER_STATE = "trainer_state.json"  # inside each checkpoint: what a resumed run needs


@dataclass(frozen=True)
class ResumePoint:
    """Where a resumed run starts: the checkpoint written after `step`.

    Attributes:
        step: the last completed step (the run continues with step + 1).
        path: the checkpoint directory (HF weights of the policy).
        rng_state: the task sampler's `random.Random.getstate()` after `step`.
        curriculum: `Curriculum.snapshot()` after `step`, or None without a curriculum.
        learner_steps: optimizer steps taken up to `step` (the learning-rate schedule's
            position): fewer than `step` when zero-variance handling left steps without a
            batch. None (checkpoints written before it was recorded): `step`.
        next_rollout: with overlap, the file holding step + 1's rollout as the run had
            already generated it (one step stale) when it wrote the checkpoint: a resumed
            run trains on it, as the uninterrupted run did. None: roll step + 1 out again.
    """

    step: int
    path: Path
    rng_state: tuple
    curriculum: dict | None = None
    learner_steps: int | None = None
    next_rollout: Path | None = None

    @classmethod
    def load(cls, path: str | Path) -> "ResumePoint":
        """Read a checkpoint's trainer state.

        Raises:
            ConfigError: the directory is missing or holds no trainer state (written by an
                older rlwb); the message says what to do instead.
        """
        path = Path(path)
        state_file = path / TRAINER_STATE
        if not state_file.is_file():
            raise ConfigError(f"checkpoint {path} has no {TRAINER_STATE} (missing, or written before runs could "
                              "resume); start a new run from it instead: set `model:` to this directory")
        try:
            data = json.loads(state_file.read_text(encoding="utf-8"))
            version, internal, gauss = data["rng_state"]
            learner_steps, rollout = data.get("learner_steps"), data.get("next_rollout")
            if rollout is not None and not (path / rollout).is_file():
                raise ValueError(f"its next rollout {rollout} is missing")
            return cls(int(data["step"]), path, (version, tuple(internal), gauss), data.get("curriculum"),
                       int(learner_steps) if learner_steps is not None else None,
                       path / rollout if rollout is not None else None)
        except (ValueError, KeyError, TypeError) as e:  # torn or edited by hand (UnicodeDecodeError is a ValueError)
            raise ConfigError(f"checkpoint {path}: {TRAINER_STATE} is unreadable ({type(e).__name__}: "
                              f"{str(e)[:120]}); resume from an earlier checkpoint or start a new run "
                              "from this one's weights (`model:` set to this directory)") from None

    @property
    def optimizer_steps(self) -> int:
        """Optimizer steps to continue the learning-rate schedule from (`learner_steps`, or
        `step` for checkpoints written before it was recorded)."""
        return self.step if self.learner_steps is None else self.learner_steps

    @classmethod
    def latest(cls, checkpoints: list[dict]) -> "ResumePoint":
        """The newest of a run's checkpoint rows (`Store.checkpoints`, by step) whose
        directory still holds its trainer state; a later one may have been deleted.

        Raises:
            ConfigError: none has its trainer state (the message names the newest).
        """
        for row in reversed(checkpoints):
            if (Path(row["path"]) / TRAINER_STATE).is_file():
                try:
                    return cls.load(row["path"])
                except ConfigError:  # torn state: fall back to the one before
                    continue
        return cls.load(checkpoints[-1]["path"])  # raises, naming the newest


NEXT_ROLLOUT = "next_rollout.pkl"  # with overlap: the next step's rollout, already generated (`ResumePoint`)


def trainer_state(step: int, rng: random.Random, curriculum: Curriculum | None, learner_steps: int,
                  next_rollout: str | None = None) -> dict:
    """The JSON-able state written as `TRAINER_STATE` beside a checkpoint's weights (see `ResumePoint`)."""
    version, internal, gauss = rng.getstate()
    return {"step": step, "rng_state": [version, list(internal), gauss],
            "curriculum": curriculum.snapshot() if curriculum is not None else None, "learner_steps": learner_steps,
            "next_rollout": next_rollout}


# inside a checkpoint: DeepSpeed's optimizer and scheduler state (`trainer.optimizer_state`)
OPTIMIZER_DIR = "optimizer"


def drop_old_optimizer_states(root: Path, keep: Path) -> int:
    """Delete ``optimizer/`` from every checkpoint under `root` but `keep` (the newest): it is
    most of a checkpoint's bytes (AdamW's two moments and the fp32 master weights: about 4x
    the float32 weights) and an exact resume needs the newest one only. Older checkpoints
    keep their weights and trainer state (a resume from one starts AdamW afresh, and says so).

    Returns:
        Bytes freed.
    """
    freed = 0
    for ckpt in root.glob("step-*"):
        state = ckpt / OPTIMIZER_DIR
        if ckpt.resolve() == Path(keep).resolve() or ckpt.name.endswith(".tmp") or not state.is_dir():
            continue
        freed += sum(f.stat().st_size for f in state.rglob("*") if f.is_file())
        shutil.rmtree(state, ignore_errors=True)
    return freed


def checkpoint_dir(cfg: RunConfig, run_id: str) -> Path:
    """Where a run's checkpoints go: ``checkpoints`` in its `core.paths.run_dir`."""
    return run_dir(cfg.output_dir, run_id) / "checkpoints"


def fsync_dir(path: str | Path) -> None:
    """Make a directory's entries (names created, renamed or removed in it) durable.

    Raises:
        OSError: the directory can't be opened or synced (ENOSPC, EIO ...).
    """
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_tree(path: str | Path) -> None:
    """fsync every regular file under `path`, then every directory bottom-up (`path` included),
    so a checkpoint written there is on disk before it is renamed into place.

    Raises:
        OSError: a file or directory can't be synced (e.g. ENOSPC on a full disk); the
            caller must then not rename the tree into place.
    """
    path = Path(path)
    for root, _dirs, files in os.walk(path, topdown=False):
        for name in files:
            f = Path(root) / name
            if f.is_symlink() or not f.is_file():
                continue
            fd = os.open(f, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        fsync_dir(root)


def replace_durably(tmp: str | Path, path: str | Path) -> None:
    """The last step of an atomic directory write: `fsync_tree(tmp)`, ``os.replace(tmp, path)``,
    then `fsync_dir` of the parent, so after a crash `path` is either the old or the new tree,
    complete. `path` must not exist as a non-empty directory (remove it first).

    Raises:
        OSError: syncing or renaming failed; `tmp` is left for the next write to remove.
    """
    fsync_tree(tmp)
    os.replace(tmp, path)
    fsync_dir(Path(path).parent)
