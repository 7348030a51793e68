"""The phases of a run: what its process is doing (`RUN_PHASES`), and the phases of its
held-out evaluation with the training step each stands at.

A run's process starts its sandboxes, rollout engine and learner, evaluates its held-out
tasks "before" training, runs its steps (evaluating at "step-N" every `eval_every` steps and
saving checkpoints), then evaluates "after" its last step (`trainer.loop`). The loop records
each phase as it enters it (`backend.store.Store.enter_phase`) so the Runs page can say what
a run is doing and where its time went. Imports nothing, so the store reads it without
loading the trainer.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone


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


#: What a run's process does, in the order it does it: phase -> its words on the page.
#: "step" and "evaluation" repeat (once per step, once per `eval_every`); "checkpoint"
#: follows every `checkpoint_every` steps and the last step.
RUN_PHASES = {
    "sandboxes": "starting the sandbox pool",
    "engine start": "starting the rollout engine",
    "learner start": "starting the learner",
    "resume": "loading the checkpoint's weights",
    "baseline evaluation": "held-out evaluation before training",
    "step": "training",
    "evaluation": "held-out evaluation",
    "checkpoint": "saving a checkpoint",
    "final evaluation": "held-out evaluation after training",
}

#: The row `backend.store.Store.set_status` adds when a run finishes, stops or fails: the end
#: of the phase before it (not a phase itself; a resumed run's downtime is not in any phase).
END_PHASE = "ended"


def phase_label(phase: str, step: int | None, total_steps: int | None) -> str:
    """A phase in words for the page: "step 3 / 30", "held-out evaluation at step 10",
    "saving a checkpoint (step 20)", "starting the rollout engine"; an unknown phase as is."""
    if phase == "step":
        return f"step {step} / {total_steps}"
    if phase == "evaluation":
        return f"held-out evaluation at step {step}"
    if phase == "checkpoint":
        return f"saving a checkpoint (step {step})"
    return RUN_PHASES.get(phase, phase)


def parse_time(ts: str | None) -> datetime | None:
    """A store timestamp (ISO-8601) as a datetime; None for None or ""."""
    return datetime.fromisoformat(ts) if ts else None


def phase_timeline(phases: list[dict], total_steps: int | None, now: datetime | None = None) -> list[dict]:
    """A run's phases (`Store.run_phases`) for the page, in order: consecutive training
    steps merged into one entry ("steps 1-30"), with the checkpoints saved between them
    ("steps 1-30 (3 checkpoints)"; a checkpoint phase whose ``saved`` is False, one being
    written or whose process died writing it, adds its time but is not counted), each with
    its label, seconds and whether it is still going (no end yet).

    Returns:
        Dicts of phase, label, seconds (float, wall clock) and live (bool).
    """
    out: list[dict] = []
    clock = now or datetime.now(timezone.utc)
    for row in phases:
        start, end = parse_time(row["started_at"]), parse_time(row["ended_at"])
        seconds = ((end or clock) - start).total_seconds() if start else 0.0
        last = out[-1] if out else None
        if last is not None and last["phase"] == "step" and row["phase"] in ("step", "checkpoint"):
            last.update(seconds=last["seconds"] + seconds, live=end is None)
            if row["phase"] == "step":
                last["last_step"] = row["step"]
            elif row.get("saved", True):  # not one being written, or whose writer died
                last["checkpoints"] += 1
            continue
        out.append({"phase": row["phase"], "seconds": seconds, "live": end is None, "first_step": row["step"],
                    "last_step": row["step"], "checkpoints": 0,
                    "label": phase_label(row["phase"], row["step"], total_steps)})
    for e in out:
        if e["phase"] == "step":
            first, last_step, n = e["first_step"], e["last_step"], e["checkpoints"]
            e["label"] = (f"step {first}" if first == last_step else f"steps {first}-{last_step}") + (
                f" ({n} checkpoint{'s' if n > 1 else ''})" if n else "")
    return [{k: e[k] for k in ("phase", "label", "seconds", "live")} for e in out]


def current_phase(run: dict, phases: list[dict]) -> str | None:
    """What a live run's process is doing now, in words ("starting the rollout engine",
    "step 3 / 30", "held-out evaluation after training"); None for a run that is not live
    or has recorded no phase yet (pending, or recorded before phases were)."""
    if run["status"] not in ("pending", "running") or not phases:
        return None
    last = phases[-1]
    return phase_label(last["phase"], last["step"], run.get("total_steps"))


#: The phases that evaluate the same held-out tasks: one's length predicts the next one's.
EVALUATION_PHASES = ("baseline evaluation", "evaluation", "final evaluation")


def expected_seconds(timeline: list[dict]) -> float | None:
    """How long the live phase of a `phase_timeline` should take, where that is known: a
    held-out evaluation takes about as long as the run's previous one (the same tasks).
    None otherwise."""
    if not timeline or not timeline[-1]["live"] or timeline[-1]["phase"] not in EVALUATION_PHASES:
        return None
    done = [e["seconds"] for e in timeline[:-1] if e["phase"] in EVALUATION_PHASES]
    return done[-1] if done else None
