"""Processes the store tests start: a run's writer and the page's polling reader.

    python -m tests.reliability.store_workers writer DB RUN_ID STEPS ROWS_PER_STEP
    python -m tests.reliability.store_workers reader DB STOP_FILE

The writer records STEPS steps of ROWS_PER_STEP trajectories plus metrics, a heartbeat and
a checkpoint row each, through the real `Store` verbs, printing ``committed STEP`` after
each step's transaction returns. The reader polls what the Runs and Trajectories pages
read (`backend.views.runs_table`, metrics, trajectory summaries, counts, search) until
STOP_FILE exists, and prints one JSON line: polls, errors, and every trajectory count it saw
per run (each must be a whole number of steps: a reader never sees half a transaction).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from backend import views
from backend.store import Store
from trainer.types import Completion, Sample


def samples(step: int, rows: int, width: int = 200) -> list[Sample]:
    """`rows` trajectories of one step; the completion text names the step and the row."""
    return [Sample(domain="chain_sum", task_seed=1000 * step + i, group=i // 4, index=i % 4,
                   prompt=f"step {step} prompt {i}: what is 2 + 2?", prompt_ids=list(range(12)),
                   completion=Completion(list(range(8)), [-0.5] * 8,
                                         f"step {step} row {i} " + "reasoning " * (width // 10) + "Answer: 4", "stop"),
                   reward=float(i % 2), breakdown={"format": 1.0, "correct": float(i % 2)}, advantage=0.1, answer="4")
            for i in range(rows)]


def writer(db: str, run_id: str, steps: int, rows: int) -> int:
    store = Store(db)
    store.update_run(run_id, pid=__import__("os").getpid())
    store.set_status(run_id, "running")
    for step in range(1, steps + 1):
        store.record_trajectories(run_id, step, samples(step, rows))
        store.record_metrics(run_id, step, {"reward/mean": 0.5, "kl": 0.01 * step})
        store.record_checkpoint(run_id, step, f"/nonexistent/{run_id}/step-{step}")
        store.heartbeat(run_id, step)
        print(f"committed {step}", flush=True)
    store.set_status(run_id, "completed")
    return 0


def reader(db: str, stop_file: str) -> int:
    store = Store(db)
    polls, errors, seen = 0, [], {}
    while not Path(stop_file).exists():
        try:
            table = views.runs_table(store)
            for run_id in list(table["id"]) if not table.empty else []:
                store.run_metrics(run_id)
                store.trajectory_summaries(run_id, limit=50)
                seen.setdefault(run_id, []).append(store.count_trajectories(run_id))
                store.trajectories(run_id, limit=5, query="reasoning")
            polls += 1
        except Exception as e:  # noqa: BLE001 - counted and reported, the test asserts none
            errors.append(f"{type(e).__name__}: {e}")
        time.sleep(0.01)
    print(json.dumps({"polls": polls, "errors": errors[:20], "n_errors": len(errors), "seen": seen}), flush=True)
    return 0


if __name__ == "__main__":
    cmd, *rest = sys.argv[1:]
    if cmd == "writer":
        sys.exit(writer(rest[0], rest[1], int(rest[2]), int(rest[3])))
    sys.exit(reader(rest[0], rest[1]))
