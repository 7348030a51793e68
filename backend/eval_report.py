"""Evaluation report: one stored evaluation, or a baseline A against a model B side by side.

Recomputes everything from the stored sample rows (`Store.eval_samples`) with
`trainer.eval_stats`: per domain and family pass@1, pass@k, mean reward and format rate
with 95% bootstrap intervals over tasks; for two evaluations the paired deltas B - A over
the tasks both share, ranked worst first with a verdict each; the baselines of the tasks
played (`backend.baselines`: best constant answer, copying from the question, format-only
reward; stored with the evaluation, else computed from its regenerated tasks) and each
headline row's verdict against the strongest of them and A; tool-call validity,
multi-turn success and the usable context length when the evaluations have them.

    report = build_report(store, [base_id, ckpt_id])      # JSON-able dict
    print(headline_text(report))                           # Markdown table for the CLI
    write_html(store, [base_id, ckpt_id], "out.html")      # one self-contained file

Torch-free (the page and the CLI import it); the baselines and the evaluation module are
imported inside the functions that use them, for `rlwb --help`'s start-up (they load the store). A training run's own held-out evaluations
(greedy, one completion per task, `trainer.evaluate`) are reported by the same code. Not
covered: running evaluations (`backend.evaluation`), reports over more than two evaluations.
"""

from __future__ import annotations

import os
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

import plotly.graph_objects as go

from core.errors import ConfigError
from trainer.eval_stats import (
    DEFAULT_RESAMPLES,
    MIN_TASKS_FOR_VERDICT,
    compare,
    domain_families,
    jsonable,
    summarize,
)
from backend.baselines import answer_warnings, baseline_rows, group_verdicts, suite_baselines, with_forgiven

MISSING = "—"
BASELINE_NOTE = ("best baseline: the strongest of the best constant answer, copying from the question (rules "
                 "fitted on these held-out tasks) and, in a comparison, A as it scored and with the format "
                 "forgiven (the last number of its replies); the verdict is against every one of them.")
VERDICT_COLORS = {"regression": "#d62728", "improvement": "#2ca02c", "no clear change": "#9e9e9e",
                  "too few tasks": "#bdbdbd"}
SIDE_COLORS = ("#7f7f7f", "#1f77b4")  # A (baseline) grey, B blue
MARGIN = {"l": 10, "r": 10, "t": 50, "b": 10}  # plotly figure margins (px)


def side_label(ev: dict) -> str:
    """How a report names an evaluation: the model as the user named it, the training run
    and step when the weights came from one, and the first 8 hex digits of their sha256; a
    run's own held-out evaluation as "run R step N (in-run, greedy)"."""
    if ev.get("phase"):
        return f"run {ev['run_id']} {ev['phase']} · step {ev['step']} (in-run, greedy)"
    model = str(ev.get("model") or "?")
    parts = [model]
    if ev.get("run_id") and ev["run_id"] not in model:
        parts.append(f"run {ev['run_id']}")
    if ev.get("step") is not None and not model.endswith(f":{ev['step']}"):
        parts.append(f"step {ev['step']}")
    sha = (ev.get("identity") or {}).get("sha256")
    if sha:
        parts.append(f"sha {sha[:8]}")
    return " · ".join(parts)


def mix_label(suite: dict) -> str:
    """The suite's mix as NAME@VERSION, else its domain names."""
    pin = suite.get("mix_pinned")
    if pin:
        return f"{pin['name']}@{pin['version']}"
    return suite.get("mix") or ", ".join(suite.get("domains") or {}) or MISSING


def _first_line(text: str | None, limit: int = 300) -> str:
    """An error's first line, cut to `limit` characters (a page table, a message)."""
    line = (text or "").split("\n", 1)[0]
    return line if len(line) <= limit else line[: limit - 1] + "…"


def evaluation_rows(evals: list[dict]) -> list[dict]:
    """The list of evaluations (rows of `Store.list_evals`) as display rows: id, kind
    ("rlwb eval, sampled at T" or "in-run PHASE, greedy"), model, run / step, mix, domains ×
    tasks per domain × samples, status, created (UTC), error."""
    out = []
    for e in evals:
        suite = e.get("suite") or {}
        kind = (f"in-run {e['phase']}, greedy" if e.get("phase")
                else f"rlwb eval, sampled at T={suite.get('temperature')}")
        out.append({"evaluation": e["id"], "kind": kind, "model": e["model"],
                    "run / step": f"{e['run_id']} / {e['step']}" if e.get("run_id") else MISSING,
                    "mix": mix_label(suite), "tasks × samples": f"{len(suite.get('domains') or {})} domains × "
                    f"{suite.get('tasks_per_domain')} × {suite.get('samples')}", "status": e["status"],
                    "created": (e.get("created_at") or "")[:19].replace("T", " "),
                    "error": _first_line(e.get("error"))})
    return out


