"""The workbench's SQLite store: runs, metrics, trajectories, checkpoints, evaluations.

A thin `Store` with domain verbs (`create_run`, `record_metrics`, `trajectories`, ...) on
top of sqlite-utils. One file per machine (``$RLWB_DB`` or the user data dir), WAL mode so
the page can read while a training process writes.

    store = Store()                       # default_db_path()
    run_id = store.create_run("demo", {"lr": 1e-6}, total_steps=10)
    store.record_metrics(run_id, 1, {"reward/mean": 0.2})

The schema is versioned in ``PRAGMA user_version`` and upgraded by the explicit functions
in `MIGRATIONS` (backend/store_schema.py); a database written by a newer rlwb is refused rather than guessed at.

Trajectories are searchable (an FTS5 index over prompt, completion and turns, kept by
triggers; see `_migrate_6`), filtered through one list index, and exported a batch at a
time (`export_trajectories`).

Not covered here: launching or supervising runs (that is the run manager), exporting whole
runs or deleting them, and multi-host access (SQLite wants one host per file). A `Store` may be
shared between threads (one lock guards its connection), but each process opens its own.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sqlite3
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import platformdirs
import sqlite_utils

from core.errors import RunNotFound, TrajectoryNotFound, WorkbenchError
from backend.eval_store import EvalVerbs
from backend.store_catalogue import CatalogueVerbs
from backend.store_phases import PhaseVerbs
from backend.store_sandboxes import SandboxVerbs
from backend.store_common import (decode, locked, new_id, now, prompt_search_text, turns_search_text,
                                  utf8_safe)
from trainer.phases import END_PHASE, evaluation_step
from backend.store_schema import MIGRATIONS, STEP_CHILD_TABLES, STEP_TABLES
from backend.trajectory_query import LIST_ORDER, trajectory_filter

if TYPE_CHECKING:  # trainer.types imports torch; the store only reads attributes
    from trainer.types import Sample

STATUSES = ("pending", "running", "completed", "failed", "stopped")
FINISHED_STATUSES = ("completed", "failed", "stopped")
RUN_FIELDS = ("name", "status", "config", "created_at", "started_at", "finished_at", "error",
              "traceback", "pid", "heartbeat_at", "step", "total_steps")  # settable by update_run


def default_db_path() -> Path:
    """Where the store lives: ``$RLWB_DB`` if set, else ``<user data dir>/rlwb/rlwb.db``.

    The parent directory is created if missing.
    """
    env = os.environ.get("RLWB_DB")
    path = Path(env).expanduser() if env else Path(platformdirs.user_data_dir("rlwb")) / "rlwb.db"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _run_not_found(run_id: str) -> RunNotFound:
    return RunNotFound(f"run '{run_id}' not found; list runs with `rlwb runs list`")


_now = now
_locked = locked
_decode = decode


def _new_run_id() -> str:
    """Short sortable id: ``r`` + UTC ``yyyymmdd-HHMMSS`` + ``-`` + 4 hex digits."""
    return new_id("r")


def _decode_turns(row: dict) -> dict:
    """Decode the JSON list of turns of a trajectory row (NULL -> [])."""
    row["turns"] = json.loads(row["turns"]) if row.get("turns") else []
    return row


def _without_search(row: dict) -> dict:
    """A trajectory row without ``turns_search`` and ``prompt_search`` (they only feed the
    search index)."""
    row.pop("turns_search", None)
    row.pop("prompt_search", None)
    return row


def _decode_all(row: dict) -> dict:
    """A trajectory row with its breakdown, retrieval record and turns decoded."""
    return _decode_turns(_decode(_decode(_without_search(row), "breakdown"), "retrieval"))


#: Columns `Store.record_trajectories` writes, in the order of `_trajectory_row`.
TRAJECTORY_COLUMNS = ("run_id", "step", "domain", "task_seed", "group_idx", "sample_idx", "prompt", "completion",
                      "answer", "reward", "breakdown", "advantage", "prompt_tokens", "completion_tokens",
                      "finish_reason", "created_at", "turns", "fault", "difficulty", "retrieval", "turns_search",
                      "prompt_search")
_ROWS_PER_INSERT = 1000  # rows per INSERT statement at most (the SQL text and its plan stay small)
_to_json = json.JSONEncoder(default=str).encode  # == json.dumps(x, default=str), one encoder reused
_as_sql = sqlite_utils.db.jsonify_if_needed  # what sqlite-utils' insert_all does to each value


def _trajectory_row(run_id: str, step: int, now: str, s: Sample, seen: set) -> tuple:
    """The values of one trajectory row, in `TRAJECTORY_COLUMNS` order; `seen`: the
    (step, group, prompt) keys of the rows before it (see `prompt_search_text`)."""
    c = s.completion
    group, prompt = int(s.group), _as_sql(s.prompt)
    return (run_id, step, _as_sql(s.domain), int(s.task_seed), group, int(s.index), prompt,
            _as_sql(c.text), _as_sql(s.answer), float(s.reward), _to_json(s.breakdown), float(s.advantage),
            len(s.prompt_ids), len(c.token_ids), _as_sql(c.finish_reason), now,
            _to_json(s.turns) if s.turns else None, _as_sql(s.fault), int(s.difficulty) or None,
            _to_json(s.retrieval) if s.retrieval else None, turns_search_text(s.turns, c.text),
            prompt_search_text(seen, step, group, prompt))


@functools.lru_cache(maxsize=64)
def _insert_sql(rows: int) -> str:
    """``INSERT INTO trajectories (...) VALUES (?, ...), ...`` for `rows` rows."""
    one = "(" + ", ".join("?" * len(TRAJECTORY_COLUMNS)) + ")"
    return f"INSERT INTO trajectories ({', '.join(TRAJECTORY_COLUMNS)}) VALUES " + ", ".join([one] * rows)


def _max_variables(conn: sqlite3.Connection) -> int:
    """How many ``?`` one statement may hold (SQLite's default before 3.32, 999, where
    Python < 3.11 can't ask the connection)."""
    if sys.version_info >= (3, 11):
        return conn.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
    return 999



#: Characters of the completion a `Store.trajectory_summaries` row carries.
SUMMARY_CHARS = 400

class Store(EvalVerbs, CatalogueVerbs, SandboxVerbs, PhaseVerbs):
    """Domain verbs over the workbench's SQLite database.

    Args:
        path: database file; None means `default_db_path()`; ``":memory:"`` for tests.

    Raises:
        WorkbenchError: the database was written by a newer rlwb (version > SCHEMA_VERSION).
    """

    SCHEMA_VERSION = 15

    def __init__(self, path: str | Path | None = None):
        self.path = str(default_db_path() if path is None else path)
        conn = sqlite3.connect(self.path, timeout=5.0, check_same_thread=False)
        self.db = sqlite_utils.Database(conn)
        self._lock = threading.RLock()
        self.db.execute("PRAGMA busy_timeout = 5000")
        self.db.execute("PRAGMA foreign_keys = ON")
        if self.path != ":memory:":
            self.db.enable_wal()
        try:
            self._migrate()
        except BaseException:
            conn.close()
            raise

    def _migrate(self) -> None:
        conn = self.db.conn
        conn.execute("BEGIN IMMEDIATE")  # take the write lock before reading the version
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version > self.SCHEMA_VERSION:
                raise WorkbenchError(f"database {self.path} has schema version {version}, but this "
                                     f"rlwb understands up to {self.SCHEMA_VERSION}; upgrade "
                                     "rl-workbench or point RLWB_DB at another file")
            for target in range(version + 1, self.SCHEMA_VERSION + 1):
                MIGRATIONS[target](self.db)
                conn.execute(f"PRAGMA user_version = {target}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    @_locked
    def abandon_write(self) -> bool:
        """Roll back a write transaction left open on this connection, e.g. by a stop signal
        (`backend.runs.RunStopped`, raised at any bytecode) that landed inside library code
        between a BEGIN and its COMMIT. A later write would otherwise run inside that
        transaction (sqlite-utils nests it as a savepoint) and be lost when the process ends.

        Returns:
            True if a transaction was open and is now rolled back.
        """
        if not self.db.conn.in_transaction:
            return False
        self.db.conn.rollback()
        return True

    def close(self) -> None:
        """Close the connection; the store can't be used afterwards."""
        with self._lock:
            self.db.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ---- runs -------------------------------------------------------------------------

    def _require_run(self, run_id: str) -> None:
        if not self.db.execute("SELECT 1 FROM runs WHERE id = ?", [run_id]).fetchone():
            raise _run_not_found(run_id)

    @_locked
    def create_run(self, name: str, config: dict, total_steps: int) -> str:
        """Insert a run in status 'pending' and return its id, e.g. ``r20250101-120000-ab12``.

        `config` is the resolved run config, stored as JSON (non-JSON values via `str`);
        `total_steps` is the number of training steps planned.
        """
        row = {"name": name, "status": "pending", "config": json.dumps(config, default=str),
               "created_at": _now(), "step": 0, "total_steps": int(total_steps)}
        for _ in range(10):  # 4 hex digits can collide within one second; retry
            try:
                run_id = _new_run_id()
                self.db["runs"].insert({"id": run_id, **row})
                return run_id
            except sqlite3.IntegrityError:
                continue
        raise WorkbenchError("could not allocate a unique run id; try again")

    @_locked
    def update_run(self, run_id: str, **fields: Any) -> None:
        """Set columns of a run, e.g. ``update_run(rid, pid=123)``; a dict config is JSON-encoded.

        Raises:
            RunNotFound: if the run doesn't exist.
            ValueError: on an unknown column or an invalid status.
        """
        unknown = set(fields) - set(RUN_FIELDS)
        if unknown:
            raise ValueError(f"unknown run field(s) {sorted(unknown)}; valid: {RUN_FIELDS}")
        if "status" in fields and fields["status"] not in STATUSES:
            raise ValueError(f"invalid run status {fields['status']!r}; use one of {STATUSES}")
        if isinstance(fields.get("config"), dict):
            fields["config"] = json.dumps(fields["config"], default=str)
        self._require_run(run_id)
        if fields:
            self.db["runs"].update(run_id, fields)

    @_locked
    def update_run_if(self, run_id: str, expected: dict[str, Any], **fields: Any) -> bool:
        """Compare-and-set: set `fields` only if the run's columns still hold `expected`
        (one UPDATE, so of two callers racing on the same row at most one wins).

        Returns:
            True if the row was updated.

        Raises:
            ValueError: on an unknown column.
        """
        unknown = (set(fields) | set(expected)) - set(RUN_FIELDS)
        if unknown or not fields:
            raise ValueError(f"unknown or no run field(s) {sorted(unknown)}; valid: {RUN_FIELDS}")
        sets = ", ".join(f"{k} = ?" for k in fields)
        conds = "".join(f" AND {k} IS ?" for k in expected)
        with self.db.conn:
            cur = self.db.conn.execute(f"UPDATE runs SET {sets} WHERE id = ?{conds}",
                                       [*fields.values(), run_id, *expected.values()])
        return cur.rowcount == 1

    def set_status(
        self, run_id: str, status: str, error: str | None = None, traceback: str | None = None
    ) -> None:
        """Move a run to `status`, stamping times.

        -> 'running' sets started_at (first time only) and heartbeat_at and clears
        finished_at/error/traceback (a resumed run); -> completed/failed/stopped sets
        finished_at and stores `error` and `traceback`. Raises RunNotFound, or ValueError
        if `status` is not one of `STATUSES`.
        """
        if status not in STATUSES:
            raise ValueError(f"invalid run status {status!r}; use one of {STATUSES}")
        fields: dict[str, Any] = {"status": status}
        now = _now()
        with self._lock:
            if status == "running":
                run = self.get_run(run_id)
                fields.update(started_at=run["started_at"] or now, heartbeat_at=now,
                              finished_at=None, error=None, traceback=None)
            elif status in FINISHED_STATUSES:
                fields.update(finished_at=now, error=error, traceback=traceback)
            with self._immediate():
                self.update_run(run_id, **fields)
                if status in FINISHED_STATUSES:  # the end of its last phase (a resumed run's gap stays a gap)
                    step = self.get_run(run_id)["step"] or 0
                    self.db["run_phases"].insert({"run_id": run_id, "phase": END_PHASE, "at_step": step,
                                                  "started_at": now})

    def heartbeat(self, run_id: str, step: int | None = None) -> None:
        """Stamp heartbeat_at and, if given, record `step` as the last completed step."""
        fields: dict[str, Any] = {"heartbeat_at": _now()}
        if step is not None:
            fields["step"] = int(step)
        self.update_run(run_id, **fields)

    @_locked
    def get_run(self, run_id: str) -> dict:
        """One run as a dict with `config` decoded; raises RunNotFound if it doesn't exist."""
        try:
            return _decode(dict(self.db["runs"].get(run_id)), "config")
        except sqlite_utils.db.NotFoundError:
            raise _run_not_found(run_id) from None

    @_locked
    def list_runs(self, limit: int = 200, statuses: tuple[str, ...] | None = None) -> list[dict]:
        """Up to `limit` runs (only those in `statuses` if given), newest first, configs decoded."""
        where, params = (None, None) if statuses is None else (
            f"status IN ({', '.join('?' * len(statuses))})", list(statuses))
        rows = self.db["runs"].rows_where(where, params, order_by="created_at DESC, rowid DESC", limit=limit)
        return [_decode(r, "config") for r in rows]

    @_locked
    def truncate_after(self, run_id: str, step: int) -> None:
        """Delete every row a run recorded for a step after `step`, in one transaction: a run
        resumed from step's checkpoint records those steps again. That is each table of
        `STEP_TABLES` (trajectories, metrics, sandbox executions, checkpoints, held-out
        evaluations "step-N" with N > step and "after", capability evaluations of those
        checkpoints) and the rows hanging off them (`STEP_CHILD_TABLES`: their samples).
        Rows of the run as a whole (its pool state) stay. Raises RunNotFound."""
        self._require_run(run_id)
        args = [run_id, int(step)]
        with self._immediate():
            for table, (column, parent, key) in STEP_CHILD_TABLES.items():
                self.db.execute(f"DELETE FROM [{table}] WHERE [{column}] IN "
                                f"(SELECT [{key}] FROM [{parent}] WHERE run_id = ? AND step > ?)", args)
            for table in STEP_TABLES:
                self.db.execute(f"DELETE FROM [{table}] WHERE run_id = ? AND step > ?", args)

    # ---- metrics ----------------------------------------------------------------------

    @contextlib.contextmanager
    def _immediate(self) -> Iterator[None]:
        """A write transaction that takes the write lock at BEGIN (``BEGIN IMMEDIATE``), so a
        busy store waits up to the busy timeout. A deferred one that reads first (sqlite-utils
        looks up the table's columns) fails at once with "database is locked" when another
        process committed in between: SQLite can't upgrade a stale read snapshot, and no busy
        timeout helps. Nested use becomes a savepoint."""
        conn = self.db.conn
        if conn.in_transaction:
            with self.db.atomic():
                yield
            return
        try:  # BEGIN inside: a stop signal raised just after it must still roll back
            conn.execute("BEGIN IMMEDIATE")
            yield
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    @contextlib.contextmanager  # used by every record_* verb
    def _writing(self, run_id: str) -> Iterator[None]:
        """One transaction for rows of `run_id`; a foreign-key failure becomes RunNotFound."""
        try:
            with self._immediate():
                yield
        except sqlite3.IntegrityError as e:
            if "FOREIGN KEY" in str(e):
                raise _run_not_found(run_id) from None
            raise

    @_locked
    def record_metrics(self, run_id: str, step: int, metrics: dict[str, float]) -> None:
        """Store metrics of one step, e.g. {"reward/mean": 0.3, "kl": 0.01}; a repeat replaces."""
        rows = [{"run_id": run_id, "step": int(step), "name": k, "value": float(v)}
                for k, v in metrics.items()]
        with self._writing(run_id):
            self.db["metrics"].insert_all(rows, replace=True)

    @_locked
    def run_metrics(self, run_id: str) -> list[dict]:
        """All metrics of a run as rows {step, name, value}, ordered by step then name."""
        sql = "SELECT step, name, value FROM metrics WHERE run_id = ? ORDER BY step, name"
        return list(self.db.query(sql, [run_id]))

    # ---- trajectories -----------------------------------------------------------------

    @_locked
    def record_trajectories(self, run_id: str, step: int, samples: list[Sample]) -> None:
        """Store the scored samples of one step in one transaction; raises RunNotFound.

        The rows go in through as few multi-row INSERTs as SQLite's parameter limit allows
        (one for a step of up to `_ROWS_PER_INSERT` samples under SQLite's default limit
        since 3.32; 49 rows a statement under the older 999). That matters for the search
        index: its trigger runs inside each statement, and FTS5 flushes its pending terms
        to a new on-disk segment at every statement's savepoint, so each extra statement
        writes (and later merges) one more small segment. bench/store_ingest.py measures it.
        """
        now, step = _now(), int(step)
        seen: set = set()
        rows = [_trajectory_row(run_id, step, now, s, seen) for s in samples]
        per = max(1, min(_ROWS_PER_INSERT, _max_variables(self.db.conn) // len(TRAJECTORY_COLUMNS)))
        try:
            self._insert_trajectory_rows(run_id, rows, per)
        except UnicodeEncodeError:  # a lone surrogate (text is UTF-8 in SQLite): U+FFFD, as a decoder would
            self._insert_trajectory_rows(run_id, [tuple(map(utf8_safe, r)) for r in rows], per)

    def _insert_trajectory_rows(self, run_id: str, rows: list[tuple], per: int) -> None:
        with self._writing(run_id):
            for i in range(0, len(rows), per):
                chunk = rows[i:i + per]
                self.db.conn.execute(_insert_sql(len(chunk)), [v for row in chunk for v in row])

    @_locked
    def trajectories(
        self, run_id: str, *, step_min: int | None = None, step_max: int | None = None,
        domain: str | None = None, reward_min: float | None = None,
        reward_max: float | None = None, finish_reason: str | None = None,
        query: str | None = None, search_in: str = "all", limit: int = 500, offset: int = 0,
    ) -> list[dict]:
        """Up to `limit` trajectories from `offset` matching the filters, ordered by step,
        group_idx, sample_idx; breakdown, retrieval record and turns decoded.

        Args:
            step_min, step_max, reward_min, reward_max: inclusive bounds.
            domain, finish_reason: exact values ("stop", "length", ...).
            query: full-text search over prompt, completion and the turns' text (see
                `backend.trajectory_query.fts_query`: words must all occur, "quoted phrase",
                prefix*); any text is safe. None or blank: no search; text without letters
                or digits matches nothing.
            search_in: "all" (the default) or "completion" (the completion only).
        """
        where, params = trajectory_filter(run_id, step_min, step_max, domain, reward_min, reward_max,
                                           finish_reason, query, search_in)
        rows = self.db.query(f"SELECT * FROM trajectories WHERE {where} ORDER BY {LIST_ORDER} LIMIT ? OFFSET ?",
                             [*params, limit, offset])
        return [_decode_all(r) for r in rows]

    @_locked
    def trajectory_summaries(self, run_id: str, *, limit: int = 500, offset: int = 0, **filters) -> list[dict]:
        """Like `trajectories` (same filters, same order) but light rows for a table: id, step,
        domain, group_idx, sample_idx, reward, advantage, completion_tokens, finish_reason and
        the first `SUMMARY_CHARS` characters of the completion; nothing decoded."""
        where, params = trajectory_filter(run_id, **filters)
        sql = (f"SELECT id, step, domain, group_idx, sample_idx, reward, advantage, completion_tokens, "
               f"finish_reason, substr(completion, 1, {SUMMARY_CHARS}) AS completion FROM trajectories "
               f"WHERE {where} ORDER BY {LIST_ORDER} LIMIT ? OFFSET ?")
        return list(self.db.query(sql, [*params, limit, offset]))

    @_locked
    def count_trajectories(self, run_id: str, *, cap: int = 100_000, **filters) -> int:
        """How many trajectories match `filters` (as in `trajectories`), counting no further
        than ``cap + 1``: a result above `cap` means "more than cap". Reads the list index
        only (and the search index for `query`), so it stays cheap on big runs."""
        where, params = trajectory_filter(run_id, **filters)
        sql = f"SELECT count(*) FROM (SELECT 1 FROM trajectories WHERE {where} LIMIT ?)"
        return self.db.execute(sql, [*params, cap + 1]).fetchone()[0]

    @_locked
    def reward_range(self, run_id: str, **filters) -> tuple[float, float] | None:
        """(lowest, highest) reward of the trajectories matching `filters` (as in
        `trajectories`); None when none match."""
        where, params = trajectory_filter(run_id, **filters)
        low, high = self.db.execute(f"SELECT min(reward), max(reward) FROM trajectories WHERE {where}",
                                    params).fetchone()
        return None if low is None else (float(low), float(high))

    def export_trajectories(self, run_id: str, *, limit: int | None = None, batch: int = 200,
                            **filters) -> Iterator[dict]:
        """Every trajectory matching `filters` (as in `trajectories`), in list order, decoded
        like `trajectories`; at most `limit` (None: all). Reads `batch` rows at a time (keyset
        paging on the list order), holding the store's lock only while reading a batch, so
        an export of a big run neither loads it whole nor blocks other readers."""
        where, params = trajectory_filter(run_id, **filters)
        after: list = []
        left = limit
        while left is None or left > 0:
            size = batch if left is None else min(batch, left)
            page = " AND (step, group_idx, sample_idx, id) > (?, ?, ?, ?)" if after else ""
            sql = f"SELECT * FROM trajectories WHERE {where}{page} ORDER BY {LIST_ORDER} LIMIT ?"
            with self._lock:
                rows = list(self.db.query(sql, [*params, *after, size]))
            for r in rows:
                yield _decode_all(r)
            if len(rows) < size:
                return
            last = rows[-1]
            after = [last["step"], last["group_idx"], last["sample_idx"], last["id"]]
            if left is not None:
                left -= len(rows)

    @_locked
    def trajectory(self, traj_id: int) -> dict:
        """One trajectory by id, breakdown and retrieval record decoded; raises
        TrajectoryNotFound if missing."""
        try:
            return _decode_all(dict(self.db["trajectories"].get(int(traj_id))))
        except sqlite_utils.db.NotFoundError:
            raise TrajectoryNotFound(f"trajectory {traj_id} not found") from None

    @_locked
    def group(self, run_id: str, step: int, group_idx: int) -> list[dict]:
        """The G samples of one task at one step, ordered by sample_idx."""
        where = "run_id = ? AND step = ? AND group_idx = ?"
        rows = self.db["trajectories"].rows_where(where, [run_id, step, group_idx],
                                                  order_by="sample_idx, id")
        return [_decode(_without_search(r), "breakdown") for r in rows]

    @_locked
    def trajectory_domains(self, run_id: str) -> list[str]:
        """Sorted distinct domains that have trajectories in this run."""
        return self._distinct(run_id, "domain")

    @_locked
    def finish_reasons(self, run_id: str) -> list[str]:
        """Sorted distinct finish reasons ("length", "stop", ...) of this run's trajectories."""
        return self._distinct(run_id, "finish_reason")

    def _distinct(self, run_id: str, column: str) -> list[str]:
        """Sorted distinct non-NULL values of an indexed (run_id, `column`) pair: one index
        seek per value (a skip scan) instead of reading every row of the run."""
        sql = (f"WITH RECURSIVE v(x) AS (SELECT min({column}) FROM trajectories WHERE run_id = :r "
               f"UNION ALL SELECT (SELECT min({column}) FROM trajectories WHERE run_id = :r AND {column} > v.x) "
               f"FROM v WHERE v.x IS NOT NULL) SELECT x FROM v WHERE x IS NOT NULL")
        return [r[0] for r in self.db.execute(sql, {"r": run_id}).fetchall()]

    @_locked
    def trajectory_step_range(self, run_id: str) -> tuple[int, int] | None:
        """(first, last) step that has trajectories in this run, or None if there are none."""
        sql = "SELECT MIN(step) AS lo, MAX(step) AS hi FROM trajectories WHERE run_id = ?"
        row = next(self.db.query(sql, [run_id]))
        return None if row["lo"] is None else (row["lo"], row["hi"])

    # ---- checkpoints and evaluations --------------------------------------------------

    @_locked
    def record_checkpoint(self, run_id: str, step: int, path: str) -> None:
        """Record a checkpoint saved at `step` (a repeat replaces); raises RunNotFound."""
        row = {"run_id": run_id, "step": int(step), "path": str(path), "created_at": _now()}
        with self._writing(run_id):
            self.db["checkpoints"].insert(row, replace=True)

    @_locked
    def checkpoints(self, run_id: str) -> list[dict]:
        """Checkpoints of a run as {run_id, step, path, created_at}, ordered by step."""
        return list(self.db["checkpoints"].rows_where("run_id = ?", [run_id], order_by="step"))

    @_locked
    def record_evaluation(
        self, run_id: str, phase: str, domain: str, n: int, accuracy: float,
        mean_reward: float, format_rate: float, model: str,
    ) -> None:
        """Record one evaluation (phase "before", "after" or "step-N"); a repeat replaces it.

        accuracy, mean_reward and format_rate are fractions in [0, 1] over `n` tasks; `model`
        names the model or checkpoint evaluated. The row's step comes from the phase
        (`evaluation_step`: "after" is the run's total_steps).

        Raises:
            RunNotFound: the run doesn't exist.
            ValueError: a phase other than "before", "after" or "step-N".
        """
        run = self.db.execute("SELECT total_steps FROM runs WHERE id = ?", [run_id]).fetchone()
        if run is None:
            raise _run_not_found(run_id)
        at = evaluation_step(phase, run[0])
        if at is None and phase != "after":
            raise ValueError(f"invalid evaluation phase {phase!r}; use 'before', 'after' or 'step-N' (N a step)")
        row = {"run_id": run_id, "phase": phase, "step": at, "domain": domain, "n": int(n),
               "accuracy": float(accuracy), "mean_reward": float(mean_reward),
               "format_rate": float(format_rate), "model": model, "created_at": _now()}
        with self._writing(run_id):
            self.db["evaluations"].insert(row, replace=True)

    @_locked
    def evaluations(self, run_id: str) -> list[dict]:
        """Evaluations of a run in the order they were (last) recorded."""
        return list(self.db["evaluations"].rows_where("run_id = ?", [run_id], order_by="rowid"))
