"""Tests of backend.store: every verb round-trips on a tmp-file database."""

import json
import sqlite3

import pytest

from core.errors import RunNotFound, TrajectoryNotFound, WorkbenchError
from backend.store import Store, default_db_path
from backend.trajectory_query import fts_query
from trainer.types import Completion, Sample


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "rlwb.db")
    yield s
    s.close()


def make_samples(group: int, rewards: list[float], domain: str = "basic_arithmetic") -> list[Sample]:
    return [
        Sample(domain=domain, task_seed=100 + group, group=group, index=i, prompt=f"What is {group} + {i}?",
               prompt_ids=[1, 2, 3], completion=Completion([5, 6], [-0.1, -0.2], f"Answer: {group + i}", "stop"),
               reward=r, breakdown={"format": 1.0, "correct": r}, advantage=r - 0.5, answer=str(group + i))
        for i, r in enumerate(rewards)
    ]


def test_schema_version_wal_and_foreign_keys(tmp_path, store):
    conn = sqlite3.connect(tmp_path / "rlwb.db")
    assert conn.execute("PRAGMA user_version").fetchone()[0] == Store.SCHEMA_VERSION
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert store.db.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert store.db.execute("PRAGMA busy_timeout").fetchone()[0] == 5000
    conn.close()
    Store(tmp_path / "rlwb.db").close()  # reopening an up-to-date db is a no-op


