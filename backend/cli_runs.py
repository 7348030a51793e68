"""`rlwb run` and `rlwb runs ...`: start, list, show, stop and resume runs.

    rlwb run CONFIG.yaml [--detach]     run a job in the foreground with a progress bar
                                        (--detach: in the background, like the page's Launch)
    rlwb runs list | show ID            inspect runs in the store
    rlwb runs stop ID                   SIGTERM to a running run (it keeps what it wrote)
    rlwb runs resume ID [--detach]      continue a stopped or failed run from its last checkpoint
    rlwb runs export ID -o FILE         the run (config, metrics, trajectories, ...) as one file
    rlwb runs import FILE [--new-id]    add an exported run to this store (all or nothing)

Thin wrappers over `backend.runs`; `register` adds them to the `rlwb` parser.

Each command imports what it runs inside its function (start-up speed: `rlwb --help` builds
the parser in ~0.2 s without the store, torch, vLLM or the domain families).
"""

from __future__ import annotations

import argparse
import json
import sys

from backend.cli_common import isolation_notice, open_store, positive
from trainer.phases import phase_timeline


def _rlwb(args) -> str:
    """How to call rlwb again on the same store (``rlwb --db PATH`` when --db was given)."""
    import shlex

    return f"rlwb --db {shlex.quote(str(args.db))}" if args.db else "rlwb"


def _progress(cfg, store, start: int = 0):
    """A tqdm bar and the (on_step, on_start) callbacks that drive it."""
    from tqdm import tqdm

    bar = tqdm(total=cfg.steps, initial=start, desc=cfg.name, unit="step", dynamic_ncols=True)

    def on_step(step: int, m: dict[str, float]) -> None:
        kl = {"kl": f"{m['kl']:.4f}"} if "kl" in m else {}  # none without a reference (kl_coef: 0)
        bar.set_postfix(reward=f"{m['reward/mean']:.3f}", acc=f"{m['accuracy/mean']:.2f}",
                        tok_s=f"{m['rollout_tokens_per_s']:.0f}", **kl, refresh=False)
        if bar.n == start and m.get("time/step"):
            # the first step's rate is the step's own time, not the engine start and baseline evaluation
            # before it (the quickstart's first ETA read 1 h 27 min for a 12-minute run); elapsed keeps them
            bar.last_print_t = bar._time() - m["time/step"]
        bar.update(1)

    def on_start(run_id: str) -> None:
        bar.write(f"run {run_id} started; store: {store.path}")

    return bar, on_step, on_start


def cmd_run(args) -> int:
    # on first use: it pulls in pydantic, yaml
    from trainer.config import load_config
    # on first use: it pulls in pydantic
    from domains.mixes import resolve_mix
    # on first use: it pulls in pandas, numpy, pydantic, yaml
    from backend.runs import launch, log_path, run_foreground

    store = open_store(args)  # first: it registers the user domains the config may name
    cfg = load_config(args.config)  # validated before any run row exists
    cfg = resolve_mix(cfg, store)  # pins the mix version the run records
    if cfg.dtype_note:
        print(f"note: {cfg.dtype_note}", file=sys.stderr)
    if cfg.needs_sandbox:
        isolation_notice(cfg.sandbox_backend)
    if args.detach:
        run_id = launch(cfg, store)
        print(f"run {run_id} launched in the background (pid {store.get_run(run_id)['pid']}); log: "
              f"{log_path(store, run_id)}; follow it with `{_rlwb(args)} runs show {run_id}` or "
              f"`{_rlwb(args)} ui`, stop it with `{_rlwb(args)} runs stop {run_id}`")
        return 0
    bar, on_step, on_start = _progress(cfg, store)
    started: list[str] = []
    try:
        run_id = run_foreground(cfg, store, on_step=on_step, on_start=lambda rid: (started.append(rid), on_start(rid)))
    except Exception:
        if not started:
            raise
        return _report_failure(args, store, started[0])
    finally:
        bar.close()
    run = store.get_run(run_id)
    # what it learned, as `runs show` has it: held-out accuracy before and after, against the best baseline
    from backend.heldout import heldout_lines, run_heldout  # on first use: it pulls in numpy

    figures = run_heldout(store, run_id)
    if figures is not None:
        print("\n".join(heldout_lines(figures, [], _rlwb(args))))
    print(f"run {run_id} {run['status']}: {cfg.steps} steps; see it with `{_rlwb(args)} ui` or "
          f"`{_rlwb(args)} runs show {run_id}`")
    return 0


