"""Export a run from the store as one file, and import such a file into another store.

    rlwb runs export RUN_ID -o run.rlwb.jsonl.gz     # one gzip-compressed JSON Lines file
    rlwb runs import run.rlwb.jsonl.gz [--new-id]    # into this store, all or nothing

The file (`EXPORT_FORMAT`, version `EXPORT_VERSION`) is gzip-compressed JSON Lines, readable
with ``zcat`` and ``jq``:

- line 1, the header: ``{"format": "rlwb-run", "version": 1, "schema_version": 7,
  "run_id": ..., "exported_at": ...}``;
- one line per row: ``{"table": "trajectories", "row": {column: value, ...}}``, for the
  tables in `RUN_TABLES` (the run row with its resolved config, its phases, metrics, trajectories with
  their turns and retrieval records, checkpoint records, evaluations, sandbox executions,
  the sandbox pool state, and the run's own held-out evaluations with every completion:
  ``eval_runs`` rows with a ``phase`` and their ``eval_samples``), each row exactly as
  stored (JSON columns stay JSON text);
- the last line, the trailer: ``{"end": {"rows": {table: count, ...}}}``. A file cut short
  (a full disk, an interrupted copy) has no trailer or the wrong counts and is refused.

Export reads every table in one read transaction (one consistent snapshot) and writes the
file atomically (temporary sibling, fsync, rename). Import checks the whole file (header,
known columns, plain values, counts) inside one write transaction: it either adds the whole
run or nothing. Trajectory and sandbox-execution ids are renumbered by the importing store,
held-out evaluations get fresh ids (their samples follow). A file from before schema
version 11 has no held-out evaluation rows (its trailer lacks those tables: 0 rows).

Not covered: checkpoint weights (the records keep their paths; copy the directories
yourself), capability evaluations of its checkpoints (`rlwb eval`), and runs that are still pending or running
(stop them or wait: a live run's rows would be a moving target).
"""

from __future__ import annotations

import gzip
import json
import os
import sqlite3
import zlib
from collections.abc import Iterator
from pathlib import Path

from core.errors import ConfigError, WorkbenchError
from backend.store import FINISHED_STATUSES, Store, _new_run_id
from backend.store_common import new_id, now, prompt_search_text, turns_search_text
from trainer.phases import evaluation_step

EXPORT_FORMAT = "rlwb-run"
EXPORT_VERSION = 1
SUFFIX = ".rlwb.jsonl.gz"
#: The tables a run's rows live in, in insertion order (the run row first: foreign keys).
RUN_TABLES = ("runs", "run_phases", "metrics", "trajectories", "checkpoints", "evaluations", "sandbox_executions",
              "sandbox_pools", "eval_runs", "eval_samples")
#: Tables read by their own query (the run's id as its one argument): only the run's own
#: held-out evaluations (`trainer.evaluate`), not `rlwb eval`'s of its checkpoints.
_QUERIES = {
    "eval_runs": "SELECT * FROM eval_runs WHERE run_id = ? AND phase IS NOT NULL ORDER BY rowid",
    "eval_samples": "SELECT s.* FROM eval_samples s JOIN eval_runs e ON e.id = s.eval_id "
                    "WHERE e.run_id = ? AND e.phase IS NOT NULL ORDER BY s.rowid"}
_RENUMBERED = {"trajectories": "id", "sandbox_executions": "id"}  # autoincrement ids, reassigned on import
#: Columns computed from a row's other columns: left out of the export, recomputed on import
#: (a file can't set what the search index holds).
_DERIVED = {"trajectories": ("turns_search", "prompt_search"), "evaluations": ("step",)}


def _derivers(run: dict) -> dict[str, dict]:
    """table -> column -> function(row) computing a `_DERIVED` column on import; fresh
    state per import (a group's prompt is indexed in its first row only). `run`: the
    imported run's row, filled in when it is read (it comes first)."""
    seen: set = set()
    return {"trajectories": {
        "turns_search": lambda row: turns_search_text(row.get("turns"), row.get("completion")),
        "prompt_search": lambda row: prompt_search_text(seen, row.get("step"), row.get("group_idx"),
                                                        row.get("prompt"))},
        "evaluations": {"step": lambda row: evaluation_step(row.get("phase"), run.get("total_steps"))}}
