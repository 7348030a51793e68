"""`Store` verbs for the phases a run's processes go through (`trainer.phases.RUN_PHASES`):
recorded by the training loop as each starts, read by the Runs page and `rlwb runs show`."""

from __future__ import annotations

from backend.store_common import locked as _locked
from backend.store_common import now as _now
from trainer.phases import END_PHASE, RUN_PHASES


class PhaseVerbs:
    """Mixed into `backend.store.Store` (its ``db``, lock, `_require_run` and `_immediate`)."""

    @_locked
    def enter_phase(self, run_id: str, phase: str, step: int) -> None:
        """Record that the run's process enters `phase` (a key of `trainer.phases.RUN_PHASES`)
        now, after training step `step` (0 before training; a "step" phase: the step it
        runs), and stamp the heartbeat. Raises RunNotFound, or ValueError for an unknown phase."""
        if phase not in RUN_PHASES:
            raise ValueError(f"unknown run phase {phase!r}; use one of {sorted(RUN_PHASES)}")
        self._require_run(run_id)
        stamp = _now()
        with self._immediate():
            self.db["run_phases"].insert({"run_id": run_id, "phase": phase, "at_step": int(step), "started_at": stamp})
            self.db["runs"].update(run_id, {"heartbeat_at": stamp})

    @_locked
    def run_phases(self, run_id: str) -> list[dict]:
        """The phases the run's processes entered, in order (a resumed run's first attempt
        too): dicts of phase, step, started_at and ended_at (the next phase's start, or when
        the process ended: `set_status` to a finished status marks it; None while it runs);
        a "checkpoint" phase also has saved (bool: its checkpoint was recorded; not while it is
        written, nor when the process died writing it).
        [] for a run recorded before version 15."""
        rows = [dict(r) for r in self.db.query(
            "SELECT phase, at_step AS step, started_at FROM run_phases WHERE run_id = ? ORDER BY rowid", [run_id])]
        # a checkpoint is saved by the attempt that recorded it: its row (a repeat replaces it) dates from
        # within that phase, not from a resumed attempt's save of the same step
        saved = {r["step"]: r["created_at"] for r in self.db.query(
            "SELECT step, created_at FROM checkpoints WHERE run_id = ?", [run_id])}
        for row, after in zip(rows, rows[1:] + [None]):
            row["ended_at"] = after["started_at"] if after else None
            if row["phase"] == "checkpoint":
                at = saved.get(row["step"])
                row["saved"] = at is not None and row["started_at"] <= at and (row["ended_at"] is None
                                                                                 or at <= row["ended_at"])
        return [r for r in rows if r["phase"] != END_PHASE]
