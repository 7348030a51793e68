"""Upstream code (reasoning-gym generators and verifiers) run in worker processes, with a
hard time limit that holds on any thread.

    pool = WorkerPool(preload=("domains.reasoning_gym.domain", "reasoning_gym"))
    value = pool.call(fn, *args, seconds=5.0, what="scoring a chain_sum answer")
    # fn(*args) ran in a worker; past 5 s: GenerationTimeout, the worker is killed and replaced

reasoning-gym's generators and scorers are pure Python that may loop for a very long time on
rare inputs (number_sequence on some seeds), and they are called hundreds of times per step
from whichever thread rolls out (with ``overlap: true`` that is a background thread). A limit
built on SIGALRM holds on the main thread only; an exception injected into a thread is
swallowed by upstream ``except:`` clauses and never stops C code; a thread that runs on
can't be stopped at all. So `call` runs ``fn(*args)`` in a persistent worker process and
waits for it at most `seconds`: a call that runs past its limit is abandoned, its worker is
killed (SIGKILL) and dropped, and the caller gets `GenerationTimeout`; the next call starts
a fresh worker. Measured here (bench/upstream_calls.py, a 2-core host under load 4-6): a
chain_sum answer scored in-process under SIGALRM took 0.04 ms, through a persistent worker
0.38 ms (+0.17 s per step of 512 answers), in a fork per call 65 ms (+33 s per step).

Workers start on demand, one per thread that calls at the same time, each a fresh
interpreter that imports `preload` first (~2-3 s and ~120 MB here; not counted against any
call's limit), and are kept between calls (at most `MAX_IDLE` idle), so what a worker caches
(built datasets) serves its later calls. A `Setup` names work a worker does once before
its first call of a kind (building a dataset), under its own limit. Every call in a worker
runs with stdout captured (bf's interpreter prints) and in its own decimal context
(decimal_arithmetic changes the precision of the thread it runs in).

Arguments, results and exceptions cross the process boundary pickled: functions go by
reference (module-level functions and bound methods of picklable objects); an exception
that can't be pickled arrives as a RuntimeError naming its type.

Workers run with `PYTHONHASHSEED` = `WORKER_HASH_SEED`, so a generator that iterates a set
of strings makes the same task in every worker of every run (the parent's hash seed is
random per process).

Not covered: a security boundary (a worker runs as the same user, with the same files and
network; answers that upstream code evaluates are screened by `domains.answer_guard`
first), memory limits, and platforms other than POSIX (the socket is passed as an
inherited file descriptor).
"""

from __future__ import annotations

import atexit
import contextlib
import decimal
import io
import json
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Hashable
from importlib import metadata
from multiprocessing import Pipe
from multiprocessing.connection import Connection
from typing import Any, NamedTuple

from core.errors import GenerationTimeout, UpstreamCrash


def package_version(distribution: str) -> str:
    """The installed version of a distribution ("reasoning-gym" -> "0.1.25"), or "not
    installed": what a domain's `source` names, and so what its shipped validation is of."""
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "not installed"

# Every worker hashes strings alike: generators that iterate a set of strings (reasoning-core's
# planning, table_qa, logic_qa ...; reasoning-gym's ransom_note, word_ladder ...) give the
# same task for a seed in every process and on every machine, whatever the parent's seed.
WORKER_HASH_SEED = "0"
START_TIMEOUT_S = 120.0  # a fresh worker must have imported its preload modules by then
MAX_IDLE = 4  # idle workers kept for later calls; more are closed
PARENT_CHECK_S = 1.0  # a worker whose parent is gone exits within this

# The worker's entry: the parent's import path, then `serve` on the inherited socket.
_BOOT = ("import json, sys; sys.path[:0] = json.loads(sys.argv[1]); "
         "from domains.upstream import serve; serve(int(sys.argv[2]), json.loads(sys.argv[3]))")


class Setup(NamedTuple):
    """Work a worker does once before its first call that names `key` (e.g. building the
    dataset the call needs): ``fn()`` under a limit of `seconds`, reported as `what` if it
    runs past it."""

    key: Hashable
    fn: Callable[[], Any]
    seconds: float
    what: str