def test_newer_schema_refused(tmp_path):
    path = tmp_path / "future.db"
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {Store.SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(WorkbenchError, match="upgrade rl-workbench"):
        Store(path)


def test_rlwb_db_override(tmp_path, monkeypatch):
    target = tmp_path / "sub" / "x.db"
    monkeypatch.setenv("RLWB_DB", str(target))
    assert default_db_path() == target and target.parent.is_dir()
    with Store() as s:
        assert s.path == str(target)
    assert target.exists()


def test_memory_store():
    with Store(":memory:") as s:
        assert s.get_run(s.create_run("m", {}, 1))["name"] == "m"


def test_run_round_trip(store):
    rid = store.create_run("demo", {"lr": 1e-6, "mix": {"basic_arithmetic": 1.0}}, total_steps=10)
    assert rid.startswith("r") and len(rid) == len("r20250101-120000-ab12")
    run = store.get_run(rid)
    assert run["status"] == "pending" and run["config"]["mix"] == {"basic_arithmetic": 1.0}
    assert run["total_steps"] == 10 and run["step"] == 0 and run["created_at"].endswith("+00:00")
    store.update_run(rid, pid=4242, config={"lr": 2e-6})
    store.heartbeat(rid, step=3)
    run = store.get_run(rid)
    assert run["pid"] == 4242 and run["config"] == {"lr": 2e-6} and run["step"] == 3
    assert run["heartbeat_at"] is not None
    rid2 = store.create_run("second", {}, 1)
    assert [r["id"] for r in store.list_runs()] == [rid2, rid]
    assert len(store.list_runs(limit=1)) == 1


def test_run_not_found(store):
    with pytest.raises(RunNotFound, match="rlwb runs list") as e:
        store.get_run("nope")
    assert str(e.value) == "run 'nope' not found; list runs with `rlwb runs list`"
    for call in (lambda: store.update_run("nope", pid=1), lambda: store.heartbeat("nope"),
                 lambda: store.set_status("nope", "running"),
                 lambda: store.record_metrics("nope", 1, {"kl": 0.0}),
                 lambda: store.record_trajectories("nope", 1, make_samples(0, [1.0])),
                 lambda: store.record_checkpoint("nope", 1, "/tmp/x"),
                 lambda: store.record_evaluation("nope", "before", "d", 1, 0, 0, 0, "m")):
        with pytest.raises(RunNotFound):
            call()


def test_status_transitions_set_timestamps(store):
    rid = store.create_run("demo", {}, 5)
    store.set_status(rid, "running")
    run = store.get_run(rid)
    assert run["status"] == "running" and run["started_at"] and run["finished_at"] is None
    store.set_status(rid, "failed", error="boom", traceback="Traceback ...")
    run = store.get_run(rid)
    assert run["status"] == "failed" and run["finished_at"] >= run["started_at"]
    assert run["error"] == "boom" and run["traceback"] == "Traceback ..."
    started = run["started_at"]
    store.set_status(rid, "running")  # resume keeps the first start, clears the failure
    run = store.get_run(rid)
    assert run["started_at"] == started and run["finished_at"] is None and run["error"] is None
    for status in ("completed", "stopped"):
        store.set_status(rid, status)
        assert store.get_run(rid)["finished_at"] is not None


def test_invalid_status_rejected(store):
    rid = store.create_run("demo", {}, 5)
    with pytest.raises(ValueError, match="invalid run status"):
        store.set_status(rid, "done")
    with pytest.raises(ValueError, match="invalid run status"):
        store.update_run(rid, status="done")
    with pytest.raises(ValueError, match="unknown run field"):
        store.update_run(rid, colour="red")
    assert store.get_run(rid)["status"] == "pending"


def test_metrics_round_trip(store):
    rid = store.create_run("demo", {}, 5)
    store.record_metrics(rid, 2, {"reward/mean": 0.5, "kl": 0.01})
    store.record_metrics(rid, 1, {"reward/mean": 0.25})
    store.record_metrics(rid, 2, {"kl": 0.02})  # re-recorded: replaced
    assert store.run_metrics(rid) == [
        {"step": 1, "name": "reward/mean", "value": 0.25},
        {"step": 2, "name": "kl", "value": 0.02},
        {"step": 2, "name": "reward/mean", "value": 0.5},
    ]


def test_trajectories_round_trip_and_filters(store):
    rid = store.create_run("demo", {}, 5)
    store.record_trajectories(rid, 1, make_samples(0, [0.0, 1.0]) + make_samples(1, [0.5, 0.5], "chain_sum"))
    store.record_trajectories(rid, 2, make_samples(0, [1.0, 1.0, 0.0]))
    rows = store.trajectories(rid)
    assert len(rows) == 7 and [r["step"] for r in rows] == [1, 1, 1, 1, 2, 2, 2]
    t = rows[1]
    assert t["domain"] == "basic_arithmetic" and t["completion"] == "Answer: 1" and t["answer"] == "1"
    assert t["breakdown"] == {"format": 1.0, "correct": 1.0} and t["advantage"] == 0.5
    assert t["prompt_tokens"] == 3 and t["completion_tokens"] == 2 and t["finish_reason"] == "stop"
    assert store.trajectory(t["id"]) == t
    assert len(store.trajectories(rid, step_min=2)) == 3
    assert len(store.trajectories(rid, step_max=1, domain="chain_sum")) == 2
    assert {r["reward"] for r in store.trajectories(rid, reward_min=0.4, reward_max=0.6)} == {0.5}
    assert len(store.trajectories(rid, limit=2, offset=6)) == 1
    assert [r["sample_idx"] for r in store.group(rid, 2, 0)] == [0, 1, 2]
    assert store.trajectory_domains(rid) == ["basic_arithmetic", "chain_sum"]
    assert store.trajectory_step_range(rid) == (1, 2)
    assert store.trajectory_step_range(store.create_run("empty", {}, 1)) is None
    with pytest.raises(TrajectoryNotFound):
        store.trajectory(10_000)


def test_checkpoints_and_evaluations_round_trip(store):
    rid = store.create_run("demo", {}, 5)
    store.record_checkpoint(rid, 5, "/ckpt/5")
    store.record_checkpoint(rid, 2, "/ckpt/2")
    assert [(c["step"], c["path"]) for c in store.checkpoints(rid)] == [(2, "/ckpt/2"), (5, "/ckpt/5")]
    store.record_evaluation(rid, "before", "basic_arithmetic", 50, 0.1, 0.12, 0.3, "smollm2")
    store.record_evaluation(rid, "after", "basic_arithmetic", 50, 0.4, 0.41, 0.9, "ckpt/5")
    evals = store.evaluations(rid)
    assert [(e["phase"], e["accuracy"], e["n"]) for e in evals] == [("before", 0.1, 50), ("after", 0.4, 50)]
    assert evals[1]["model"] == "ckpt/5" and evals[1]["format_rate"] == 0.9


def test_two_handles_share_the_file(tmp_path, store):
    rid = store.create_run("demo", {}, 5)
    with Store(tmp_path / "rlwb.db") as other:
        other.record_metrics(rid, 1, {"kl": 0.1})
    assert store.run_metrics(rid)[0]["value"] == 0.1


# ---- search, filters and export (schema version 6) ------------------------------------

TERMINAL_TURNS = [{"turn": 1, "action": "command", "text": "```bash\ncat notes.txt\n```", "command": "cat notes.txt",
                   "stdout": "first line\nquokka café\n", "stderr": "", "exit_code": 0, "duration_ms": 3.0},
                  {"turn": 2, "action": "done", "text": "DONE"}]
TOOL_TURNS = [{"turn": 1, "action": "tool_call", "text": '<tool_call>{"name": "sql"}</tool_call>',
               "calls": [{"index": 0, "name": "sql", "arguments": {"sql": "select 1"}, "error": None,
                          "observation": "[[1]]\nmarmoset found", "duration_ms": 1.5}]}]


def episode_samples(group: int = 0) -> list[Sample]:
    """A terminal episode, a tool episode and a single-turn sample ('length'), one group."""
    out = make_samples(group, [1.0, 0.0, 0.5], "terminal_files")
    out[0].turns, out[1].turns = TERMINAL_TURNS, TOOL_TURNS
    out[2].completion.finish_reason = "length"
    return out


def old_store(path, version: int):
    """A database as rlwb wrote it at schema `version`, with one completed run "r1"."""
    import sqlite_utils

    from backend.store import MIGRATIONS

    db = sqlite_utils.Database(path)
    for v in range(1, version + 1):
        MIGRATIONS[v](db)
    db.execute(f"PRAGMA user_version = {version}")
    db["runs"].insert({"id": "r1", "name": "old", "status": "completed", "config": "{}", "created_at": "2025"})
    return db


def test_migration_from_version_5_makes_existing_rows_searchable(tmp_path):
    import json

    path = tmp_path / "v5.db"
    db = old_store(path, 5)
    db["trajectories"].insert({"run_id": "r1", "step": 1, "domain": "terminal_files", "group_idx": 0,
                               "sample_idx": 0, "prompt": "list the files", "completion": "done",
                               "reward": 1.0, "finish_reason": "stop", "turns": json.dumps(TERMINAL_TURNS)})
    db.close()
    with Store(path) as store:
        assert store.db.execute("PRAGMA user_version").fetchone()[0] == Store.SCHEMA_VERSION >= 6
        assert [t["prompt"] for t in store.trajectories("r1", query="quokka")] == ["list the files"]
        assert store.trajectories("r1", query="cafe")[0]["turns"] == TERMINAL_TURNS
        store.record_trajectories("r1", 2, episode_samples())  # the triggers index new rows
        assert [t["step"] for t in store.trajectories("r1", query="quokka")] == [1, 2]
        indexes = {i.name for i in store.db["trajectories"].indexes}
        assert "idx_trajectories_list" in indexes
        assert "idx_trajectories_run_id_step_group_idx_sample_idx" not in indexes  # a prefix of the list index


def test_search_reaches_turn_outputs_and_observations(store):
    rid = store.create_run("demo", {}, 1)
    store.record_trajectories(rid, 1, episode_samples())
    store.record_trajectories(rid, 2, make_samples(0, [0.0]))

    def found(query, **filters):
        return [(t["step"], t["sample_idx"]) for t in store.trajectories(rid, query=query, **filters)]

    assert found("marmoset") == [(1, 1)]  # only in a tool call's observation
    assert found("quokka") == found("QUOKKA") == found("cafe") == [(1, 0)]  # stdout, after a newline
    assert found("notes") == [(1, 0)]  # the command
    assert found("marm*") == [(1, 1)] and found('"marmoset found"') == [(1, 1)]
    assert found('"found marmoset"') == [] and found("marmoset quokka") == []  # phrase order; all words
    assert found("What") == [(1, 0), (1, 1), (1, 2), (2, 0)]  # prompts
    assert found("What", step_min=2) == [(2, 0)] and found("  ") == found(None) == found("What")
    assert found("select") == [(1, 1)]  # tool-call arguments
    assert found("exit_code") == [] and found("stdout") == []  # JSON keys are not text
    # completions only: the prompts' words no longer match; what the completion holds still does
    assert found("What", search_in="completion") == []
    assert found("marmoset", search_in="completion") == []  # a tool's observation is not the completion
    assert found("Answer", search_in="completion") == found("Answer") != []
    assert store.count_trajectories(rid, query="What", search_in="completion") == 0
    with pytest.raises(ValueError, match="search_in"):
        found("What", search_in="prompts")


def test_highlight_pattern_marks_what_the_search_pieces_match():
    from backend.trajectory_query import highlight_pattern

    p = highlight_pattern('err* "two plus" 42 AND(')
    text = "Error: two  plus three is 42, not 420; and AND( errno, terrible"
    assert p.findall(text) == ["Error", "two  plus", "42", "and", "AND", "errno"]
    assert highlight_pattern("  ") is None and highlight_pattern('"" * (') is None


HOSTILE = ['"', '""', '"""', "'", "*", "**", "AND", "AND(", "OR", "NOT", "NEAR", "NEAR(a b, 2)", "(", ")",
           "a:b", "prompt:", "-x", "^x", "+", "{a b}", "a AND", "OR b", '"unclosed', "col:\"x\"", "\\", "%",
           "a\x00b", "\x00", "a\ud800b", "😀", "\u200b", "'; DROP TABLE trajectories; --", "x" * 5000,
           " ".join(["a"] * 300)]


def test_hostile_search_text_never_raises(store):
    import random

    rid = store.create_run("demo", {}, 1)
    store.record_trajectories(rid, 1, episode_samples())
    rng = random.Random(0)
    alphabet = list('"\'*()^:-+{},.\\ aAnNdDoOrR\x00\t\n😀é')
    fuzz = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 12))) for _ in range(300)]
    for text in HOSTILE + fuzz:
        rows = store.trajectories(rid, query=text)
        assert store.count_trajectories(rid, query=text) == len(rows)
        assert len(list(store.export_trajectories(rid, query=text))) == len(rows)
    assert store.trajectories(rid, query="*") == []  # nothing to look for matches nothing
    assert fts_query('a"b AND( err* "x y" *') == '"a""b" "AND(" "err"* "x y"' and fts_query(" (* ") is None
    assert store.trajectories(rid)  # and the table is intact


