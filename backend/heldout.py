"""Held-out answers and a training run's held-out figures, read from stored evaluations.

Two views of the evaluations in ``eval_runs`` / ``eval_samples`` (`rlwb eval`'s, and a
run's own in-run ones: greedy, one completion per task, `trainer.evaluate`):

- **answers** (`task_pairs`): for one evaluation and domain, per held-out task its
  question, the prompt's chat messages and the reference answer (the task regenerated
  from (domain, level, seed)), and a
  completion with the answer extracted from it (`backend.baselines.model_answer`: the
  verifier's own rule, `domains.answers`), its reward and whether it is correct; with a
  second evaluation (`vs`: the one before, A), both side by side for the same task.
- **a run's figures** (`run_heldout`): the report (`backend.eval_report.build_report`, the
  code the Evaluation page uses) of the run's "before" evaluation against its latest one,
  as rows per domain: accuracy with its 95% interval (or "too few tasks"), the format
  rate, the best baseline, the gain above it and the verdict; and the run's `rlwb eval`
  evaluations of its checkpoints.

    pairs = task_pairs(store, after_id, "chain_sum", vs=before_id)   # one dict per task
    print(pairs_text(filter_pairs(pairs, "changed")))
    figures = run_heldout(store, run_id)                             # None: nothing recorded

Torch- and plotly-free (the pages and the CLI import it). Not covered: multi-turn transcripts turn by
turn (the completion is shown whole; the Trajectories page has the turn view), the chat
template's special tokens around the messages, and a retrieval domain's prompt (its
retrieved context depends on the evaluation's budget and index, which are not stored:
the question is shown).
"""

from __future__ import annotations

from core.errors import ConfigError, WorkbenchError
from trainer.eval_stats import DEFAULT_RESAMPLES, MIN_TASKS_FOR_VERDICT
from domains.contract import RetrievalDomain
from domains.registry import build_messages, get_domain
from backend.baselines import eligible, model_answer
from backend.eval_report import MISSING, build_report
from backend.eval_tables import pct, pp

#: filter name -> what it keeps, by each task's pair (A = before / vs, B = after / the evaluation)
FILTERS = {
    "all": "every task",
    "changed": "the answer or its correctness changed from A to B",
    "wrong after": "B's answer is wrong",
    "fixed": "wrong in A, right in B",
    "broken": "right in A, wrong in B",
}
IN_RUN_NOTE = ("In-run: greedy, one completion per held-out task, at each domain's lowest level (the run's "
               "`eval_tasks_per_domain` tasks); `rlwb eval` samples several completions per task at a temperature "
               "(pass@1 is their mean), so its figures for the same checkpoint differ.")


def _task(domain: str, level: int, seed: int):
    try:
        return get_domain(domain).make_task(seed, level)
    except WorkbenchError:  # a domain no longer registered, a generator past its time limit
        return None


def prompt_text(task) -> str | None:
    """The chat messages a single-turn or multi-turn task opens with (`build_messages`), as
    "role: content" blocks, before the model's chat template; None for a retrieval domain
    (its context is built per evaluation) or a task that can't be rendered."""
    try:
        if isinstance(get_domain(task.domain), RetrievalDomain):
            return None
        return "\n\n".join(f"{m['role']}: {m['content']}" for m in build_messages(task))
    except (WorkbenchError, KeyError, TypeError):
        return None


def _side(domain, task, rows: list[dict], sample: int) -> dict | None:
    """One evaluation's samples of one task -> the shown sample's fields and the task's tally."""
    if not rows:
        return None
    rows = sorted(rows, key=lambda r: r["sample_idx"])
    shown = next((r for r in rows if r["sample_idx"] == sample), rows[0])
    answer = None
    if task is not None and domain is not None and eligible(domain):
        answer = model_answer(domain, task, shown.get("completion"))
    scored = [r for r in rows if not r.get("fault")]
    return {"sample": shown["sample_idx"], "completion": shown.get("completion") or "", "answer": answer,
            "correct": bool(shown["correct"]), "reward": float(shown["reward"] or 0.0),
            "format": float(shown.get("format") or 0.0), "finish_reason": shown.get("finish_reason"),
            "fault": shown.get("fault"), "samples": len(scored), "solved": sum(int(r["correct"]) for r in scored)}


