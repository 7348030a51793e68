"""A durable queue of sandbox jobs in SQLite, so a killed orchestrator loses nothing.

    q = JobQueue("jobs.db")
    q.enqueue([SandboxJob("python3 main.py", files={"main.py": src})])
    q.work(Scheduler(pool))          # claims, runs and completes jobs until none is pending
    q.counts()                       # {"pending": 0, "running": 0, "done": 1}

Each job row moves pending -> running (claimed by ``<host>:<pid>``) -> done (with its
result) in single transactions; completing is conditional on the claim, so a job is never
counted twice. `recover` puts back to pending every running job whose owner process is
dead; `work` calls it first. Together with the Docker garbage collector (containers of dead
owners) a ``kill -9`` of the orchestrator mid-batch is survived: restart, and the
unfinished jobs run again.

Not covered: several machines sharing one queue (SQLite wants one host), priorities.
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import asdict
from pathlib import Path

import sqlite_utils

from sandboxes.owners import owner_alive, owner_tag
from sandboxes.pool import JobResult, SandboxJob, Scheduler


class JobQueue:
    """Sandbox jobs persisted in a SQLite table ``sandbox_jobs``.

    Args:
        path: database file (created if missing); WAL mode, 30 s busy timeout.
    """

    def __init__(self, path: str | Path) -> None:
        conn = sqlite3.connect(str(path), timeout=30, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        self.db = sqlite_utils.Database(conn)
        if "sandbox_jobs" not in self.db.table_names():
            self.db["sandbox_jobs"].create({
                "id": str, "job": str, "status": str, "owner": str, "attempts": int, "result": str,
                "enqueued_at": float, "finished_at": float,
            }, pk="id", not_null={"job", "status"})
            self.db["sandbox_jobs"].create_index(["status"])

    def enqueue(self, jobs: list[SandboxJob]) -> None:
        """Add jobs as pending (a job id already queued is left as it is)."""
        now = time.time()
        with self.db.conn:
            self.db["sandbox_jobs"].insert_all(
                [{"id": j.id, "job": json.dumps(asdict(j)), "status": "pending", "attempts": 0, "enqueued_at": now}
                 for j in jobs], ignore=True)

    def recover(self) -> int:
        """Return to pending every running job whose owner process is dead; returns how many."""
        dead = [r["owner"] for r in self.db.query(
            "select distinct owner from sandbox_jobs where status = 'running'") if not owner_alive(r["owner"] or "")]
        n = 0
        with self.db.conn:
            for owner in dead:
                n += self.db.execute("update sandbox_jobs set status = 'pending', owner = null "
                                     "where status = 'running' and owner = ?", [owner]).rowcount
        return n

    def claim(self, n: int) -> list[SandboxJob]:
        """Mark up to n pending jobs as running by this process and return them."""
        owner = owner_tag()
        with self.db.conn:
            self.db.execute("BEGIN IMMEDIATE")
            ids = [r["id"] for r in self.db.query(
                "select id from sandbox_jobs where status = 'pending' order by enqueued_at, id limit ?", [n])]
            for job_id in ids:
                self.db.execute("update sandbox_jobs set status = 'running', owner = ?, attempts = attempts + 1 "
                                "where id = ?", [owner, job_id])
        return [SandboxJob(**json.loads(self.db["sandbox_jobs"].get(i)["job"])) for i in ids]

    def complete(self, result: JobResult) -> bool:
        """Store a result if this process still holds the job's claim; returns whether it did."""
        payload = {"outcome": result.outcome, "fault": result.fault, "error": result.error,
                   "attempts": result.attempts, "latency_ms": result.latency_ms,
                   "exec": None if result.result is None else result.result.to_dict()}
        with self.db.conn:
            cur = self.db.execute(
                "update sandbox_jobs set status = 'done', result = ?, finished_at = ? "
                "where id = ? and status = 'running' and owner = ?",
                [json.dumps(payload), time.time(), result.job_id, owner_tag()])
        return cur.rowcount == 1

    def counts(self) -> dict[str, int]:
        """Jobs by status."""
        out = {"pending": 0, "running": 0, "done": 0}
        for r in self.db.query("select status, count(*) as n from sandbox_jobs group by status"):
            out[r["status"]] = r["n"]
        return out

    def results(self) -> dict[str, dict]:
        """job id -> stored result, for finished jobs."""
        return {r["id"]: json.loads(r["result"]) for r in self.db.query(
            "select id, result from sandbox_jobs where status = 'done'")}

    def work(self, scheduler: Scheduler, batch: int | None = None) -> int:
        """Recover orphaned jobs, then run pending jobs on `scheduler` until none is left.

        Returns:
            The number of jobs this call completed.
        """
        self.recover()
        batch = batch or scheduler.concurrency
        done = 0
        while jobs := self.claim(batch):
            futures = [scheduler.submit(j) for j in jobs]
            for f in futures:
                done += self.complete(f.result())
        return done