def test_finish_reason_filter_and_count(store):
    rid = store.create_run("demo", {}, 1)
    store.record_trajectories(rid, 1, episode_samples(0) + episode_samples(1))
    assert store.finish_reasons(rid) == ["length", "stop"]
    assert store.finish_reasons(store.create_run("empty", {}, 1)) == []
    assert [t["sample_idx"] for t in store.trajectories(rid, finish_reason="length")] == [2, 2]
    assert store.count_trajectories(rid) == 6 and store.count_trajectories(rid, finish_reason="stop") == 4
    assert store.count_trajectories(rid, cap=3) == 4  # counts no further than cap + 1
    assert store.count_trajectories(rid, finish_reason="stop", reward_min=0.5, query="What") == 2
    summaries = store.trajectory_summaries(rid, finish_reason="length")
    assert [s["id"] for s in summaries] == [t["id"] for t in store.trajectories(rid, finish_reason="length")]
    assert set(summaries[0]) == {"id", "step", "domain", "group_idx", "sample_idx", "reward", "advantage",
                                 "completion_tokens", "finish_reason", "completion"}


def test_export_yields_every_matching_row_in_list_order(store):
    rid = store.create_run("demo", {}, 3)
    for step in (1, 2, 3):
        store.record_trajectories(rid, step, episode_samples(0) + episode_samples(1))
    every = store.trajectories(rid)
    assert list(store.export_trajectories(rid, batch=4)) == every  # pages across batch edges
    assert list(store.export_trajectories(rid, batch=4, limit=5)) == every[:5]
    assert list(store.export_trajectories(rid, batch=1, step_min=2, finish_reason="length")) == \
        store.trajectories(rid, step_min=2, finish_reason="length")
    assert next(store.export_trajectories(rid))["turns"] == TERMINAL_TURNS