_LIVE = ("pending", "running")
_MAX_LINE_CHARS = 64 * 2**20  # one row; a trajectory's turns are far below this
_BATCH = 200  # rows per INSERT on import


def _rows(store: Store, table: str, run_id: str) -> Iterator[dict]:
    key = "id" if table == "runs" else "run_id"
    query = _QUERIES.get(table) or f"SELECT * FROM [{table}] WHERE [{key}] = ? ORDER BY rowid"
    cur = store.db.conn.execute(query, [run_id])
    names = [d[0] for d in cur.description]
    derived = _DERIVED.get(table, ())
    for values in cur:
        yield {k: v for k, v in zip(names, values) if k not in derived}


def export_run(store: Store, run_id: str, path: str | Path, force: bool = False) -> dict[str, int]:
    """Write run `run_id` to one file at `path` (format in the module docstring).

    Args:
        force: replace an existing regular file at `path`.

    Returns:
        Rows written per table.

    Raises:
        RunNotFound: no such run.
        WorkbenchError: the run is pending or running, or `path` exists (without `force`)
            or is not a regular file; nothing is written then.
        OSError: the file can't be written (e.g. a full disk); no partial file is left.
    """
    run = store.get_run(run_id)  # RunNotFound
    if run["status"] in _LIVE:
        raise WorkbenchError(f"run {run_id} is {run['status']}; stop it (`rlwb runs stop {run_id}`) or let it "
                             "finish before exporting it")
    path = Path(path)
    if path.is_dir():
        raise WorkbenchError(f"{path} is a directory; name the file to write, such as "
                             f"{path / (run_id + '.rlwb.jsonl.gz')}")
    if path.exists() and not path.is_file():
        raise WorkbenchError(f"{path} is not a regular file; pick another path")
    if path.exists() and not force:
        raise WorkbenchError(f"{path} already exists; pick another path or pass --force to replace it")
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    counts = {t: 0 for t in RUN_TABLES}
    try:
        with store._lock, open(tmp, "wb") as raw:  # one connection, one snapshot
            with gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6) as gz:
                def put(obj: dict) -> None:
                    gz.write(json.dumps(obj, ensure_ascii=True).encode("ascii") + b"\n")

                put({"format": EXPORT_FORMAT, "version": EXPORT_VERSION, "schema_version": Store.SCHEMA_VERSION,
                     "run_id": run_id, "exported_at": now()})
                conn = store.db.conn
                outer = conn.in_transaction
                if not outer:
                    conn.execute("BEGIN")  # a read snapshot across all tables (WAL)
                try:
                    for table in RUN_TABLES:
                        for row in _rows(store, table, run_id):
                            put({"table": table, "row": row})
                            counts[table] += 1
                finally:
                    if not outer:
                        conn.execute("COMMIT")
                put({"end": {"rows": counts}})
            raw.flush()
            os.fsync(raw.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return counts


def _bad(path: Path, line: int, why: str) -> ConfigError:
    return ConfigError(f"{path}: not a complete rlwb run export (line {line}: {why}); nothing was imported. "
                       "Export the run again with `rlwb runs export RUN_ID -o FILE`")


def _lines(path: Path) -> Iterator[tuple[int, dict]]:
    try:
        with gzip.open(path, "rb") as f:
            n = 0
            while line := f.readline(_MAX_LINE_CHARS + 1):  # bounded: a gzip bomb of one line is refused
                n += 1
                if len(line) > _MAX_LINE_CHARS:
                    raise _bad(path, n, f"a line over {_MAX_LINE_CHARS} bytes")
                try:
                    obj = json.loads(line)
                except ValueError as e:
                    raise _bad(path, n, f"not JSON: {str(e)[:100]}") from None
                if not isinstance(obj, dict):
                    raise _bad(path, n, "not a JSON object")
                yield n, obj
    except (gzip.BadGzipFile, EOFError, zlib.error) as e:
        raise ConfigError(f"{path}: not a gzip file or cut short ({type(e).__name__}: {str(e)[:100]}); nothing "
                          "was imported. Export the run again with `rlwb runs export RUN_ID -o FILE`") from None


def _plain(value) -> bool:
    return value is None or isinstance(value, (str, int, float)) and not isinstance(value, bool)


def import_run(store: Store, path: str | Path, new_id: bool = False) -> tuple[str, dict[str, int]]:
    """Add the run in an export file (`export_run`) to `store`, all or nothing.

    Args:
        new_id: give the run a fresh id (when the store already holds one with its id,
            e.g. importing the same file twice).

    Returns:
        (the run's id in this store, rows added per table).

    Raises:
        ConfigError: the file is missing, not an export, from a newer rlwb, cut short,
            or holds unknown columns or non-plain values; the run id is taken (without
            `new_id`). Nothing is written then.
    """
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path} is not a file; pass a file written by `rlwb runs export`")
    columns = {t: set(store.db[t].columns_dict) for t in RUN_TABLES}
    counts = {t: 0 for t in RUN_TABLES}
    run_id = None
    ended = None
    pending: list[dict] = []
    run: dict = {}
    derivers = _derivers(run)
    pending_table = None
    eval_ids: dict[str, str] = {}  # an exported evaluation's id -> its id in this store

    def flush() -> None:  # multi-row INSERTs: the search index writes one segment per statement
        if pending:
            store.db[pending_table].insert_all(pending, batch_size=_BATCH)
            pending.clear()

    with store._lock:
        try:
            with store._immediate():
                for n, obj in _lines(path):
                    if n == 1:
                        run_id = _check_header(path, obj, store)
                        target = _new_run_id() if new_id else run_id
                        continue
                    if ended is not None:
                        raise _bad(path, n, "rows after the trailer")
                    if "end" in obj:
                        ended = obj["end"]
                        continue
                    table, row = _checked_row(store, path, n, obj, columns, counts, run_id, target, new_id)
                    if table == "runs":
                        run.update(row)
                    _rekey_eval(store, path, n, table, row, eval_ids)
                    row.pop(_RENUMBERED.get(table, ""), None)
                    for column, compute in derivers.get(table, {}).items():
                        row[column] = compute(row)
                    if table != pending_table or len(pending) >= _BATCH:
                        flush()
                        pending_table = table
                    pending.append(row)
                    counts[table] += 1
                flush()
                if run_id is None:
                    raise _bad(path, 1, "empty file")
                if not _counts_match(ended, counts):
                    raise _bad(path, n, f"the trailer's row counts {ended and ended.get('rows')} don't match the "
                                        f"rows read {counts} (the file was cut short or edited)")
        except (sqlite3.IntegrityError, UnicodeEncodeError, OverflowError) as e:
            raise ConfigError(f"{path}: a row can't be stored ({type(e).__name__}: {str(e)[:120]}); nothing was "
                              "imported") from None
    return target, counts