def task_pairs(store, eval_id: str, domain: str, vs: str | None = None, sample: int = 0) -> list[dict]:
    """Per held-out task of `domain`: the question, the reference, and evaluation `eval_id`'s
    answer ("b") beside evaluation `vs`'s ("a") for the same (level, seed).

    Args:
        store: a `backend.store.Store`.
        eval_id: the evaluation shown (B: the checkpoint, the in-run "after").
        domain: a domain of it.
        vs: the evaluation compared with (A: the base model, the in-run "before"), or None.
        sample: which sample of each task to show (an index; the first when a task lacks it).

    Returns:
        One dict per task in (level, seed) order: "level", "seed", "question", "prompt"
        (`prompt_text`), "reference" (None where the task can't be regenerated), "a" and "b" (None where that evaluation
        lacks the task, else {"sample", "completion", "answer" (extracted; None when none
        or for a domain whose answer isn't one string), "correct", "reward", "format",
        "finish_reason", "fault", "samples" (scored), "solved" (correct among them)}) and
        "changed" (the answer or its correctness differs between A and B).

    Raises:
        EvalNotFound: no such evaluation.
        ConfigError: neither evaluation has `domain`.
    """
    return _domain_pairs(_sample_rows(store, eval_id, vs), domain, sample, eval_id, vs)


def _sample_rows(store, eval_id: str, vs: str | None) -> dict[str, list[dict]]:
    """Evaluation `eval_id`'s sample rows with completions as "b", `vs`'s as "a"."""
    sides = {"b": store.eval_samples(eval_id, with_completions=True)}
    if vs is not None:
        sides["a"] = store.eval_samples(vs, with_completions=True)
    return sides


def _domain_pairs(sides: dict[str, list[dict]], domain: str, sample: int, eval_id: str, vs: str | None) -> list[dict]:
    """`task_pairs` over rows already read (`_sample_rows`)."""
    by_task: dict[tuple[int, int], dict[str, list]] = {}
    for tag, rows in sides.items():
        for r in rows:
            if r["domain"] == domain:
                by_task.setdefault((int(r["level"]), int(r["task_seed"])), {}).setdefault(tag, []).append(r)
    if not by_task:
        have = sorted({r["domain"] for rows in sides.values() for r in rows})
        raise ConfigError(f"no held-out task of domain '{domain}' in evaluation {eval_id}"
                          + (f" or {vs}" if vs else "") + f"; its domains: {', '.join(have) or 'none'}")
    try:
        dom = get_domain(domain)
    except WorkbenchError:
        dom = None
    out = []
    for (level, seed), got in sorted(by_task.items()):
        task = _task(domain, level, seed) if dom is not None else None
        a, b = (_side(dom, task, got.get(t, []), sample) for t in ("a", "b"))
        changed = bool(a and b and (a["answer"] != b["answer"] or a["correct"] != b["correct"]))
        out.append({"level": level, "seed": seed, "question": task.question if task else None,
                    "prompt": prompt_text(task) if task else None, "reference": task.answer if task else None,
                    "a": a, "b": b, "changed": changed})
    return out


def filter_pairs(pairs: list[dict], which: str) -> list[dict]:
    """The pairs `FILTERS[which]` keeps. Raises ConfigError for an unknown filter."""
    keep = {"all": lambda p: True, "changed": lambda p: p["changed"],
            "wrong after": lambda p: bool(p["b"]) and not p["b"]["correct"],
            "fixed": lambda p: bool(p["a"] and p["b"]) and not p["a"]["correct"] and p["b"]["correct"],
            "broken": lambda p: bool(p["a"] and p["b"]) and p["a"]["correct"] and not p["b"]["correct"]}
    if which not in keep:
        raise ConfigError(f"unknown filter {which!r}; use one of {', '.join(FILTERS)}")
    return [p for p in pairs if keep[which](p)]


def _short(text, limit: int) -> str:
    text = MISSING if text is None else " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _mark(side: dict | None) -> str:
    if side is None:
        return MISSING
    tally = f" ({side['solved']}/{side['samples']})" if side["samples"] > 1 else ""
    return ("right" if side["correct"] else "wrong") + tally


def pair_rows(pairs: list[dict], tags: tuple[str, str] = ("A", "B")) -> list[dict]:
    """The pairs as table rows: level, seed, question, reference and, per side, the
    extracted answer, right/wrong (and correct/samples when a task has several) and the
    reward; "changed" with two sides."""
    two = any(p["a"] for p in pairs)
    out = []
    for p in pairs:
        row = {"level": p["level"], "seed": p["seed"], "question": _short(p["question"], 120),
               "reference": _short(p["reference"], 40)}
        for tag, key in zip(tags, ("a", "b")):
            if key == "a" and not two:
                continue
            side = p[key]
            label = f" {tag}" if two else ""
            row[f"answer{label}"] = _short(side["answer"], 40) if side else MISSING
            row[f"correct{label}"] = _mark(side)
            row[f"reward{label}"] = round(side["reward"], 3) if side else None
        if two:
            row["changed"] = p["changed"]
        out.append(row)
    return out


