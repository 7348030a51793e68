"""The store's schema history: one function per version, applied in order by `Store`.

``MIGRATIONS[v]`` upgrades a database at version v-1 to version v (the version lives in
``PRAGMA user_version``). Append new versions; never edit an old one, since databases in
the field were written by it.
"""

from __future__ import annotations

from collections.abc import Callable

import sqlite_utils

from backend.store_common import turns_search_text
from trainer.phases import evaluation_step


def _migrate_1(db: sqlite_utils.Database) -> None:
    """Version 1: runs, metrics, trajectories, checkpoints, evaluations."""
    fk = [("run_id", "runs", "id")]
    db["runs"].create({
        "id": str, "name": str, "status": str, "config": str, "created_at": str,
        "started_at": str, "finished_at": str, "error": str, "traceback": str, "pid": int,
        "heartbeat_at": str, "step": int, "total_steps": int,
    }, pk="id", not_null={"name", "status", "config", "created_at"})
    db["runs"].create_index(["created_at"])
    # the primary key (run_id, name, step) is the index curves are read through
    db["metrics"].create({"run_id": str, "step": int, "name": str, "value": float},
                         pk=("run_id", "name", "step"), foreign_keys=fk)
    db["trajectories"].create({
        "id": int, "run_id": str, "step": int, "domain": str, "task_seed": int,
        "group_idx": int, "sample_idx": int, "prompt": str, "completion": str, "answer": str,
        "reward": float, "breakdown": str, "advantage": float, "prompt_tokens": int,
        "completion_tokens": int, "finish_reason": str, "created_at": str,
    }, pk="id", foreign_keys=fk)
    db["trajectories"].create_index(["run_id", "step", "group_idx", "sample_idx"])
    db["trajectories"].create_index(["run_id", "domain"])
    db["checkpoints"].create({"run_id": str, "step": int, "path": str, "created_at": str},
                             pk=("run_id", "step"), foreign_keys=fk)
    db["evaluations"].create({
        "run_id": str, "phase": str, "domain": str, "n": int, "accuracy": float,
        "mean_reward": float, "format_rate": float, "model": str, "created_at": str,
    }, pk=("run_id", "phase", "domain"), foreign_keys=fk)


def _migrate_2(db: sqlite_utils.Database) -> None:
    """Version 2: multi-turn turns and harness faults on trajectories; sandbox executions."""
    db["trajectories"].add_column("turns", str)
    db["trajectories"].add_column("fault", str)
    db["sandbox_executions"].create({
        "id": int, "run_id": str, "step": int, "kind": str, "outcome": str, "exit_code": int,
        "latency_ms": float, "queue_ms": float, "attempts": int, "sandbox": str, "backend": str,
        "command": str, "error": str, "created_at": str,
    }, pk="id")
    db["sandbox_executions"].create_index(["created_at"])
    db["sandbox_executions"].create_index(["run_id", "step"])


def _migrate_3(db: sqlite_utils.Database) -> None:
    """Version 3: the latest state of each run's sandbox pool."""
    db["sandbox_pools"].create({
        "run_id": str, "backend": str, "isolation": str, "size": int, "idle": int, "busy": int,
        "replaced": int, "orphans_collected": int, "status": str, "updated_at": str,
    }, pk="run_id")


def _migrate_4(db: sqlite_utils.Database) -> None:
    """Version 4: domain validation reports; named, versioned mixes; each trajectory's task level."""
    db["trajectories"].add_column("difficulty", int)
    db["domain_validations"].create({
        "id": int, "domain": str, "passed": int, "reasons": str, "report": str, "created_at": str,
    }, pk="id", not_null={"domain", "passed", "report", "created_at"})
    db["domain_validations"].create_index(["domain", "id"])
    db["mixes"].create({"name": str, "version": int, "spec": str, "note": str, "created_at": str},
                       pk=("name", "version"), not_null={"spec", "created_at"})


def _migrate_5(db: sqlite_utils.Database) -> None:
    """Version 5: retrieval domains record how each prompt's context was assembled;
    context-length sweeps (`rlwb eval context-length`)."""
    db["trajectories"].add_column("retrieval", str)
    db["context_sweeps"].create({"id": int, "model": str, "config": str, "result": str, "created_at": str},
                                pk="id", not_null={"model", "result", "created_at"})


def _turns_text_sql(column: str) -> str:
    """SQL for the searchable text of a turns JSON column: its string values, space-joined
    (model text, commands, stdout/stderr, tool names, arguments, observations). Text that
    isn't JSON is taken as is; numbers, booleans and keys are left out."""
    return (f"CASE WHEN json_valid({column}) THEN (SELECT group_concat(value, ' ') FROM json_tree({column}) "
            f"WHERE type = 'text') ELSE {column} END")