def _side(store, eval_id: str) -> dict:
    ev = store.get_eval(eval_id)
    if ev["status"] != "completed":
        why = f" ({_first_line(ev.get('error'))})" if ev.get("error") else ""
        raise ConfigError(f"evaluation '{eval_id}' is {ev['status']}{why}, not completed; only completed "
                          "evaluations can be reported (see `rlwb eval list`)")
    suite = ev.get("suite") or {}
    settings = {k: suite.get(k) for k in ("tasks_per_domain", "samples", "ks", "temperature", "top_p",
                                           "max_new_tokens", "seed", "seed_offset", "rollout_engine")}
    settings.update(mix=mix_label(suite), domains=suite.get("domains") or {})
    return {"id": eval_id, "label": side_label(ev), "model": ev["model"], "model_path": ev.get("model_path"),
            "run_id": ev.get("run_id"), "step": ev.get("step"), "phase": ev.get("phase"),
            "identity": ev.get("identity") or {},
            "settings": settings, "created_at": ev.get("created_at"), "finished_at": ev.get("finished_at"),
            "stored_extras": ev.get("extras") or {}}


def _settings_warnings(a: dict, b: dict) -> list[str]:
    keys = ("samples", "temperature", "top_p", "max_new_tokens")
    diff = [f"{k} {a['settings'][k]} vs {b['settings'][k]}" for k in keys if a["settings"][k] != b["settings"][k]]
    return [(f"A and B were sampled with different settings ({'; '.join(diff)}); part of any change may "
             "come from the settings, not the weights.")] if diff else []


def _seen_warning(side: dict) -> list[str]:
    """A note when held-out tasks repeat, verbatim, a question the checkpoint's run trained on
    (`backend.evaluation.seen_in_training`): different seeds, same question (small task spaces)."""
    seen = side["stored_extras"].get("seen_in_training") or {}
    hits = {d: c for d, c in seen.items() if isinstance(c, dict) and c.get("seen")}
    if not hits:
        return []
    parts = ", ".join(f"{d} {c['seen']}/{c.get('tasks', '?')}" for d, c in sorted(hits.items()))
    return [f"{side['label']}: some held-out tasks ask a question its training run also sampled (under another "
            f"seed; small task spaces repeat questions): {parts}."]