def test_search_index_follows_updates_and_deletes(store):
    rid = store.create_run("demo", {}, 1)
    store.record_trajectories(rid, 1, episode_samples())
    (tid,) = [t["id"] for t in store.trajectories(rid, query="quokka")]
    store.db.execute("UPDATE trajectories SET completion = 'wombat', turns = NULL, turns_search = NULL WHERE id = ?", [tid])
    assert store.trajectories(rid, query="quokka") == [] and len(store.trajectories(rid, query="wombat")) == 1
    store.db.execute("DELETE FROM trajectories WHERE id = ?", [tid])
    assert store.trajectories(rid, query="wombat") == []
    assert store.db.execute("SELECT count(*) FROM trajectories_fts_docsize").fetchone()[0] == 2
    vocab = "CREATE VIRTUAL TABLE temp.v USING fts5vocab(main, trajectories_fts, row)"
    store.db.execute(vocab)  # the deleted row's words left the index (a wrong delete would leave them)
    words = {r[0] for r in store.db.execute("SELECT term FROM temp.v")}
    assert "quokka" not in words and "wombat" not in words and "marmoset" in words


def test_filtered_list_walks_the_list_index(store):
    """The filtered list neither sorts nor reads rows that fail the filters (query plan)."""
    from backend.trajectory_query import LIST_ORDER, trajectory_filter

    filters = {"step_min": 1, "step_max": 9, "domain": "d", "reward_min": 0.5, "reward_max": 1.0,
               "finish_reason": "stop"}
    for extra in ({}, {"query": "word"}):
        where, params = trajectory_filter("r", **filters, **extra)
        plan = " | ".join(r[3] for r in store.db.execute(
            f"EXPLAIN QUERY PLAN SELECT * FROM trajectories WHERE {where} ORDER BY {LIST_ORDER} LIMIT 500", params))
        assert "USING INDEX idx_trajectories_list" in plan and "TEMP B-TREE" not in plan, plan


def test_migration_to_version_7_keeps_runs_and_adds_evaluations(tmp_path):
    path = tmp_path / "v6.db"
    db = old_store(path, 6)
    db.close()
    with Store(path) as store:
        assert store.db.execute("PRAGMA user_version").fetchone()[0] == Store.SCHEMA_VERSION >= 7
        assert store.get_run("r1")["name"] == "old"
        eval_id = store.create_eval("m", "/m", {"sha256": "ab"}, {"ks": [1]}, run_id="r1", step=3)
        rows = [{"domain": "chain_sum", "level": 1, "task_seed": 1_000_000_000, "sample_idx": i, "reward": 1.0,
                 "correct": 1} for i in range(3)]
        assert store.record_eval_samples(eval_id, rows) == 3
        store.record_eval_samples(eval_id, rows[:1])  # a repeat replaces, never duplicates
        assert len(store.eval_samples(eval_id)) == 3
        store.finish_eval(eval_id, "completed", summary={"overall": {}})
        got = store.get_eval(eval_id)
        assert (got["status"], got["run_id"], got["step"], got["identity"]) == ("completed", "r1", 3, {"sha256": "ab"})
        with pytest.raises(ValueError, match="invalid evaluation status"):
            store.finish_eval(eval_id, "done")


def test_turns_search_keeps_only_the_turns_text_the_completion_lacks():
    from backend.store_common import turns_search_text

    turns = [{"turn": 1, "text": "run ls", "command": "ls -la", "stdout": "a.txt 3", "stderr": "denied",
              "exit_code": 3, "calls": [{"name": "sql", "arguments": {"sql": "select 1"}}]}]
    completion = "run ls\n```bash\nls -la\n```\n<obs>a.txt 3</obs> x13 sql"
    # "denied" is missing; "select 1" too; the rest is in the completion as whole words
    assert turns_search_text(turns, completion) == "denied\nselect 1"
    # a value found only inside a longer word is kept: "3" in "x13", "sql" in "sqlite"
    assert turns_search_text([{"a": "3", "b": "sql"}], "x13 sqlite") == "3\nsql"
    assert turns_search_text([{"a": "ç"}], "façade") == "ç"  # non-ASCII neighbours count as glued
    assert turns_search_text(json.dumps(turns), completion) == "denied\nselect 1"  # JSON text works too
    assert turns_search_text(None, "x") is None and turns_search_text([], "x") is None
    assert turns_search_text("not json", None) == "not json"  # as the previous index took it
    assert turns_search_text([{"a": "y", "n": 4, "t": True}], 12) == "y"  # a non-text completion: keep all
    # values JSON can't hold are indexed as the store's JSON writes them (default=str)
    from enum import Enum
    from pathlib import Path

    class Fruit(str, Enum):
        APPLE = "apple"

    assert turns_search_text([{"p": Path("/tmp/okapi"), "f": Fruit.APPLE, "none": None}], "") == "/tmp/okapi\napple"
    assert turns_search_text([{"o": "bad \udc80 byte"}], "") == "bad \ufffd byte"  # storable as UTF-8
    deep = "[" * 5000 + "]" * 5000  # valid JSON Python's parser can't nest: taken as text
    assert turns_search_text(deep, "") == deep


