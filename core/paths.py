"""Where the workbench keeps files on disk: a run's directory (checkpoints, ``run.log``) and
the cache of converted models (and, beside it, retrieval collections).

A ground-floor module: it imports nothing of the project, so the trainer
(`trainer.checkpoints`), the run manager (`backend.runs`), model fetching
(`trainer.models`) and retrieval (`retrieval.pipeline.collections_dir`) read the layout
from here.

Not covered: what goes inside the directories (`trainer.checkpoints`, `backend.runs.log_path`,
`trainer.models`).
"""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs


def run_dir(output_dir: str | None, run_id: str) -> Path:
    """A run's directory (checkpoints, ``run.log``): `output_dir` or the user data dir, per run."""
    base = Path(output_dir) if output_dir else Path(platformdirs.user_data_dir("rlwb")) / "runs"
    return base / run_id


def model_cache_dir() -> Path:
    """Directory holding converted checkpoints: ``$RLWB_CACHE`` if set, else
    ``platformdirs.user_cache_dir("rlwb")/models``. Not created here."""
    env = os.environ.get("RLWB_CACHE")
    if env:
        return Path(env).expanduser()
    return Path(platformdirs.user_cache_dir("rlwb")) / "models"