class _Worker:
    """One worker process and the parent's end of its socket."""

    def __init__(self, preload: tuple[str, ...]) -> None:
        ours, theirs = Pipe(duplex=True)
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", _BOOT, json.dumps(sys.path), str(theirs.fileno()), json.dumps(preload)],
                pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                env={**os.environ, "PYTHONHASHSEED": WORKER_HASH_SEED})
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self.conn: Connection = ours
        self.prepared: set[Hashable] = set()
        self.busy = False  # a request was sent and its reply not read: unusable unless it comes
        try:
            if not self.conn.poll(START_TIMEOUT_S):
                raise UpstreamCrash(f"the upstream worker did not start within {START_TIMEOUT_S:g} s")
            status, value, _ = self.conn.recv()
        except (EOFError, OSError) as e:
            self.kill()
            raise UpstreamCrash(f"the upstream worker ended while starting (exit code {self.proc.poll()}); "
                                "its error is on stderr") from e
        except BaseException:
            self.kill()
            raise
        if status != "ready":
            self.kill()
            raise UpstreamCrash(f"the upstream worker could not import {', '.join(preload)}: {value}")

    @property
    def pid(self) -> int:
        return self.proc.pid

    def run(self, fn: Callable, args: tuple, seconds: float, what: str) -> tuple[Any, float]:
        """``fn(*args)`` in this worker: (its value, the worker's CPU seconds for it).

        Raises:
            GenerationTimeout: no reply within `seconds`; the worker is killed.
            UpstreamCrash: the worker died during the call.
            whatever ``fn`` raised (re-raised here).
        """
        request = pickle.dumps((fn, args))  # an unpicklable argument fails here, nothing sent
        self.busy = True
        try:
            self.conn.send_bytes(request)
            if not self.conn.poll(seconds):
                self.kill()
                raise GenerationTimeout(f"{what} took over {seconds:g} s")
            status, value, cpu = self.conn.recv()
        except (EOFError, OSError) as e:
            self.kill()
            raise UpstreamCrash(f"{what}: the upstream worker died (exit code {self.proc.poll()})") from e
        self.busy = False
        if status == "error":
            raise value
        return value, cpu

    def close(self) -> None:
        """End an idle worker: it exits when its socket closes; killed if it doesn't."""
        self.conn.close()
        try:
            self.proc.wait(timeout=PARENT_CHECK_S)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        self.busy = True  # never handed out again
        with contextlib.suppress(OSError):
            self.proc.kill()
        self.proc.wait()
        self.conn.close()


