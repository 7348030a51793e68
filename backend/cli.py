"""The `rlwb` command line: thin wrappers over backend functions.

    rlwb run CONFIG.yaml [--detach]  run a job (foreground with a progress bar, or background)
    rlwb runs list | show ID | stop ID | resume ID   inspect, stop and resume runs (cli_runs.py)
    rlwb model fetch smollm2-135m   fetch and convert the base model (once)
    rlwb ui                         start the Streamlit page
    rlwb sandbox build-image|status|gc|exec|work   sandboxes (Docker engine or local fallback)
    rlwb domains list | show NAME | validate [NAME ...|--all]   the domain catalogue
    rlwb domains add | update | remove | export | import         your own domains (cli_domains.py)
    rlwb mix create|update|list|show                            named, versioned mixes
    rlwb eval MODEL --mix NAME | list | show | report | samples   evaluations (cli_eval.py)
    rlwb eval context-length MODEL, rlwb retrieval index|search   long context (cli_retrieval.py)

The entry point: it imports the command modules (`cli_runs`, `cli_eval`, `cli_retrieval`),
which share `cli_common` and never import this module back. Every command takes --db (or
RLWB_DB). Errors a user can fix print one line to stderr and exit 2; Ctrl-C exits 130 after
marking the run stopped.

Each command imports what it runs inside its function (start-up speed: `rlwb --help` builds
the parser in ~0.2 s without the store, torch, vLLM or the domain families).
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
from pathlib import Path

from backend import cli_domains, cli_eval, cli_retrieval, cli_runs
from core import allocator
from core.choices import SANDBOX_BACKENDS
from backend.cli_common import isolation_notice, open_store, positive
from core.errors import WorkbenchError
from trainer.models import fetch_model, resolve_model
from backend.ui_access import TOKEN_ENV, check_bind
from domains.registry import build_messages, domain_names, get_domain, is_built_in, registry
from domains.contract import RetrievalDomain
from domains.shipped_validations import SHIPPED_PATH, ship
from domains.validation import validate, validation_report


def cmd_model_fetch(args) -> int:
    path = fetch_model(args.name, force=args.force)
    print(f"{args.name}: {path}")
    return 0


def cmd_ui(args) -> int:
    token = args.token if args.token is not None else os.environ.get(TOKEN_ENV) or None
    check_bind(args.host, token)  # a non-loopback host needs a token
    app = Path(__file__).resolve().parent.parent / "app" / "main.py"
    env = dict(os.environ)
    if args.db:
        env["RLWB_DB"] = str(Path(args.db).resolve())
    if token:
        env[TOKEN_ENV] = token  # to the page through the environment, never argv (visible in ps)
    cmd = [sys.executable, "-m", "streamlit", "run", str(app), "--server.address", args.host,
           "--server.port", str(args.port), "--server.headless", "true", "--browser.gatherUsageStats", "false",
           "--client.toolbarMode", "viewer",
           # no file watcher: the page is not being edited, and the watcher walks every imported
           # module (transformers.models.*: one torchvision traceback each, thousands an hour)
           "--server.fileWatcherType", "none"]
    gate = (f"; the page asks for the access token (or open it with ?token=... appended; "
            f"the token is in {TOKEN_ENV} or --token)") if token else ""
    print(f"RL Workbench page: http://{args.host}:{args.port}{gate}  (Ctrl-C to stop)", flush=True)
    os.execve(sys.executable, cmd, env)  # become the server: signals reach it directly
    return 0  # pragma: no cover - execve does not return


def cmd_sandbox_build_image(args) -> int:
    # on first use: it pulls in pydantic
    from sandboxes.image import build_image

    build_image(force=args.force)
    return 0


def cmd_sandbox_status(args) -> int:
    # on first use: it pulls in pydantic
    from sandboxes import backend_status

    status = backend_status()
    for name, st in status.items():
        print(f"{name:>7}: {'available' if st['available'] else 'unavailable'} - {st['detail']}")
        if st["isolation"]:
            print(f"{'':>9}isolation: {st['isolation']}")
    if status["docker"]["available"]:
        # on first use: it pulls in docker, pydantic
        from sandboxes.docker_backend import labelled_containers

        print(f"labelled sandbox containers on the engine: {len(labelled_containers())}")
    return 0


def cmd_sandbox_gc(args) -> int:
    # on first use: it pulls in docker, pydantic
    from sandboxes.docker_backend import collect_garbage

    print(f"removed {collect_garbage(everything=args.all)} sandbox container(s)")
    return 0


def cmd_sandbox_exec(args) -> int:
    # on first use: it pulls in pydantic
    from sandboxes import open_sandbox
    # on first use: it pulls in pydantic
    from sandboxes.spec import SandboxSpec

    isolation_notice(args.backend)
    spec = SandboxSpec(memory_mb=args.memory_mb, command_timeout_s=args.timeout)
    with open_sandbox(args.backend, spec) as sb:
        r = sb.exec(args.cmd)
    sys.stdout.write(r.stdout)
    sys.stderr.write(r.stderr)
    print(f"[{r.outcome}] exit {r.exit_code} in {r.duration_ms:.0f} ms"
          + (f", {r.truncated_bytes} bytes of output cut" if r.truncated_bytes else ""), file=sys.stderr)
    return 124 if r.timed_out else min(max(r.exit_code, 0), 255)  # like timeout(1); else the command's own


def cmd_sandbox_work(args) -> int:
    # on first use: it pulls in pandas, numpy, pydantic, sqlite_utils
    from sandboxes.jobqueue import JobQueue
    # on first use: it pulls in numpy, pydantic
    from sandboxes.pool import SandboxPool, Scheduler

    isolation_notice(args.backend)
    queue = JobQueue(args.queue)
    with SandboxPool(args.backend, size=args.pool) as pool:
        scheduler = Scheduler(pool)
        try:
            done = queue.work(scheduler)
        finally:
            scheduler.close()
    print(f"completed {done} job(s); queue: {queue.counts()}")
    return 0


def cmd_domains_list(args) -> int:
    # on first use: it pulls in pandas
    from backend.views import domains_frame

    catalogue = domains_frame(open_store(args))
    shown = catalogue
    for column, plural, wanted in (("family", "families", args.family), ("kind", "kinds", args.kind),
                                   ("source", "sources", args.source), ("validation", "", args.validation)):
        if wanted:
            if plural and wanted not in set(catalogue[column]):  # a verdict no domain has is just none
                raise WorkbenchError(f"--{column} {wanted!r} matches no domain; the {plural} are: "
                                     f"{', '.join(sorted(set(catalogue[column])))}")
            shown = shown[shown[column] == wanted]
    reg = registry()
    if args.json:
        lengths = _prompt_lengths(args.model) if args.model else None
        print(json.dumps([{"name": r.name, "family": r.family, "kind": r.kind, "levels": sorted(reg[r.name].levels),
                           "validated": {"passed": True, "failed": False}.get(r.validation), "source": r.source,
                           "license": r.license, "description": r.description,
                           **({"prompt_tokens": lengths(r.name)} if lengths else {})}
                          for r in shown.itertuples()], indent=2))
        return 0
    print(f"{'domain':<28} {'family':<16} {'kind':<11} {'levels':>6}  {'validation':<10} {'source':<15} description")
    for r in shown.itertuples():
        mark = {"passed": "passed", "failed": "FAILED"}.get(r.validation, "-")
        print(f"{r.name:<28} {r.family:<16} {r.kind:<11} {len(reg[r.name].levels):>6}  {mark:<10} {r.source:<15} "
              f"{r.description[:60]}")
    counts = shown["validation"].value_counts()
    print(f"{len(shown)} domains in {shown['family'].nunique()} families: {counts.get('passed', 0)} passed, "
          f"{counts.get('failed', 0)} failed, {counts.get('not validated', 0)} not validated")
    return 0


def cmd_domains_families(args) -> int:
    # on first use: it pulls in pandas
    from backend.views import domains_frame, family_overview

    overview = family_overview(domains_frame(open_store(args)))
    if args.json:
        print(overview.to_json(orient="records", indent=2))
        return 0
    print(f"{'family':<18} {'domains':>7} {'passed':>6} {'failed':>6} {'not val.':>8} {'levels':>6} "
          f"{'gen ms':>7}  sources")
    for r in overview.itertuples(index=False):
        gen = "-" if r[8] is None or r[8] != r[8] else f"{r[8]:.1f}"
        print(f"{r.family:<18} {r.domains:>7} {r.passed:>6} {r.failed:>6} {r[4]:>8} {r.levels:>6} {gen:>7}  "
              f"{r.sources}")
    print(f"{len(overview)} families, {int(overview['domains'].sum())} domains")
    return 0


def _prompt_lengths(model: str):
    """domain -> {model, level -> prompt-token quantiles (`trainer.window.prompt_lengths`)}
    in `model`'s tokens; a level whose generator fails gets {"error": ...}.

    Raises:
        ModelNotFound: the model is not fetched.
    """
    from transformers import AutoTokenizer

    # on first use: it pulls in torch, gymnasium, numpy, pydantic
    from trainer.window import prompt_lengths

    tokenizer = AutoTokenizer.from_pretrained(resolve_model(model))

    def of(name: str) -> dict:
        out: dict = {"model": model}
        for level in sorted(get_domain(name).levels):
            try:
                out[str(level)] = prompt_lengths(tokenizer, name, level)
            except WorkbenchError as e:
                out[str(level)] = {"error": str(e)}
        return out

    return of


def cmd_domains_show(args) -> int:
    store = open_store(args)  # first: it registers the user domains
    d = get_domain(args.name)
    if args.json:
        report = validation_report(store, d.name)
        print(json.dumps({"name": d.name, "family": d.family, "kind": d.kind, "description": d.description,
                          "source": d.source, "license": d.license,
                          "levels": {str(k): v for k, v in d.level_notes.items()},
                          "prompt_tokens": _prompt_lengths(args.model)(d.name),
                          "validated": None if report is None else report["passed"]}, indent=2))
        return 0
    print(f"{d.name}: {d.description}")
    env = getattr(d, "environment", {"runtime": "sandbox" if d.needs_sandbox else "in-process"})
    for key, val in [("family", d.family), ("kind", d.kind), ("source", d.source), ("license", d.license),
                     ("environment", json.dumps(env))]:
        print(f"{key:>12}: {val}")
    for level, note in d.level_notes.items():
        print(f"{'level ' + str(level):>12}: {note}")
    if d.family == "user":  # a user domain: how its data file was read, and its versions
        spec = d.spec.model_dump(mode="json", exclude_defaults=True, exclude={"name", "description"})
        spec.get("verifier", {}).pop("source", None)  # the reward function's code: `domains export`
        print(f"{'definition':>12}: {json.dumps(spec)}")
        versions = [str(v["version"]) for v in store.user_domain_versions(d.name)]
        print(f"{'versions':>12}: {', '.join(versions)} (this is version {d.version})")
    for seed in range(args.examples):
        try:
            task = d.make_task(seed, args.level or min(d.levels))
        except WorkbenchError:
            raise
        except Exception as e:  # noqa: BLE001 - an upstream generator failing at this level
            raise WorkbenchError(f"{d.name} level {args.level or min(d.levels)} can't generate seed {seed}: "
                                 f"{type(e).__name__}: {e}; `rlwb domains validate {d.name}` reports it") from None
        if isinstance(d, RetrievalDomain):  # the context is assembled per policy tokenizer: show the question
            prompt = (f"[question, after a retrieved context of up to {d.environment.get('budget_tokens', '?')} "
                      f"tokens; see `rlwb retrieval` and the Retrieval page]\n{task.question}")
        else:
            prompt = build_messages(task)[-1]["content"][:800]
        print(f"\n--- example seed {seed}, level {task.difficulty} ---\n{prompt}\n[reference answer] {task.answer[:300]}")
        if "spec" in task.entry:
            print(f"[spec] {json.dumps(task.entry['spec'])[:600]}")
        for name, arguments in task.entry.get("reference_calls", []):
            print(f"[reference call] {name} {json.dumps(arguments)[:200]}")
    report = validation_report(store, d.name)
    print("\nvalidation: " + ("never run; `rlwb domains validate " + d.name + "`" if report is None else
                              f"{'passed' if report['passed'] else 'FAILED'} ({report['created_at']}"
                              + (", the report shipped with the workbench)" if report.get("shipped") else ")")))
    for reason in (report or {}).get("reasons", []):
        print(f"  - {reason}")
    return 0


def cmd_domains_validate(args) -> int:
    if args.all == bool(args.names):
        raise WorkbenchError("name the domains to validate, or pass --all (not both)")
    store = open_store(args)  # first: it registers the user domains
    names = domain_names() if args.all else list(dict.fromkeys(args.names))
    backend = None if args.sandbox_backend == "none" else args.sandbox_backend
    if backend and backend != "docker":
        isolation_notice(backend)

    def show(r: dict) -> None:
        head = "passed" if r["passed"] else "FAILED"
        lv = ", ".join(f"L{x['level']} {x.get('distinct_per_100', 0):.0f}/100" for x in r["levels"])
        print(f"{head:<7} {r['domain']:<26} {r['duration_s']:>7.1f}s  distinct: {lv}", flush=True)
        for reason in r["reasons"][:4]:
            print(f"        - {reason}", flush=True)

    reports = validate(names, n_tasks=args.tasks, sandbox_backend=backend, cross_process=not args.no_cross_process,
                       progress=show)
    for r in reports:  # stored with the second-process determinism verdict, known only now
        store.record_validation(r)
        if r.get("cross_process_deterministic") is False or (not args.no_cross_process
                                                             and r.get("cross_process_deterministic") is None):
            print(f"FAILED  {r['domain']:<26} {r['reasons'][-1]}")
    if args.ship:
        built_in = {n: d for n, d in registry().items() if is_built_in(n)}
        held = ship([r for r in reports if r["domain"] in built_in], built_in)
        print(f"shipped reports: {SHIPPED_PATH} now holds {held}")
    failed = [r["domain"] for r in reports if not r["passed"]]
    print(f"{len(reports) - len(failed)} of {len(reports)} domains passed; reports stored in {store.path}"
          + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


def _mix_items(items: list[str]) -> dict:
    # on first use: it pulls in pydantic
    from domains.mixes import parse_domain_arg

    out = {}
    for item in items:
        name, spec = parse_domain_arg(item)
        if name in out:
            raise WorkbenchError(f"mix item {item!r}: domain {name} is listed twice; give each domain once")
        out[name] = spec
    return out


def _print_mix(row: dict) -> None:
    print(f"mix {row['name']}@{row['version']} ({row['created_at']}){': ' + row['note'] if row.get('note') else ''}")
    spec = row["spec"]["domains"]
    total = sum(d["weight"] for d in spec.values()) or 1.0
    for name, d in spec.items():
        lo, hi = d["levels"]
        print(f"  {name:<26} weight {d['weight']:<6g} ({100 * d['weight'] / total:5.1f}%)  levels {lo}-{hi}")


def cmd_mix_create(args) -> int:
    # on first use: it pulls in pydantic
    from domains.mixes import check_name, save_mix

    store = open_store(args)
    if store.get_mix(check_name(args.name)) is not None:
        raise WorkbenchError(f"mix {args.name!r} exists; change it with `rlwb mix update {args.name} ...`")
    version = save_mix(store, args.name, {"domains": _mix_items(args.items)}, note=args.note)
    _print_mix(store.get_mix(args.name, version))
    return 0


def cmd_mix_update(args) -> int:
    # on first use: it pulls in pydantic
    from domains.mixes import load_mix, save_mix

    store = open_store(args)
    row, _ = load_mix(store, args.name)
    domains = dict(row["spec"]["domains"])
    for name in args.remove:
        if name not in domains:
            raise WorkbenchError(f"--remove {name}: not in mix {row['name']}@{row['version']}")
        domains.pop(name)
    for name, spec in _mix_items(args.items).items():
        domains[name] = {**domains.get(name, {}), **spec}
    # on first use: it pulls in pydantic
    from domains.mixes import parse_spec

    if parse_spec({"domains": domains}).pinned("", 0) == parse_spec(row["spec"]).pinned("", 0):
        raise WorkbenchError(f"nothing to change in {row['name']}@{row['version']}; give DOMAIN[:WEIGHT[:LO-HI]] "
                             "items or --remove DOMAIN")
    version = save_mix(store, row["name"], {"domains": domains}, note=args.note)
    _print_mix(store.get_mix(row["name"], version))
    return 0


def cmd_mix_list(args) -> int:
    mixes = open_store(args).list_mixes()
    if not mixes:
        print("no mixes yet; create one with `rlwb mix create NAME chain_sum:2:1-3 maze:1`")
    for m in mixes:
        print(f"{m['name'] + '@' + str(m['version']):<30} {len(m['spec']['domains']):>3} domains  {m['created_at']}")
    return 0


def cmd_mix_show(args) -> int:
    # on first use: it pulls in pydantic
    from domains.mixes import load_mix

    row, _ = load_mix(open_store(args), args.name)
    if args.json:
        print(json.dumps(row, indent=2))
    else:
        _print_mix(row)
    return 0


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a TCP port; use a number from 1 to 65535, e.g. 8501")
    return port


def _register_model(sub: argparse._SubParsersAction) -> None:
    model = sub.add_parser("model", help="base models").add_subparsers(dest="model_command", required=True)
    mf = model.add_parser("fetch", help="fetch and convert a base model into the cache")
    mf.add_argument("name", help="model name, e.g. smollm2-135m")
    mf.add_argument("--force", action="store_true", help="convert again even if cached")
    mf.set_defaults(fn=cmd_model_fetch)


def _register_sandbox(sub: argparse._SubParsersAction) -> None:
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
    e.add_argument("--backend", choices=SANDBOX_BACKENDS, default="docker",
                   help="docker (default) or local (bubblewrap; weaker isolation, said on stderr)")
    e.add_argument("--timeout", type=positive, default=10, help="seconds (default 10)")
    e.add_argument("--memory-mb", type=positive, default=512, help="memory limit in MiB (default 512)")
    e.set_defaults(fn=cmd_sandbox_exec)
    w = sbs.add_parser("work", help="run the pending jobs of a durable job queue")
    w.add_argument("--queue", required=True, help="SQLite file of the job queue")
    w.add_argument("--backend", choices=SANDBOX_BACKENDS, default="docker", help="docker (default) or local")
    w.add_argument("--pool", type=positive, default=4, help="warm sandboxes (default 4)")
    w.set_defaults(fn=cmd_sandbox_work)


def _register_domains(sub: argparse._SubParsersAction) -> None:
    dom = sub.add_parser("domains", help="the domain catalogue: list, show, validate; add your own")
    doms = dom.add_subparsers(dest="domains_command", required=True)
    dl = doms.add_parser("list", help="every registered domain with its validation status")
    dl.add_argument("--family", help="only this family, e.g. arithmetic")
    dl.add_argument("--kind", choices=["single_turn", "multi_turn", "code", "retrieval"], help="only this kind")
    dl.add_argument("--source", help="only domains from this package, e.g. reasoning-core")
    dl.add_argument("--validation", choices=["passed", "failed", "not validated"], help="only this verdict")
    dl.add_argument("--json", action="store_true", help="print JSON")
    dl.add_argument("--model", default=None, help="with --json: add each level's prompt-length quantiles in this "
                                                  "model's tokens (e.g. smollm2-135m; measures 16 tasks a level)")
    dl.set_defaults(fn=cmd_domains_list)
    df = doms.add_parser("families", help="one line per family: domains, validated, levels, generation time")
    df.add_argument("--json", action="store_true", help="print JSON")
    df.set_defaults(fn=cmd_domains_families)
    ds = doms.add_parser("show", help="one domain: levels, source, example tasks, validation")
    ds.add_argument("name")
    ds.add_argument("--level", type=positive, default=None, help="level of the examples (default: easiest)")
    ds.add_argument("--examples", type=int, choices=range(11), default=2, metavar="N", help="examples (0-10)")
    ds.add_argument("--json", action="store_true", help="print JSON, with each level's prompt-length quantiles")
    ds.add_argument("--model", default="smollm2-135m", help="policy whose tokens measure prompts (--json)")
    ds.set_defaults(fn=cmd_domains_show)
    dv = doms.add_parser("validate", help="check generation, determinism, diversity and the verifier at every "
                                          "level; stores the reports; exits 1 if a domain fails")
    dv.add_argument("names", nargs="*", help="domains to validate")
    dv.add_argument("--all", action="store_true", help="validate every registered domain")
    dv.add_argument("--tasks", type=positive, default=100, help="tasks generated per level (default 100)")
    dv.add_argument("--sandbox-backend", choices=[*SANDBOX_BACKENDS, "none"], default="docker",
                    help="where sandboxed domains are verified (default docker; none fails them)")
    dv.add_argument("--no-cross-process", action="store_true",
                    help="skip the second-process determinism check (another PYTHONHASHSEED)")
    dv.add_argument("--ship", action="store_true",
                    help="also keep the built-in domains' reports in domains/validations.json, which a fresh "
                         "install reads (for maintainers)")
    dv.set_defaults(fn=cmd_domains_validate)
    cli_domains.register(doms)


def _register_mix(sub: argparse._SubParsersAction) -> None:
    mix = sub.add_parser("mix", help="named, versioned mixes of domains")
    mixs = mix.add_subparsers(dest="mix_command", required=True)
    item_help = "DOMAIN[:WEIGHT[:LO-HI]], e.g. chain_sum:2:1-3 (weight 1 and every level by default)"
    mc = mixs.add_parser("create", help="create a mix (version 1)")
    mc.add_argument("name")
    mc.add_argument("items", nargs="+", help=item_help)
    mc.add_argument("--note", default="", help="what this version is for")
    mc.set_defaults(fn=cmd_mix_create)
    mu = mixs.add_parser("update", help="save a new version: add or change domains, or --remove them")
    mu.add_argument("name")
    mu.add_argument("items", nargs="*", help=item_help)
    mu.add_argument("--remove", action="append", default=[], metavar="DOMAIN", help="drop a domain")
    mu.add_argument("--note", default="", help="what this version changes")
    mu.set_defaults(fn=cmd_mix_update)
    mixs.add_parser("list", help="every mix at its newest version").set_defaults(fn=cmd_mix_list)
    ms = mixs.add_parser("show", help="one mix: NAME (newest) or NAME@VERSION")
    ms.add_argument("name")
    ms.add_argument("--json", action="store_true", help="print JSON")
    ms.set_defaults(fn=cmd_mix_show)


def _register_ui(sub: argparse._SubParsersAction) -> None:
    ui = sub.add_parser("ui", help="start the Streamlit page")
    ui.add_argument("--host", default="127.0.0.1", help="interface to listen on (default 127.0.0.1: this machine "
                    "only); any other (e.g. 0.0.0.0) needs an access token")
    ui.add_argument("--token", default=None, help="access token the page asks for (prefer the RLWB_UI_TOKEN "
                    "environment variable: command lines are visible to other users in ps)")
    ui.add_argument("--port", type=_port, default=8501)
    ui.set_defaults(fn=cmd_ui)


def build_parser() -> argparse.ArgumentParser:
    """The `rlwb` parser; each sub-command's `fn` default is the function that runs it."""
    p = argparse.ArgumentParser(prog="rlwb", description="RL Workbench: RL post-training of language models.")
    p.add_argument("--db", default=None, help="SQLite store path (default: $RLWB_DB or the user data dir)")
    sub = p.add_subparsers(dest="command", required=True)
    cli_runs.register(sub)
    _register_model(sub)
    _register_sandbox(sub)
    _register_domains(sub)
    _register_mix(sub)
    ev = sub.add_parser("eval", help="capability evaluation: `rlwb eval MODEL --mix NAME`, list, show, report, "
                        "context-length").add_subparsers(dest="eval_command", required=True)
    cli_eval.register(ev)
    cli_retrieval.register_context_length(ev)
    cli_retrieval.register(sub)
    _register_ui(sub)
    return p