def build_report(store, eval_ids: list[str], resamples: int = DEFAULT_RESAMPLES) -> dict:
    """The report of 0, 1 or 2 completed evaluations (A = the baseline, B = the model
    compared with it), recomputed from their sample rows.

    Args:
        store: a `backend.store.Store`.
        eval_ids: [] (an empty report), [A] or [A, B].
        resamples: bootstrap resamples per interval.

    Returns:
        A JSON-able dict: "sides" (id, label, settings, identity, ... per evaluation), "ks"
        (those both share, 1 always included), "k" (the largest k > 1 or None),
        "summaries" (`eval_stats.summarize` per side, estimates as dicts), "comparison"
        (`eval_stats.compare` as dicts with "ranked" as a list of dicts, or None),
        "extras" per side, "families" (domain -> family), "warnings", "resamples",
        "baselines" (`baselines.suite_baselines` per side) and "verdicts"
        (`baselines.group_verdicts` of the last side: B, or the only evaluation).

    Raises:
        EvalNotFound: no evaluation with one of the ids.
        ConfigError: more than two ids, the same id twice, or an evaluation not completed.
    """
    # on first use: it pulls in pydantic
    from backend.evaluation import capability_extras

    if len(eval_ids) > 2:
        raise ConfigError(f"a report compares at most two evaluations (A, B); got {len(eval_ids)}")
    if len(eval_ids) == 2 and eval_ids[0] == eval_ids[1]:
        raise ConfigError(f"A and B are the same evaluation '{eval_ids[0]}'; pick two different evaluations")
    sides = [_side(store, i) for i in eval_ids]
    rows = [store.eval_samples(i) for i in eval_ids]
    ks = set.intersection(*(set(s["settings"]["ks"] or [1]) for s in sides)) if sides else set()
    ks = sorted(ks | {1}) if sides else []
    families = domain_families({r["domain"] for rs in rows for r in rs})
    summaries = [jsonable(summarize(r, ks, families, resamples)) for r in rows]
    extras = []
    for side, r in zip(sides, rows):
        ex = capability_extras(r)
        if (side["stored_extras"].get("context") or {}).get("lengths"):
            ex["context"] = {k: v for k, v in side["stored_extras"]["context"].items() if k != "cells"}
        extras.append(ex)
    warnings, comparison = [], None
    if len(sides) == 2:
        a, b = sides
        comparison = compare(rows[0], rows[1], ks, families, resamples)
        comparison["ranked"] = [{"domain": d, "family": families.get(d, "other"), "metric": m, **v.as_dict()}
                                for d, m, v in comparison["ranked"]]
        comparison = jsonable(comparison)
        if comparison["only_a"] or comparison["only_b"]:
            warnings.append(f"The task sets differ: {comparison['only_a']} tasks only in A, {comparison['only_b']} "
                            f"only in B; deltas cover the {comparison['shared_tasks']} shared tasks only.")
        sha_a, sha_b = a["identity"].get("sha256"), b["identity"].get("sha256")
        if sha_a and sha_a == sha_b:
            warnings.append(f"A and B have the same weights (sha256 {sha_a[:12]}…); any difference is sampling noise.")
        warnings += _settings_warnings(a, b)
    tables = [_baselines(store, side) for side in sides]
    base_table = tables[0] if len(tables) == 2 else None  # A's format-forgiven replies join the baselines
    verdicts = jsonable(group_verdicts(rows[-1], tables[-1], families, comparison, resamples, base_table)) \
        if sides else None
    for side, summary, table in zip(sides, summaries, tables):
        warnings += answer_warnings(side["label"], table)
        warnings += _seen_warning(side)
        context = sum(d.get("context_faults") or 0 for d in summary["domains"].values())
        faults = sum(d.get("faults") or 0 for d in summary["domains"].values()) - context
        if faults:
            warnings.append(f"{side['label']}: {faults} samples hit a harness fault (a sandbox failed, not the "
                            "model) and are left out; pass@k covers only tasks with at least k scored samples.")
        if context:
            warnings.append(f"{side['label']}: {context} samples had prompts longer than the engine's window and "
                            "were not sent; they are left out, so the longest tasks are missing from these figures.")
    transfer = _transfer(store, sides, rows, families, resamples) if comparison else None
    return {"sides": sides, "ks": ks, "k": max(ks) if ks and max(ks) > 1 else None, "summaries": summaries,
            "comparison": comparison, "extras": extras, "families": families, "warnings": warnings,
            "resamples": resamples, "baselines": tables, "verdicts": verdicts, "transfer": transfer}


def _transfer(store, sides: list[dict], rows: list[list[dict]], families: dict[str, str],
              resamples: int) -> dict | None:
    """The comparison split by whether B's training run trained on a domain: {"trained":
    [domains], "unseen": [domains], "groups": {group: {metric: Delta}}} with groups
    "trained", "unseen" and "unseen · <family>" (paired deltas B - A over each group's
    shared tasks, `eval_stats.compare`). None when B's weights don't come from a run, or
    every domain of the report was trained on (no transfer to show)."""
    b = sides[-1]
    if not b.get("run_id"):
        return None
    trained = store.run_domains(b["run_id"], b.get("step"))
    domains = {r["domain"] for rs in rows for r in rs}
    unseen = sorted(domains - trained)
    if not unseen or not trained:
        return None
    groups = {d: "trained" if d in trained else "unseen" for d in domains}
    by_family = {d: f"unseen · {families.get(d, 'other')}" for d in unseen}
    pooled = compare(rows[0], rows[1], [1], groups, resamples)["families"]
    per_family = compare([r for r in rows[0] if r["domain"] in by_family], [r for r in rows[1] if r["domain"] in by_family],
                         [1], by_family, resamples)["families"]
    return jsonable({"trained": sorted(domains & trained), "unseen": unseen, "groups": {**pooled, **per_family}})


