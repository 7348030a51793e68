"""The store's evaluation verbs (`rlwb eval MODEL`): `Store` inherits them.

An evaluation is one row of ``eval_runs`` (the model as given, its resolved path and
identity -- weights' sha256 and size, the training run and step of a checkpoint --, the
suite's settings including the exact task seeds, status, and the summary once finished)
and one row of ``eval_samples`` per sampled completion, keyed by its task's exact
(domain, level, task_seed) and the sample's index. A training run's own held-out
evaluations (`trainer.evaluate`, greedy, one completion per task) are stored the same way
with their ``phase`` ("before", "step-N", "after"; NULL for `rlwb eval`), so one code
path (`backend.eval_report`) reports both.

    eval_id = store.create_eval("smollm2-135m", path, identity, suite)
    store.record_eval_samples(eval_id, rows)            # any number of batches
    store.finish_eval(eval_id, "completed", summary={...})
"""

from __future__ import annotations

import json
import os
import sqlite3

from core.errors import EvalNotFound, WorkbenchError
from backend.store_common import decode, locked, new_id, now

EVAL_STATUSES = ("running", "completed", "failed")
SAMPLE_COLUMNS = ("domain", "level", "task_seed", "sample_idx", "reward", "correct", "format", "calls",
                  "valid_calls", "turns", "finish_reason", "completion", "fault", "answer")
_JSON_COLUMNS = ("identity", "suite", "summary", "extras")


def _eval_not_found(eval_id: str) -> EvalNotFound:
    return EvalNotFound(f"evaluation '{eval_id}' not found; list evaluations with `rlwb eval list`")


def _decoded(row: dict) -> dict:
    for column in _JSON_COLUMNS:
        decode(row, column)
    return row


