"""Where a run's files live on disk: its run directory (checkpoints, ``run.log``).

A ground-floor module: it imports nothing of the project, so the trainer
(`trainer.checkpoints`) and the run manager (`backend.runs`) both read the layout from here.

Not covered: what goes inside the directory (`trainer.checkpoints`, `backend.runs.log_path`).
"""

from __future__ import annotations

from pathlib import Path

import platformdirs


def run_dir(output_dir: str | None, run_id: str) -> Path:
    """A run's directory (checkpoints, ``run.log``): `output_dir` or the user data dir, per run."""
    base = Path(output_dir) if output_dir else Path(platformdirs.user_data_dir("rlwb")) / "runs"
    return base / run_id
