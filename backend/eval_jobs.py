"""Evaluations started from the page: each one a background process (``python -m
backend.eval_jobs work MODEL --settings JSON``, its own session) that runs
`backend.evaluation.evaluate_model` and outlives the page closing or reloading, like a
launched run (`backend.runs.launch`).

    job = start(store, "smollm2-135m", EvalSettings(domains=["chain_sum"], tasks_per_domain=10))
    starting(store)            # launched jobs that have no evaluation row yet, or never got one
    progress(store, ev)        # a running evaluation: domains scored of all, its last log line
    stop(store, eval_id)       # SIGTERM: the evaluation is marked failed ("stopped")

The settings and the model are checked here first (`resolve_eval_model`, `eval_config`,
`check_model_fits`), so a bad field is refused on the page before any process starts. The
process's output goes to ``<store folder>/eval-logs/<UTC time>-<pid>.log``; the pid in the
name ties a log to its evaluation row (`Store.create_eval` records the pid), so every page
session finds a job, including one started elsewhere, and a job that died before it
recorded its evaluation shows its log's end instead of vanishing.

Not covered: evaluations on other hosts, queueing (each start is its own process; two at
once share the CPU), context-length sweeps started from the page (`rlwb eval
context-length` does them).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
from datetime import datetime, timedelta, timezone
from pathlib import Path

from backend.evaluation import EvalSettings, eval_config, evaluate_model, parse_settings, resolve_eval_model
from backend.runs import process_alive, run_process_alive, worker_env
from backend.store import Store, default_db_path
from backend.views import readable_log
from core import allocator
from core.errors import ConfigError, WorkbenchError

LOG_DIR = "eval-logs"
#: a job whose process ended without an evaluation row is shown this long (seconds)
FAILED_START_SHOWN_S = 3600.0
#: Seconds per sampled completion assumed when the store has no finished evaluation to
#: learn from: SmolLM2-135M on vLLM (CPU, 2 cores), 64-token answers, from the README's
#: default suite (3 domains x 50 tasks x 8 samples in about 12 minutes).
DEFAULT_SECONDS_PER_COMPLETION = 0.55
#: engine start and weight hashing before the first completion (seconds), same machine
DEFAULT_START_S = 45.0


def logs_dir(store) -> Path:
    """``<folder of the store's database>/eval-logs``."""
    return Path(store.path).resolve().parent / LOG_DIR


def start(store, ref: str, settings: EvalSettings) -> dict:
    """Check the model and settings, then start the evaluation's process; returns at once
    with {"pid", "log", "model", "started_at"}. The evaluation row appears when the process
    has hashed the weights (a few seconds; `starting` shows the job until then).

    Raises:
        ModelNotFound: `ref` names no fetched model, checkpoint or run with a checkpoint.
        ConfigError: no domains, an unknown mix or domain, prompts the model can't hold.
    """
    # on first use: it pulls in torch (as `backend.runs.launch` does)
    from trainer.loop import check_model_fits

    model_path, run_id, _ = resolve_eval_model(store, ref)
    check_model_fits(eval_config(store, settings, model_path, run_id))
    folder = logs_dir(store)
    folder.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
    pending = folder / f"{stamp}-starting-{os.getpid()}-{threading.get_ident()}.log"
    cmd = [sys.executable, "-m", "backend.eval_jobs", "work", ref, "--settings", settings.model_dump_json()]
    env = worker_env(store)
    with open(pending, "ab") as out:
        out.write(f"--- {stamp} rlwb eval {ref} {settings.model_dump_json(exclude_defaults=True)}\n".encode())
        out.flush()
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                env=env, start_new_session=True)  # its own session: the page's Ctrl-C spares it
    log = folder / f"{stamp}-{proc.pid}.log"
    pending.rename(log)  # the process keeps writing through its open descriptor
    # reap it when it ends, or it lingers as a zombie of this (long-lived page) process
    threading.Thread(target=proc.wait, name=f"reap-eval-{proc.pid}", daemon=True).start()
    return {"pid": proc.pid, "log": str(log), "model": ref, "started_at": stamp}


def _log_jobs(store) -> list[tuple[Path, int, datetime]]:
    """(log, pid, start time) of every job log, newest first."""
    out = []
    for log in logs_dir(store).glob("*-*.log"):
        stamp, _, pid = log.stem.partition("-")
        if not pid.isdigit():
            continue
        try:
            at = datetime.strptime(stamp, "%Y%m%dT%H%M%S").replace(tzinfo=timezone.utc)
        except ValueError:
            continue
        out.append((log, int(pid), at))
    return sorted(out, key=lambda j: j[2], reverse=True)


def log_of(store, ev: dict) -> Path | None:
    """The log of an evaluation started from the page (same pid, started before the row was
    created), or None (started with `rlwb eval`, or an in-run evaluation)."""
    if not ev.get("pid") or ev.get("phase"):
        return None
    created = datetime.fromisoformat(ev["created_at"])
    if created.tzinfo is None:
        created = created.replace(tzinfo=timezone.utc)
    for log, pid, at in _log_jobs(store):
        if pid == ev["pid"] and at <= created + timedelta(seconds=2):
            return log
    return None


def tail(log: Path | None, lines: int = 20) -> list[str]:
    """The last `lines` non-empty lines of a log (none for a missing one), without the
    known-harmless ones (`backend.views.readable_log`) and the job's own header line."""

    if log is None or not log.is_file():
        return []
    with log.open("rb") as fh:
        fh.seek(max(0, log.stat().st_size - 64_000))
        text = fh.read().decode("utf-8", "replace")
    kept, _ = readable_log([ln for ln in text.splitlines() if ln.strip() and not ln.startswith("--- ")])
    return kept[-lines:]


