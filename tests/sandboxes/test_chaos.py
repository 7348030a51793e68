"""Chaos: kill -9 the scheduler process in the middle of 50 tasks, restart it, and check
that the garbage collector leaves no labelled container and every task ran exactly once."""

import os
import signal
import socket
import subprocess
import sys
import time

from sandboxes.docker_backend import OWNER_LABEL, labelled_containers
from sandboxes.jobqueue import JobQueue
from sandboxes.pool import SandboxJob

N_TASKS = 50


def _owned_by(owners: set[str]) -> list:
    return [c for c in labelled_containers() if c.labels.get(OWNER_LABEL) in owners]


def _worker(queue_path):
    return subprocess.Popen([sys.executable, "-m", "backend.cli", "sandbox", "work", "--queue", str(queue_path),
                             "--pool", "3"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_kill_9_mid_batch_loses_and_duplicates_nothing(docker_engine, tmp_path):
    queue = JobQueue(tmp_path / "jobs.db")
    # the first ten tasks are quick; the rest take a second each, so a task seen running is
    # still running when the kill lands a few milliseconds later, even on a loaded machine
    jobs = [SandboxJob(f"sleep {0.2 if i < 10 else 1}; echo task-{i}", kind="chaos", id=f"task-{i:02d}")
            for i in range(N_TASKS)]
    queue.enqueue(jobs)

    first = _worker(tmp_path / "jobs.db")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and first.poll() is None:
        c = queue.counts()
        if c["done"] >= 10 and c["running"] > 0:  # tasks in flight: kill now
            break
        time.sleep(0.02)
    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    mid = queue.counts()
    owners = {f"{socket.gethostname()}:{first.pid}"}
    assert _owned_by(owners), "the killed worker left its containers behind (the GC's work)"
    assert 10 <= mid["done"] < N_TASKS, mid  # killed in the middle, with work in flight
    assert mid["running"] > 0  # claimed by the dead worker; recovered by the next one

    second = _worker(tmp_path / "jobs.db")
    owners.add(f"{socket.gethostname()}:{second.pid}")
    out, _ = second.communicate(timeout=300)
    assert second.returncode == 0, out

    counts = queue.counts()
    assert counts == {"pending": 0, "running": 0, "done": N_TASKS}
    results = queue.results()
    assert sorted(results) == sorted(j.id for j in jobs)  # none lost; ids are unique, so none twice
    for job_id, res in results.items():
        assert res["outcome"] == "ok" and res["exec"]["stdout"] == f"task-{int(job_id[5:])}\n"
    assert _owned_by(owners) == []  # the dead worker's containers were collected, the second closed its own