class WorkerPool:
    """Worker processes that run upstream calls under a time limit (see the module docstring).

    Args:
        preload: Modules every worker imports before it reports ready (their import time
            is not counted against any call).

    Thread-safe: each calling thread gets a worker of its own for the length of a call.
    """

    def __init__(self, preload: tuple[str, ...] = ()) -> None:
        self.preload = tuple(preload)
        self._idle: list[_Worker] = []
        self._all: set[_Worker] = set()
        self._lock = threading.Lock()
        self._cpu = threading.local()
        self._hooked = False

    def call(self, fn: Callable, *args: Any, seconds: float, what: str, setup: Setup | None = None) -> Any:
        """``fn(*args)`` run in a worker process, waited for at most `seconds`.

        Args:
            fn: A picklable callable (module-level function, bound method of a picklable
                object); args: picklable arguments.
            seconds: Wall-clock limit of the call, not counting worker start or `setup`.
            what: What the call does, for the timeout's message ("scoring a ... answer").
            setup: Done first, once per worker, under its own limit (see `Setup`).

        Returns:
            What ``fn`` returned (a pickled copy).

        Raises:
            GenerationTimeout: the call (or its setup) ran past its limit ("<what> took over
                N s"); its worker was killed, the next call gets a fresh one.
            UpstreamCrash: the worker died during the call or could not start.
            whatever ``fn`` raised.
        """
        worker = self._checkout()
        try:
            if setup is not None and setup.key not in worker.prepared:
                _, cpu = worker.run(setup.fn, (), setup.seconds, setup.what)
                self._add_cpu(cpu)
                worker.prepared.add(setup.key)
            value, cpu = worker.run(fn, args, seconds, what)
            self._add_cpu(cpu)
            return value
        finally:
            self._checkin(worker)

    def cpu_time(self) -> float:
        """CPU seconds the workers spent on this thread's calls so far (cumulative, like
        `time.thread_time`; calls that timed out are not counted)."""
        return getattr(self._cpu, "seconds", 0.0)

    def reset(self, fn: Callable[[], Any], seconds: float = 30.0) -> None:
        """Run ``fn()`` in every idle worker (to clear its caches) and forget what they set up.
        Workers busy on other threads are left as they are."""
        with self._lock:
            idle, self._idle = self._idle, []
        for w in idle:
            w.prepared.clear()
            try:
                w.run(fn, (), seconds, "resetting an upstream worker")
            except Exception:  # noqa: BLE001 - a worker that can't reset is dropped
                w.kill()
            self._checkin(w)

    def close(self) -> None:
        """End every worker (idle ones cleanly; busy ones are killed)."""
        with self._lock:
            idle, self._idle = self._idle, []
            busy, self._all = self._all - set(idle), set()
        for w in idle:
            w.close()
        for w in busy:
            w.kill()

    def pids(self) -> list[int]:
        """Process ids of the live workers (for tests and diagnostics)."""
        with self._lock:
            return sorted(w.pid for w in self._all)

    def _checkout(self) -> _Worker:
        with self._lock:
            if self._idle:
                return self._idle.pop()
            if not self._hooked:  # first worker: clean up at exit, and never share them with a fork
                self._hooked = True
                atexit.register(self.close)
                os.register_at_fork(after_in_child=self._forget_inherited)
        worker = _Worker(self.preload)  # outside the lock: starting takes seconds
        with self._lock:
            self._all.add(worker)
        return worker

    def _checkin(self, worker: _Worker) -> None:
        with self._lock:
            if not worker.busy and len(self._idle) < MAX_IDLE:
                self._idle.append(worker)
                return
            self._all.discard(worker)
        if worker.busy:  # timed out, died or left mid-call (an interrupt): its state is unknown
            worker.kill()
        else:
            worker.close()

    def _add_cpu(self, seconds: float) -> None:
        self._cpu.seconds = self.cpu_time() + seconds

    def _forget_inherited(self) -> None:
        """In a forked child: the parent's workers are not ours (their sockets stay the parent's)."""
        self._idle, self._all, self._lock = [], set(), threading.Lock()


def _portable(e: BaseException) -> BaseException:
    """`e` if it survives pickling, else a RuntimeError that names it."""
    try:
        pickle.loads(pickle.dumps(e))
        return e
    except Exception:  # noqa: BLE001 - any unpicklable exception
        return RuntimeError(f"{type(e).__name__}: {e}")


def _watch_parent(parent: int) -> None:
    """Exit this worker once its parent is gone (even while a call still runs)."""
    while True:
        time.sleep(PARENT_CHECK_S)
        if os.getppid() != parent:
            os._exit(0)


def serve(fd: int, preload: list[str]) -> None:
    """The worker's loop: import `preload`, report ready, then answer ``(fn, args)``
    requests on socket `fd` until it closes. Run by the parent's `WorkerPool`, not by hand."""
    import importlib

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    conn = Connection(fd)
    try:
        for name in preload:
            importlib.import_module(name)
    except BaseException as e:  # noqa: BLE001 - reported to the parent, which raises it
        conn.send(("error", f"{type(e).__name__}: {e}", 0.0))
        return
    threading.Thread(target=_watch_parent, args=(os.getppid(),), daemon=True).start()
    conn.send(("ready", None, 0.0))
    while True:
        try:
            request = conn.recv_bytes()
        except (EOFError, OSError):
            return
        t0 = time.thread_time()
        try:
            fn, args = pickle.loads(request)
            with contextlib.redirect_stdout(io.StringIO()), decimal.localcontext():
                reply = ("ok", fn(*args))
        except BaseException as e:  # noqa: BLE001 - upstream code raises anything, SystemExit too
            reply = ("error", _portable(e))
        cpu = time.thread_time() - t0
        try:
            conn.send((*reply, cpu))
        except Exception as e:  # noqa: BLE001 - an unpicklable result
            conn.send(("error", RuntimeError(f"the result could not be sent back: {type(e).__name__}: {e}"), cpu))
