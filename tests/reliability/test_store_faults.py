"""The store under concurrency and faults: two writer processes and a polling reader at once;
kill -9 of a writer in the middle of a transaction; a full disk under the store; a run
exported to one file, the file cut short in transit, and the intact file imported back.
Each ends with ``PRAGMA integrity_check``."""

from __future__ import annotations

import gzip
import json
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from backend.store import Store
from tests.reliability.conftest import mounted_tmpfs

WORKERS = [sys.executable, "-m", "tests.reliability.store_workers"]
ROOT = Path(__file__).resolve().parents[2]


def _integrity(db: Path) -> str:
    conn = sqlite3.connect(db)
    try:
        return conn.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        conn.close()


def _steps_present(store: Store, run_id: str, rows: int) -> list[int]:
    """Steps with trajectories; asserts each step is whole (`rows` rows) or absent."""
    counts = dict(store.db.execute("SELECT step, count(*) FROM trajectories WHERE run_id = ? GROUP BY step",
                                   [run_id]).fetchall())
    assert all(n == rows for n in counts.values()), f"a step is partly written: {counts}"
    return sorted(counts)


def test_two_writer_processes_and_a_polling_reader_keep_the_store_intact(tmp_path, fault):
    steps, rows = 30, 32
    db = tmp_path / "wb.db"
    with Store(db) as store:
        runs = [store.create_run(f"writer-{i}", {"i": i}, steps) for i in range(2)]
    stop = tmp_path / "stop"
    reader = subprocess.Popen([*WORKERS, "reader", str(db), str(stop)], cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    writers = [subprocess.Popen([*WORKERS, "writer", str(db), r, str(steps), str(rows)], cwd=ROOT,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in runs]
    fault.inject("two writer processes (two runs) and a polling reader (the page) on one SQLite file at once")
    try:
        outs = [w.communicate(timeout=300) for w in writers]
    finally:
        stop.touch()
        rout, rerr = reader.communicate(timeout=120)
    for w, (out, err) in zip(writers, outs):
        assert w.returncode == 0, err[-2000:]
        assert out.split() [-1] == str(steps)  # "committed 30" came last
    assert reader.returncode == 0, rerr[-2000:]
    report = json.loads(rout.strip().splitlines()[-1])
    assert report["n_errors"] == 0, report["errors"]
    assert report["polls"] > 0
    for run_id in runs:  # the page only ever saw whole steps, never fewer rows than before
        seen = report["seen"].get(run_id, [])
        assert all(n % rows == 0 for n in seen), sorted(set(seen))
        assert seen == sorted(seen)
    assert _integrity(db) == "ok"
    with Store(db) as store:
        for run_id in runs:
            present = _steps_present(store, run_id, rows)
            fault.lost((steps - len(present)) * rows)
            assert present == list(range(1, steps + 1))
            assert len(store.run_metrics(run_id)) == 2 * steps
            assert store.get_run(run_id)["status"] == "completed"
            assert store.count_trajectories(run_id, query="reasoning") == steps * rows  # search index in step


def test_kill_9_of_a_writer_mid_transaction_keeps_every_committed_step(tmp_path, fault):
    rows = 4000  # a step's transaction takes a while: the kill lands inside one
    db = tmp_path / "wb.db"
    with Store(db) as store:
        run_id = store.create_run("killed-writer", {}, 1000)
    proc = subprocess.Popen([*WORKERS, "writer", str(db), run_id, "1000", str(rows)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    committed = 0
    try:
        while committed < 3:  # a few whole steps first, then kill in the middle of the next
            line = proc.stdout.readline()
            assert line, proc.stderr.read()[-2000:]
            committed = int(line.split()[1])
        time.sleep(0.3)
        proc.send_signal(signal.SIGKILL)
        fault.inject("kill -9 of a store writer process in the middle of a step's transaction")
        rest, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    committed = max([committed] + [int(x.split()[1]) for x in rest.splitlines() if x.startswith("committed")])
    assert _integrity(db) == "ok"
    with Store(db) as store:  # opening it recovers the hot WAL
        present = _steps_present(store, run_id, rows)  # whole steps only: the torn one rolled back
        fault.lost(len(set(range(1, committed + 1)) - set(present)) * rows)
        assert present[: committed] == list(range(1, committed + 1))
        assert len(present) <= committed + 1  # at most the step whose "committed" line the kill cut off
        assert store.get_run(run_id)["status"] == "running"  # the liveness check marks it failed
        from backend.runs import refresh_liveness

        assert refresh_liveness(store) == [run_id]
        assert store.get_run(run_id)["status"] == "failed"
        store.record_metrics(run_id, 999, {"after": 1.0})  # and the store takes writes again
    assert _integrity(db) == "ok"


@pytest.fixture
def tiny_disk(tmp_path):
    """A real 2 MiB tmpfs mounted for the test (needs root and mount rights; else skipped)."""
    with mounted_tmpfs(tmp_path / "disk", "2m") as mnt:
        yield mnt


def test_a_full_disk_under_the_store_fails_writes_cleanly_and_keeps_what_was_written(tiny_disk, fault):
    from tests.reliability.store_workers import samples

    db = tiny_disk / "wb.db"
    rows = 16
    with Store(db) as store:
        run_id = store.create_run("full", {}, 10_000)
        written, error = 0, None
        for step in range(1, 10_000):
            try:
                store.record_trajectories(run_id, step, samples(step, rows, width=2000))
            except sqlite3.OperationalError as e:
                error = e
                break
            written = step
        fault.inject("ENOSPC under the store: its 2 MiB tmpfs filled up by trajectory writes")
        assert error is not None and "full" in str(error), error
        assert written >= 1
        present = _steps_present(store, run_id, rows)  # the failed step rolled back whole
        fault.lost((written - len(present)) * rows)
        assert present == list(range(1, written + 1))
        assert store.get_run(run_id)["status"] == "pending"  # the row is readable and unchanged
    assert _integrity(db) == "ok"
    for f in tiny_disk.glob("wb.db*"):  # free space the way a user would: move the store away
        (tiny_disk.parent / f.name).write_bytes(f.read_bytes())
        f.unlink()
    moved = tiny_disk.parent / "wb.db"
    assert _integrity(moved) == "ok"
    with Store(moved) as store:
        assert _steps_present(store, run_id, rows) == list(range(1, written + 1))
        store.record_trajectories(run_id, written + 1, samples(written + 1, rows))  # writable again


def _fill_run(store: Store) -> str:
    """A finished run with a row in every table an export carries; unicode and control text included."""
    from tests.reliability.store_workers import samples

    run_id = store.create_run("exported", {"model": "tiny", "learning_rate": 1e-3, "note": "ünï\tcode ✓"}, 3)
    for step in (1, 2, 3):
        batch = samples(step, 8)
        batch[0].turns = [{"text": "<tool_call>{}</tool_call>", "observation": "exit code 0\x1b[31m", "ms": 3.5}]
        batch[1].retrieval = {"context_tokens": 100, "fragments": [{"doc": "a", "score": 0.5}]}
        batch[2].completion.text = "line\r\nnul-free \u202e reversed \U0001F600"
        store.record_trajectories(run_id, step, batch)
        store.record_metrics(run_id, step, {"reward/mean": step / 10, "kl": 0.001})
        store.record_checkpoint(run_id, step, f"/somewhere/{run_id}/step-{step}")
    store.record_evaluation(run_id, "after", "chain_sum", n=4, accuracy=0.25, mean_reward=0.3, format_rate=1.0,
                            model="tiny")
    store.record_sandbox_executions([{"kind": "exec", "outcome": "ok", "exit_code": 0, "latency_ms": 5.0,
                                      "queue_ms": 0.1, "attempts": 1, "sandbox": "s1", "backend": "docker",
                                      "command": "ls", "error": None}], run_id=run_id, step=1)
    store.record_pool_state(run_id, {"backend": "docker", "isolation": "container", "size": 2, "idle": 2, "busy": 0,
                                     "replaced": 0, "orphans_collected": 0}, status="closed")
    store.set_status(run_id, "completed")
    return run_id


def _table_rows(store: Store, run_id: str) -> dict[str, list]:
    from backend.store_export import _QUERIES, RUN_TABLES

    out = {}
    for table in RUN_TABLES:
        key = "id" if table == "runs" else "run_id"
        sql = _QUERIES.get(table, f"SELECT * FROM [{table}] WHERE [{key}] = ? ORDER BY rowid")
        rows = [dict(r) for r in store.db.query(sql, [run_id])]
        for r in rows:  # ids an import assigns afresh
            r.pop("id" if table in ("trajectories", "sandbox_executions", "runs", "eval_runs") else "", None)
            r.pop("eval_id", None)
            r.pop("run_id", None)
            r.pop("pid", None)
        out[table] = rows
    return out


def test_a_run_export_cut_short_in_transit_is_refused_and_the_whole_file_round_trips(tmp_path, fault):
    src, dst = tmp_path / "a.db", tmp_path / "b.db"
    path = tmp_path / "run.rlwb.jsonl.gz"
    with Store(src) as store:
        run_id = _fill_run(store)
        before = _table_rows(store, run_id)
    rc = subprocess.run([sys.executable, "-m", "backend.cli", "--db", str(src), "runs", "export", run_id, "-o",
                         str(path)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert rc.returncode == 0, rc.stderr
    data = path.read_bytes()
    cut = tmp_path / "cut.rlwb.jsonl.gz"
    cut.write_bytes(data[: len(data) // 2])  # a copy interrupted half way
    lines = gzip.decompress(data).splitlines()
    no_trailer = tmp_path / "no-trailer.rlwb.jsonl.gz"
    no_trailer.write_bytes(gzip.compress(b"\n".join(lines[:-5] + lines[-1:]) + b"\n"))  # rows dropped, trailer kept
    flipped = bytearray(data)
    flipped[len(data) // 2] ^= 0xFF
    corrupt = tmp_path / "corrupt.rlwb.jsonl.gz"
    corrupt.write_bytes(bytes(flipped))
    fault.inject("a run export cut short, stripped of rows, or with a flipped byte, then imported", times=3)
    for bad in (cut, no_trailer, corrupt):
        res = subprocess.run([sys.executable, "-m", "backend.cli", "--db", str(dst), "runs", "import", str(bad)],
                             cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert res.returncode == 2 and "nothing was imported" in res.stderr, (bad.name, res.stderr)
        assert "Traceback" not in res.stderr
    with Store(dst) as store:
        assert store.list_runs() == [] and store.db.execute("SELECT count(*) FROM trajectories").fetchone()[0] == 0
    res = subprocess.run([sys.executable, "-m", "backend.cli", "--db", str(dst), "runs", "import", str(path)],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    with Store(dst) as store:
        after = _table_rows(store, run_id)
        fault.lost(sum(len(before[t]) - len(after[t]) for t in before))
        assert after == before
        assert store.count_trajectories(run_id, query="reversed") == 3  # searchable after import
    assert _integrity(dst) == "ok"