def pairs_text(pairs: list[dict], tags: tuple[str, str] = ("A", "B"), width: int = 60) -> str:
    """The pairs as a plain-text table, then each task's completions (A above B)."""
    rows = pair_rows(pairs, tags)
    if not rows:
        return "no tasks match"
    cols = list(rows[0])
    widths = {c: max(len(c), *(len(str(r[c])) for r in rows)) for c in cols}
    lines = ["  ".join(c.ljust(widths[c]) for c in cols)]
    lines += ["  ".join(str(r[c]).ljust(widths[c]) for c in cols) for r in rows]
    for p in pairs:
        lines.append(f"\n--- level {p['level']} seed {p['seed']}: {_short(p['question'], width * 2)}")
        lines.append(f"    reference: {p['reference']}")
        for tag, key in zip(tags, ("a", "b")):
            side = p[key]
            if side is None:
                continue
            lines.append(f"    {tag} ({_mark(side)}, reward {side['reward']:.3f}, answer {side['answer']!r}, "
                         f"{side['finish_reason'] or '-'}):")
            lines += [f"      | {line}" for line in (side["completion"] or "").splitlines() or [""]]
    return "\n".join(lines)


EXAMPLES_PER_DOMAIN = 8  # held-out tasks per domain that an HTML report shows (`answer_examples`)


def answer_examples(store, report: dict, per_domain: int = EXAMPLES_PER_DOMAIN) -> list[tuple[str, list[dict]]]:
    """A few held-out answers per domain of `report` (`eval_report.build_report`), for its
    HTML page: tasks whose answer changed from A to B first, then B's wrong ones, then the
    rest, each in (level, seed) order, as `pair_rows` (question, reference, each side's
    extracted answer, right/wrong, reward).

    Returns:
        (domain, rows) per domain in name order; [] without evaluations.

    Raises:
        EvalNotFound: an evaluation of the report was deleted meanwhile.
    """
    sides = report["sides"]
    if not sides:
        return []
    eval_id, vs = sides[-1]["id"], (sides[0]["id"] if len(sides) == 2 else None)
    rows = _sample_rows(store, eval_id, vs)  # read once for every domain
    out = []
    for domain in sorted({d for s in report["summaries"] for d in s["domains"]}):
        try:
            pairs = _domain_pairs(rows, domain, 0, eval_id, vs)
        except ConfigError:  # only A played this domain
            continue
        order = sorted(pairs, key=lambda p: (not p["changed"], not (p["b"] and not p["b"]["correct"])))
        out.append((domain, pair_rows(order[:per_domain])))
    return out


# ---------------------------------------------------------------- a training run's figures

def _est(e: dict | None) -> str:
    """An accuracy with its 95% interval (`eval_tables.pct`), or "(too few tasks)" under
    MIN_TASKS_FOR_VERDICT."""
    if e and e["n"] < MIN_TASKS_FOR_VERDICT:
        return f"{pct(e, ci=False)} (too few tasks: {e['n']})"
    return pct(e)


def _delta(d: dict | None) -> str:
    """A change in percentage points with its interval (`eval_tables.pp`), or "(too few tasks)"."""
    if d and d["n"] < MIN_TASKS_FOR_VERDICT:
        return f"{100 * d['delta']:+.1f} pp (too few tasks: {d['n']})"
    return pp(d)


def _rate(e: dict | None) -> str:
    return MISSING if not e else f"{100 * e['value']:.0f}%"


def figure_rows(report: dict, phases: list[str]) -> list[dict]:
    """A run's held-out figures per domain and over all domains, from `build_report` of its
    in-run evaluations (`phases`: their phases, A first): tasks, each phase's accuracy
    (greedy pass@1) with its interval, the change with its interval (two phases), the
    format rate per phase, the best baseline, the latest phase's gain above it and the
    verdict (`backend.baselines.judge`)."""
    names = sorted({d for s in report["summaries"] for d in s["domains"]})
    cmp, verdicts = report["comparison"], report["verdicts"] or {}
    rows = []
    for name in [*names, None]:
        ests = [(s["domains"].get(name) if name else s["overall"]) or {} for s in report["summaries"]]
        row = {"domain": name or "all domains",
               "tasks": max((e.get("pass@1") or {}).get("n", 0) for e in ests)}
        for phase, e in zip(phases, ests):
            row[f"accuracy {phase}"] = _est(e.get("pass@1"))
        if cmp is not None:
            row["change"] = _delta(((cmp["domains"].get(name) if name else cmp["overall"]) or {}).get("pass@1"))
        row["format rate"] = " → ".join(_rate(e.get("format_rate")) for e in ests)
        v = (verdicts.get("domains", {}).get(name) if name else verdicts.get("overall")) or {}
        row["best baseline"] = (f"{v['baseline']}: {100 * v['value']:.1f}%" if v.get("value") is not None
                                else MISSING)
        row[f"gain above baseline ({phases[-1]})"] = _delta(v.get("gain"))
        row["verdict"] = v.get("verdict") or MISSING
        rows.append(row)
    return rows


