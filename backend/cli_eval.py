"""`rlwb eval ...`: capability evaluations and their reports.

    rlwb eval MODEL_OR_CHECKPOINT --mix NAME     evaluate (a name, a directory, RUN_ID or RUN_ID:STEP)
    rlwb eval list [--in-run] | show ID           stored evaluations (--in-run: training runs' own too)
    rlwb eval report A [B] [--html out.html]      base (A) against checkpoint (B)
    rlwb eval samples B --domain D [--vs A]       the held-out answers, B beside A task by task
    rlwb eval context-length MODEL                the needle sweep (backend/cli_retrieval.py)

Each command imports what it runs inside its function (start-up speed: `rlwb --help` builds
the parser in ~0.2 s without the store, torch, vLLM or the domain families).
"""

from __future__ import annotations

import argparse
import json
import sys

from core.choices import ROLLOUT_ENGINES
from backend.cli_common import open_store, positive
from retrieval.context import DEFAULT_BUDGET_TOKENS
from core.errors import ConfigError

SUBCOMMANDS = ("run", "list", "show", "report", "samples", "context-length")


def normalize_argv(argv: list[str]) -> list[str]:
    """``rlwb eval [OPTIONS] MODEL ...`` is ``rlwb eval run ...``: insert "run" when the word
    after "eval" is not one of its sub-commands or a help flag (global options first)."""
    out = list(argv)
    for i, word in enumerate(out):
        if word == "eval":
            if i + 1 < len(out) and out[i + 1] not in SUBCOMMANDS and out[i + 1] not in ("-h", "--help"):
                out.insert(i + 1, "run")
            return out
        if not word.startswith("-") and (i == 0 or out[i - 1] != "--db"):
            return out  # another command
    return out


def _fmt(v, digits: int = 3) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


#: EvalSettings field -> the flag that sets it, for error messages
FLAGS = {"mix": "--mix", "domains": "--domains", "difficulty": "--difficulty", "tasks_per_domain": "--tasks",
         "samples": "--samples", "ks": "--k", "temperature": "--temperature", "max_new_tokens": "--max-new-tokens",
         "seed_offset": "--seed-offset", "seed": "--seed", "rollout_engine": "--engine",
         "context_budget_tokens": "--context-budget", "max_turns": "--max-turns",
         "max_episode_tokens": "--max-episode-tokens"}


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


def cmd_eval_run(args) -> int:
    import signal

    # on first use: it pulls in pydantic
    from backend.evaluation import evaluate_model, parse_settings

    # SIGTERM (`kill`, a closed terminal's hang-up) ends it like Ctrl-C: the evaluation is marked failed
    signal.signal(signal.SIGTERM, _raise_interrupt)
    signal.signal(signal.SIGHUP, _raise_interrupt)
    settings = parse_settings({
        "mix": args.mix, "domains": args.domains, "difficulty": args.difficulty,
        "tasks_per_domain": args.tasks, "samples": args.samples, "ks": args.k, "temperature": args.temperature,
        "max_new_tokens": args.max_new_tokens, "seed_offset": args.seed_offset, "seed": args.seed,
        "rollout_engine": args.engine, "context_sweep": not args.no_context_sweep,
        "context_budget_tokens": args.context_budget, "max_turns": args.max_turns,
        "max_episode_tokens": args.max_episode_tokens}, names=FLAGS)
    store = open_store(args)
    eval_id = evaluate_model(store, args.model, settings, progress=lambda line: print(line, file=sys.stderr))
    _print_eval(store.get_eval(eval_id))
    db = f" --db {args.db}" if args.db else ""
    print(f"\nevaluation {eval_id} stored; compare two with `rlwb{db} eval report A_ID {eval_id}` "
          "or on the page under Evaluation")
    return 0


