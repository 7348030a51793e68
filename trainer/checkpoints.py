"""A run's checkpoints and what a resumed run starts from.

Each checkpoint directory holds the policy's HF weights and `TRAINER_STATE`, the state a
resumed run needs to sample the tasks an uninterrupted run would: the task sampler's RNG
state, the curriculum's state and the optimizer steps taken (`trainer_state`, read back by
`ResumePoint`). Torch-free, so the page and the CLI can pick a resume point cheaply.

Not covered: writing the weights (`trainer.learner.DeepSpeedLearner.save_checkpoint`).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from backend.config import RunConfig
from backend.errors import ConfigError

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
    """

    step: int
    path: Path
    rng_state: tuple
    curriculum: dict | None = None
    learner_steps: int | None = None

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
        data = json.loads(state_file.read_text(encoding="utf-8"))
        version, internal, gauss = data["rng_state"]
        learner_steps = data.get("learner_steps")
        return cls(int(data["step"]), path, (version, tuple(internal), gauss), data.get("curriculum"),
                   int(learner_steps) if learner_steps is not None else None)

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
        usable = [c for c in checkpoints if (Path(c["path"]) / TRAINER_STATE).is_file()]
        return cls.load((usable or checkpoints)[-1]["path"])


def trainer_state(step: int, rng: random.Random, curriculum: Curriculum | None, learner_steps: int) -> dict:
    """The JSON-able state written as `TRAINER_STATE` beside a checkpoint's weights (see `ResumePoint`)."""
    version, internal, gauss = rng.getstate()
    return {"step": step, "rng_state": [version, list(internal), gauss],
            "curriculum": curriculum.snapshot() if curriculum is not None else None, "learner_steps": learner_steps}


def checkpoint_dir(cfg: RunConfig, run_id: str) -> Path:
    """Where a run's checkpoints go: ``checkpoints`` in its `backend.runs.run_dir`."""
    from backend.runs import run_dir

    return run_dir(cfg.output_dir, run_id) / "checkpoints"
