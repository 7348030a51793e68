"""The phases of a run's held-out evaluation and the training step each stands at.

A run evaluates its held-out tasks "before" training, at "step-N" every `eval_every` steps
and "after" its last step (`trainer.loop`); the store (`backend.store`, its export and its
migrations) records each evaluation at the step this module gives. Imports nothing, so the
store reads it without loading the trainer.
"""

from __future__ import annotations

import re


def evaluation_step(phase: str, total_steps: int | None) -> int | None:
    """The training step a run's held-out evaluation stands at: "before" is step 0, "step-N"
    step N and "after" the run's last step (`total_steps`; the loop evaluates its final
    checkpoint). None for any other phase."""
    if phase == "before":
        return 0
    if phase == "after":
        return total_steps
    found = re.fullmatch(r"step-([0-9]+)", phase) if isinstance(phase, str) else None
    return int(found[1]) if found else None