def _print_eval(ev: dict) -> None:
    suite, summary, extras = ev["suite"], ev["summary"], ev["extras"]
    ks = suite.get("ks", [1])
    src = f" (run {ev['run_id']}, step {ev['step']})" if ev.get("run_id") else ""
    print(f"evaluation {ev['id']}: {ev['model']}{src} · {ev['status']}")
    if ev["identity"].get("sha256"):
        print(f"  weights sha256 {ev['identity']['sha256'][:16]}…, {ev['identity'].get('bytes', 0) / 1e6:.0f} MB")
    else:  # a training run's own held-out evaluation: the policy at that step, not a file on disk
        print("  weights: the run's policy at that step (an in-run evaluation)")
    mix = suite.get("mix_pinned")
    print(f"  {len(suite.get('domains', {}))} domains{' from mix ' + mix['name'] + '@' + str(mix['version']) if mix else ''}"
          f", {suite.get('tasks_per_domain')} held-out tasks each x {suite.get('samples')} samples at temperature "
          f"{suite.get('temperature')}")
    if ev["status"] == "failed":
        print(f"  error: {(ev.get('error') or '').splitlines()[0] if ev.get('error') else '?'}")
    if not summary:
        return
    names = [f"pass@{k}" for k in ks] + ["mean_reward"]
    print(f"  {'domain':<24}" + "".join(f"{n:>22}" for n in names))
    rows = list(summary["domains"].items()) + [("all domains", summary["overall"])]
    for d, per in rows:
        cells = []
        for n in names:
            e = per.get(n)
            cells.append("-" if not e else f"{e['value']:.3f} [{e['low']:.2f}, {e['high']:.2f}]")
        print(f"  {d:<24}" + "".join(f"{c:>22}" for c in cells))
    _print_baselines(ev["model"], extras)
    if "tool_calls" in extras:
        t = extras["tool_calls"]
        print(f"  tool-call validity: {t['validity']:.3f} ({t['valid_calls']}/{t['calls']} calls)")
    if "multi_turn" in extras:
        m = extras["multi_turn"]
        print(f"  multi-turn success: {m['success']['value']:.3f} [{m['success']['low']:.2f}, "
              f"{m['success']['high']:.2f}] over {m['tasks']} tasks, {m['mean_turns']:.1f} turns per episode")
    seen = {d: c for d, c in (extras.get("seen_in_training") or {}).items() if isinstance(c, dict)}
    if seen:
        total = sum(c.get("seen", 0) for c in seen.values())
        print(f"  held-out tasks whose prompt the training run also sampled (another seed): {total}"
              + (" (" + ", ".join(f"{d} {c['seen']}/{c.get('tasks')}" for d, c in seen.items() if c.get("seen")) + ")"
                 if total else ""))
    if "context" in extras:
        c = extras["context"]
        shortest = f"none (under 0.5 already at {min(c['lengths']):,} tokens)"
        tokens = lambda n: f"{n:,} tokens" if n else shortest  # noqa: E731
        print(f"  usable context length (needle sweep, accuracy >= 0.5): full context {tokens(c['usable_tokens'])}; "
              f"with retrieval {tokens(c['usable_tokens_retrieval'])}"
              + (f"; full context, the number mentioned anywhere: {tokens(c['usable_tokens_mention'])}"
                 if "usable_tokens_mention" in c else ""))


def _print_baselines(model: str, extras: dict) -> None:
    """Per domain: the best constant answer, the best copy rule and the format-only reward
    (`backend.baselines`, stored with the evaluation), pass@1's gain above the best one and
    the verdict; then the notes on the model's answers."""
    # on first use: it pulls in numpy
    from backend.baselines import answer_warnings

    table = extras.get("baselines") or {}
    if not table:
        return
    verdicts = (extras.get("baseline_verdicts") or {}).get("domains") or {}
    print("  baselines on the same tasks (no model; verdict of pass@1 against the best):")
    for d, b in table.items():
        c, cp, v = b["constant"], b["copy"], verdicts.get(d) or {}
        g = v.get("gain")
        gain = f"gain {g['delta']:+.3f} [{g['low']:+.2f}, {g['high']:+.2f}]" if g else "gain -"
        print(f"  {d:<24} constant {str(c['answer'])[:20]!r} {c['accuracy']:.3f}, copy ({cp['rule']}) "
              f"{cp['accuracy']:.3f}, format-only reward {b['format_reward']:.2f}; {gain}: {v.get('verdict') or '-'}")
    for note in answer_warnings(model, table):
        print(f"  note: {note}")