class EvalVerbs:
    """Evaluation verbs of `backend.store.Store` (uses its ``db`` and ``_lock``)."""

    @locked
    def create_eval(self, model: str, model_path: str, identity: dict, suite: dict,
                    run_id: str | None = None, step: int | None = None, phase: str | None = None) -> str:
        """Insert an evaluation in status 'running' (this process's pid) and return its id,
        e.g. ``e20261130-081500-ab12``.

        Args:
            model: the model as the user named it (a name, path, RUN_ID or RUN_ID:STEP).
            model_path: the resolved checkpoint directory.
            identity: {"sha256", "bytes", ...} of the weights (`backend.evaluation.model_identity`).
            suite: the settings: domains and levels, seeds, samples, ks, temperature, ...
            run_id, step: the training run and step a checkpoint came from, if any.
            phase: a training run's own held-out evaluation ("before", "step-N", "after"),
                which replaces an earlier one of the same run and phase (and its samples);
                None for `rlwb eval`.
        """
        row = {"model": model, "model_path": str(model_path), "identity": json.dumps(identity),
               "suite": json.dumps(suite), "status": "running", "run_id": run_id, "step": step,
               "phase": phase, "pid": os.getpid(), "created_at": now()}
        for _ in range(10):  # 4 hex digits can collide within one second; retry
            try:
                eval_id = new_id("e")
                with self.db.conn:
                    if phase is not None:
                        old = "SELECT id FROM eval_runs WHERE run_id = ? AND phase = ?"
                        self.db.execute(f"DELETE FROM eval_samples WHERE eval_id IN ({old})", [run_id, phase])
                        self.db.execute("DELETE FROM eval_runs WHERE run_id = ? AND phase = ?", [run_id, phase])
                    self.db["eval_runs"].insert({"id": eval_id, **row})
                return eval_id
            except sqlite3.IntegrityError:
                continue
        raise WorkbenchError("could not allocate a unique evaluation id; try again")

    def _require_eval(self, eval_id: str) -> None:
        if not self.db.execute("SELECT 1 FROM eval_runs WHERE id = ?", [eval_id]).fetchone():
            raise _eval_not_found(eval_id)

    @locked
    def record_eval_samples(self, eval_id: str, rows: list[dict]) -> int:
        """Insert sample rows (keys of SAMPLE_COLUMNS; missing ones NULL) in one transaction;
        a repeat of (domain, level, task_seed, sample_idx) replaces. Returns the rows written.

        Raises:
            EvalNotFound: no such evaluation.
        """
        self._require_eval(eval_id)
        with self.db.conn:
            self.db["eval_samples"].insert_all(
                ({"eval_id": eval_id, **{c: r.get(c) for c in SAMPLE_COLUMNS}} for r in rows),
                replace=True, batch_size=500)
        return len(rows)

    @locked
    def finish_eval(self, eval_id: str, status: str, summary: dict | None = None,
                    extras: dict | None = None, error: str | None = None) -> None:
        """Mark an evaluation completed or failed, with its summary and extras (tool use,
        context length, ...) as JSON.

        Raises:
            EvalNotFound: no such evaluation.
            ValueError: a status other than EVAL_STATUSES.
        """
        if status not in EVAL_STATUSES:
            raise ValueError(f"invalid evaluation status {status!r}; use one of {EVAL_STATUSES}")
        self._require_eval(eval_id)
        fields = {"status": status, "finished_at": now(), "error": error}
        if summary is not None:
            fields["summary"] = json.dumps(summary)
        if extras is not None:
            fields["extras"] = json.dumps(extras)
        with self.db.conn:
            self.db["eval_runs"].update(eval_id, fields)

    @locked
    def get_eval(self, eval_id: str) -> dict:
        """One evaluation with its JSON columns decoded. Raises EvalNotFound."""
        rows = list(self.db["eval_runs"].rows_where("id = ?", [eval_id]))
        if not rows:
            raise _eval_not_found(eval_id)
        return _decoded(rows[0])

    @locked
    def list_evals(self, statuses: tuple[str, ...] | None = None, limit: int = 200,
                   run_id: str | None = None, in_run: bool | None = None) -> list[dict]:
        """The newest evaluations first (JSON columns decoded), optionally only those in
        `statuses`, only those of training run `run_id` and, with `in_run` True or False,
        only a run's own held-out evaluations (a ``phase``) or only `rlwb eval`'s."""
        clauses, args = [], []
        if in_run is not None:
            clauses.append("phase IS NOT NULL" if in_run else "phase IS NULL")
        if statuses:
            clauses.append(f"status IN ({', '.join('?' for _ in statuses)})")
            args += list(statuses)
        if run_id is not None:
            clauses.append("run_id = ?")
            args.append(run_id)
        rows = self.db["eval_runs"].rows_where(" AND ".join(clauses) or None, args,
                                               order_by="created_at DESC, id DESC", limit=limit)
        return [_decoded(r) for r in rows]

    @locked
    def in_run_evals(self, run_id: str) -> list[dict]:
        """A training run's own completed held-out evaluations in step order ("before" first,
        "after" last), JSON columns decoded; [] for a run recorded before version 11."""
        rows = self.db["eval_runs"].rows_where("run_id = ? AND phase IS NOT NULL AND status = 'completed'",
                                               [run_id], order_by="step, created_at")
        return [_decoded(r) for r in rows]

    @locked
    def eval_samples(self, eval_id: str, with_completions: bool = False) -> list[dict]:
        """The sample rows of an evaluation in (domain, level, task_seed, sample_idx) order;
        the completion text only if `with_completions`. Raises EvalNotFound."""
        self._require_eval(eval_id)
        cols = [c for c in SAMPLE_COLUMNS if with_completions or c != "completion"]
        sql = (f"SELECT {', '.join(cols)} FROM eval_samples WHERE eval_id = ? "
               "ORDER BY domain, level, task_seed, sample_idx")
        cur = self.db.execute(sql, [eval_id])
        return [dict(zip(cols, r)) for r in cur.fetchall()]

    @locked
    def run_prompts(self, run_id: str) -> dict[str, set[str]]:
        """The distinct prompts a training run sampled, by domain (to tell which evaluation
        tasks a checkpoint's run saw verbatim)."""
        out: dict[str, set[str]] = {}
        for domain, prompt in self.db.execute(
                "SELECT DISTINCT domain, prompt FROM trajectories WHERE run_id = ?", [run_id]).fetchall():
            out.setdefault(domain, set()).add(prompt or "")
        return out

    @locked
    def run_domains(self, run_id: str, through_step: int | None = None) -> set[str]:
        """The domains a training run sampled rollouts of (through `through_step`, if given):
        what a checkpoint of it was trained on."""
        sql, params = "SELECT DISTINCT domain FROM trajectories WHERE run_id = ?", [run_id]
        if through_step is not None:
            sql, params = sql + " AND step <= ?", params + [through_step]
        return {r[0] for r in self.db.execute(sql, params).fetchall()}

    @locked
    def checkpoint_at(self, path) -> tuple[str, int] | None:
        """(run id, step) of the recorded checkpoint in directory `path` (paths compared
        resolved), or None if no run recorded it."""
        from pathlib import Path

        target = Path(path).resolve()
        for run_id, step, ck in self.db.execute("SELECT run_id, step, path FROM checkpoints").fetchall():
            if Path(ck).resolve() == target:
                return run_id, step
        return None
