"""The evaluation report's tables, as the page, the CLI and the HTML file show them.

Each function but `evaluation_rows` (which lists `Store.list_evals` rows) takes
`backend.eval_report.build_report`'s dict and returns display rows
(dicts of formatted strings: rates as percentages with their 95% interval, deltas in
percentage points) or text: the headline per domain and per family against the best
baseline, the deltas worst first, each evaluation's per-domain table, the baselines, the
transfer to domains the run never trained on, tool use and context length, and the
headline as Markdown (`headline_text`) for `rlwb eval report`.

    rows = headline_rows(build_report(store, [a, b]))   # one dict per domain, "all domains" last

Plotly-free. Not covered: figures and the HTML file (`backend.eval_html`).
"""

from __future__ import annotations

from trainer.eval_stats import MIN_TASKS_FOR_VERDICT
from backend.baselines import baseline_rows
from backend.eval_report import MISSING, mix_label, first_line


BASELINE_NOTE = ("best baseline: the strongest of the best constant answer, copying from the question (rules "
                 "fitted on these held-out tasks) and, in a comparison, A as it scored and with the format "
                 "forgiven (the last number of its replies); the verdict is against every one of them.")


def pct(est: dict | None, ci: bool = True) -> str:
    """A rate estimate (`eval_stats` as a dict: value, low, high in 0..1) as "62.1% [58.3, 65.9]",
    without the interval when `ci` is False; `MISSING` for None."""
    if not est:
        return MISSING
    text = f"{100 * est['value']:.1f}%"
    return text + (f" [{100 * est['low']:.1f}, {100 * est['high']:.1f}]" if ci else "")


def pp(delta: dict | None, metric: str = "pass@1") -> str:
    """A delta in percentage points (rates) or reward units (mean_reward), with its CI."""
    if not delta:
        return MISSING
    if metric == "mean_reward":
        return f"{delta['delta']:+.3f} [{delta['low']:+.3f}, {delta['high']:+.3f}]"
    return f"{100 * delta['delta']:+.1f} pp [{100 * delta['low']:+.1f}, {100 * delta['high']:+.1f}]"


def value_text(x: float, metric: str) -> str:
    """A metric's value: reward units to 3 decimals for mean_reward, else a percentage."""
    return f"{x:.3f}" if metric == "mean_reward" else f"{100 * x:.1f}%"


def num(est: dict | None, digits: int = 3) -> str:
    """An estimate's value to `digits` decimals (mean reward), `MISSING` for None."""
    return f"{est['value']:.{digits}f}" if est else MISSING


def side_tags(report: dict) -> list[str]:
    """The sides' column tags: ["A", "B"] for a comparison, [""] for one evaluation."""
    return ["A", "B"] if len(report["sides"]) == 2 else [""] * len(report["sides"])


def _metric_cells(report: dict, metric: str, group: str | None, table: str, fmt, label: str = "") -> dict:
    """{"<label> A": ..., "<label> B": ...} ({"<label>": ...} for one evaluation): `metric` of
    `group` in each side's summary `table` ("domains"/"families"; group None: "overall")."""
    out = {}
    for tag, summary in zip(side_tags(report), report["summaries"]):
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
        row.update(_metric_cells(report, "pass@1", name, table, pct))
        delta = None
        if cmp is not None:
            per = cmp[table].get(name, {}) if name else cmp["overall"]
            delta = per.get("pass@1")
            row["Δ pass@1 [95% CI]"] = pp(delta)
        v = (report["verdicts"][table].get(name) if name else report["verdicts"]["overall"]) or {}
        row["best baseline"] = f"{v['baseline']}: {100 * v['value']:.1f}%" if v.get("value") is not None else MISSING
        row["gain above baseline [95% CI]"] = pp(v.get("gain"))
        if k:
            row.update(_metric_cells(report, f"pass@{k}", name, table, lambda e: pct(e, ci=False)))
        row.update(_metric_cells(report, "mean_reward", name, table, num, label="mean reward"))
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
             "A": value_text(r["a"], r["metric"]), "B": value_text(r["b"], r["metric"]), "Δ [95% CI]": pp(r, r["metric"]),
             "tasks": r["n"], "verdict": r["verdict"]} for r in report["comparison"]["ranked"]]


def domain_rows(report: dict, side: int) -> list[dict]:
    """One evaluation's per-domain table: tasks, samples, pass@k per k (percent, CI), mean
    reward, format rate, tool-call validity and mean turns (multi-turn domains)."""
    out = []
    for d, m in report["summaries"][side]["domains"].items():
        row = {"domain": d, "family": report["families"].get(d, "other"), "tasks": m["tasks"], "samples": m["samples"]}
        row.update({f"pass@{k}": pct(m.get(f"pass@{k}")) for k in report["ks"]})
        row.update({"mean reward": num(m.get("mean_reward")), "format rate": pct(m.get("format_rate"), ci=False),
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
    return baseline_rows(report["baselines"][-1], list(zip(side_tags(report), report["baselines"])))


def capability_rows(report: dict) -> list[dict]:
    """Tool-call validity (valid calls / calls), multi-turn success (share of episodes
    solved, CI over tasks), mean turns and usable context length (tokens, full context and
    retrieval) per evaluation; only the rows some evaluation has."""
    specs = [("tool-call validity", "tool_calls", lambda t: f"{100 * t['validity']:.1f}% ({t['valid_calls']}/{t['calls']})"),
             ("multi-turn success", "multi_turn", lambda t: pct(t["success"])),
             ("mean turns", "multi_turn", lambda t: f"{t['mean_turns']:.1f}"),
             ("usable context, full (tokens)", "context", lambda t: _tokens(t.get("usable_tokens"))),
             ("usable context, retrieval (tokens)", "context", lambda t: _tokens(t.get("usable_tokens_retrieval"))),
             ("usable context, full, number mentioned (tokens)", "context",
              lambda t: _tokens(t.get("usable_tokens_mention")))]
    rows = []
    for label, key, fmt in specs:
        if any(key in ex for ex in report["extras"]):
            row = {"metric": label}
            for tag, ex in zip(side_tags(report), report["extras"]):
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
        out.append({"group": group, "domains": len(members.get(group, [])), "A": value_text(d["a"], "pass@1"),
                    "B": value_text(d["b"], "pass@1"), "Δ [95% CI]": pp(d), "tasks": d["n"],
                    "improved": sum(v.get("low", 0) > 0 for v in verdicts),
                    "regressed": sum(v.get("high", 0) < 0 for v in verdicts)})
    return out


def side_rows(report: dict) -> list[dict]:
    """One row per evaluation: role, label, id, mix, tasks × samples, ks, temperature,
    max new tokens, created."""
    out = []
    for tag, s in zip(side_tags(report), report["sides"]):
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
                    "error": first_line(e.get("error"))})
    return out
