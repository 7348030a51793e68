"""Run manager: start runs in this process or in the background, stop and resume them, and
keep their status in the store honest.

`run_foreground` creates the run row only after the config has been validated, marks it
`running` with this process's pid, beats a heartbeat every `HEARTBEAT_S` seconds while it
lives, and whatever happens leaves it in a final state: `completed`, `stopped` (Ctrl-C or
SIGTERM; everything written so far is kept) or `failed` (error and traceback on the Runs
page).

`launch` starts a run as a background process (``python -m backend.runs work RUN_ID``, its
own session, output in the run directory's ``run.log``) that survives the page closing or
reloading; `stop` sends it SIGTERM; `resume` starts a stopped or failed run again from its
last checkpoint (see `trainer.checkpoints.ResumePoint`) after removing what later steps wrote.
`refresh_liveness` marks runs whose process is gone as failed, with the last completed
step.

Not covered: runs on other hosts (pids are checked on this machine; the store is one
SQLite file per host), restarting a run that has no checkpoint (clone its config instead).
"""

from __future__ import annotations

import argparse
import errno
import os
import signal
import subprocess
import sys
import threading
import traceback as tb
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

from trainer.config import RunConfig, parse_config
from core import allocator
from core.errors import ConfigError, WorkbenchError
from core.paths import run_dir
from backend.store import Store
from backend.user_domains import pin_user_domains, register_pinned
from trainer.checkpoints import ResumePoint

HEARTBEAT_S = 10.0  # a live run stamps heartbeat_at this often (seconds)
LAPSE_S = 120.0  # a pending run with no process after this long is failed (seconds)
PID_CLOCK_SLACK_S = 2.0  # a process's start time (psutil) may be off by up to 1 s (seconds)
LOG_NAME = "run.log"
STOP_REQUESTED = "stop requested"  # the run row's error while a stop signal is on its way


class RunStopped(KeyboardInterrupt):
    """Raised inside a run when it receives SIGTERM; handled like Ctrl-C."""


def _raise_stopped(signum, frame):  # pragma: no cover - exercised through a subprocess test
    raise RunStopped(f"by request (signal {signal.Signals(signum).name}: Stop on the page, "
                     "`rlwb runs stop` or kill)")


def log_path(store: Store, run_id: str) -> Path:
    """Where a background run's stdout and stderr go (``<run dir>/run.log``)."""
    return run_dir(store.get_run(run_id)["config"].get("output_dir"), run_id) / LOG_NAME


class _Heartbeat:
    """Stamps the run's heartbeat every `HEARTBEAT_S` seconds from a daemon thread."""

    def __init__(self, store: Store, run_id: str):
        self._store, self._run_id = store, run_id
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"heartbeat-{run_id}", daemon=True)

    def _beat(self) -> None:
        while not self._done.wait(HEARTBEAT_S):
            try:
                self._store.heartbeat(self._run_id)
            except Exception:  # noqa: BLE001 - a busy store must not kill the run; the next beat retries
                pass

    def __enter__(self) -> "_Heartbeat":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        self._thread.join(timeout=HEARTBEAT_S)


def run_foreground(cfg: RunConfig, store: Store,
                   on_step: Callable[[int, dict[str, float]], None] | None = None,
                   on_start: Callable[[str], None] | None = None,
                   run_id: str | None = None, resume=None) -> str:
    """Run a post-training job in this process.

    Args:
        cfg: a validated config (see `trainer.config.load_config`).
        store: where the run, its metrics and trajectories go.
        on_step: progress callback (step, metrics).
        on_start: called with the run id once the run row exists.
        run_id: an existing run row to run (a launched or resumed run); None creates one.
        resume: a `trainer.checkpoints.ResumePoint` to continue from (with `run_id`).

    Returns:
        The run id.

    Raises:
        KeyboardInterrupt: after marking the run `stopped` (Ctrl-C or SIGTERM).
        Exception: whatever failed, after marking the run `failed` with its traceback.
    """
    from trainer.loop import check_model_fits, train  # torch-heavy: the page and the CLI import this module

    if run_id is None:
        cfg = pin_user_domains(cfg, store)  # the user-domain versions the run records
        check_model_fits(cfg)  # a model too small for the prompts fails before the run row exists
        run_id = store.create_run(cfg.name, cfg.model_dump(mode="json"), cfg.steps)
    if on_start:
        on_start(run_id)
    previous = signal.signal(signal.SIGTERM, _raise_stopped)
    try:
        store.update_run(run_id, pid=os.getpid())
        store.set_status(run_id, "running")
        with _Heartbeat(store, run_id):
            train(cfg, store, run_id, on_step=on_step, resume=resume)
    except KeyboardInterrupt as e:
        reason = str(e) if isinstance(e, RunStopped) else "interrupted by the user (Ctrl-C)"
        store.abandon_write()  # the signal may have landed mid-write: that step is not recorded
        store.set_status(run_id, "stopped", error=f"stopped: {reason}")
        raise
    except BaseException as e:
        store.abandon_write()
        store.set_status(run_id, "failed", error=failure_reason(e, cfg, run_id), traceback=tb.format_exc())
        raise
    else:
        store.set_status(run_id, "completed")
    finally:
        signal.signal(signal.SIGTERM, previous)
    return run_id