def _fts_row_sql(ref: str) -> str:
    """The (rowid, prompt, completion, turns_text) values the search index holds for the
    trajectory row `ref` ("new" or "old" in a trigger)."""
    return f"{ref}.id, {ref}.prompt, {ref}.completion, {_turns_text_sql(ref + '.turns')}"


def _migrate_6(db: sqlite_utils.Database) -> None:
    """Version 6: full-text search over trajectories; an index for the filtered trajectory list.

    ``trajectories_fts`` is an FTS5 index with external content (the trajectories table),
    kept in sync by triggers. Its ``turns_text`` column is not a column of the content table
    but the string values of the turns JSON, computed by the triggers (`_turns_text_sql`):
    indexing the raw JSON would glue escapes to words (``ls\\nfoo`` -> "nfoo"). So FTS5's
    'rebuild' and 'integrity-check' don't work on it (no such column); to rebuild, run
    'delete-all' and refill it as below.
    (sqlite-utils' ``enable_fts`` indexes raw columns only, hence plain SQL; a view as the
    content table can't be used either: FTS5 can't read json_tree through one.)
    """
    db.execute("CREATE VIRTUAL TABLE trajectories_fts USING fts5(prompt, completion, turns_text, "
               "content='trajectories', content_rowid='id', tokenize='unicode61 remove_diacritics 2')")
    cols = "rowid, prompt, completion, turns_text"
    db.execute(f"INSERT INTO trajectories_fts ({cols}) SELECT {_fts_row_sql('trajectories')} FROM trajectories")
    remove = (f"INSERT INTO trajectories_fts (trajectories_fts, {cols}) "
              f"VALUES ('delete', {_fts_row_sql('old')});")
    add = f"INSERT INTO trajectories_fts ({cols}) VALUES ({_fts_row_sql('new')});"
    db.execute(f"CREATE TRIGGER trajectories_fts_ai AFTER INSERT ON trajectories BEGIN {add} END")
    db.execute(f"CREATE TRIGGER trajectories_fts_ad AFTER DELETE ON trajectories BEGIN {remove} END")
    db.execute("CREATE TRIGGER trajectories_fts_au AFTER UPDATE OF id, prompt, completion, turns ON trajectories "
               f"BEGIN {remove} {add} END")
    # The list reads rows of one run in (step, group, sample, id) order and filters on
    # domain, reward and finish reason: with those in the index, rows that don't match are
    # skipped without reading the (large) table row. It replaces the version-1 index on
    # (run_id, step, group_idx, sample_idx), a prefix of it.
    db.execute("DROP INDEX IF EXISTS idx_trajectories_run_id_step_group_idx_sample_idx")
    db["trajectories"].create_index(["run_id", "step", "group_idx", "sample_idx", "id", "domain", "reward",
                                     "finish_reason"], index_name="idx_trajectories_list")
    db["trajectories"].create_index(["run_id", "finish_reason"])


def _migrate_7(db: sqlite_utils.Database) -> None:
    """Version 7: capability evaluations (`rlwb eval MODEL`): one row per evaluation with the
    model's identity and the suite's settings, one row per sampled completion with its
    task's exact (domain, level, seed)."""
    db["eval_runs"].create({
        "id": str, "model": str, "model_path": str, "identity": str, "suite": str, "status": str,
        "error": str, "summary": str, "extras": str, "run_id": str, "step": int, "pid": int,
        "created_at": str, "finished_at": str,
    }, pk="id", not_null={"model", "suite", "status", "created_at"})
    db["eval_runs"].create_index(["created_at"])
    db["eval_samples"].create({
        "eval_id": str, "domain": str, "level": int, "task_seed": int, "sample_idx": int, "reward": float,
        "correct": int, "format": float, "calls": int, "valid_calls": int, "turns": int,
        "finish_reason": str, "completion": str, "fault": str,
    }, pk=("eval_id", "domain", "level", "task_seed", "sample_idx"), foreign_keys=[("eval_id", "eval_runs", "id")])