def _printable(text: str) -> str:
    """`text` with anything the terminal can't encode (lone surrogates) as backslash escapes."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _heavy(args) -> bool:
    """A command that trains or samples in this process (a foreground run or resume, an
    evaluation, a needle sweep): it runs with TCMalloc (`core.allocator`)."""
    return ((args.command == "run" and not args.detach)
            or (args.command == "runs" and args.runs_command == "resume" and not args.detach)
            or (args.command == "eval" and getattr(args, "eval_command", None) in ("run", "context-length")))


def main(argv: list[str] | None = None) -> int:
    """Entry point of `rlwb`; returns the process exit code."""
    args = build_parser().parse_args(cli_eval.normalize_argv(sys.argv[1:] if argv is None else argv))
    if args.db:
        os.environ["RLWB_DB"] = str(Path(args.db).resolve())
    try:
        if argv is None and _heavy(args):  # from the shell: restart with TCMalloc preloaded, or say why not
            allocator.reexec()
            allocator.notice(sys.stderr)
        if _heavy(args) or args.command == "retrieval":
            # on first use: it pulls in numpy
            from retrieval.embeddings import embedding_dtype

            embedding_dtype()  # a bad RLWB_EMBEDDING_DTYPE: an error now, not at the first long document
        return args.fn(args)
    except WorkbenchError as e:
        print(_printable(f"error: {e}"), file=sys.stderr)
        return 2
    except sqlite3.Error as e:
        db = os.environ.get("RLWB_DB", "the default store")
        print(_printable(f"error: store {db}: {e}; pass --db with a path to an RL Workbench SQLite file "
                         "(a new path creates one)"), file=sys.stderr)
        return 2
    except UnicodeEncodeError as e:  # undecodable argv bytes (surrogateescape) reaching the store or a print
        print(_printable(f"error: {e.object[max(e.start - 20, 0):e.end + 20]!r} is not valid UTF-8 text; "
                         "pass run ids, names and paths as UTF-8"), file=sys.stderr)
        return 2
    except BrokenPipeError:  # e.g. `rlwb runs list | head`: the reader left; not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as e:  # a path argument the OS refuses (too long, a directory, no permission ...)
        where = f" ({str(e.filename)[:80]!r})" if e.filename else ""
        print(_printable(f"error: {e.strerror or e}{where}; check the path you passed"), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        if args.command in ("run", "runs"):
            print("stopped (Ctrl-C); the run is marked stopped and keeps what was written", file=sys.stderr)
        elif args.command == "eval" and getattr(args, "eval_command", None) == "run":
            print("interrupted; the evaluation is marked failed (its samples so far are kept, but a report needs "
                  "a completed one): run it again", file=sys.stderr)
        else:
            print("interrupted (Ctrl-C); nothing half-written is left", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