def _report_failure(args, store, run_id: str) -> int:
    """A run that failed in the foreground: its recorded reason on one line (the traceback is
    on the run row, shown by the Runs page and `runs show --json`); exit code 1."""
    run = store.get_run(run_id)
    print(f"error: run {run_id} failed: {run['error']}\n(traceback: `{_rlwb(args)} runs show {run_id} --json`)",
          file=sys.stderr)
    return 1


def _checked_store(args):
    """The store, with runs whose process is gone marked failed first (`refresh_liveness`)."""
    # on first use: it pulls in pandas, numpy, pydantic, yaml
    from backend.runs import refresh_liveness

    store = open_store(args)
    refresh_liveness(store)
    return store


def cmd_runs_list(args) -> int:
    store = _checked_store(args)
    runs = store.list_runs(limit=args.limit)
    if not runs:
        print("no runs yet; start one with `rlwb run configs/quickstart.yaml`")
        return 0
    print(f"{'id':<26} {'name':<20} {'status':<10} {'step':>9}  created")
    for r in runs:
        print(f"{r['id']:<26} {str(r['name'])[:20]:<20} {r['status']:<10} "
              f"{r['step'] or 0:>4}/{r['total_steps'] or 0:<4}  {r['created_at']}")
    return 0


def cmd_runs_show(args) -> int:
    store = _checked_store(args)
    run = store.get_run(args.run_id)
    if args.json:
        print(json.dumps(run, indent=2, default=str))
        return 0
    for key in ("id", "name", "status", "step", "total_steps", "created_at", "started_at", "finished_at", "error"):
        print(f"{key:>12}: {run.get(key)}")
    timeline = phase_timeline(store.run_phases(args.run_id), run["total_steps"])
    if timeline:  # where the time went (the Runs page's line)
        live = run["status"] == "running"
        print(f"{'phases':>12}: " + " -> ".join(f"{e['label']} {e['seconds']:.0f}s" + (" (now)" if e["live"] and live else "")
                                               for e in timeline))
    last: dict[str, tuple[int, float]] = {}
    for row in store.run_metrics(args.run_id):
        last[row["name"]] = (row["step"], row["value"])
    for name in ("reward/mean", "accuracy/mean", "kl", "response_length", "rollout_tokens_per_s", "time/step"):
        if name in last:
            print(f"{name:>22}: {last[name][1]:.4g} (step {last[name][0]})")
    # on first use: it pulls in pandas, numpy, sqlite_utils
    from backend.audit_view import audit_lines, audit_run

    print("\n".join(audit_lines(audit_run(store, args.run_id))))
    # on first use: it pulls in numpy
    from backend.heldout import checkpoint_evals, heldout_lines, run_heldout

    figures = run_heldout(store, args.run_id)
    if figures is None:  # a run recorded before its held-out completions were stored: the aggregates
        for ev in store.evaluations(args.run_id):
            print(f"  eval {ev['phase']:<7} {ev['domain']:<18} acc={ev['accuracy']:.3f} "
                  f"reward={ev['mean_reward']:.3f} n={ev['n']}")
    for ck in store.checkpoints(args.run_id):
        print(f"  checkpoint step {ck['step']}: {ck['path']}")
    print("\n".join(heldout_lines(figures, checkpoint_evals(store, args.run_id), _rlwb(args))))
    return 0


def cmd_runs_stop(args) -> int:
    # on first use: it pulls in pandas, numpy, pydantic, yaml
    from backend.runs import stop

    how = stop(open_store(args), args.run_id)
    print(f"run {args.run_id}: " + ("SIGTERM sent; it marks itself stopped after the current step's writes"
                                    if how == "signalled" else "its process had already ended; marked stopped"))
    return 0