def checkpoint_evals(store, run_id: str) -> list[dict]:
    """A run's `rlwb eval` evaluations of its checkpoints, newest first, as rows:
    evaluation, step, status, setting (tasks × samples at temperature: sampled pass@1, not
    the in-run greedy figure), pass@1 over all domains with its interval and the stored
    verdict against the best baselines."""
    out = []
    for e in store.list_evals(run_id=run_id, in_run=False, limit=1000):
        suite, summary = e.get("suite") or {}, e.get("summary") or {}
        verdict = ((e.get("extras") or {}).get("baseline_verdicts") or {}).get("overall") or {}
        out.append({"evaluation": e["id"], "step": e.get("step"), "status": e["status"],
                    "setting": (f"{suite['tasks_per_domain']} tasks × {suite['samples']} samples, "
                                f"T={suite.get('temperature')}" if suite.get("samples") else MISSING),
                    "pass@1 (sampled)": _est((summary.get("overall") or {}).get("pass@1")),
                    "verdict": verdict.get("verdict") or MISSING})
    return out


def run_heldout(store, run_id: str, resamples: int = DEFAULT_RESAMPLES) -> dict | None:
    """A training run's held-out figures: its "before" evaluation against its latest one
    ("after", else the newest "step-N"), reported by `backend.eval_report.build_report`.

    Returns:
        None when the run has no in-run evaluation with stored completions (recorded
        before schema version 11, or none yet); else {"ids" ([A, B] or [only]), "phases"
        (theirs), "report" (`build_report`'s), "rows" (`figure_rows`)}.

    Raises:
        RunNotFound: no such run.
    """
    store.get_run(run_id)
    evals = store.in_run_evals(run_id)
    if not evals:
        return None
    before = next((e for e in evals if e["phase"] == "before"), None)
    latest = evals[-1]
    chosen = [before, latest] if before is not None and latest is not before else [latest]
    ids, phases = [e["id"] for e in chosen], [e["phase"] for e in chosen]
    report = build_report(store, ids, resamples)
    return {"ids": ids, "phases": phases, "report": report, "rows": figure_rows(report, phases)}


def heldout_lines(figures: dict | None, checkpoints: list[dict], rlwb: str = "rlwb") -> list[str]:
    """`run_heldout`'s figures (None: none) and `checkpoint_evals`' rows as text lines for
    `rlwb runs show`."""
    lines = [f"  rlwb eval {row['evaluation']} of step {row['step']}: {row['status']}, {row['setting']}, "
             f"pass@1 (sampled) {row['pass@1 (sampled)']}, verdict {row['verdict']} (`{rlwb} eval show "
             f"{row['evaluation']}`)" for row in checkpoints]
    if figures is None:
        return lines
    ids, phases = figures["ids"], figures["phases"]
    if len(ids) == 1:  # one evaluation so far (a run's "before"): no trained side yet
        head = (f"held-out, {phases[0]} only (evaluation {ids[0]}; later evaluations are compared with it when "
                "they exist):")
    else:
        head = (f"held-out ({' vs '.join(phases)}; " + ", ".join(f"{p} = evaluation {i}" for p, i in zip(phases, ids))
                + "):")
    held = [head, f"  {IN_RUN_NOTE}"]
    for row in figures["rows"]:
        cells = [f"{k} {v}" for k, v in row.items() if k not in ("domain", "tasks")]
        held.append(f"  {row['domain']:<20} {row['tasks']:>4} tasks: " + "; ".join(cells))
    vs = f" --vs {ids[0]}" if len(ids) == 2 else ""
    held.append(f"  the answers: `{rlwb} eval samples {ids[-1]} --domain DOMAIN{vs}`; the full comparison: "
                 f"`{rlwb} eval report {' '.join(ids)}`")
    return held + lines