def _migrate_8(db: sqlite_utils.Database) -> None:
    """Version 8: the search index takes from the turns only what the completion lacks.

    A multi-turn completion is the whole transcript, so version 6's ``turns_text`` (every
    string of the turns JSON, walked by json_tree in the insert trigger) indexed most text
    twice. The new ``turns_search`` column holds the turns' strings the completion doesn't
    hold as whole words (`backend.store_common.turns_search_text`, computed by the writer),
    and the index is over plain columns of the table again, so FTS5's 'rebuild' and
    'integrity-check' work. ``automerge`` 16 (FTS5's default: 4) merges segments in wider,
    rarer passes: fewer rewrites of the index as a run grows, more segments for a query to
    read. bench/store_ingest.py measures both.
    """
    _drop_search_index(db)
    db["trajectories"].add_column("turns_search", str)
    last = -1
    while True:  # a page of rows at a time: a big store's text needn't fit in memory
        rows = db.execute("SELECT id, turns, completion FROM trajectories WHERE turns IS NOT NULL AND id > ? "
                          "ORDER BY id LIMIT 500", [last]).fetchall()
        if not rows:
            break
        db.conn.executemany("UPDATE trajectories SET turns_search = ? WHERE id = ?",
                            [(turns_search_text(turns, completion), rid) for rid, turns, completion in rows])
        last = rows[-1][0]
    _search_index(db, "prompt, completion, turns_search")


def _search_index(db: sqlite_utils.Database, cols: str) -> None:
    """(Re)create ``trajectories_fts``, an FTS5 index with external content over the plain
    trajectories columns `cols` ("a, b, c"), its triggers, and fill it from the table.
    ``automerge`` 16 (FTS5's default: 4): fewer, wider merges as a run grows."""
    db.execute(f"CREATE VIRTUAL TABLE trajectories_fts USING fts5({cols}, content='trajectories', "
               "content_rowid='id', tokenize='unicode61 remove_diacritics 2')")
    db.execute("INSERT INTO trajectories_fts (trajectories_fts, rank) VALUES ('automerge', 16)")
    db.execute("INSERT INTO trajectories_fts (trajectories_fts) VALUES ('rebuild')")
    old, new = ", ".join(f"old.{c}" for c in cols.split(", ")), ", ".join(f"new.{c}" for c in cols.split(", "))
    remove = f"INSERT INTO trajectories_fts (trajectories_fts, rowid, {cols}) VALUES ('delete', old.id, {old});"
    add = f"INSERT INTO trajectories_fts (rowid, {cols}) VALUES (new.id, {new});"
    db.execute(f"CREATE TRIGGER trajectories_fts_ai AFTER INSERT ON trajectories BEGIN {add} END")
    db.execute(f"CREATE TRIGGER trajectories_fts_ad AFTER DELETE ON trajectories BEGIN {remove} END")
    db.execute(f"CREATE TRIGGER trajectories_fts_au AFTER UPDATE OF id, {cols} ON trajectories "
               f"BEGIN {remove} {add} END")


def _drop_search_index(db: sqlite_utils.Database) -> None:
    for name in ("ai", "ad", "au"):
        db.execute(f"DROP TRIGGER IF EXISTS trajectories_fts_{name}")
    db.execute("DROP TABLE IF EXISTS trajectories_fts")


def _migrate_9(db: sqlite_utils.Database) -> None:
    """Version 9: the search index takes a group's prompt once.

    The G samples of a group share their prompt, so the index held every prompt G times
    (a fifth of its text in bench/store_ingest.py's workload). The new ``prompt_search``
    column holds the prompt in the first row (lowest id) of each (run, step, group, prompt)
    and NULL in the others (`backend.store_common.prompt_search_text`, computed by the
    writer); the index is over ``prompt_search`` instead of ``prompt``, and a search piece
    found in a group's indexed prompt matches every row of the group with that prompt
    (`backend.trajectory_query.trajectory_filter`).
    """
    _drop_search_index(db)
    db["trajectories"].add_column("prompt_search", str)
    db.execute("UPDATE trajectories SET prompt_search = prompt WHERE id IN "
               "(SELECT min(id) FROM trajectories GROUP BY run_id, step, group_idx, prompt)")
    _search_index(db, "prompt_search, completion, turns_search")


def _migrate_10(db: sqlite_utils.Database) -> None:
    """Version 10: each held-out evaluation row carries its training step (`evaluation_step`:
    "before" 0, "step-N" N, "after" the run's total_steps; NULL for another phase), so that
    resuming a run deletes the evaluations of its discarded steps like every other per-step
    row (`STEP_TABLES`)."""
    db["evaluations"].add_column("step", int)
    rows = db.execute("SELECT e.rowid, e.phase, r.total_steps FROM evaluations e "
                      "LEFT JOIN runs r ON r.id = e.run_id").fetchall()
    db.conn.executemany("UPDATE evaluations SET step = ? WHERE rowid = ?",
                        [(evaluation_step(phase, total), rowid) for rowid, phase, total in rows])