def cmd_eval_list(args) -> int:
    # on first use: it pulls in pydantic
    from backend.evaluation import refresh_eval_liveness

    store = open_store(args)
    refresh_eval_liveness(store)
    evals = store.list_evals(limit=args.limit, in_run=None if args.in_run else False)
    if not evals:
        in_run = store.list_evals(limit=1, in_run=True)
        print("no evaluations yet; run one with `rlwb eval smollm2-135m --mix NAME` (see `rlwb mix list`)"
              + ("; training runs' own held-out evaluations: `rlwb eval list --in-run`" if in_run else ""))
        return 0
    print(f"{'id':<23} {'status':<10} {'model':<34} {'tasks':>9} {'pass@1':>7} created")
    for ev in evals:
        overall = (ev["summary"] or {}).get("overall", {}).get("pass@1")
        suite = ev["suite"]
        size = f"{len(suite.get('domains', {}))}x{suite.get('tasks_per_domain')}"
        model = f"run {ev['run_id']} {ev['phase']} (in-run, greedy)" if ev.get("phase") else ev["model"]
        model = model if len(model) <= 34 else "…" + model[-33:]
        print(f"{ev['id']:<23} {ev['status']:<10} {model:<34} {size:>9} "
              f"{_fmt(overall['value'] if overall else None):>7} {ev['created_at'][:19]}")
    return 0


def cmd_eval_show(args) -> int:
    # on first use: it pulls in pydantic
    from backend.evaluation import refresh_eval_liveness

    store = open_store(args)
    refresh_eval_liveness(store)
    ev = store.get_eval(args.eval_id)
    if args.json:
        print(json.dumps(ev, indent=2))
    else:
        _print_eval(ev)
    return 0


def cmd_eval_report(args) -> int:
    # on first use: they pull in numpy (eval_html: plotly)
    from backend.eval_html import write_html
    from backend.eval_report import build_report
    from backend.eval_tables import headline_text
    # on first use: it pulls in numpy
    from backend.heldout import answer_examples

    # on first use: it pulls in pydantic
    from backend.evaluation import resolve_eval_ref

    store = open_store(args)
    ids = [resolve_eval_ref(store, ref) for ref in [args.a] + ([args.b] if args.b else [])]
    report = write_html(store, ids, args.html, overwrite=args.force, answers=answer_examples) if args.html is not None \
        else build_report(store, ids)
    for tag, side in zip("AB", report["sides"]):
        print(f"{tag}: {side['label']} (evaluation {side['id']})")
    print(headline_text(report))
    if args.html:
        print(f"\nreport written to {args.html}")
    return 0


def cmd_eval_samples(args) -> int:
    # on first use: it pulls in numpy
    from backend.eval_report import side_label
    # on first use: it pulls in numpy
    from backend.heldout import filter_pairs, pairs_text, task_pairs

    store = open_store(args)
    b = store.get_eval(args.eval_id)
    a = store.get_eval(args.vs) if args.vs else None
    pairs = task_pairs(store, args.eval_id, args.domain, vs=args.vs, sample=args.sample)
    if a is not None and not any(p["a"] and p["b"] for p in pairs):
        raise ConfigError(f"evaluations {args.vs} (--vs) and {args.eval_id} share no {args.domain} task (same level "
                          "and seed), so there is nothing to put side by side; compare evaluations of the same "
                          "suite (`rlwb eval show ID` lists its domains and seeds), or drop --vs")
    pairs = filter_pairs(pairs, args.filter)
    if args.limit:
        pairs = pairs[: args.limit]
    if args.json:
        print(json.dumps({"domain": args.domain, "a": args.vs, "b": args.eval_id, "filter": args.filter,
                          "tasks": pairs}, indent=2))
        return 0
    if a is not None:
        print(f"A: {side_label(a)} (evaluation {a['id']})")
    print(f"{'B' if a is not None else 'evaluation'}: {side_label(b)} (evaluation {b['id']})")
    print(f"{args.domain}: {len(pairs)} tasks ({args.filter})\n")
    print(pairs_text(pairs))
    return 0


def _k_list(text: str) -> list[int]:
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items or not all(t.isdigit() and int(t) >= 1 for t in items):
        raise argparse.ArgumentTypeError(f"{text!r}: give k values as positive whole numbers, e.g. 1,8")
    return [int(t) for t in items]


def _domain_list(text: str) -> list[str]:
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items:
        raise argparse.ArgumentTypeError("give at least one domain, comma-separated, e.g. chain_sum,basic_arithmetic")
    return items