def starting(store, now: datetime | None = None) -> list[dict]:
    """Jobs whose process has recorded no evaluation yet: {"pid", "log", "started_at",
    "alive", "tail"}; alive ones are still starting, dead ones (shown for
    `FAILED_START_SHOWN_S`) ended before the evaluation began, their log's end says why."""

    now = now or datetime.now(timezone.utc)
    recorded = {e["pid"] for e in store.list_evals(in_run=False, limit=50) if e.get("pid")}
    out = []
    for log, pid, at in _log_jobs(store):
        if pid in recorded:
            continue
        alive = process_alive(pid)
        if not alive and (now - at).total_seconds() > FAILED_START_SHOWN_S:
            continue
        out.append({"pid": pid, "log": str(log), "started_at": at.isoformat(timespec="seconds"),
                    "alive": alive, "tail": tail(log)})
    return out


def progress(store, ev: dict) -> dict:
    """A running evaluation's progress: {"domains_done", "domains", "completions",
    "completions_total", "last_line", "log"} (completions are stored domain by domain, so
    the count moves in steps)."""
    suite = ev.get("suite") or {}
    domains = list(suite.get("domains") or {})
    samples = store.eval_samples(ev["id"])
    done = {s["domain"] for s in samples}
    log = log_of(store, ev)
    lines = tail(log, 5)
    return {"domains_done": len(done & set(domains)), "domains": len(domains), "completions": len(samples),
            "completions_total": len(domains) * int(suite.get("tasks_per_domain") or 0) * int(suite.get("samples") or 0),
            "last_line": lines[-1] if lines else None, "log": str(log) if log else None}


def stop(store, eval_id: str) -> bool:
    """Send SIGTERM to a running evaluation's process, which marks it failed ("stopped by
    request"); False when it is not running or its process is gone.

    Raises:
        EvalNotFound: no such evaluation.
    """

    ev = store.get_eval(eval_id)
    if ev["status"] != "running" or not run_process_alive({"pid": ev.get("pid"), "heartbeat_at": ev["created_at"]}):
        return False
    try:
        os.kill(int(ev["pid"]), signal.SIGTERM)
    except ProcessLookupError:
        return False
    return True


def estimate_seconds(store, domains: int, settings: EvalSettings) -> tuple[float, str]:
    """How long an evaluation of `domains` domains should take (seconds) and what the figure
    rests on: the seconds per completion of this store's finished evaluations (`rlwb eval` or
    the page's, not in-run ones), else `DEFAULT_SECONDS_PER_COMPLETION`; scaled by the answer
    budget against 64 tokens; plus `DEFAULT_START_S`."""
    completions = domains * settings.tasks_per_domain * settings.samples
    rates = []
    for e in store.list_evals(statuses=("completed",), in_run=False, limit=20):
        s = e.get("suite") or {}
        n = len(s.get("domains") or {}) * int(s.get("tasks_per_domain") or 0) * int(s.get("samples") or 0)
        if not n or not e.get("finished_at"):
            continue
        took = (datetime.fromisoformat(e["finished_at"]) - datetime.fromisoformat(e["created_at"])).total_seconds()
        rates.append((max(took - DEFAULT_START_S, 0.0) / n) * 64 / max(int(s.get("max_new_tokens") or 64), 1))
    if rates:
        rate = sorted(rates)[len(rates) // 2]
        basis = f"the median of this store's {len(rates)} finished evaluations"
    else:
        rate = DEFAULT_SECONDS_PER_COMPLETION
        basis = "SmolLM2-135M on a 2-core CPU (the README's machine); none finished in this store yet"
    return DEFAULT_START_S + completions * rate * settings.max_new_tokens / 64, basis


# ---- the job's process ------------------------------------------------------------------


def _raise_interrupt(signum, frame):  # pragma: no cover - exercised through a subprocess test
    raise KeyboardInterrupt(f"stopped by request (signal {signal.Signals(signum).name})")


def main(argv: list[str] | None = None) -> int:
    """``python -m backend.eval_jobs work MODEL --settings JSON``: run one evaluation in
    this process (the store at ``$RLWB_DB``), printing its progress; exit 0 once stored,
    1 on a refused or failed evaluation, 130 when stopped."""

    parser = argparse.ArgumentParser(prog="python -m backend.eval_jobs")
    sub = parser.add_subparsers(dest="command", required=True)
    work = sub.add_parser("work", help="run one evaluation (started by the page)")
    work.add_argument("model")
    work.add_argument("--settings", required=True, help="EvalSettings as JSON")
    args = parser.parse_args(argv)
    allocator.notice(sys.stdout)  # into the job's log: `start` preloads TCMalloc where installed
    signal.signal(signal.SIGTERM, _raise_interrupt)
    signal.signal(signal.SIGHUP, _raise_interrupt)
    try:
        settings = parse_settings(json.loads(args.settings))
    except (json.JSONDecodeError, ConfigError) as e:
        print(f"error: --settings: {e}", flush=True)
        return 1
    with Store(default_db_path()) as store:
        try:
            eval_id = evaluate_model(store, args.model, settings, progress=lambda line: print(line, flush=True))
        except KeyboardInterrupt as e:
            print(f"evaluation {e or 'stopped'}; it is marked failed", flush=True)
            return 130
        except WorkbenchError as e:
            print(f"error: {e}", flush=True)
            return 1
    print(f"evaluation {eval_id} completed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