def test_migration_to_version_8_indexes_the_turns_text_once(tmp_path):
    path = tmp_path / "v7.db"
    db = old_store(path, 7)
    turns = [{"turn": 1, "action": "command", "text": "```bash\ncat log\n```", "command": "cat log",
              "stdout": "short", "stderr": "permission denied okapi"}]
    db["trajectories"].insert({"run_id": "r1", "step": 1, "domain": "terminal_files", "group_idx": 0,
                               "sample_idx": 0, "prompt": "read the log", "reward": 0.0, "finish_reason": "stop",
                               "completion": "```bash\ncat log\n```\nshort\nDONE", "turns": json.dumps(turns)})
    db["trajectories"].insert({"run_id": "r1", "step": 1, "domain": "terminal_files", "group_idx": 1,  # undecodable
                               "sample_idx": 0, "prompt": "p", "completion": "c", "reward": 0.0,  # output: a lone
                               "turns": json.dumps([{"stdout": "bad \udc80 wapiti"}])})  # surrogate's JSON escape
    db.close()
    with Store(path) as store:
        assert store.db.execute("PRAGMA user_version").fetchone()[0] == Store.SCHEMA_VERSION >= 8
        assert store.db.execute("SELECT turns_search FROM trajectories").fetchone()[0] == "command\npermission denied okapi"
        assert [t["group_idx"] for t in store.trajectories("r1", query="wapiti")] == [1]
        for query in ("okapi", '"cat log"', "short", "read"):
            assert [(t["step"], t["group_idx"]) for t in store.trajectories("r1", query=query)] == [(1, 0)], query
        assert "turns_search" not in store.trajectory(1)  # it only feeds the index
        store.db.execute("INSERT INTO trajectories_fts (trajectories_fts) VALUES ('integrity-check')")
        store.record_trajectories("r1", 2, episode_samples())  # new rows are indexed by the trigger
        assert [t["step"] for t in store.trajectories("r1", query="quokka")] == [2]
        store.db.execute("INSERT INTO trajectories_fts (trajectories_fts) VALUES ('rebuild')")  # plain columns now
        assert [t["step"] for t in store.trajectories("r1", query="okapi")] == [1]
        assert [t["step"] for t in store.trajectories("r1", query="marmoset")] == [2]
        assert [t["step"] for t in store.trajectories("r1", query="wapiti")] == [1]


def group_samples(step_prompt: str, completions: list[str], group: int = 0) -> list[Sample]:
    """One group whose samples share `step_prompt` (as GRPO's do), one per completion."""
    out = make_samples(group, [1.0] * len(completions))
    for s, text in zip(out, completions):
        s.prompt, s.completion.text = step_prompt, text
    return out


def test_a_groups_prompt_is_indexed_once_and_found_in_every_sample(store):
    rid = store.create_run("demo", {}, 2)
    store.record_trajectories(rid, 1, group_samples("Sort the okapi list", ["alpha", "beta gamma", "delta"])
                              + group_samples("Count the lemurs", ["beta"], group=1))
    store.record_trajectories(rid, 2, group_samples("Sort the okapi list", ["beta"]))
    store.record_trajectories(rid, 2, group_samples("Sort the okapi list", ["epsilon"]))  # the group, again
    found = lambda q: [(t["step"], t["group_idx"], t["sample_idx"]) for t in store.trajectories(rid, query=q)]  # noqa: E731
    assert found("okapi") == [(1, 0, 0), (1, 0, 1), (1, 0, 2), (2, 0, 0), (2, 0, 0)]
    assert found("okapi beta") == [(1, 0, 1), (2, 0, 0)]  # the prompt from the group, "beta" from the sample
    assert found('"the okapi" gam*') == [(1, 0, 1)] and found("okap* delta") == [(1, 0, 2)]
    assert found("lemurs beta") == [(1, 1, 0)] and found("okapi lemurs") == [] and found("alpha beta") == []
    assert store.count_trajectories(rid, query="okapi") == 5
    held = store.db.execute("SELECT step, group_idx, prompt_search FROM trajectories WHERE prompt_search IS NOT NULL "
                            "ORDER BY id").fetchall()
    assert held == [(1, 0, "Sort the okapi list"), (1, 1, "Count the lemurs"), (2, 0, "Sort the okapi list"),
                    (2, 0, "Sort the okapi list")]  # once per group and call (a second call can't see the first)
    assert "prompt_search" not in store.trajectory(1) and "prompt_search" not in store.group(rid, 1, 0)[1]
    store.db.execute("INSERT INTO trajectories_fts (trajectories_fts) VALUES ('integrity-check')")
    different = make_samples(3, [1.0, 0.0])  # one group, two prompts: each is indexed
    store.record_trajectories(rid, 2, different)
    assert found('"What is 3 + 1"') == [(2, 3, 1)] and found('"What is 3 + 0"') == [(2, 3, 0)]


def test_a_long_search_finds_what_its_words_find(store):
    """A piece repeated counts once; 1,200 distinct pieces stay within SQLite's expression
    depth (1000) and still mix the group's prompt with the sample's own words."""
    rid = store.create_run("demo", {}, 1)
    words = [f"w{i}" for i in range(1200)]
    store.record_trajectories(rid, 1, group_samples("Sort the okapi list", ["alpha", " ".join(words), "w1 beta"]))
    found = lambda q: [t["sample_idx"] for t in store.trajectories(rid, query=q)]  # noqa: E731
    assert found("okapi " * 2000) == [0, 1, 2] and found("beta okapi beta " * 500) == [2]
    assert found(" ".join(["okapi", *words])) == [1] and found(" ".join(["lemur", *words])) == []
    assert store.count_trajectories(rid, query=" ".join(["sort", *words, "list"])) == 1