def _temperature(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number; e.g. 1.0") from None
    if not 0.0 <= value <= 2.0:
        raise argparse.ArgumentTypeError(f"{text!r}: the temperature must be between 0 and 2")
    return value


def register(ev: argparse._SubParsersAction) -> None:
    """Add `run`, `list`, `show`, `report` and `samples` to the `rlwb eval` sub-command parser `ev`."""
    r = ev.add_parser("run", help="evaluate a model or checkpoint on held-out tasks (also: `rlwb eval MODEL ...`)")
    r.add_argument("model", help="a fetched model (smollm2-135m), a checkpoint directory, RUN_ID (its newest "
                   "checkpoint) or RUN_ID:STEP")
    r.add_argument("--mix", help="a stored mix, NAME or NAME@VERSION (`rlwb mix list`)")
    r.add_argument("--domains", type=_domain_list, help="comma-separated domains instead of a mix")
    r.add_argument("--difficulty", type=positive, default=1, help="level of --domains tasks (default 1)")
    r.add_argument("--tasks", type=positive, default=50, help="held-out tasks per domain (default 50)")
    r.add_argument("--samples", type=positive, default=8, help="completions per task, n of pass@k (default 8)")
    r.add_argument("--k", type=_k_list, default=[1, 8], help="k values of pass@k, each <= samples (default 1,8)")
    r.add_argument("--temperature", type=_temperature, default=1.0, help="sampling temperature (default 1.0)")
    r.add_argument("--max-new-tokens", type=positive, default=64, help="answer budget in tokens (default 64)")
    r.add_argument("--seed-offset", type=int, default=0, help="start this many seeds into the held-out range")
    r.add_argument("--seed", type=int, default=0, help="the engine's sampling seed (default 0)")
    r.add_argument("--engine", choices=ROLLOUT_ENGINES, default="vllm", help="rollout engine (default vllm)")
    r.add_argument("--no-context-sweep", action="store_true", help="skip the needle sweep for needle_haystack")
    r.add_argument("--context-budget", type=positive, default=None, help="retrieval domains: tokens of retrieved "
                   f"context per prompt (default: the run's, else {DEFAULT_BUDGET_TOKENS})")
    r.add_argument("--max-turns", type=positive, default=None, help="multi-turn domains (games, shell, tools): "
                   "turns per episode, 1-32 (default: the run's, else 4; a game's level sets its own)")
    r.add_argument("--max-episode-tokens", type=positive, default=None, help="multi-turn domains: tokens of a whole "
                   "episode, 64-4096 (default: the run's, else 1024; a sudoku needs ~3000)")
    r.set_defaults(fn=cmd_eval_run)
    li = ev.add_parser("list", help="stored evaluations, newest first")
    li.add_argument("--limit", type=positive, default=50, help="how many (default 50)")
    li.add_argument("--in-run", action="store_true", help="also list training runs' own held-out evaluations "
                    "(greedy, one completion per task)")
    li.set_defaults(fn=cmd_eval_list)
    sh = ev.add_parser("show", help="one evaluation's results")
    sh.add_argument("eval_id")
    sh.add_argument("--json", action="store_true", help="print the stored row as JSON")
    sh.set_defaults(fn=cmd_eval_show)
    rep = ev.add_parser("report", help="base (A) against checkpoint (B): per-domain deltas with bootstrap CIs")
    rep.add_argument("a", help="the baseline (e.g. the base model): an evaluation id, or a training run id for "
                     "the newest completed evaluation of its checkpoints")
    rep.add_argument("b", nargs="?", help="what to compare against A (e.g. the checkpoint), the same way")
    rep.add_argument("--html", help="also write a self-contained HTML report to this (new) file")
    rep.add_argument("--force", action="store_true", help="let --html replace an existing file")
    rep.set_defaults(fn=cmd_eval_report)
    # on first use: it pulls in numpy
    from backend.heldout import FILTERS

    sa = ev.add_parser("samples", help="the held-out answers of one domain: question, reference, completion, "
                       "extracted answer, reward; beside another evaluation's (--vs) task by task")
    sa.add_argument("eval_id", help="the evaluation shown (B: e.g. the checkpoint, a run's in-run 'after'; "
                    "`rlwb eval list --in-run`, `rlwb runs show RUN_ID`)")
    sa.add_argument("--domain", required=True, help="the domain whose tasks to show")
    sa.add_argument("--vs", help="the evaluation to put beside it (A: e.g. the base model, the in-run 'before')")
    sa.add_argument("--filter", choices=list(FILTERS), default="all",
                    help="; ".join(f"{k}: {v}" for k, v in FILTERS.items()) + " (default all)")
    sa.add_argument("--sample", type=int, default=0, help="which sample of each task to show (default 0)")
    sa.add_argument("--limit", type=positive, default=None, help="at most this many tasks")
    sa.add_argument("--json", action="store_true", help="print the tasks as JSON")
    sa.set_defaults(fn=cmd_eval_samples)