def _migrate_11(db: sqlite_utils.Database) -> None:
    """Version 11: a training run's own held-out evaluations are stored as evaluations too
    (`trainer.evaluate`: greedy, one completion per task, every completion kept): their
    ``phase`` ("before", "step-N", "after"; NULL for `rlwb eval`) tells them apart."""
    db["eval_runs"].add_column("phase", str)
    db["eval_runs"].create_index(["run_id", "step"])


def _migrate_12(db: sqlite_utils.Database) -> None:
    """Version 12: user domains (`domains.user`), versioned like mixes: a version's definition
    never changes, `removed_at` hides a removed domain from the catalogue while the runs that
    used a version can still load it. Their rows are stored once per content
    (``user_domain_data``, keyed by the SHA-256 of the task rows)."""
    db["user_domain_data"].create({"sha256": str, "rows": str, "n_rows": int, "created_at": str},
                                  pk="sha256", not_null={"rows", "n_rows", "created_at"})
    db["user_domains"].create({"name": str, "version": int, "spec": str, "data_sha256": str, "note": str,
                               "created_at": str, "removed_at": str},
                              pk=("name", "version"), not_null={"spec", "data_sha256", "created_at"},
                              foreign_keys=[("data_sha256", "user_domain_data", "sha256")])


def _migrate_13(db: sqlite_utils.Database) -> None:
    """Version 13: each evaluation sample keeps its task's reference answer, so baselines
    that regenerate the tasks from (level, seed) can tell when the generator has changed
    since (`backend.baselines.regenerated`). Older rows have NULL: nothing to compare."""
    db["eval_samples"].add_column("answer", str)


def _migrate_14(db: sqlite_utils.Database) -> None:
    """Version 14: a validation report says which version of its domain it is of (a user
    domain's stored version; "" for the shipped ones), so a new version is not validated
    by its predecessor's report."""
    db["domain_validations"].add_column("domain_version", str)


def _migrate_15(db: sqlite_utils.Database) -> None:
    """Version 15: the phases a run's processes went through (`trainer.phases.RUN_PHASES`),
    one row each as it enters it, with the training step it belongs to (``at_step``: 0
    before training), and an end row when a process finishes, stops or fails, so the page
    says what a run is doing and where its time went. A history of wall-clock time: kept
    when a run resumes (its discarded steps did take that time)."""
    db["run_phases"].create({"run_id": str, "phase": str, "at_step": int, "started_at": str},
                            foreign_keys=[("run_id", "runs", "id")], not_null={"phase", "at_step", "started_at"})
    db["run_phases"].create_index(["run_id"])


# version -> function that upgrades a database at version-1 to version. Append, never edit.
MIGRATIONS: dict[int, Callable[[sqlite_utils.Database], None]] = {
    1: _migrate_1, 2: _migrate_2, 3: _migrate_3, 4: _migrate_4, 5: _migrate_5, 6: _migrate_6,
    7: _migrate_7, 8: _migrate_8, 9: _migrate_9, 10: _migrate_10, 11: _migrate_11,
    12: _migrate_12, 13: _migrate_13, 14: _migrate_14, 15: _migrate_15}

#: The tables holding rows of one step of a training run, each with a ``run_id`` and an
#: integer ``step`` column. Resuming a run from a step's checkpoint deletes their rows of
#: later steps (`backend.store.Store.truncate_after`). ``eval_runs``: capability
#: evaluations of a checkpoint (`rlwb eval RUN_ID:STEP`; a discarded step's checkpoint is
#: written anew by the resumed run, so they would name weights that are gone) and the run's
#: own held-out evaluations (phase "before" at step 0, "step-N" at N, "after" at the last step).
STEP_TABLES = ("trajectories", "metrics", "sandbox_executions", "checkpoints", "evaluations", "eval_runs")
#: Tables whose rows belong to a row of a `STEP_TABLES` table: table -> (its column, the
#: parent table, the parent's key); deleted with their parent rows.
STEP_CHILD_TABLES = {"eval_samples": ("eval_id", "eval_runs", "id")}
#: Tables with a ``run_id`` column whose rows belong to the run as a whole, not to a step:
#: kept on resume. ``sandbox_pools``: the latest state of the run's pool, overwritten by the
#: resumed run; ``run_phases``: the history of its processes' phases, appended to.
RUN_LEVEL_TABLES = ("sandbox_pools", "run_phases")
# A new table with a run_id column goes in STEP_TABLES or RUN_LEVEL_TABLES, one that refers
# to a step table's rows in STEP_CHILD_TABLES: tests/backend/test_store.py walks the schema.
