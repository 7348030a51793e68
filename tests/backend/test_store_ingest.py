"""Tests of the batched `Store.record_trajectories`: it stores exactly what the previous
row-dict path (sqlite-utils ``insert_all`` on schema version 7, kept in
bench/store_ingest.py as the baseline) stored (rows, search hits, and the same words of the
same trajectories in the search index, which since version 8 takes from the turns only the
text the completion lacks), edge cases included. No timings here: the speed is
bench/store_ingest.py's business."""

import random
import re

import pytest

import backend.store as store_module
from backend.store import Store
from bench.store_ingest import episode, old_record_trajectories, store_class
from tests.backend.test_store import episode_samples, make_samples
from trainer.types import Completion, Sample

QUERIES = ["What", "zanzibar", "error", "sel*", '"bash sort"', "quokka", "marmoset", "cafe", "naïve", "日本語", "😀",
           "answer", "select", "observation", "DONE", "exit_code", "nul", "tail"]


def record_both(tmp_path, steps: list[list[Sample]]) -> tuple[Store, Store, str]:
    """Two fresh stores (old path, new path) with the same run id and the same steps recorded."""
    old, new = store_class("old")(tmp_path / "old.db"), Store(tmp_path / "new.db")
    rid = old.create_run("ingest", {}, len(steps))
    new.db["runs"].insert(old.db["runs"].get(rid))
    for step, samples in enumerate(steps, start=1):
        old_record_trajectories(old, rid, step, samples)
        new.record_trajectories(rid, step, samples)
    return old, new, rid


def contents(store: Store, rid: str) -> dict:
    """Everything a reader can see of a run's trajectories: raw rows (id included, time
    left out), decoded rows, search hits, which words the search index holds for which
    trajectory outside its prompt (the columns and positions differ: version 8 indexes turn
    text once), and which prompt words for which (step, group, prompt) (version 9 indexes
    a group's prompt in its first row only)."""
    derived = ("created_at", "turns_search", "prompt_search")
    columns = ", ".join(c for c in store_module.TRAJECTORY_COLUMNS if c not in derived)
    raw = list(store.db.execute(f"SELECT id, {columns} FROM trajectories ORDER BY id"))
    decoded = [{k: v for k, v in t.items() if k != "created_at"} for t in store.trajectories(rid, limit=100_000)]
    hits = {q: [t["id"] for t in store.trajectories(rid, query=q, limit=100_000)] for q in QUERIES}
    store.db.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.vocab USING fts5vocab(main, trajectories_fts, instance)")
    terms = list(store.db.execute("SELECT DISTINCT term, doc FROM temp.vocab WHERE col NOT IN ('prompt', "
                                  "'prompt_search') ORDER BY term, doc"))
    prompt_terms = list(store.db.execute(
        "SELECT DISTINCT v.term, t.step, t.group_idx, t.prompt FROM temp.vocab v JOIN trajectories t ON t.id = v.doc "
        "WHERE v.col IN ('prompt', 'prompt_search') ORDER BY 1, 2, 3, 4"))
    docs = list(store.db.execute("SELECT id FROM trajectories_fts_docsize ORDER BY id"))
    return {"raw": raw, "decoded": decoded, "hits": hits, "terms": terms, "prompt_terms": prompt_terms, "docs": docs}


def assert_same(tmp_path, steps: list[list[Sample]]) -> dict:
    old, new, rid = record_both(tmp_path, steps)
    try:
        expected, got = contents(old, rid), contents(new, rid)
        for part in expected:
            assert got[part] == expected[part], part
        return got
    finally:
        old.close()
        new.close()


def unicode_sample(index: int = 0) -> Sample:
    text = "naïve café — 日本語のテキスト 😀 \x00 nul\tbyte\r\n Ω≈ç √ العربية"
    return Sample(domain="terminal_files", task_seed=7, group=0, index=index, prompt=f"Prompt {text}",
                  prompt_ids=[1], completion=Completion([2, 3], [-0.1, -0.2], f"Completion {text}", "stop"),
                  reward=1.0, breakdown={"note": text, "x": 1.5}, advantage=0.5, answer=text,
                  turns=[{"turn": 1, "action": "command", "text": text, "command": "echo é\x00", "stdout": text},
                         {"turn": 2, "action": "done", "text": "DONE"}],
                  retrieval={"fragments": [{"text": text, "score": 0.25}]})