_DISK_FULL_TEXT = ("No space left on device", "os error 28", "Disk quota exceeded", "database or disk is full",
                   # torch.save's zip writer (DeepSpeed's optimizer checkpoint) loses the errno: a short
                   # write surfaces as "[enforce fail at inline_container.cc:...] . unexpected pos N vs M"
                   # or "PytorchStreamWriter failed writing file ...: file write failed"
                   "unexpected pos", "PytorchStreamWriter failed writing file")


def _disk_full(exc: BaseException) -> bool:
    """True if `exc` or an exception it was raised from is a full disk (ENOSPC/EDQUOT, or a
    library's wrapping of it: safetensors says "os error 28", SQLite "database or disk is full",
    torch.save "unexpected pos N vs M")."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if any(t in str(exc) for t in _DISK_FULL_TEXT):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def failure_reason(exc: BaseException, cfg: RunConfig, run_id: str) -> str:
    """The error a failed run's row shows: ``Type: message``, or for a full disk a sentence
    that says so, where the run writes, and how to continue (the previous checkpoint is
    intact: checkpoints are renamed into place only once complete)."""
    if _disk_full(exc):
        where = run_dir(cfg.output_dir, run_id)
        return (f"disk full: no space left while writing the run's files under {where} ({type(exc).__name__}: "
                f"{str(exc)[:200]}). The last complete checkpoint is intact; free space there (or on the "
                f"store's disk), then resume with `rlwb runs resume {run_id}` or Resume on the Runs page.")
    return f"{type(exc).__name__}: {exc}"


# ---- background runs ------------------------------------------------------------------


def worker_env(store: Store) -> dict:
    """The environment of a run's (or the page's evaluation's) worker process: this one's, the
    store, TCMalloc preloaded where installed (`core.allocator`).

    Raises:
        ConfigError: a bad ``RLWB_ALLOCATOR`` or ``RLWB_EMBEDDING_DTYPE``; built before any row is
            written or claimed.
    """
    # on first use: it pulls in numpy
    from retrieval.embeddings import embedding_dtype

    embedding_dtype()  # a bad RLWB_EMBEDDING_DTYPE fails the launch, not the worker at its first long document
    return allocator.environment({**os.environ, "RLWB_DB": str(Path(store.path).resolve()), "PYTHONUNBUFFERED": "1"})


def _spawn(store: Store, run_id: str, resume: bool, env: dict) -> int:
    """Start the worker process of a run with `env` (`worker_env`); returns its pid (stored
    on the run row)."""
    log = log_path(store, run_id)
    log.parent.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "backend.runs", "work", run_id] + (["--resume"] if resume else [])
    with open(log, "ab") as out:
        out.write(f"--- {datetime.now(timezone.utc).isoformat(timespec='seconds')} "
                  f"{'resume' if resume else 'launch'} {run_id}\n".encode())
        out.flush()
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                env=env, start_new_session=True)  # its own session: the page's Ctrl-C spares it
    store.update_run(run_id, pid=proc.pid)
    # reap it when it ends, or it lingers as a zombie of this (long-lived page) process
    threading.Thread(target=proc.wait, name=f"reap-{run_id}", daemon=True).start()
    return proc.pid


def launch(cfg: RunConfig, store: Store) -> str:
    """Start a run as a background process and return its id at once (status `pending`).

    The process runs `run_foreground` on the new run row; it outlives the caller (the page
    closing or reloading). Its output goes to `log_path`.

    Raises:
        ConfigError: a model too small for the prompts, a bad ``RLWB_ALLOCATOR`` (both
            checked before the run row exists).
    """
    from trainer.loop import check_model_fits  # torch-heavy: the page and the CLI import this module

    env = worker_env(store)
    cfg = pin_user_domains(cfg, store)  # the user-domain versions the run records
    check_model_fits(cfg)
    run_id = store.create_run(cfg.name, cfg.model_dump(mode="json"), cfg.steps)
    _spawn(store, run_id, resume=False, env=env)
    return run_id


def process_alive(pid: int | None) -> bool:
    """True if a process with this pid runs on this machine and is not a zombie."""
    import psutil

    if not pid:
        return False
    try:
        return psutil.Process(int(pid)).status() != psutil.STATUS_ZOMBIE
    except (psutil.NoSuchProcess, psutil.AccessDenied, ValueError):
        return False


def run_process_alive(run: dict) -> bool:
    """True if the run's process still runs: its pid is alive (`process_alive`) and is not a
    later process that reused the pid, i.e. it started before the run's last heartbeat
    (with `PID_CLOCK_SLACK_S` for the kernel's whole-second boot time). A run with no
    heartbeat yet (launched or resumed, still starting) is judged by its pid alone."""
    import psutil

    if not process_alive(run["pid"]):
        return False
    if not run.get("heartbeat_at"):
        return True
    try:
        started = psutil.Process(int(run["pid"])).create_time()
    except psutil.Error:
        return False
    return started <= datetime.fromisoformat(run["heartbeat_at"]).timestamp() + PID_CLOCK_SLACK_S


def stop(store: Store, run_id: str) -> str:
    """Stop a pending or running run: SIGTERM to its process, which marks it `stopped`
    (keeping every completed step). A run whose process is already gone is marked stopped here.

    Returns:
        "signalled" or "marked" (no live process).

    Raises:
        RunNotFound: no such run.
        WorkbenchError: the run is not pending or running.
    """
    run = store.get_run(run_id)
    if run["status"] not in ("pending", "running"):
        raise WorkbenchError(f"run {run_id} is {run['status']}; only a pending or running run can be stopped")
    if run_process_alive(run):
        # noted first: a process killed by the signal before it can mark itself is then
        # marked stopped (not failed) by refresh_liveness
        store.update_run(run_id, error=STOP_REQUESTED)
        os.kill(int(run["pid"]), signal.SIGTERM)
        return "signalled"
    store.set_status(run_id, "stopped", error="stopped: its process had already ended")
    return "marked"


def resume(store: Store, run_id: str, background: bool = True):
    """Resume a stopped or failed run from its last checkpoint (the last one whose directory
    still holds its trainer state).

    Every row the run wrote for a step after that checkpoint (`Store.truncate_after`:
    trajectories, metrics, sandbox executions, later checkpoints, evaluations of those
    steps and the final "after" one) is removed first, so no step is recorded twice.

    Args:
        background: start a worker process (as `launch` does); False returns the
            `trainer.checkpoints.ResumePoint` for the caller to run with `run_foreground`.

    Returns:
        The `ResumePoint` the run continues from.

    Raises:
        RunNotFound: no such run.
        WorkbenchError: the run is pending, running or completed, or has no checkpoint
            with trainer state (the message says to clone its config instead).
        ConfigError: its stored config's fields don't validate (an edited export), or the
            mix's prompts no longer fit the model's window (`check_model_fits`).
    """
    run = store.get_run(run_id)
    if run["status"] in ("pending", "running") and run_process_alive(run):
        raise WorkbenchError(f"run {run_id} is {run['status']}; stop it before resuming")
    if run["status"] == "completed":
        raise WorkbenchError(f"run {run_id} is completed; clone its config to train further")
    ckpts = store.checkpoints(run_id)
    if not ckpts:
        raise WorkbenchError(f"run {run_id} has no checkpoint to resume from (it stopped before its first one; "
                             "set checkpoint_every to save more often); clone its config to start it again")
    point = ResumePoint.latest(ckpts)
    from trainer.loop import check_model_fits  # torch-heavy: the page and the CLI import this module

    register_pinned(run["config"], store)  # the user-domain versions the run pinned (a foreground resume runs here)
    try:  # its fields checked as a new run's are: an edited import can hold anything
        cfg = parse_config(run["config"], source=f"run {run_id}'s stored config", check_model=False)
    except ConfigError as e:
        raise ConfigError(f"{e}; it can't be resumed: start a new run from a corrected copy of its config") from None
    check_model_fits(cfg)  # refused here, not in the worker after the claim
    env = worker_env(store) if background else None  # a bad RLWB_ALLOCATOR too
    # claim the run in one compare-and-set: of two resumes racing (two tabs), one wins. Until
    # the worker's pid replaces it, this process's pid marks the resume as in progress (a
    # second resume then finds a live pid); no heartbeat until the new process beats (the
    # old one's would make the new pid look reused).
    claimed = store.update_run_if(
        run_id, {"status": run["status"], "pid": run["pid"], "heartbeat_at": run["heartbeat_at"]},
        status="pending", pid=os.getpid(), step=point.step, error=None, traceback=None, finished_at=None,
        heartbeat_at=None)
    if not claimed:
        raise WorkbenchError(f"run {run_id} changed while resuming (resumed or stopped from elsewhere); "
                             "reload and try again")
    store.truncate_after(run_id, point.step)
    if background:
        _spawn(store, run_id, resume=True, env=env)
    return point


def refresh_liveness(store: Store) -> list[str]:
    """Mark failed every pending or running run whose process is gone (killed, crashed,
    machine restarted); the error names the last completed step and how to resume. A run
    whose stop was requested (`stop`) is marked stopped instead.

    Returns:
        The ids of the runs marked failed or stopped.
    """
    failed = []
    now = datetime.now(timezone.utc)
    for run in store.list_runs(limit=1000, statuses=("pending", "running")):
        if run_process_alive(run):
            continue
        if not run["pid"]:  # a launch in progress sets the pid at once; give it LAPSE_S
            created = datetime.fromisoformat(run["created_at"])
            if (now - created).total_seconds() < LAPSE_S:
                continue
        step = run["step"] or 0
        if run["error"] == STOP_REQUESTED:
            store.set_status(run["id"], "stopped", error=f"stopped: by request, after step {step}")
            failed.append(run["id"])
            continue
        store.set_status(run["id"], "failed", error=(
            f"the training process (pid {run['pid'] or 'none'}) ended without finishing the run; last completed "
            f"step {step} of {run['total_steps']}. Resume it from its last checkpoint (Resume on the Runs page "
            f"or `rlwb runs resume {run['id']}`)."))
        failed.append(run["id"])
    return failed


def eta_seconds(run: dict, step_times: list[float], window: int = 5) -> float | None:
    """Seconds until a live run finishes: the mean of its last `window` step times
    (``time/step``, seconds) times the steps left; None when the run is not pending or
    running or no step has finished yet. Evaluation and the final checkpoint are not counted."""
    if run["status"] not in ("pending", "running") or not step_times:
        return None
    recent = step_times[-window:]
    left = max((run["total_steps"] or 0) - (run["step"] or 0), 0)
    return left * sum(recent) / len(recent)


# ---- the worker process ---------------------------------------------------------------


def _work(run_id: str, resume_run: bool) -> int:
    """Body of a background run's process: run (or resume) `run_id` from the store."""
    store = Store()
    try:
        return _work_in(store, run_id, resume_run)
    except KeyboardInterrupt:  # stopped before run_foreground took over the run's status
        store.abandon_write()
        if store.get_run(run_id)["status"] in ("pending", "running"):
            store.set_status(run_id, "stopped", error="stopped: before training started")
        return 130


def _work_in(store: Store, run_id: str, resume_run: bool) -> int:
    run = store.get_run(run_id)
    register_pinned(run["config"], store)  # the user-domain versions it pinned, before the config is checked
    cfg = RunConfig(**run["config"])
    point = None
    if resume_run:
        point = ResumePoint.latest(store.checkpoints(run_id))
        print(f"resuming {run_id} after step {point.step} from {point.path}", flush=True)
    try:
        run_foreground(cfg, store, run_id=run_id, resume=point)
    except KeyboardInterrupt:
        print(f"run {run_id} stopped", flush=True)
        return 130
    except BaseException:  # noqa: BLE001 - recorded on the run row by run_foreground
        tb.print_exc()
        return 1
    print(f"run {run_id} completed", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m backend.runs work RUN_ID [--resume]`` (started by `launch` and `resume`)."""
    signal.signal(signal.SIGTERM, _raise_stopped)  # before the slow imports: a stop may come at once
    p = argparse.ArgumentParser(prog="python -m backend.runs")
    sub = p.add_subparsers(dest="command", required=True)
    w = sub.add_parser("work", help="run a launched run's training in this process")
    w.add_argument("run_id")
    w.add_argument("--resume", action="store_true", help="continue from the run's last checkpoint")
    args = p.parse_args(argv)
    allocator.notice(sys.stdout)  # into the run's log: `launch` preloads TCMalloc where installed
    return _work(args.run_id, args.resume)


if __name__ == "__main__":  # pragma: no cover - the worker process
    sys.exit(main())