def test_migration_to_version_9_indexes_each_groups_prompt_once(tmp_path):
    path = tmp_path / "v8.db"
    db = old_store(path, 8)
    for i, (group, prompt) in enumerate([(0, "sort the okapi list")] * 3 + [(1, "count the lemurs")]):
        db["trajectories"].insert({"run_id": "r1", "step": 1, "domain": "d", "group_idx": group, "sample_idx": i,
                                   "prompt": prompt, "completion": f"answer {i}", "reward": 0.0})
    db.close()
    with Store(path) as store:
        assert store.db.execute("PRAGMA user_version").fetchone()[0] == Store.SCHEMA_VERSION >= 9
        assert store.db.execute("SELECT id, prompt_search FROM trajectories WHERE prompt_search IS NOT NULL").fetchall() \
            == [(1, "sort the okapi list"), (4, "count the lemurs")]
        assert [t["sample_idx"] for t in store.trajectories("r1", query="okapi")] == [0, 1, 2]
        assert [t["sample_idx"] for t in store.trajectories("r1", query="okapi 2")] == [2]
        store.db.execute("INSERT INTO trajectories_fts (trajectories_fts) VALUES ('integrity-check')")


def test_rows_without_a_step_or_group_share_their_prompt_after_migration(tmp_path):
    """Rows written by hand without a step or group count as one group in the migration, and
    search finds the prompt in each of them (NULL = NULL is not true in SQL; IS is)."""
    path = tmp_path / "v8.db"
    db = old_store(path, 8)
    for i in range(3):
        db["trajectories"].insert({"run_id": "r1", "step": None, "domain": "d", "group_idx": None, "sample_idx": i,
                                   "prompt": "sort the okapi list", "completion": f"answer {i}", "reward": 0.0})
    db.close()
    with Store(path) as store:
        assert store.db.execute("SELECT count(*) FROM trajectories WHERE prompt_search IS NOT NULL").fetchone() == (1,)
        assert [t["sample_idx"] for t in store.trajectories("r1", query="okapi")] == [0, 1, 2]
        assert [t["sample_idx"] for t in store.trajectories("r1", query="okapi 1")] == [1]


def test_export_leaves_out_turns_search_and_import_recomputes_it(tmp_path):
    import gzip

    from backend.store_export import export_run, import_run

    with Store(tmp_path / "a.db") as store:
        rid = store.create_run("demo", {}, 1)
        store.record_trajectories(rid, 1, episode_samples() + group_samples("Sort the okapi list", ["a", "b"], 1))
        store.update_run(rid, status="completed")
        export_run(store, rid, tmp_path / "run.rlwb.jsonl.gz")
    lines = [json.loads(x) for x in gzip.decompress((tmp_path / "run.rlwb.jsonl.gz").read_bytes()).splitlines()]
    rows = [x["row"] for x in lines if x.get("table") == "trajectories"]
    assert len(rows) == 5 and not any("turns_search" in r or "prompt_search" in r for r in rows)
    rows[0]["turns_search"] = rows[1]["prompt_search"] = "planted"  # a file can't set what the index holds
    body = [json.dumps(x) for x in lines]
    (tmp_path / "edited.rlwb.jsonl.gz").write_bytes(gzip.compress(("\n".join(body) + "\n").encode()))
    with Store(tmp_path / "b.db") as store:
        import_run(store, tmp_path / "edited.rlwb.jsonl.gz")
        assert [t["sample_idx"] for t in store.trajectories(rid, query="quokka")] == [0]  # from the turns only
        assert store.trajectories(rid, query="planted") == []
        assert [t["sample_idx"] for t in store.trajectories(rid, query='"What is 0 + 1"')] == [1]  # own prompts
        assert [(t["group_idx"], t["sample_idx"]) for t in store.trajectories(rid, query="okapi")] == [(1, 0), (1, 1)]
        assert store.db.execute("SELECT count(prompt_search) FROM trajectories").fetchone()[0] == 4  # 3 + 1 group


def test_export_refuses_a_directory_even_with_force_and_names_a_file_to_write(tmp_path):
    from backend.store_export import export_run
    from core.errors import WorkbenchError

    with Store(tmp_path / "a.db") as store:
        rid = store.create_run("demo", {}, 1)
        store.update_run(rid, status="completed")
        (tmp_path / "out").mkdir()
        for force in (False, True):
            with pytest.raises(WorkbenchError, match=f"is a directory; name the file to write, such as .*{rid}"):
                export_run(store, rid, tmp_path / "out", force=force)
        export_run(store, rid, tmp_path / "run.rlwb.jsonl.gz")
        with pytest.raises(WorkbenchError, match="already exists; .* pass --force to replace it"):
            export_run(store, rid, tmp_path / "run.rlwb.jsonl.gz")
        export_run(store, rid, tmp_path / "run.rlwb.jsonl.gz", force=True)
    assert list((tmp_path / "out").iterdir()) == []


# ---- resume: every row of a discarded step goes (schema version 10) -----------------------

def _run_tables(store) -> dict[str, set[str]]:
    """Every table of the schema -> its columns (FTS5's own tables left out)."""
    names = [r[0] for r in store.db.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                            "AND name NOT LIKE 'trajectories_fts%'")]
    return {t: set(store.db[t].columns_dict) for t in names}