def transfer_rows(report: dict) -> list[dict]:
    """The transfer table: pass@1 of A and B and the paired delta B - A with its 95% CI for
    the domains B's run trained on, for those it never saw, and for the unseen ones per
    family, with how many of the group's domains improved or regressed (their own delta's
    interval above or below 0). [] without a transfer section (`build_report`)."""
    transfer = report.get("transfer")
    if not transfer:
        return []
    per_domain = report["comparison"]["domains"]
    members = {"trained": transfer["trained"], "unseen": transfer["unseen"]}
    for d in transfer["unseen"]:
        members.setdefault(f"unseen · {report['families'].get(d, 'other')}", []).append(d)
    out = []
    for group, delta in sorted(transfer["groups"].items(), key=lambda kv: (kv[0] != "trained", kv[0] != "unseen", kv[0])):
        d = delta.get("pass@1")
        if not d:
            continue
        verdicts = [(per_domain.get(x) or {}).get("pass@1") or {} for x in members.get(group, [])]
        out.append({"group": group, "domains": len(members.get(group, [])), "A": _value(d["a"], "pass@1"),
                    "B": _value(d["b"], "pass@1"), "Δ [95% CI]": _pp(d), "tasks": d["n"],
                    "improved": sum(v.get("low", 0) > 0 for v in verdicts),
                    "regressed": sum(v.get("high", 0) < 0 for v in verdicts)})
    return out


def _baselines(store, side: dict) -> dict:
    """A side's baselines (`backend.baselines`): those stored with the evaluation, else
    computed from its sample rows (its tasks regenerated from their seeds)."""
    if "baselines" in side["stored_extras"]:

        return with_forgiven(side["stored_extras"]["baselines"], store.eval_samples(side["id"], with_completions=True))
    return suite_baselines(store.eval_samples(side["id"], with_completions=True))


# ---------------------------------------------------------------- tables (formatted strings)

def _pct(est: dict | None, ci: bool = True) -> str:
    if not est:
        return MISSING
    text = f"{100 * est['value']:.1f}%"
    return text + (f" [{100 * est['low']:.1f}, {100 * est['high']:.1f}]" if ci else "")


def _pp(delta: dict | None, metric: str = "pass@1") -> str:
    """A delta in percentage points (rates) or reward units (mean_reward), with its CI."""
    if not delta:
        return MISSING
    if metric == "mean_reward":
        return f"{delta['delta']:+.3f} [{delta['low']:+.3f}, {delta['high']:+.3f}]"
    return f"{100 * delta['delta']:+.1f} pp [{100 * delta['low']:+.1f}, {100 * delta['high']:+.1f}]"


def _value(x: float, metric: str) -> str:
    return f"{x:.3f}" if metric == "mean_reward" else f"{100 * x:.1f}%"


def _num(est: dict | None, digits: int = 3) -> str:
    return f"{est['value']:.{digits}f}" if est else MISSING


def _sides(report: dict) -> list[str]:
    return ["A", "B"] if len(report["sides"]) == 2 else [""] * len(report["sides"])


def _metric_cells(report: dict, metric: str, group: str | None, table: str, fmt, label: str = "") -> dict:
    """{"<label> A": ..., "<label> B": ...} ({"<label>": ...} for one evaluation): `metric` of
    `group` in each side's summary `table` ("domains"/"families"; group None: "overall")."""
    out = {}
    for tag, summary in zip(_sides(report), report["summaries"]):
        est = summary[table].get(group, {}).get(metric) if group else summary["overall"].get(metric)
        out[f"{label or metric} {tag}".strip()] = fmt(est)
    return out


def _grouped_rows(report: dict, table: str, first: str) -> list[dict]:
    """Rows of the headline (table="domains") or the family table: per group and overall."""
    k, cmp = report["k"], report["comparison"]
    names = sorted({g for s in report["summaries"] for g in s[table]})
    rows = []
    for name in [*names, None]:
        row = {first: name or f"all {table}"}
        if table == "families":
            row["domains"] = ", ".join(sorted({d for s in report["summaries"] for d in s[table].get(name, {})
                                               .get("domains", [])})) if name else ""
        row.update(_metric_cells(report, "pass@1", name, table, _pct))
        delta = None
        if cmp is not None:
            per = cmp[table].get(name, {}) if name else cmp["overall"]
            delta = per.get("pass@1")
            row["Δ pass@1 [95% CI]"] = _pp(delta)
        v = (report["verdicts"][table].get(name) if name else report["verdicts"]["overall"]) or {}
        row["best baseline"] = f"{v['baseline']}: {100 * v['value']:.1f}%" if v.get("value") is not None else MISSING
        row["gain above baseline [95% CI]"] = _pp(v.get("gain"))
        if k:
            row.update(_metric_cells(report, f"pass@{k}", name, table, lambda e: _pct(e, ci=False)))
        row.update(_metric_cells(report, "mean_reward", name, table, _num, label="mean reward"))
        if cmp is not None:
            present = [name is None or name in s[table] for s in report["summaries"]]
            row["verdict"] = ((v.get("verdict") or delta["verdict"]) if delta
                              else "only in A" if present == [True, False]
                              else "only in B" if present == [False, True] else "no shared tasks")
        else:
            row["verdict"] = v.get("verdict") or MISSING
        rows.append(row)
    return rows


