"""The `rlwb` command line: thin wrappers over backend functions.

    rlwb run CONFIG.yaml            run a job in the foreground with a progress bar
    rlwb runs list | show ID        inspect runs in the store
    rlwb model fetch smollm2-135m   fetch and convert the base model (once)
    rlwb ui                         start the Streamlit page
    rlwb sandbox build-image|status|gc|exec|work   sandboxes (Docker engine or local fallback)

Every command takes --db (or RLWB_DB). Errors a user can fix print one line to stderr and
exit 2; Ctrl-C exits 130 after marking the run stopped.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
from pathlib import Path

from backend.errors import WorkbenchError


def _store(args):
    from backend.store import Store

    return Store(args.db)


def cmd_run(args) -> int:
    from tqdm import tqdm

    from backend.config import load_config
    from backend.runs import run_foreground

    cfg = load_config(args.config)  # validated before any run row exists
    if cfg.needs_sandbox:
        _isolation_notice(cfg.sandbox_backend)
    store = _store(args)
    bar = tqdm(total=cfg.steps, desc=cfg.name, unit="step", dynamic_ncols=True)

    def on_step(step: int, m: dict[str, float]) -> None:
        bar.set_postfix(reward=f"{m['reward/mean']:.3f}", acc=f"{m['accuracy/mean']:.2f}",
                        tok_s=f"{m['rollout_tokens_per_s']:.0f}", kl=f"{m['kl']:.4f}", refresh=False)
        bar.update(1)

    def on_start(run_id: str) -> None:
        bar.write(f"run {run_id} started; store: {store.path}")

    try:
        run_id = run_foreground(cfg, store, on_step=on_step, on_start=on_start)
    finally:
        bar.close()
    run = store.get_run(run_id)
    print(f"run {run_id} {run['status']}: {cfg.steps} steps; see it with `rlwb ui` or `rlwb runs show {run_id}`")
    return 0


def cmd_runs_list(args) -> int:
    runs = _store(args).list_runs(limit=args.limit)
    if not runs:
        print("no runs yet; start one with `rlwb run configs/quickstart.yaml`")
        return 0
    print(f"{'id':<26} {'name':<20} {'status':<10} {'step':>9}  created")
    for r in runs:
        print(f"{r['id']:<26} {str(r['name'])[:20]:<20} {r['status']:<10} "
              f"{r['step'] or 0:>4}/{r['total_steps'] or 0:<4}  {r['created_at']}")
    return 0


def cmd_runs_show(args) -> int:
    store = _store(args)
    run = store.get_run(args.run_id)
    if args.json:
        print(json.dumps(run, indent=2, default=str))
        return 0
    for key in ("id", "name", "status", "step", "total_steps", "created_at", "started_at", "finished_at", "error"):
        print(f"{key:>12}: {run.get(key)}")
    last: dict[str, tuple[int, float]] = {}
    for row in store.run_metrics(args.run_id):
        last[row["name"]] = (row["step"], row["value"])
    for name in ("reward/mean", "accuracy/mean", "kl", "response_length", "rollout_tokens_per_s", "time/step"):
        if name in last:
            print(f"{name:>22}: {last[name][1]:.4g} (step {last[name][0]})")
    for ev in store.evaluations(args.run_id):
        print(f"  eval {ev['phase']:<7} {ev['domain']:<18} acc={ev['accuracy']:.3f} reward={ev['mean_reward']:.3f} n={ev['n']}")
    for ck in store.checkpoints(args.run_id):
        print(f"  checkpoint step {ck['step']}: {ck['path']}")
    return 0


def cmd_model_fetch(args) -> int:
    from backend.models import fetch_model

    path = fetch_model(args.name, force=args.force)
    print(f"{args.name}: {path}")
    return 0


def cmd_ui(args) -> int:
    app = Path(__file__).resolve().parent.parent / "app" / "main.py"
    env = dict(os.environ)
    if args.db:
        env["RLWB_DB"] = str(Path(args.db).resolve())
    cmd = [sys.executable, "-m", "streamlit", "run", str(app), "--server.address", args.host,
           "--server.port", str(args.port), "--server.headless", "true", "--browser.gatherUsageStats", "false"]
    print(f"RL Workbench page: http://{args.host}:{args.port}  (Ctrl-C to stop)", flush=True)
    os.execve(sys.executable, cmd, env)  # become the server: signals reach it directly
    return 0  # pragma: no cover - execve does not return


def _isolation_notice(backend: str) -> None:
    """Say on stderr when a backend isolates less than Docker (never silently)."""
    if backend != "docker":
        from sandboxes import sandbox_class

        print(f"note: sandbox backend '{backend}' gives {sandbox_class(backend).isolation}", file=sys.stderr)


def cmd_sandbox_build_image(args) -> int:
    from sandboxes.image import build_image

    build_image(force=args.force)
    return 0


def cmd_sandbox_status(args) -> int:
    from sandboxes import backend_status

    status = backend_status()
    for name, st in status.items():
        print(f"{name:>7}: {'available' if st['available'] else 'unavailable'} - {st['detail']}")
        if st["isolation"]:
            print(f"{'':>9}isolation: {st['isolation']}")
    if status["docker"]["available"]:
        from sandboxes.docker_backend import labelled_containers

        print(f"labelled sandbox containers on the engine: {len(labelled_containers())}")
    return 0


def cmd_sandbox_gc(args) -> int:
    from sandboxes.docker_backend import collect_garbage

    print(f"removed {collect_garbage(everything=args.all)} sandbox container(s)")
    return 0


def cmd_sandbox_exec(args) -> int:
    from sandboxes import open_sandbox
    from sandboxes.spec import SandboxSpec

    _isolation_notice(args.backend)
    spec = SandboxSpec(memory_mb=args.memory_mb, command_timeout_s=args.timeout)
    with open_sandbox(args.backend, spec) as sb:
        r = sb.exec(args.cmd)
    sys.stdout.write(r.stdout)
    sys.stderr.write(r.stderr)
    print(f"[{r.outcome}] exit {r.exit_code} in {r.duration_ms:.0f} ms"
          + (f", {r.truncated_bytes} bytes of output cut" if r.truncated_bytes else ""), file=sys.stderr)
    return 124 if r.timed_out else min(max(r.exit_code, 0), 255)  # like timeout(1); else the command's own


def cmd_sandbox_work(args) -> int:
    from sandboxes.jobqueue import JobQueue
    from sandboxes.pool import SandboxPool, Scheduler

    _isolation_notice(args.backend)
    queue = JobQueue(args.queue)
    with SandboxPool(args.backend, size=args.pool) as pool:
        scheduler = Scheduler(pool)
        try:
            done = queue.work(scheduler)
        finally:
            scheduler.close()
    print(f"completed {done} job(s); queue: {queue.counts()}")
    return 0


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a TCP port; use a number from 1 to 65535, e.g. 8501")
    return port


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive whole number; e.g. --limit 20")
    return int(text)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="rlwb", description="RL Workbench: RL post-training of language models.")
    p.add_argument("--db", default=None, help="SQLite store path (default: $RLWB_DB or the user data dir)")
    sub = p.add_subparsers(dest="command", required=True)

    r = sub.add_parser("run", help="run a post-training job in the foreground")
    r.add_argument("config", help="run config YAML, e.g. configs/quickstart.yaml")
    r.set_defaults(fn=cmd_run)

    runs = sub.add_parser("runs", help="list and inspect runs").add_subparsers(dest="runs_command", required=True)
    rl = runs.add_parser("list", help="list runs, newest first")
    rl.add_argument("--limit", type=_positive, default=50, help="how many runs to list (default 50)")
    rl.set_defaults(fn=cmd_runs_list)
    rs = runs.add_parser("show", help="show one run")
    rs.add_argument("run_id")
    rs.add_argument("--json", action="store_true", help="print the run row as JSON")
    rs.set_defaults(fn=cmd_runs_show)

    model = sub.add_parser("model", help="base models").add_subparsers(dest="model_command", required=True)
    mf = model.add_parser("fetch", help="fetch and convert a base model into the cache")
    mf.add_argument("name", help="model name, e.g. smollm2-135m")
    mf.add_argument("--force", action="store_true", help="convert again even if cached")
    mf.set_defaults(fn=cmd_model_fetch)

    sb = sub.add_parser("sandbox", help="sandboxes: image, status, garbage collection, one-off commands")
    sbs = sb.add_subparsers(dest="sandbox_command", required=True)
    b = sbs.add_parser("build-image", help="build the rlwb-sandbox image from a debootstrap rootfs (cached)")
    b.add_argument("--force", action="store_true", help="rebuild even if the image is up to date")
    b.set_defaults(fn=cmd_sandbox_build_image)
    sbs.add_parser("status", help="which backends work here and how they isolate").set_defaults(fn=cmd_sandbox_status)
    g = sbs.add_parser("gc", help="remove sandbox containers whose owner process is gone")
    g.add_argument("--all", action="store_true", help="remove every labelled sandbox container")
    g.set_defaults(fn=cmd_sandbox_gc)
    e = sbs.add_parser("exec", help="run one command in a fresh sandbox; exits with its exit code "
                                     "(124 on timeout, 137 when OOM-killed)")
    e.add_argument("cmd", help="shell command, e.g. \"python3 -c 'print(1)'\"")
    e.add_argument("--backend", choices=["docker", "local"], default="docker",
                   help="docker (default) or local (bubblewrap; weaker isolation, said on stderr)")
    e.add_argument("--timeout", type=_positive, default=10, help="seconds (default 10)")
    e.add_argument("--memory-mb", type=_positive, default=512, help="memory limit in MiB (default 512)")
    e.set_defaults(fn=cmd_sandbox_exec)
    w = sbs.add_parser("work", help="run the pending jobs of a durable job queue")
    w.add_argument("--queue", required=True, help="SQLite file of the job queue")
    w.add_argument("--backend", choices=["docker", "local"], default="docker", help="docker (default) or local")
    w.add_argument("--pool", type=_positive, default=4, help="warm sandboxes (default 4)")
    w.set_defaults(fn=cmd_sandbox_work)

    ui = sub.add_parser("ui", help="start the Streamlit page")
    ui.add_argument("--host", default="127.0.0.1")
    ui.add_argument("--port", type=_port, default=8501)
    ui.set_defaults(fn=cmd_ui)
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of `rlwb`; returns the process exit code."""
    args = build_parser().parse_args(argv)
    if args.db:
        os.environ["RLWB_DB"] = str(Path(args.db).resolve())
    try:
        return args.fn(args)
    except WorkbenchError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except sqlite3.Error as e:
        db = os.environ.get("RLWB_DB", "the default store")
        print(f"error: store {db}: {e}; pass --db with a path to an RL Workbench SQLite file "
              "(a new path creates one)", file=sys.stderr)
        return 2
    except BrokenPipeError:  # e.g. `rlwb runs list | head`: the reader left; not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        print("stopped (Ctrl-C); the run is marked stopped and keeps what was written", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
