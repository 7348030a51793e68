"""A warm pool of sandboxes and a scheduler that spreads sandboxed jobs over it.

    pool = SandboxPool("docker", SandboxSpec(), size=4).start()   # GC of orphans, 4 warm containers
    sched = Scheduler(pool, max_retries=2)
    results = sched.run([SandboxJob(command="python3 main.py", files={"main.py": src})])
    results[0].result.exit_code, results[0].fault      # 0, None
    sched.metrics()    # {"queue_depth": 0, "latency_p50_ms": 95.0, "failures/timeout": 0, ...}
    pool.close()

The pool keeps `size` started sandboxes; `lease()` hands one out and, on return, resets it
(every process killed, workspace restored from the snapshot taken at start, the workspace
directory itself given its type, mode and owner back) so no task sees another's files or
inherits a ``chmod 000 /workspace``. A sandbox whose reset fails (container died, engine
error) or can't be verified (`Sandbox.reset`: the directory not as at start, a probe file
the sandbox user can't write, a process left) is closed and replaced, and counted in
``state()["replaced"]``; the next task gets a fresh one. Jobs (`Scheduler`, clean=False)
reset at their start instead (`Sandbox.run_fresh`), with the same check: one that fails is
a harness fault, retried on the replacement. A background thread collects orphaned
containers (owner process gone) every `gc_interval_s`, and `start()` collects them first,
so a killed orchestrator leaves nothing behind after the next start.

The scheduler runs jobs with bounded concurrency (a thread per slot, jobs queued in
order). A *harness fault* (engine error, container died mid-job) is retried on a fresh
sandbox up to `max_retries` times; if it persists the job's result carries
``fault="harness"`` and no `ExecResult`, and callers must not score it as reward 0 for the
model. Program failures (non-zero exit, timeout, OOM) are results, not faults.

Not covered: durable queues across processes (`sandboxes.jobqueue`), multi-turn episodes
(they hold a lease for the whole episode; see `domains.terminal.env`).
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from core.errors import ConfigError, SandboxError, SandboxTimeout, WorkbenchError
from sandboxes import sandbox_class
from sandboxes.base import Sandbox
from sandboxes.spec import ExecResult, SandboxSpec


@dataclass
class SandboxJob:
    """One unit of sandboxed work: write files into a clean workspace, run one command.

    Attributes:
        command: shell command run in /workspace as the sandbox user.
        files: workspace-relative path -> text content, written before the command.
        timeout_s: the command's wall-clock limit in seconds (None: the spec's default).
        stdin: text fed to the command's standard input.
        kind: a label for metrics and the page (usually the domain name).
        id: unique id (generated when not given).
    """

    command: str
    files: dict[str, str] = field(default_factory=dict)
    timeout_s: float | None = None
    stdin: str | None = None
    kind: str = "exec"
    id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])


@dataclass
class JobResult:
    """Outcome of a `SandboxJob`.

    Attributes:
        job_id: the job's id.
        kind: the job's kind.
        result: the command's `ExecResult`, or None after a harness fault.
        fault: None; "harness" when the sandbox machinery failed on every attempt; "invalid"
            when the job itself is malformed (a path outside the workspace, a bad timeout).
        error: the last harness error message ("" if none).
        attempts: how many times the job ran (1 + retries).
        queue_ms: time from submission to start, milliseconds.
        latency_ms: time from start to result (files + command + retries), milliseconds.
        sandbox_id: the sandbox that produced the result.
    """

    job_id: str
    kind: str
    result: ExecResult | None
    fault: str | None = None
    error: str = ""
    attempts: int = 1
    queue_ms: float = 0.0
    latency_ms: float = 0.0
    sandbox_id: str = ""

    @property
    def outcome(self) -> str:
        """ok, error, timeout, oom (from the ExecResult), harness or invalid."""
        return self.fault if self.result is None else self.result.outcome


class SandboxPool:
    """`size` warm sandboxes of one backend and spec, reused across tasks.

    Args:
        backend: "docker" or "local".
        spec: the spec every sandbox gets.
        size: number of warm sandboxes (>= 1).
        labels: extra labels for the containers (Docker).
        gc_interval_s: seconds between orphan collections (0 disables the thread).
    """

    def __init__(self, backend: str = "docker", spec: SandboxSpec | None = None, size: int = 4,
                 labels: dict[str, str] | None = None, gc_interval_s: float = 60.0) -> None:
        if not isinstance(size, int) or size < 1:
            raise ConfigError(f"sandbox pool size must be an int >= 1, got {size!r}")
        self.backend, self.spec, self.size = backend, spec or SandboxSpec(), size
        self.labels = dict(labels or {})
        self._cls = sandbox_class(backend)
        self._idle: queue.Queue[Sandbox] = queue.Queue()
        self._all: set[Sandbox] = set()
        self._dirty: set[Sandbox] = set()  # used by a job; reset on the next clean acquire
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._gc_interval = gc_interval_s
        self.replaced = 0
        self.orphans_collected = 0

    @property
    def isolation(self) -> str:
        return self._cls.isolation

    def start(self) -> "SandboxPool":
        """Collect orphaned containers, then start the warm sandboxes.

        Raises:
            SandboxUnavailable, SandboxError: the backend can't start sandboxes.
        """
        self.collect_garbage()
        try:
            for _ in range(self.size):
                self._add()
        except BaseException:
            self.close()
            raise
        if self._gc_interval > 0:
            threading.Thread(target=self._gc_loop, name="sandbox-gc", daemon=True).start()
        return self

    def collect_garbage(self) -> int:
        """Remove orphaned sandboxes of dead owners (Docker); returns how many."""
        if self.backend != "docker":
            return 0
        # on first use: it pulls in docker
        from sandboxes.docker_backend import collect_garbage

        n = collect_garbage()
        self.orphans_collected += n
        return n

    def _gc_loop(self) -> None:
        while not self._closed.wait(self._gc_interval):
            with contextlib.suppress(SandboxError):
                self.collect_garbage()

    def _add(self) -> None:
        sb = self._cls(self.spec, self.labels).start()
        with self._lock:
            self._all.add(sb)
        self._idle.put(sb)

    def _discard(self, sb: Sandbox) -> None:
        with self._lock:
            self._all.discard(sb)
        with contextlib.suppress(SandboxError):
            sb.close()

    def acquire(self, timeout_s: float | None = None, clean: bool = True) -> Sandbox:
        """Take an idle sandbox, waiting up to `timeout_s` (None: forever).

        Args:
            clean: reset it first if its last user left it dirty (jobs that start with
                `Sandbox.run_fresh` skip this, since they reset in the same round trip).

        Raises:
            SandboxError: the pool is closed, none became free in time, or no replacement
                for a broken one could be started.
        """
        if self._closed.is_set():
            raise SandboxError("sandbox pool is closed")
        try:
            sb = self._idle.get(timeout=timeout_s)
        except queue.Empty:
            raise SandboxError(f"no sandbox free within {timeout_s} s (pool size {self.size})") from None
        if clean and sb in self._dirty:
            try:
                sb.reset()
                self._dirty.discard(sb)
            except SandboxError:
                self.replace(sb)
                return self.acquire(timeout_s, clean)
        return sb

    def release(self, sb: Sandbox, reset: bool = True) -> None:
        """Make a sandbox available again: reset it now, or (reset=False) mark it dirty so
        the next `acquire(clean=True)` resets it. A failed reset replaces it."""
        if self._closed.is_set():
            self._discard(sb)
            return
        if not reset:
            self._dirty.add(sb)
            self._idle.put(sb)
            return
        try:
            sb.reset()
            self._dirty.discard(sb)
            self._idle.put(sb)
        except SandboxError:
            self.replace(sb)

    def replace(self, sb: Sandbox) -> None:
        """Close a broken sandbox (or one whose reset could not be verified) and start a fresh
        one in its place; counted in `state()["replaced"]`.

        Raises:
            SandboxError: the replacement could not be started.
        """
        self._discard(sb)
        self._dirty.discard(sb)
        self.replaced += 1
        if not self._closed.is_set():
            self._add()

    @contextlib.contextmanager
    def lease(self, timeout_s: float | None = None, clean: bool = True) -> Iterator[Sandbox]:
        """`acquire` ... `release` as a context manager. With clean=False the sandbox is
        neither reset before nor after (the user resets it, e.g. with `run_fresh`). A
        `SandboxError` inside the block replaces the sandbox, then propagates."""
        sb = self.acquire(timeout_s, clean)
        try:
            yield sb
        except SandboxError as e:
            if isinstance(e, SandboxTimeout):
                self.release(sb, reset=clean)
            else:
                with contextlib.suppress(SandboxError):
                    self.replace(sb)
            raise
        except BaseException:
            self.release(sb, reset=clean)
            raise
        self.release(sb, reset=clean)

    def state(self) -> dict:
        """Pool state for the page: backend, isolation, size, idle, busy, replaced, orphans collected."""
        with self._lock:
            total = len(self._all)
        idle = self._idle.qsize()
        return {"backend": self.backend, "isolation": self.isolation, "size": self.size, "idle": idle,
                "busy": total - idle, "replaced": self.replaced, "orphans_collected": self.orphans_collected}

    def close(self) -> None:
        """Close every sandbox of the pool. Safe to call twice."""
        self._closed.set()
        with self._lock:
            members, self._all = list(self._all), set()
        for sb in members:
            with contextlib.suppress(SandboxError):
                sb.close()

    def __enter__(self) -> "SandboxPool":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()


def run_job(sb: Sandbox, job: SandboxJob) -> ExecResult:
    """Run a job in `sb` from a clean workspace (`Sandbox.run_fresh`; no retry).

    Raises:
        SandboxError: harness fault.
    """
    return sb.run_fresh(job.command, job.files, timeout_s=job.timeout_s, stdin=job.stdin)


class Scheduler:
    """Runs `SandboxJob`s on a pool with bounded concurrency and retries of harness faults.

    Args:
        pool: a started `SandboxPool`.
        concurrency: jobs in flight at once (default: the pool size).
        max_retries: extra attempts after a harness fault (0 disables retries).
    """

    def __init__(self, pool: SandboxPool, concurrency: int | None = None, max_retries: int = 2) -> None:
        self.pool = pool
        self.concurrency = concurrency or pool.size
        if self.concurrency < 1 or max_retries < 0:
            raise ConfigError("scheduler concurrency must be >= 1 and max_retries >= 0")
        self.max_retries = max_retries
        self._executor = ThreadPoolExecutor(self.concurrency, thread_name_prefix="sandbox-job")
        self._lock = threading.Lock()
        self._pending = 0
        self._latencies: list[float] = []
        self._outcomes: Counter[str] = Counter()
        self._retries = 0
        self.records: list[dict] = []  # one row per finished job, drained by `drain_records`

    def submit(self, job: SandboxJob):
        """Queue a job; returns a `concurrent.futures.Future` of its `JobResult`."""
        with self._lock:
            self._pending += 1
        return self._executor.submit(self._run, job, time.monotonic())

    def run(self, jobs: list[SandboxJob]) -> list[JobResult]:
        """Run jobs (concurrently, up to `concurrency`) and return their results in order."""
        return [f.result() for f in [self.submit(j) for j in jobs]]

    def _run(self, job: SandboxJob, submitted: float) -> JobResult:
        start = time.monotonic()
        attempts, error, result, sandbox_id = 0, "", None, ""
        fault = None
        while attempts <= self.max_retries and result is None and fault is None:
            attempts += 1
            try:
                with self.pool.lease(clean=False) as sb:
                    sandbox_id = sb.id or ""
                    result = run_job(sb, job)
            except SandboxError as e:
                error = str(e)
            except WorkbenchError as e:  # the job itself is malformed (bad path, timeout): no retry
                fault, error = "invalid", str(e)
        done = time.monotonic()
        if result is None and fault is None:
            fault = "harness"
        out = JobResult(job.id, job.kind, result, fault, error, attempts,
                        (start - submitted) * 1000, (done - start) * 1000, sandbox_id[:12])
        self._account(out)
        return out

    def _account(self, r: JobResult) -> None:
        with self._lock:
            self._pending -= 1
            self._latencies.append(r.latency_ms)
            self._outcomes[r.outcome] += 1
            self._retries += r.attempts - 1
            self.records.append({
                "job_id": r.job_id, "kind": r.kind, "outcome": r.outcome, "attempts": r.attempts,
                "queue_ms": round(r.queue_ms, 2), "latency_ms": round(r.latency_ms, 2), "sandbox": r.sandbox_id,
                "backend": self.pool.backend, "exit_code": None if r.result is None else r.result.exit_code,
                "error": r.error[:500],
            })

    def drain_records(self) -> list[dict]:
        """The per-job rows collected since the last call (for the store)."""
        with self._lock:
            rows, self.records = self.records, []
        return rows

    def metrics(self, reset: bool = False) -> dict[str, float]:
        """Queue depth, jobs, latency p50/p99 (ms), failures by kind, retries.

        Args:
            reset: start a new measurement window after reading.
        """
        with self._lock:
            lat = sorted(self._latencies)
            out = {"queue_depth": float(self._pending), "jobs": float(len(lat)), "retries": float(self._retries),
                   "latency_p50_ms": percentile(lat, 50), "latency_p99_ms": percentile(lat, 99)}
            for kind in ("error", "timeout", "oom", "harness", "invalid"):
                out[f"failures/{kind}"] = float(self._outcomes[kind])
            if reset:
                self._latencies, self._outcomes, self._retries = [], Counter(), 0
        return out

    def close(self) -> None:
        """Wait for running jobs and stop the worker threads (the pool stays open)."""
        self._executor.shutdown(wait=True, cancel_futures=True)


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (numpy's linear interpolation), 0.0 when empty."""
    return float(np.percentile(values, q)) if values else 0.0
