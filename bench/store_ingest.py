"""Store ingestion: trajectory turns per second through `Store.record_trajectories`, new vs old.

    python bench/store_ingest.py            # 40 steps x 256 episodes x 4 turns, 5 repeats
    python bench/store_ingest.py --quick    # 8 steps, 5 repeats: < 1 minute
    python bench/store_ingest.py --steps 100 --repeats 3

Workload: each step records 32 groups of 8 multi-turn episodes, 4 turns each (a turn is
one entry of `Sample.turns`), the 8 samples of a group sharing their prompt (as GRPO's do), half terminal episodes (model text with a bash block, the
command, ~400 characters of output) and half tool-use episodes (a tool call with
arguments and an observation), the completion holding the whole transcript (~2 KB). Every
run writes to a fresh database file (WAL, the production schema with its full-text search
triggers) and times the `record_trajectories` calls, commits included; the samples are
built beforehand. Runs of the two paths alternate, and each path's figure is the median
over ``--repeats`` runs.

* old: the store as it was before this benchmark, schema version 7: the previous
  `record_trajectories`, copied below as `old_record_trajectories` (sqlite-utils
  ``insert_all``: 49-row INSERTs, each with its own statement savepoint, at which FTS5
  flushes its pending terms to a new segment; ``json.dumps`` per value), and a search
  index whose trigger walks the turns JSON with json_tree and indexes every string of it.
* new: the current `Store.record_trajectories` on the current schema: one multi-row
  INSERT per step; the index takes from the turns only the text the completion (the
  whole transcript) lacks (`turns_search`) and a group's prompt once (`prompt_search`, in
  the group's first row; a search word found there matches the whole group), and merges
  segments 16 at a time. The baseline store searches as version 7 did: one MATCH over each
  row's own columns.
* "new, no search index": the new path with the FTS insert trigger dropped. Not a valid
  store; it only shows how much of the time the search index takes.

Prints turns/s of each (wall clock, and per CPU second of this process, which the other
work on a shared machine disturbs less), checks that both paths stored the same rows and
search hits, and, as its last line, ``ratio: X.XX`` = new / old turns per wall second. A
benchmark, not a test: numbers depend on the machine and on what else runs on it. Not
covered: concurrent readers, and how writes slow down as the search index grows large.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from bench.workload import WORDS, prose  # noqa: E402

TURNS, GROUP, GROUPS_PER_STEP = 4, 8, 32
RARE = "zanzibar"  # in ~1 of 200 episodes' outputs: the search check


# ---- the baseline: the previous Store.record_trajectories, verbatim but for `self` -> `store`

def old_record_trajectories(store, run_id: str, step: int, samples: list) -> None:
    """BASELINE (the implementation before bench/store_ingest.py): sqlite-utils insert_all."""
    from backend.store import _now

    now = _now()
    rows = [{
        "run_id": run_id, "step": int(step), "domain": s.domain, "task_seed": int(s.task_seed),
        "group_idx": int(s.group), "sample_idx": int(s.index), "prompt": s.prompt,
        "completion": s.completion.text, "answer": s.answer, "reward": float(s.reward),
        "breakdown": json.dumps(s.breakdown, default=str), "advantage": float(s.advantage),
        "prompt_tokens": len(s.prompt_ids), "completion_tokens": len(s.completion.token_ids),
        "finish_reason": s.completion.finish_reason, "created_at": now,
        "turns": json.dumps(s.turns, default=str) if s.turns else None, "fault": s.fault,
        "difficulty": int(s.difficulty) or None,
        "retrieval": json.dumps(s.retrieval, default=str) if s.retrieval else None,
    } for s in samples]
    with store._writing(run_id):
        store.db["trajectories"].insert_all(rows)


def new_record_trajectories(store, run_id: str, step: int, samples: list) -> None:
    store.record_trajectories(run_id, step, samples)


# ---- the workload ----------------------------------------------------------------------

def _terminal_turn(rng: random.Random, t: int) -> tuple[dict, str]:
    cmd = f"{rng.choice(WORDS)} -n {rng.randint(1, 99)} {prose(rng, 2).strip()}.txt"
    out = prose(rng, 60) + (f" {RARE}" if rng.random() < 0.002 else "")
    text = f"{prose(rng, 30)}\n```bash\n{cmd}\n```"
    turn = {"turn": t, "action": "command", "text": text, "command": cmd, "stdout": out, "stderr": "",
            "exit_code": int(rng.random() < 0.2), "duration_ms": round(rng.uniform(5, 200), 1), "timed_out": False,
            "oom_killed": False, "outcome": "ok"}
    return turn, f"{text}\n<observation>\n{out}\n</observation>"


def _tool_turn(rng: random.Random, t: int) -> tuple[dict, str]:
    args = {"sql": f"select {rng.choice(WORDS)} from {rng.choice(WORDS)} where id = {rng.randint(1, 999)}"}
    obs = prose(rng, 60) + (f" {RARE}" if rng.random() < 0.002 else "")
    text = f"{prose(rng, 30)}\n<tool_call>{json.dumps({'name': 'sql', 'arguments': args})}</tool_call>"
    turn = {"turn": t, "action": "tool_call", "text": text,
            "calls": [{"index": 0, "name": "sql", "arguments": args, "error": None, "observation": obs,
                       "duration_ms": round(rng.uniform(1, 50), 1)}]}
    return turn, f"{text}\n<observation>\n{obs}\n</observation>"


def episode(rng: random.Random, step: int, group: int, index: int):
    """One 4-turn episode as a `Sample`: 3 commands or tool calls, then DONE or an answer."""
    from trainer.types import Completion, Sample

    tool = group % 2 == 1
    turns, transcript = [], []
    for t in range(1, TURNS):
        turn, shown = (_tool_turn if tool else _terminal_turn)(rng, t)
        turns.append(turn)
        transcript.append(shown)
    last = ({"turn": TURNS, "action": "answer", "text": "Answer: 42", "calls": []} if tool
            else {"turn": TURNS, "action": "done", "text": "DONE"})
    turns.append(last)
    transcript.append(last["text"])
    reward = float(rng.random() < 0.4)
    return Sample(domain="sql_tools" if tool else "terminal_files", task_seed=step * 1000 + group, group=group,
                  index=index, prompt=prose(random.Random(f"{step}/{group}"), 100), prompt_ids=[0] * 180,
                  completion=Completion([0] * 500, [], "\n".join(transcript), "stop" if rng.random() < 0.8 else "length"),
                  reward=reward, breakdown={"correct": reward, "turns": TURNS}, advantage=reward - 0.4,
                  answer="42" if tool else "ok", turns=turns, difficulty=rng.randint(1, 3))


def workload(steps: int, seed: int = 0) -> list[list]:
    """`steps` lists of GROUP * GROUPS_PER_STEP samples."""
    rng = random.Random(seed)
    return [[episode(rng, step, i // GROUP, i % GROUP) for i in range(GROUP * GROUPS_PER_STEP)]
            for step in range(1, steps + 1)]


# ---- timing ----------------------------------------------------------------------------

def store_class(name: str):
    """`Store` for the new path; for "old", `Store` stopped at schema version 7 (the last
    before this benchmark's changes to the search index)."""
    from backend.store import Store

    if name != "old":
        return Store

    class StoreV7(Store):
        SCHEMA_VERSION = 7

        def trajectories(self, run_id: str, *, query: str | None = None, limit: int = 500, offset: int = 0,
                         **filters) -> list[dict]:
            """BASELINE search of version 7: one MATCH of every piece over each row's own
            columns (each row indexed its prompt)."""
            if query is None or not query.strip():
                return super().trajectories(run_id, limit=limit, offset=offset, **filters)
            from backend.store import _decode_all
            from backend.trajectory_query import LIST_ORDER, fts_query, trajectory_filter

            match = fts_query(query)
            if match is None:
                return []
            where, params = trajectory_filter(run_id, **filters)
            rows = self.db.query(f"SELECT * FROM trajectories WHERE {where} AND id IN (SELECT rowid FROM "
                                 f"trajectories_fts WHERE trajectories_fts MATCH ?) ORDER BY {LIST_ORDER} "
                                 "LIMIT ? OFFSET ?", [*params, match, limit, offset])
            return [_decode_all(r) for r in rows]

    return StoreV7


def timed_run(path: Path, record, steps: list[list], drop_index: bool = False,
              store_cls=None) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of recording every step into a fresh store at `path`."""
    with (store_cls or store_class("new"))(path) as store:
        rid = store.create_run("ingest", {}, total_steps=len(steps))
        if drop_index:
            store.db.execute("DROP TRIGGER trajectories_fts_ai")
        wall, cpu = time.perf_counter(), time.process_time()
        for step, samples in enumerate(steps, start=1):
            record(store, rid, step, samples)
        return time.perf_counter() - wall, time.process_time() - cpu


def stored(path: Path, store_cls) -> tuple[list, list, int]:
    """(rows without id and created_at, ids found by searches, index size) of a store."""
    with store_cls(path) as store:
        rows = [tuple(r[1:]) for r in store.db.execute(
            "SELECT id, step, domain, task_seed, group_idx, sample_idx, prompt, completion, answer, reward, breakdown, "
            "advantage, prompt_tokens, completion_tokens, finish_reason, turns, fault, difficulty, retrieval "
            "FROM trajectories ORDER BY id")]
        rid = store.list_runs()[0]["id"]
        hits = [[t["id"] for t in store.trajectories(rid, query=q, limit=10_000)]
                for q in (RARE, "error", '"bash sort"', "sel*", "zanzib*")]
        size = store.db.execute("SELECT count(*) FROM trajectories_fts_docsize").fetchone()[0]
    return rows, hits, size


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="8 steps, 5 repeats (< 1 minute)")
    ap.add_argument("--steps", type=int, default=None, help="steps per run (default 40; 8 with --quick)")
    ap.add_argument("--repeats", type=int, default=None, help="runs of each path (default 5)")
    args = ap.parse_args(argv)
    n_steps = args.steps or (8 if args.quick else 40)
    repeats = args.repeats or 5

    t0 = time.perf_counter()
    steps = workload(n_steps)
    turns = sum(len(s.turns) or 1 for step in steps for s in step)
    chars = sum(len(s.completion.text) for s in steps[0]) / len(steps[0])
    print(f"workload: {n_steps} steps x {len(steps[0])} episodes ({GROUPS_PER_STEP} groups of {GROUP}) = "
          f"{turns} turns; completion {chars:.0f} chars on average; built in {time.perf_counter() - t0:.1f} s")
    paths = {"old": old_record_trajectories, "new": new_record_trajectories}
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in [*paths, "new, no search index"]}
    with tempfile.TemporaryDirectory(prefix="rlwb-ingest-") as tmp:
        for r in range(repeats):
            for name, record in paths.items():
                results[name].append(timed_run(Path(tmp) / f"{name}{r}.db", record, steps,
                                               store_cls=store_class(name)))
        results["new, no search index"].append(
            timed_run(Path(tmp) / "noindex.db", new_record_trajectories, steps, drop_index=True))
        old = stored(Path(tmp) / "old0.db", store_class("old"))
        new = stored(Path(tmp) / "new0.db", store_class("new"))
        same = old == new
        print(f"same rows, search hits and index size in both stores: {same} "
              f"({len(new[0])} rows, {len(new[1][0])} hits for '{RARE}')")

    print(f"{'path':<22} {'turns/s (wall)':>15} {'turns/CPU s':>12}  runs (wall s)")
    medians, cpu_medians = {}, {}
    for name, runs in results.items():
        wall = statistics.median(w for w, _ in runs)
        cpu = statistics.median(c for _, c in runs)
        medians[name], cpu_medians[name] = turns / wall, turns / cpu
        print(f"{name:<22} {turns / wall:>15,.0f} {turns / cpu:>12,.0f}  " + " ".join(f"{w:.2f}" for w, _ in runs))
    print(f"goal: 20,000 turns/s; new path: {medians['new']:,.0f} turns/s (wall); "
          f"new / old per CPU second: {cpu_medians['new'] / cpu_medians['old']:.2f}")
    if not same:
        print("ERROR: the two paths stored different rows or search hits")
        sys.exit(1)
    print(f"ratio: {medians['new'] / medians['old']:.2f}")


if __name__ == "__main__":
    main()