def test_every_table_of_a_run_is_declared_per_step_or_per_run(store):
    """A table with a run_id column is either truncated on resume (STEP_TABLES, with a step
    column) or declared run-level; one that refers to a step table's rows is a child table.
    A new table fails here until it is declared."""
    from backend.store_schema import RUN_LEVEL_TABLES, STEP_CHILD_TABLES, STEP_TABLES

    tables = _run_tables(store)
    for table, cols in tables.items():
        if "run_id" in cols:
            assert (table in STEP_TABLES) != (table in RUN_LEVEL_TABLES), table
        elif table != "runs":  # the run row itself (its step: the last one completed)
            assert "step" not in cols, f"{table} has a step but no run_id"
        parents = {r[2] for r in store.db.execute(f"PRAGMA foreign_key_list([{table}])")}
        if parents & set(STEP_TABLES) and table not in STEP_TABLES:
            assert STEP_CHILD_TABLES.get(table, (None, None))[1] in parents, table
    for table in STEP_TABLES:
        assert {"run_id", "step"} <= tables[table], table
    for table, (column, parent, key) in STEP_CHILD_TABLES.items():
        assert column in tables[table] and parent in STEP_TABLES and key in tables[parent]


def test_truncate_after_leaves_no_row_of_a_later_step(store):
    """After truncate_after(run, 2) no table holds a row of step 3+: not the evaluations of
    phase "step-4" nor the previous attempt's "after" (the run's last step), not the
    capability evaluations of a later checkpoint nor their samples. Steps 1-2, "before",
    the run's pool state and other runs stay."""
    rid, other = store.create_run("demo", {}, 5), store.create_run("other", {}, 5)
    for run in (rid, other):
        for step in (1, 2, 3, 4):
            store.record_trajectories(run, step, make_samples(0, [1.0, 0.0]))
            store.record_metrics(run, step, {"kl": 0.1 * step})
            store.record_sandbox_executions([{"kind": "exec", "outcome": "ok", "exit_code": 0, "latency_ms": 1.0}],
                                            run_id=run, step=step)
            store.record_checkpoint(run, step, f"/ckpt/{run}/{step}")
            store.create_eval("m", f"/ckpt/{run}/{step}", {}, {}, run_id=run, step=step)
        for phase in ("before", "step-2", "step-4", "after"):
            store.record_evaluation(run, phase, "chain_sum", 4, 0.5, 0.5, 1.0, "m")
        store.record_pool_state(run, {"backend": "local", "size": 2})
    for eval_run in store.list_evals():
        store.record_eval_samples(eval_run["id"], [{"domain": "d", "level": 1, "task_seed": 1, "sample_idx": 0}])
    tables = {t: cols for t, cols in _run_tables(store).items() if {"run_id", "step"} <= cols}
    later = lambda run: {t: store.db.execute(f"SELECT count(*) FROM [{t}] WHERE run_id = ? AND step > 2",  # noqa: E731
                                             [run]).fetchone()[0] for t in tables}
    assert all(later(rid).values()), later(rid)  # every per-step table had rows to delete

    store.truncate_after(rid, 2)
    assert not any(later(rid).values()), later(rid)
    assert [e["phase"] for e in store.evaluations(rid)] == ["before", "step-2"]
    assert sorted(e["step"] for e in store.list_evals(run_id=rid)) == [1, 2]
    samples = store.db.execute("SELECT count(*) FROM eval_samples s JOIN eval_runs e ON e.id = s.eval_id "
                               "WHERE e.run_id = ?", [rid]).fetchone()[0]
    assert samples == 2 == store.db.execute("SELECT count(*) FROM eval_samples").fetchone()[0] - 4
    assert {t["step"] for t in store.trajectories(rid)} == {1, 2}
    assert store.trajectories(rid, query="Answer") and store.trajectory_step_range(rid) == (1, 2)
    assert [p["run_id"] for p in store.pool_states()].count(rid) == 1
    assert all(later(other).values()) and len(store.evaluations(other)) == 4  # another run keeps all
    store.db.execute("INSERT INTO trajectories_fts (trajectories_fts) VALUES ('integrity-check')")


def test_run_phases_in_order_each_ending_where_the_next_starts(store):
    """`enter_phase` appends; `run_phases` gives each its end (the next start; the last one
    open while the run runs, then the run's finish); an unknown phase is refused, naming the
    valid ones, and stores nothing."""
    rid = store.create_run("demo", {}, 2)
    assert store.run_phases(rid) == []
    store.set_status(rid, "running")
    for phase, step in (("engine start", 0), ("learner start", 0), ("step", 1), ("step", 2)):
        store.enter_phase(rid, phase, step)
    with pytest.raises(ValueError, match="unknown run phase 'warming up'.*'engine start'"):
        store.enter_phase(rid, "warming up", 2)
    phases = store.run_phases(rid)
    assert [(p["phase"], p["step"]) for p in phases] == [("engine start", 0), ("learner start", 0), ("step", 1),
                                                         ("step", 2)]
    assert [p["ended_at"] for p in phases] == [p["started_at"] for p in phases[1:]] + [None]
    assert store.get_run(rid)["heartbeat_at"] == phases[-1]["started_at"]
    store.set_status(rid, "completed")
    assert store.run_phases(rid)[-1]["ended_at"] == store.get_run(rid)["finished_at"]
    with pytest.raises(RunNotFound):
        store.enter_phase("nope", "step", 1)