def cmd_runs_resume(args) -> int:
    # on first use: it pulls in pydantic, yaml
    from trainer.config import RunConfig
    # on first use: it pulls in pandas, numpy, pydantic, yaml
    from backend.runs import log_path, resume, run_foreground

    store = open_store(args)
    point = resume(store, args.run_id, background=args.detach)
    if args.detach:
        print(f"run {args.run_id} resumed in the background after step {point.step} (pid "
              f"{store.get_run(args.run_id)['pid']}); log: {log_path(store, args.run_id)}")
        return 0
    cfg = RunConfig(**store.get_run(args.run_id)["config"])
    bar, on_step, _ = _progress(cfg, store, start=point.step)
    try:
        run_foreground(cfg, store, on_step=on_step, run_id=args.run_id, resume=point)
    except Exception:
        return _report_failure(args, store, args.run_id)
    finally:
        bar.close()
    print(f"run {args.run_id} {store.get_run(args.run_id)['status']} (resumed after step {point.step})")
    return 0


def cmd_runs_export(args) -> int:
    # on first use: it pulls in pandas, numpy, sqlite_utils
    from backend.store_export import SUFFIX, export_run

    store = _checked_store(args)
    out = args.output or f"{args.run_id}{SUFFIX}"
    counts = export_run(store, args.run_id, out, force=args.force)
    print(f"run {args.run_id} exported to {out}: " + ", ".join(f"{n} {t}" for t, n in counts.items() if n)
          + "; checkpoint weights are not in the file (their paths are)")
    return 0


def cmd_runs_import(args) -> int:
    # on first use: it pulls in pandas, numpy, sqlite_utils
    from backend.store_export import import_run

    store = open_store(args)
    run_id, counts = import_run(store, args.file, new_id=args.new_id)
    print(f"run {run_id} imported: " + ", ".join(f"{n} {t}" for t, n in counts.items() if n)
          + f"; see it with `{_rlwb(args)} runs show {run_id}`")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add `run` and `runs` to the `rlwb` sub-command parser `sub`."""
    r = sub.add_parser("run", help="run a post-training job (foreground, or --detach for the background)")
    r.add_argument("config", help="run config YAML, e.g. configs/quickstart.yaml")
    r.add_argument("--detach", action="store_true", help="start it as a background process and return at once")
    r.set_defaults(fn=cmd_run)

    runs = sub.add_parser("runs", help="list, inspect, stop and resume runs").add_subparsers(
        dest="runs_command", required=True)
    rl = runs.add_parser("list", help="list runs, newest first")
    rl.add_argument("--limit", type=positive, default=50, help="how many runs to list (default 50)")
    rl.set_defaults(fn=cmd_runs_list)
    rs = runs.add_parser("show", help="show one run")
    rs.add_argument("run_id")
    rs.add_argument("--json", action="store_true", help="print the run row as JSON")
    rs.set_defaults(fn=cmd_runs_show)
    st = runs.add_parser("stop", help="stop a running run (SIGTERM; completed steps are kept)")
    st.add_argument("run_id")
    st.set_defaults(fn=cmd_runs_stop)
    rr = runs.add_parser("resume", help="continue a stopped or failed run from its last checkpoint")
    rr.add_argument("run_id")
    rr.add_argument("--detach", action="store_true", help="resume in a background process")
    rr.set_defaults(fn=cmd_runs_resume)
    rx = runs.add_parser("export", help="write a finished run (config, metrics, trajectories, checkpoint records, "
                         "evaluations) to one gzip JSON Lines file")
    rx.add_argument("run_id")
    rx.add_argument("-o", "--output", help="file to write (default RUN_ID.rlwb.jsonl.gz in the current directory)")
    rx.add_argument("--force", action="store_true", help="replace an existing file")
    rx.set_defaults(fn=cmd_runs_export)
    ri = runs.add_parser("import", help="add a run exported with `rlwb runs export` to this store")
    ri.add_argument("file")
    ri.add_argument("--new-id", action="store_true", help="give the run a new id (its id is taken here)")
    ri.set_defaults(fn=cmd_runs_import)