def test_a_realistic_step_matches_the_old_path(tmp_path):
    rng = random.Random(0)
    steps = [[episode(rng, step, i // 8, i % 8) for i in range(48)] for step in (1, 2)]
    steps[1] += episode_samples(6) + make_samples(7, [0.0, 1.0], "chain_sum")  # single-turn, 'length', no turns
    steps[1][0].fault, steps[1][1].difficulty = "harness", 0
    got = assert_same(tmp_path, steps)
    assert len(got["raw"]) == 48 + 48 + 5 and got["hits"]["quokka"] and got["hits"]["marmoset"]
    assert got["decoded"][0]["turns"] == steps[0][0].turns  # the turns round-trip


def test_words_of_a_groups_prompt_and_of_one_samples_completion_find_what_they_found_before(tmp_path):
    """Version 9 indexes a group's prompt in its first row only: a search that needs a
    prompt word and a word of one later sample's own text still finds that sample, and
    finds exactly what the old index (every row's prompt) found."""
    rng = random.Random(5)
    steps = [[episode(rng, step, i // 8, i % 8) for i in range(32)] for step in (1, 2)]
    old, new, rid = record_both(tmp_path, steps)
    try:
        words = lambda text: set(re.findall(r"[a-z]+", text.lower()))  # noqa: E731
        queries, wanted = [], []
        for s in (steps[0][3], steps[0][13], steps[1][30]):  # sample_idx 3, 5, 6: none holds the prompt
            own = words(s.completion.text) - words(s.prompt)
            prompt_only = words(s.prompt) - words(s.completion.text)
            pw, cw = max(prompt_only, key=len), max(own, key=len)
            queries += [f"{pw} {cw}", f'"{pw}" {cw[:4]}*', f"{pw[:3]}* {cw}"]
            wanted.append(cw)
        other = max(words(steps[0][20].prompt) - words(steps[0][3].prompt), key=len)
        queries.append(f"{other} {wanted[0]}")  # a word of another group's prompt
        for q in queries:
            hits = [(t["step"], t["group_idx"], t["sample_idx"]) for t in new.trajectories(rid, query=q, limit=10_000)]
            assert hits == [(t["step"], t["group_idx"], t["sample_idx"])
                            for t in old.trajectories(rid, query=q, limit=10_000)], q
        found = {q: [(t["step"], t["group_idx"], t["sample_idx"]) for t in new.trajectories(rid, query=q)]
                 for q in queries}
        assert (1, 0, 3) in found[queries[0]] and (1, 1, 5) in found[queries[3]] and (2, 3, 6) in found[queries[6]]
        assert (1, 0, 3) in found[queries[1]] and (1, 0, 3) in found[queries[2]]
        assert new.db.execute("SELECT count(*) FROM trajectories WHERE prompt_search IS NOT NULL").fetchone()[0] == 8
    finally:
        old.close()
        new.close()


def test_edge_cases_match_the_old_path(tmp_path):
    one = make_samples(0, [1.0])
    huge = episode(random.Random(1), 3, 0, 0)
    huge.turns = huge.turns * 500 + [{"turn": 2001, "action": "command", "stdout": "x " * 500_000 + "needleword"}]
    huge.completion.text *= 200
    steps = [[], one, [huge], [unicode_sample(0), unicode_sample(1)]]
    got = assert_same(tmp_path, steps)
    assert [r["step"] for r in got["decoded"]] == [2, 3, 4, 4]
    assert got["decoded"][1]["turns"] == huge.turns and got["decoded"][2]["prompt"] == unicode_sample().prompt
    assert got["decoded"][2]["turns"] == unicode_sample().turns and got["hits"]["cafe"] == [3, 4]
    with Store(tmp_path / "new.db") as s:
        assert [t["id"] for t in s.trajectories(s.list_runs()[0]["id"], query="needleword")] == [2]


def test_an_empty_step_is_a_no_op(tmp_path):
    with Store(tmp_path / "rlwb.db") as store:
        store.record_trajectories("no-such-run", 1, [])  # nothing to write: no error, as before
        assert store.db.execute("SELECT count(*) FROM trajectories").fetchone()[0] == 0


def test_values_of_other_types_are_stored_as_sqlite_utils_stored_them(tmp_path):
    samples = make_samples(0, [1.0, 0.0, 0.5])
    samples[0].answer, samples[1].answer, samples[2].answer = 42, {"a": ["é"]}, [1, "two"]
    samples[1].breakdown = {"when": object, "n": 1}  # not JSON: stored through str()
    assert_same(tmp_path, [samples])


def test_a_step_larger_than_one_statement_keeps_order_and_rows(tmp_path, monkeypatch):
    monkeypatch.setattr(store_module, "_ROWS_PER_INSERT", 7)
    rng = random.Random(2)
    got = assert_same(tmp_path, [[episode(rng, 1, i // 8, i % 8) for i in range(23)]])
    assert [(r["group_idx"], r["sample_idx"]) for r in got["decoded"]] == [(i // 8, i % 8) for i in range(23)]


def test_one_insert_statement_per_step(tmp_path):
    """FTS5 flushes its pending terms to a new segment at every statement's savepoint, so a
    usual step (256 samples) goes in as one INSERT (what makes the batched path faster)."""

    class CountingConnection:
        def __init__(self, conn):
            self.conn, self.inserts = conn, 0

        def execute(self, sql, *args):
            self.inserts += sql.startswith("INSERT INTO trajectories ")
            return self.conn.execute(sql, *args)

        def __getattr__(self, name):
            return getattr(self.conn, name)

    rng = random.Random(3)
    samples = [episode(rng, 1, i // 8, i % 8) for i in range(256)]
    with Store(tmp_path / "rlwb.db") as store:
        rid = store.create_run("ingest", {}, 1)
        counting = store.db.conn = CountingConnection(store.db.conn)
        store.record_trajectories(rid, 1, samples)
        store.db.conn = counting.conn
        assert counting.inserts == 1 and store.count_trajectories(rid) == 256


def test_a_failing_row_leaves_the_step_unwritten(tmp_path):
    bad = make_samples(0, [1.0, 0.0, 0.5])
    bad[2].task_seed = 2**70  # too large for an SQLite INTEGER: the row fails to bind
    old, new, rid = record_both(tmp_path, [make_samples(1, [1.0])])
    try:
        errors = []
        for record in (lambda: old_record_trajectories(old, rid, 2, bad), lambda: new.record_trajectories(rid, 2, bad)):
            with pytest.raises(OverflowError) as e:
                record()
            errors.append(type(e.value))
        assert errors[0] is errors[1]
        assert contents(old, rid) == contents(new, rid)
        assert [t["step"] for t in new.trajectories(rid)] == [1]  # nothing of step 2, index included
        new.record_trajectories(rid, 2, make_samples(0, [1.0]))  # the store is still usable
        assert new.count_trajectories(rid) == 2
    finally:
        old.close()
        new.close()