def headline_rows(report: dict) -> list[dict]:
    """The headline table: one row per domain (by name) and an "all domains" row, with
    pass@1 of A and B (percent, 95% CI), the paired delta B - A in percentage points with
    its CI, the best baseline (the strongest of the best constant answer, copying from the
    question and A; which one and its accuracy) and B's gain above it with its CI, pass@k
    of A and B, mean reward (0..1) of A and B and the verdict against every baseline
    (`baselines.judge`: "improvement", "regression", "no gain beyond answering '1' every
    time", "no clear change", "too few tasks", "only in A/B"). One evaluation: its own
    columns without A/B and without the delta, judged against the task baselines. Empty
    report: []."""
    return _grouped_rows(report, "domains", "domain") if report["sides"] else []


def summary_sentence(report: dict) -> str:
    """One sentence on what the report shows and what it does not, from the headline's
    per-domain verdicts: where the model gains beyond its best baseline (interval above 0)
    and where it does not, naming the baseline. "" for an empty report.

        "B gains beyond the best baseline on 2 of 3 domains (basic_arithmetic, chain_sum);
        not on products (no gain beyond answering '24' every time)."
    """
    rows = [r for r in headline_rows(report) if not str(r["domain"]).startswith("all ")]
    if not rows:
        return ""
    who = "B" if len(report["sides"]) == 2 else "The model"
    good = [r["domain"] for r in rows if r["verdict"] == "improvement"]
    other = [f"{r['domain']} ({r['verdict']})" for r in rows if r["verdict"] != "improvement"]
    head = f"{who} gains beyond the best baseline on {len(good)} of {len(rows)} domains"
    if good:
        head += f" ({', '.join(good)})"
    return head + (f"; not on {', '.join(other)}." if other else ".")


def family_rows(report: dict) -> list[dict]:
    """The headline's columns per domain family (and an "all families" row)."""
    return _grouped_rows(report, "families", "family") if report["sides"] else []


def delta_rows(report: dict) -> list[dict]:
    """Every (domain, metric) delta B - A, worst first: domain, family, metric, A, B (over
    the shared tasks), delta and its CI (percentage points; reward units for mean reward),
    shared tasks, verdict. [] without a comparison."""
    if not report.get("comparison"):
        return []
    return [{"domain": r["domain"], "family": r["family"], "metric": r["metric"].replace("_", " "),
             "A": _value(r["a"], r["metric"]), "B": _value(r["b"], r["metric"]), "Δ [95% CI]": _pp(r, r["metric"]),
             "tasks": r["n"], "verdict": r["verdict"]} for r in report["comparison"]["ranked"]]


def domain_rows(report: dict, side: int) -> list[dict]:
    """One evaluation's per-domain table: tasks, samples, pass@k per k (percent, CI), mean
    reward, format rate, tool-call validity and mean turns (multi-turn domains)."""
    out = []
    for d, m in report["summaries"][side]["domains"].items():
        row = {"domain": d, "family": report["families"].get(d, "other"), "tasks": m["tasks"], "samples": m["samples"]}
        row.update({f"pass@{k}": _pct(m.get(f"pass@{k}")) for k in report["ks"]})
        row.update({"mean reward": _num(m.get("mean_reward")), "format rate": _pct(m.get("format_rate"), ci=False),
                    "tool-call validity": MISSING if m["tool_call_validity"] is None
                    else f"{100 * m['tool_call_validity']:.1f}% of {m['calls']}",
                    "mean turns": f"{m['mean_turns']:.1f}" if m["mean_turns"] else MISSING})
        out.append(row)
    return out


def baselines_table(report: dict) -> list[dict]:
    """The baselines of the judged evaluation's tasks (`baselines.baseline_rows`), with each
    side's most common answer and share copied from the question. [] without baselines."""
    if not report["sides"]:
        return []
    return baseline_rows(report["baselines"][-1], list(zip(_sides(report), report["baselines"])))