def _checked_row(store: Store, path: Path, n: int, obj: dict, columns: dict[str, set], counts: dict[str, int],
                 run_id: str, target: str, new_id: bool) -> tuple[str, dict]:
    """Line `n` of an export as (table, a copy of its row under the run's id in this store).

    Raises:
        ConfigError: an unknown table or column, a nested value, a row before the run row or of
            another run, a second run row, an unfinished run, or a run id already in the store
            (without `new_id`).
    """
    table, row = obj.get("table"), obj.get("row")
    if table not in columns or not isinstance(row, dict):
        raise _bad(path, n, f"unknown table {str(table)[:40]!r} or no row")
    if table != "runs" and counts["runs"] != 1:
        raise _bad(path, n, "rows before the run row")
    unknown = set(row) - columns[table]
    if unknown or not all(_plain(v) for v in row.values()):
        raise _bad(path, n, f"unknown columns {sorted(unknown)[:3]} or nested values in {table}")
    row = dict(row)
    if table == "runs":
        if row.get("id") != run_id or counts["runs"]:
            raise _bad(path, n, "a second run row, or one that is not the header's run")
        if not new_id and store.db.execute("SELECT 1 FROM runs WHERE id = ?", [run_id]).fetchone():
            raise ConfigError(f"run {run_id} is already in this store; import with --new-id to add it as a copy")
        if row.get("status") not in FINISHED_STATUSES:
            raise _bad(path, n, f"run status {str(row.get('status'))[:20]!r} is not one of {FINISHED_STATUSES}")
        row.update(id=target, pid=None)
    elif row.get("run_id") != run_id and table != "eval_samples":
        raise _bad(path, n, f"a {table} row of another run")
    elif table != "eval_samples":  # a sample row names its evaluation: `_rekey_eval`
        row["run_id"] = target
    return table, row


