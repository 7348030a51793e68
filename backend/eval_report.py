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
    print(eval_tables.headline_text(report))               # Markdown table for the CLI
    eval_html.write_html(store, [base_id, ckpt_id], "out.html")   # one self-contained file

The report is data; `backend.eval_tables` turns it into the tables the page, the CLI and the
HTML file show (formatted strings), and `backend.eval_html` into figures and the HTML file.
Torch- and plotly-free (the page and the CLI import it); the evaluation module is imported
inside `build_report`, for `rlwb --help`'s start-up. A training run's own held-out
evaluations (greedy, one completion per task, `trainer.evaluate`) are reported by the same
code. Not covered: running evaluations (`backend.evaluation`), reports over more than two
evaluations.
"""

from __future__ import annotations

from core.errors import ConfigError
from trainer.eval_stats import DEFAULT_RESAMPLES, compare, domain_families, jsonable, summarize
from backend.baselines import answer_warnings, group_verdicts, suite_baselines, with_forgiven

MISSING = "—"  # a cell with no value


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


def first_line(text: str | None, limit: int = 300) -> str:
    """An error's first line, cut to `limit` characters (a page table, a message)."""
    line = (text or "").split("\n", 1)[0]
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _side(store, eval_id: str) -> dict:
    ev = store.get_eval(eval_id)
    if ev["status"] != "completed":
        why = f" ({first_line(ev.get('error'))})" if ev.get("error") else ""
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


def _baselines(store, side: dict) -> dict:
    """A side's baselines (`backend.baselines`): those stored with the evaluation, else
    computed from its sample rows (its tasks regenerated from their seeds)."""
    if "baselines" in side["stored_extras"]:

        return with_forgiven(side["stored_extras"]["baselines"], store.eval_samples(side["id"], with_completions=True))
    return suite_baselines(store.eval_samples(side["id"], with_completions=True))