def capability_rows(report: dict) -> list[dict]:
    """Tool-call validity (valid calls / calls), multi-turn success (share of episodes
    solved, CI over tasks), mean turns and usable context length (tokens, full context and
    retrieval) per evaluation; only the rows some evaluation has."""
    specs = [("tool-call validity", "tool_calls", lambda t: f"{100 * t['validity']:.1f}% ({t['valid_calls']}/{t['calls']})"),
             ("multi-turn success", "multi_turn", lambda t: _pct(t["success"])),
             ("mean turns", "multi_turn", lambda t: f"{t['mean_turns']:.1f}"),
             ("usable context, full (tokens)", "context", lambda t: _tokens(t.get("usable_tokens"))),
             ("usable context, retrieval (tokens)", "context", lambda t: _tokens(t.get("usable_tokens_retrieval"))),
             ("usable context, full, number mentioned (tokens)", "context",
              lambda t: _tokens(t.get("usable_tokens_mention")))]
    rows = []
    for label, key, fmt in specs:
        if any(key in ex for ex in report["extras"]):
            row = {"metric": label}
            for tag, ex in zip(_sides(report), report["extras"]):
                row[tag or "value"] = fmt(ex[key]) if key in ex else MISSING
            rows.append(row)
    return rows


def _tokens(n) -> str:
    return f"{n:,}" if n is not None else "below the shortest length"


def headline_text(report: dict) -> str:
    """The headline table as Markdown (for the CLI), with the warnings under it."""
    rows = headline_rows(report)
    if not rows:
        return "No completed evaluations to report."
    cols = list(rows[0])
    lines = [summary_sentence(report), "", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(str(r[c]) for c in cols) + " |" for r in rows]
    transfer = transfer_rows(report)
    if transfer:
        tcols = list(transfer[0])
        lines += ["", "Transfer: the domains B's training run trained on, and those it never saw (pass@1, B - A):", "",
                  "| " + " | ".join(tcols) + " |", "|" + "---|" * len(tcols)]
        lines += ["| " + " | ".join(str(r[c]) for c in tcols) + " |" for r in transfer]
    notes = list(report["warnings"]) + [BASELINE_NOTE]
    if any(r.get("verdict") == "too few tasks" for r in rows):
        notes.append(f"'too few tasks': fewer than {MIN_TASKS_FOR_VERDICT} shared tasks, too few for a verdict; "
                     "evaluate more tasks per domain (--tasks).")
    return "\n".join(lines + [f"\n> {w}" for w in notes])


# ---------------------------------------------------------------- figures

def _bars(report: dict, table: str, metric: str, title: str) -> go.Figure:
    names = sorted({g for s in report["summaries"] for g in s[table]})
    fig = go.Figure()
    for i, (tag, side, summary) in enumerate(zip(_sides(report), report["sides"], report["summaries"])):
        ests = [summary[table].get(n, {}).get(metric) for n in names]
        fig.add_trace(go.Bar(
            x=names, y=[e["value"] if e else None for e in ests], name=f"{tag}: {side['label']}" if tag else side["label"],
            marker_color=SIDE_COLORS[i if len(report["sides"]) == 2 else 1],
            error_y={"type": "data", "symmetric": False, "array": [e["high"] - e["value"] if e else 0 for e in ests],
                     "arrayminus": [e["value"] - e["low"] if e else 0 for e in ests]}))
    fig.update_layout(title=title, barmode="group", height=380, yaxis={"range": [0, 1.05], "tickformat": ".0%"},
                      margin=MARGIN, legend={"orientation": "h", "y": -0.2})
    return fig


def _delta_figure(report: dict) -> go.Figure:
    ranked = report["comparison"]["ranked"]
    fig = go.Figure(go.Bar(
        y=[f"{r['domain']} · {r['metric'].replace('_', ' ')}" for r in ranked], x=[r["delta"] for r in ranked],
        orientation="h", marker_color=[VERDICT_COLORS[r["verdict"]] for r in ranked],
        customdata=[r["verdict"] for r in ranked], hovertemplate="%{y}: %{x:+.3f} (%{customdata})<extra></extra>",
        error_x={"type": "data", "symmetric": False, "array": [r["high"] - r["delta"] for r in ranked],
                 "arrayminus": [r["delta"] - r["low"] for r in ranked]}))
    fig.update_layout(title="Change B − A per domain and metric, worst first (red: regression, green: improvement)",
                      height=max(300, 24 * len(ranked) + 100), yaxis={"autorange": "reversed"},
                      xaxis={"zeroline": True, "zerolinewidth": 2}, margin=MARGIN)
    return fig