def _counts_match(ended, counts: dict[str, int]) -> bool:
    """Whether the trailer's row counts are those read; a table it lacks (a file exported
    before that table was) counts 0."""
    rows = ended.get("rows") if isinstance(ended, dict) else None
    return isinstance(rows, dict) and set(rows) <= set(counts) and all(rows.get(t, 0) == c for t, c in counts.items())


def _rekey_eval(store: Store, path: Path, n: int, table: str, row: dict, eval_ids: dict[str, str]) -> None:
    """Give an imported held-out evaluation (an ``eval_runs`` row) a fresh id, recorded in
    `eval_ids` (exported id -> new id), and point its ``eval_samples`` rows at it; other
    tables' rows pass. Raises ConfigError (`_bad`) for an evaluation twice or a sample row
    whose evaluation came before it in no row of the file."""
    if table == "eval_runs":
        if row.get("id") in eval_ids:
            raise _bad(path, n, f"evaluation {str(row.get('id'))[:30]!r} twice")
        eval_ids[row.get("id")] = row["id"] = _fresh_eval_id(store, set(eval_ids.values()))
        row["pid"] = None
    elif table == "eval_samples":
        if row.get("eval_id") not in eval_ids:
            raise _bad(path, n, "an eval_samples row before its evaluation, or of another run")
        row["eval_id"] = eval_ids[row["eval_id"]]


def _fresh_eval_id(store: Store, taken: set[str]) -> str:
    """An evaluation id neither in this store nor in `taken` (`backend.store_common.new_id`:
    4 random hex digits per second can collide within one import)."""
    while True:
        eval_id = new_id("e")
        if eval_id not in taken and not store.db.execute("SELECT 1 FROM eval_runs WHERE id = ?",
                                                         [eval_id]).fetchone():
            return eval_id


def _check_header(path: Path, obj: dict, store: Store) -> str:
    if obj.get("format") != EXPORT_FORMAT:
        raise _bad(path, 1, f"the header's format is {str(obj.get('format'))[:40]!r}, not {EXPORT_FORMAT!r}")
    version = obj.get("version")
    if not isinstance(version, int) or version > EXPORT_VERSION:
        raise ConfigError(f"{path} is export version {version!r}; this rlwb reads up to {EXPORT_VERSION}: "
                          "upgrade rl-workbench")
    if not isinstance(obj.get("schema_version"), int) or obj["schema_version"] > Store.SCHEMA_VERSION:
        raise ConfigError(f"{path} was exported from store schema {obj.get('schema_version')!r}; this rlwb "
                          f"understands up to {Store.SCHEMA_VERSION}: upgrade rl-workbench")
    run_id = obj.get("run_id")
    if not isinstance(run_id, str) or not run_id or len(run_id) > 100 or not run_id.isprintable():
        raise _bad(path, 1, "no valid run id in the header")
    return run_id