def test_a_resumed_runs_phases_keep_its_first_attempt_and_not_its_downtime(store):
    """The phases are wall-clock history: resuming keeps the first attempt's (its discarded
    step took that time) and the stop ends its last phase, so the downtime is in none."""
    rid = store.create_run("demo", {}, 4)
    store.set_status(rid, "running")
    for phase, step in (("engine start", 0), ("step", 1), ("checkpoint", 1), ("step", 2)):
        store.enter_phase(rid, phase, step)
    store.heartbeat(rid, step=1)
    store.set_status(rid, "stopped")
    stopped_at = store.get_run(rid)["finished_at"]
    store.truncate_after(rid, 1)
    store.set_status(rid, "running")
    store.enter_phase(rid, "engine start", 1)
    phases = store.run_phases(rid)
    assert [(p["phase"], p["step"]) for p in phases] == [("engine start", 0), ("step", 1), ("checkpoint", 1),
                                                         ("step", 2), ("engine start", 1)]
    assert phases[3]["ended_at"] == stopped_at <= phases[4]["started_at"]
    assert phases[4]["ended_at"] is None


def test_a_checkpoint_phase_counts_only_once_its_checkpoint_is_recorded(store):
    """A run killed while writing its second checkpoint: the timeline counts the one saved."""
    from trainer.phases import phase_timeline

    rid = store.create_run("demo", {}, 4)
    store.set_status(rid, "running")
    for phase, step in (("step", 1), ("checkpoint", 1), ("step", 2), ("checkpoint", 2)):
        store.enter_phase(rid, phase, step)
        if phase == "checkpoint" and step == 1:
            store.record_checkpoint(rid, 1, "/ckpt/step-1")
    phases = store.run_phases(rid)
    assert [p.get("saved") for p in phases] == [None, True, None, False]
    assert phase_timeline(phases, 4)[0]["label"] == "steps 1-2 (1 checkpoint)"
    store.set_status(rid, "failed")
    assert phase_timeline(store.run_phases(rid), 4)[0]["label"] == "steps 1-2 (1 checkpoint)"
    # resumed from step 1, the second attempt saves step 2's checkpoint: its own, not the first attempt's
    store.truncate_after(rid, 1)
    store.set_status(rid, "running")
    for phase, step in (("engine start", 1), ("step", 2), ("checkpoint", 2)):
        store.enter_phase(rid, phase, step)
    store.record_checkpoint(rid, 2, "/ckpt/step-2")
    store.enter_phase(rid, "step", 3)
    labels = [e["label"] for e in phase_timeline(store.run_phases(rid), 4)]
    assert labels == ["steps 1-2 (1 checkpoint)", "starting the rollout engine", "steps 2-3 (1 checkpoint)"]


def test_an_evaluations_step_comes_from_its_phase(store):
    rid = store.create_run("demo", {}, 5)
    for phase in ("before", "step-3", "after"):
        store.record_evaluation(rid, phase, "chain_sum", 4, 0.5, 0.5, 1.0, "m")
    assert [(e["phase"], e["step"]) for e in store.evaluations(rid)] == [("before", 0), ("step-3", 3), ("after", 5)]
    for bad in ("final", "step-", "step-x", "step-²"):
        with pytest.raises(ValueError, match="'before', 'after' or 'step-N'"):
            store.record_evaluation(rid, bad, "chain_sum", 4, 0.5, 0.5, 1.0, "m")


def test_migration_to_version_10_gives_each_evaluation_its_step(tmp_path):
    path = tmp_path / "v9.db"
    db = old_store(path, 9)
    db["runs"].update("r1", {"total_steps": 6})
    for phase in ("before", "step-4", "after", "custom"):
        db["evaluations"].insert({"run_id": "r1", "phase": phase, "domain": "d", "n": 1, "accuracy": 1.0})
    db.close()
    with Store(path) as store:
        assert store.db.execute("PRAGMA user_version").fetchone()[0] == Store.SCHEMA_VERSION >= 10
        assert [(e["phase"], e["step"]) for e in store.evaluations("r1")] == [
            ("before", 0), ("step-4", 4), ("after", 6), ("custom", None)]
        store.truncate_after("r1", 3)
        assert [e["phase"] for e in store.evaluations("r1")] == ["before", "custom"]


def test_import_computes_each_evaluations_step(tmp_path):
    """The step is derived from the phase: left out of the export, computed on import (so a
    file exported before version 10 gets it too)."""
    import gzip

    from backend.store_export import export_run, import_run

    with Store(tmp_path / "a.db") as store:
        rid = store.create_run("demo", {}, 4)
        for phase in ("before", "step-2", "after"):
            store.record_evaluation(rid, phase, "chain_sum", 4, 0.5, 0.5, 1.0, "m")
        store.update_run(rid, status="completed")
        export_run(store, rid, tmp_path / "run.rlwb.jsonl.gz")
    lines = [json.loads(x) for x in gzip.decompress((tmp_path / "run.rlwb.jsonl.gz").read_bytes()).splitlines()]
    rows = [x["row"] for x in lines if x.get("table") == "evaluations"]
    assert len(rows) == 3 and not any("step" in r for r in rows)
    with Store(tmp_path / "b.db") as store:
        target, _ = import_run(store, tmp_path / "run.rlwb.jsonl.gz", new_id=True)
        got = [(e["phase"], e["step"]) for e in store.evaluations(target)]
        assert got == [("before", 0), ("step-2", 2), ("after", 4)]