def report_figures(report: dict) -> list[tuple[str, go.Figure]]:
    """(title, figure) pairs: grouped bars (A and B, error bars = 95% bootstrap CI) per
    domain and per family for pass@1 and pass@k, and with two evaluations a horizontal
    bar chart of the deltas, worst first, regressions red and improvements green."""
    if not report["sides"]:
        return []
    metrics = ["pass@1"] + ([f"pass@{report['k']}"] if report["k"] else [])
    out = [(f"{m} per {what}", _bars(report, table, m, f"{m} per {what} (95% CI)"))
           for table, what in (("domains", "domain"), ("families", "family")) for m in metrics]
    if report["comparison"] and report["comparison"]["ranked"]:
        out.append(("Deltas, worst first", _delta_figure(report)))
    return out


# ---------------------------------------------------------------- HTML

_TEMPLATE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{{ title }}</title>
<style>
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; }
th { background: #f3f3f3; }
tr.regression td { background: #f8d0d0; }
tr.improvement td { background: #d4f0d4; }
p.warning { background: #fff3cd; padding: 0.5em; border-left: 4px solid #e0a800; }
.meta { color: #666; font-size: 0.9em; }
</style></head><body>
{% macro table(rows) %}{% if rows %}<table><thead><tr>{% for c in rows[0] %}<th>{{ c }}</th>{% endfor %}</tr></thead>
<tbody>{% for r in rows %}<tr{% if r.get("verdict") in ("regression", "improvement") %} class="{{ r["verdict"] }}"{% endif %}>
{% for c in rows[0] %}<td>{{ r[c] }}</td>{% endfor %}</tr>
{% endfor %}</tbody></table>{% endif %}{% endmacro %}
<h1>{{ title }}</h1>
<p class="meta">Written {{ written }} by RL Workbench. Intervals: 95% percentile bootstrap over tasks
({{ resamples }} resamples){% if compared %}; deltas B − A are paired over the tasks both evaluations share{% endif %}.</p>
{% for w in warnings %}<p class="warning">{{ w }}</p>{% endfor %}
{% if not sides %}<p>No evaluations in this report.</p>{% else %}
<h2>Evaluations</h2>{{ table(sides) }}
<h2>Headline</h2><p><strong>{{ summary }}</strong></p>{{ table(headline) }}
<p class="meta">{{ baseline_note }}</p>
{% if baselines %}<h2>Baselines</h2>
<p class="meta">Per domain, on the held-out tasks played: the constant answer and the rule copying from the
question that score best with the domain's verifier, the format-only reward (the reward floor: right format,
wrong answer), and each model's most common answer and share of answers copied from the question.</p>
{{ table(baselines) }}{% endif %}
{% if deltas %}<h2>Changes, worst first</h2>{{ table(deltas) }}{% endif %}
<h2>Per family</h2>{{ table(families) }}
{% if transfer %}<h2>Transfer: trained domains and domains the run never saw</h2>
<p>pass@1, B - A over the shared tasks; a domain improved (regressed) when its own delta's 95% interval is above (below) 0.</p>
{{ table(transfer) }}{% endif %}
{% for name, rows in per_domain %}<h2>Per domain: {{ name }}</h2>{{ table(rows) }}{% endfor %}
{% if capabilities %}<h2>Tool use, multi-turn and context length</h2>{{ table(capabilities) }}{% endif %}
{% if answers %}<h2>Held-out answers</h2>
<p class="meta">What the model answered, a few tasks per domain (answers that changed from A to B first, then
wrong ones): the answer extracted from the completion by the verifier's own rule, against the reference. All of
them: the Evaluation page's "Held-out answers" panel, or <code>rlwb eval samples</code>.</p>
{% for name, rows in answers %}<h3>{{ name }}</h3>{{ table(rows) }}{% endfor %}{% endif %}
<h2>Figures</h2>{% for div in figures %}<div class="figure">{{ div }}</div>{% endfor %}
{% endif %}
</body></html>
"""


def side_rows(report: dict) -> list[dict]:
    """One row per evaluation: role, label, id, mix, tasks × samples, ks, temperature,
    max new tokens, created."""
    out = []
    for tag, s in zip(_sides(report), report["sides"]):
        st = s["settings"]
        out.append({"": tag, "model": s["label"], "evaluation": s["id"], "mix": st["mix"],
                    "tasks × samples": f"{st['tasks_per_domain']} per domain × {st['samples']}",
                    "ks": ", ".join(map(str, st["ks"] or [])), "temperature": st["temperature"],
                    "max new tokens": st["max_new_tokens"], "created": (s["created_at"] or "")[:19]})
    return out


def report_title(report: dict) -> str:
    """"Evaluation: LABEL" or "Evaluation: B-LABEL vs A-LABEL"."""
    labels = [s["label"] for s in report["sides"]]
    return "Evaluation: " + (" vs ".join(reversed(labels)) if labels else "none")


def report_html(report: dict, answers: list[tuple[str, list[dict]]] | None = None) -> str:
    """The report as one self-contained HTML page: tables (regressions on a red background,
    improvements green), the held-out `answers` when given (domain -> rows,
    `backend.heldout.answer_examples`) and interactive figures, with plotly.js inlined once
    (no CDN, no external links; about 5 MB). Works for 0, 1 and 2 evaluations."""
    import jinja2
    from markupsafe import Markup

    figures = [Markup(fig.to_html(full_html=False, include_plotlyjs=i == 0, config={"displaylogo": False},
                                  default_height=f"{fig.layout.height or 380}px"))
               for i, (_, fig) in enumerate(report_figures(report))]
    env = jinja2.Environment(autoescape=True, trim_blocks=True, lstrip_blocks=True)
    tags = _sides(report)
    return env.from_string(_TEMPLATE).render(
        title=report_title(report), written=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        resamples=report["resamples"] if report["sides"] else 0, compared=report["comparison"] is not None,
        warnings=report["warnings"], sides=side_rows(report), headline=headline_rows(report),
        summary=summary_sentence(report),
        deltas=delta_rows(report), families=family_rows(report), transfer=transfer_rows(report),
        baselines=baselines_table(report),
        baseline_note=BASELINE_NOTE, capabilities=capability_rows(report),
        per_domain=[(f"{t} {s['label']}".strip(), domain_rows(report, i))
                    for i, (t, s) in enumerate(zip(tags, report["sides"]))],
        answers=answers or [], figures=figures)


def write_html(store, eval_ids: list[str], path: str | Path, resamples: int = DEFAULT_RESAMPLES,
               overwrite: bool = False, answers: Callable[[Any, dict], list] | None = None) -> dict:
    """Build the report of `eval_ids` (see `build_report`) and write it to `path` as one
    self-contained HTML file, atomically (a temporary file in the same directory, then
    `os.replace`). A symlink is followed (its target is written). Returns the report.
    `answers(store, report)` gives its held-out answers section (`report_html`).

    Raises:
        ConfigError: an empty path; a directory that does not exist; `path` is a directory,
            a device, FIFO or socket, or the store's own database; an existing file without
            `overwrite`.
        EvalNotFound, ConfigError: from `build_report`.
    """
    if not str(path).strip():
        raise ConfigError("--html needs a file name, e.g. --html report.html")
    path = Path(path).resolve()  # write a symlink's target, not over the link
    if not path.parent.is_dir():
        raise ConfigError(f"can't write {path}: the directory {path.parent} does not exist; create it or "
                          "pick another --html path")
    if path.is_dir():
        raise ConfigError(f"can't write {path}: it is a directory; give a file name such as {path / 'report.html'}")
    if path.exists():
        if not path.is_file():
            raise ConfigError(f"can't write {path}: it is not a regular file (a device, FIFO or socket); "
                              "pick another --html path")
        store_file = Path(getattr(store, "path", "")) if getattr(store, "path", ":memory:") != ":memory:" else None
        if store_file is not None and store_file.exists() and os.path.samefile(path, store_file):
            raise ConfigError(f"can't write {path}: it is the store's database; pick another --html path")
        if not overwrite:
            raise ConfigError(f"{path} exists; pass --force to replace it, or pick another --html path")
    report = build_report(store, eval_ids, resamples)
    html = report_html(report, answers(store, report) if answers else None)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as e:
        raise ConfigError(f"can't write {path}: {e.strerror}; pick another --html path") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(html)
        os.chmod(tmp, 0o644)  # mkstemp makes it private; a report is meant to be shared
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return report
