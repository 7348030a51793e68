"""Data shaped for the page: pandas frames and small summaries built from `Store` verbs.

The Streamlit pages call these (through their caches) and only draw the result, so what
the page shows can be tested without Streamlit. Every function reads the store and never
writes it.

Not covered here: charts (the pages build them with Plotly), caching (the pages wrap these
in ``st.cache_data``), and anything that starts or stops runs.
"""

from __future__ import annotations

import re

import difflib
import json
import statistics
from collections.abc import Iterator
from datetime import datetime, timezone

import pandas as pd

from backend.store import Store
# the Runs page reads a run's phases through here
from trainer.phases import current_phase, expected_seconds, parse_time, phase_timeline  # noqa: F401
from domains.registry import registry
from domains.validation import current_validations, validation_report
from domains.tools.env import CONTRACT_ERRORS

#: Chart panels on the Runs page: title -> metric names ("turns/*" means every turns
#: metric: "turns/mean" and one "turns/<domain>" per domain).
METRIC_PANELS: dict[str, tuple[str, ...]] = {
    "Reward and pass rate (mean)": ("reward/mean", "accuracy/mean"),
    "KL to reference": ("kl",),
    "Entropy (nats per token)": ("entropy",),
    "Clip fraction (share of tokens)": ("clip_frac",),
    "Response length (tokens)": ("response_length",),
    "Zero-variance groups (share)": ("zero_variance/groups",),
    "Throughput (tokens/s)": ("rollout_tokens_per_s", "learner_tokens_per_s"),
    "Sandbox latency (ms)": ("sandbox/latency_p50_ms", "sandbox/latency_p99_ms"),
    "Time per phase (s)": ("time/generate", "time/verify", "time/learn", "time/sync"),
    "Peak memory per phase (GiB, process RSS)": ("memory/rollout_peak_gb", "memory/learn_peak_gb",
                                                 "memory/sync_peak_gb", "memory/learner_rank_peak_gb",
                                                 "memory/learner_ranks_peak_gb", "memory/checkpoint_peak_gb",
                                                 "memory/eval_peak_gb"),
    "Memory the sleeping rollout engine gave back (GiB)": ("memory/engine_released_gb",),
    "Turns per episode": ("turns/*",),
    "Tool-call validity (valid calls / calls)": ("tools/call_validity/*",),
    "Tool calls per episode": ("tools/calls_per_episode/*",),
    "Tool calls that ran without an error (share)": ("tools/ok_rate/*",),
    "Tool-call errors by code (count)": ("tools/errors/*",),
}

#: Legend entries of the `METRIC_PANELS` lines (a metric key means little to a reader).
METRIC_LABELS = {"reward/mean": "reward", "accuracy/mean": "pass rate", "kl": "KL", "entropy": "entropy",
                 "clip_frac": "clipped tokens", "response_length": "mean length", "zero_variance/groups": "groups",
                 "rollout_tokens_per_s": "rollout (generation)", "learner_tokens_per_s": "learner update",
                 "sandbox/latency_p50_ms": "median (p50)", "sandbox/latency_p99_ms": "p99",
                 "time/generate": "generation", "time/verify": "verification", "time/learn": "learner update",
                 "time/sync": "weight sync", "memory/rollout_peak_gb": "rollout", "memory/learn_peak_gb": "learner update",
                 "memory/sync_peak_gb": "weight sync", "memory/learner_rank_peak_gb": "largest learner rank",
                 "memory/learner_ranks_peak_gb": "learner ranks together",
                 "memory/checkpoint_peak_gb": "checkpoint", "memory/eval_peak_gb": "held-out evaluation",
                 "memory/engine_released_gb": "given back by the sleeping engine"}


def metric_label(name: str) -> str:
    """A metric's legend entry: `METRIC_LABELS`, else its last part ("tools/errors/timeout"
    -> "timeout"; a "mean" over domains -> "all domains (mean)")."""
    if name in METRIC_LABELS:
        return METRIC_LABELS[name]
    last = name.rsplit("/", 1)[-1]
    return "all domains (mean)" if last == "mean" else last


#: The Runs page's "Per domain" charts: title -> metric prefix; one "<prefix><domain>"
#: metric (one line) per domain.
DOMAIN_PANELS: dict[str, str] = {
    "Reward": "reward/",
    "Pass rate": "accuracy/",
    "Response length (tokens)": "response_length/",
    "Zero-variance groups (share)": "zero_variance/",
    "Curriculum level": "curriculum/level/",
    "Curriculum pass rate (window)": "curriculum/pass_rate/",
    "Answer format rate": "format/",
}

#: Older names of metrics, hidden when the new name is recorded too.
RENAMED = {"zero_variance_groups": "zero_variance/groups"}

PREVIEW_CHARS = 80


def format_duration(seconds: float | None) -> str:
    """Seconds as a short human string: "42s", "3m 05s", "2h 10m"; "" for None."""
    if seconds is None:
        return ""
    s = int(max(seconds, 0))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60:02d}s"
    return f"{s // 3600}h {s % 3600 // 60:02d}m"


def run_duration(run: dict, now: datetime | None = None) -> float | None:
    """Wall-clock seconds a run has been running: start to finish, or start to now if live.

    Returns None if the run never started.
    """
    start = parse_time(run.get("started_at"))
    if start is None:
        return None
    end = parse_time(run.get("finished_at")) or now or datetime.now(timezone.utc)
    return (end - start).total_seconds()


#: Lines a run's process log prints on every CPU run that say nothing is wrong: (pattern,
#: why it is harmless). The page hides them (the file keeps them) and says how many it hid.
HARMLESS_LOG_LINES = (
    (r"Triton is not installed|Triton is installed, but doesn't include CPU|Model Runner V2 requires Triton",
     "vLLM's CPU build runs without Triton"),
    (r"(libtcmalloc|libiomp) is not found in LD_PRELOAD",
     "vLLM suggests a library it can go without (runs preload TCMalloc where installed: core/allocator.py)"),
    (r"NUMA binding: Using MEMBIND policy", "vLLM binds memory to this machine's one NUMA node"),
    (r"doesn't allow to use `torch.set_num_threads` after the thread binding|OMP_NUM_THREADS=\d+ is set",
     "vLLM keeps the threads it was given"),
    (r"Setting accelerator to CPU", "DeepSpeed found no GPU: the CPU is expected here"),
    (r"Passing raw prompts to InputProcessor is deprecated|`torch.distributed.reduce_op` is deprecated|"
     r"Reset SSM cache type", "a library's notice to its own developers"),
    (r"The global random seed is set to \d+", "the run seeds vLLM on purpose"),
)


def readable_log(lines: list[str]) -> tuple[list[str], dict[str, int]]:
    """A process log's lines without the known-harmless ones (`HARMLESS_LOG_LINES`).

    Returns:
        (the lines kept, in order; why -> how many lines were hidden for that reason).
    """
    kept, hidden = [], {}
    last = None  # why the line before was hidden: Python's warnings echo their source line, indented, next
    for line in lines:
        why = next((w for pattern, w in _HARMLESS if pattern.search(line)), None)
        if why is None and last is not None and line.startswith("  ") and line.strip():
            why = last
        if why is None:
            kept.append(line)
        else:
            hidden[why] = hidden.get(why, 0) + 1
        last = why
    return kept, hidden


_HARMLESS = [(re.compile(p), why) for p, why in HARMLESS_LOG_LINES]


def runs_table(store: Store, limit: int = 200) -> pd.DataFrame:
    """One row per run, newest first: id, name, status, progress ("step/total"), created, duration.

    `created` is "YYYY-MM-DD HH:MM" UTC; `duration` is `format_duration` of `run_duration`.
    """
    rows = [
        {
            "id": r["id"], "name": r["name"], "status": r["status"],
            "progress": f"{r['step'] or 0}/{r['total_steps'] or 0}",
            "created": r["created_at"][:16].replace("T", " "),
            "duration": format_duration(run_duration(r)),
        }
        for r in store.list_runs(limit)
    ]
    return pd.DataFrame(rows, columns=["id", "name", "status", "progress", "created", "duration"])


def metrics_frame(store: Store, run_id: str) -> pd.DataFrame:
    """All metrics of a run in long form: columns step, name, value (ordered by step)."""
    return pd.DataFrame(store.run_metrics(run_id), columns=["step", "name", "value"])


def _panel_names(pattern: str, names: list[str]) -> list[str]:
    if pattern.endswith("/*"):
        prefix = pattern[:-1]
        mean = prefix + "mean"
        return sorted((n for n in names if n.startswith(prefix)), key=lambda n: (n != mean, n))
    return [pattern] if pattern in names else []


def metric_domains(frame: pd.DataFrame) -> list[str]:
    """The domains a `metrics_frame` has per-domain metrics for (each "reward/<domain>"), sorted."""
    names = frame["name"].unique() if len(frame) else []
    return sorted(n.removeprefix("reward/") for n in names if n.startswith("reward/") and n != "reward/mean")


def domain_panels(frame: pd.DataFrame, domains: list[str]) -> dict[str, pd.DataFrame]:
    """The "Per domain" charts of a `metrics_frame` for `domains`.

    Returns:
        `DOMAIN_PANELS` title -> rows (step, name = the domain, value), ordered by domain
        then step; titles without data for any of `domains` are left out.
    """
    out = {}
    for title, prefix in DOMAIN_PANELS.items():
        rows = frame[frame["name"].isin([prefix + d for d in domains])]
        if len(rows):
            rows = rows.assign(name=rows["name"].str.removeprefix(prefix))
            out[title] = rows.sort_values(["name", "step"], kind="stable").reset_index(drop=True)
    return out


def metric_panels(frame: pd.DataFrame) -> tuple[dict[str, pd.DataFrame], pd.DataFrame]:
    """Split a `metrics_frame` into the known chart panels and the rest.

    Per-domain metrics (`DOMAIN_PANELS`, see `domain_panels`), the audit metrics
    (``audit/*``, `backend.audit_view.audit_curves`) and old names of metrics recorded
    under a new one too (`RENAMED`) belong to neither.

    Returns:
        (panels, other): panels maps each `METRIC_PANELS` title that has data to its rows
        (long form, ordered by metric then step); other holds the metrics no panel shows.
    """
    names = sorted(frame["name"].unique()) if len(frame) else []
    panels = {}
    shown = {p + d for p in DOMAIN_PANELS.values() for d in metric_domains(frame)}
    shown |= {old for old, new in RENAMED.items() if new in names}
    shown |= {n for n in names if n.startswith("audit/")}  # the Reward audit panel draws them
    for title, patterns in METRIC_PANELS.items():
        chosen = [n for p in patterns for n in _panel_names(p, names)]
        if chosen:  # rows in legend order: */mean first, then domains
            panels[title] = pd.concat([frame[frame["name"] == n] for n in chosen],
                                      ignore_index=True)
            shown.update(chosen)
    other = frame[~frame["name"].isin(shown)].reset_index(drop=True)
    return panels, other


def _phase_key(phase: str) -> tuple[int, int]:
    if phase == "before":
        return (0, 0)
    if phase.startswith("step-") and phase[5:].isdigit():
        return (1, int(phase[5:]))
    return (2, 0) if phase == "after" else (3, 0)


def evaluation_table(store: Store, run_id: str) -> pd.DataFrame:
    """Accuracy per domain (rows) and evaluation phase (columns: before, step-N..., after).

    Adds a "change" column (after - before) when both phases exist, and "n" (tasks per
    domain, from the latest phase). Empty frame if the run has no evaluations.
    """
    evals = pd.DataFrame(store.evaluations(run_id))
    if evals.empty:
        return pd.DataFrame()
    table = evals.pivot_table(index="domain", columns="phase", values="accuracy", aggfunc="last")
    table = table[sorted(table.columns, key=_phase_key)]
    if {"before", "after"} <= set(table.columns):
        table["change"] = table["after"] - table["before"]
    table["n"] = evals.groupby("domain")["n"].last()
    table.columns.name = None
    return table.reset_index()


def evaluation_curves(store: Store, run_id: str) -> pd.DataFrame:
    """Held-out evaluations of a run as curves: rows (step, name, value) with name a domain
    or "mean" (over domains) and value the greedy accuracy, at each row's step ("before" is
    step 0, "step-N" step N and "after" the run's last step: `Store.record_evaluation`).
    Empty frame without evaluations."""
    rows = store.evaluations(run_id)
    if not rows:
        return pd.DataFrame(columns=["step", "name", "value"])
    out = [{"step": r["step"], "name": r["domain"], "value": r["accuracy"]} for r in rows if r["step"] is not None]
    frame = pd.DataFrame(out, columns=["step", "name", "value"])
    mean = frame.groupby("step", as_index=False)["value"].mean().assign(name="mean")
    return pd.concat([mean, frame], ignore_index=True).sort_values(["name", "step"], kind="stable",
                                                                  ignore_index=True)


def checkpoints_frame(store: Store, run_id: str) -> pd.DataFrame:
    """Checkpoints of a run: columns step, path, created_at (ordered by step)."""
    return pd.DataFrame(store.checkpoints(run_id), columns=["step", "path", "created_at"])


def _preview(text: str) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 1] + "…"


TRAJ_COLUMNS = ["id", "step", "domain", "group", "sample", "reward", "advantage",
                "tokens", "finish", "completion"]


def trajectories_frame(store: Store, run_id: str, **filters) -> pd.DataFrame:
    """Trajectories matching `filters` (see `Store.trajectories`) as a table.

    Columns: id, step, domain, group, sample, reward, advantage, tokens (completion
    tokens), finish (finish reason), completion (first `PREVIEW_CHARS` characters).
    Reads light rows (`Store.trajectory_summaries`): no JSON is decoded for the table.
    """
    rows = [
        {
            "id": t["id"], "step": t["step"], "domain": t["domain"], "group": t["group_idx"],
            "sample": t["sample_idx"], "reward": t["reward"], "advantage": t["advantage"],
            "tokens": t["completion_tokens"], "finish": t["finish_reason"],
            "completion": _preview(t["completion"]),
        }
        for t in store.trajectory_summaries(run_id, **filters)
    ]
    return pd.DataFrame(rows, columns=TRAJ_COLUMNS)


def trajectories_jsonl(store: Store, run_id: str, *, limit: int | None = None, **filters) -> Iterator[str]:
    """The trajectories matching `filters` (see `Store.trajectories`) as JSON Lines: one
    line per trajectory, in list order, with every stored field (turns, breakdown and
    retrieval record decoded, not as JSON strings); at most `limit` lines (None: all).
    Streams from the store a batch at a time. Every line encodes as UTF-8: a row holding a
    lone surrogate (stored as a JSON escape in its turns or breakdown) is written with
    ``\\u`` escapes instead."""
    for t in store.export_trajectories(run_id, limit=limit, **filters):
        line = json.dumps(t, ensure_ascii=False, default=str)
        try:
            line.encode("utf-8")
        except UnicodeEncodeError:
            line = json.dumps(t, default=str)
        yield line + "\n"


def completion_diff(a: dict, b: dict, max_lines: int = 2000) -> str:
    """Unified line diff of two trajectories' completions ("" when they are equal).

    Headers name them as ``#<id> (sample <i>)``; only the first `max_lines` lines of each
    completion are compared (a note says so when one is longer).
    """
    left, right = (t["completion"].splitlines() for t in (a, b))
    diff = "\n".join(difflib.unified_diff(
        left[:max_lines], right[:max_lines], lineterm="",
        fromfile=f"#{a['id']} (sample {a['sample_idx']})", tofile=f"#{b['id']} (sample {b['sample_idx']})"))
    if diff and max(len(left), len(right)) > max_lines:
        diff += f"\n(only the first {max_lines} lines of each completion compared)"
    return diff


def group_frame(store: Store, traj: dict) -> pd.DataFrame:
    """The samples of `traj`'s group: sample, reward, advantage, tokens, finish, id and the
    completion's start last (the wide column, so the others stay in view).

    A "this" column marks the row of `traj` itself with "▶".
    """
    rows = [
        {
            "this": "▶" if t["id"] == traj["id"] else "", "sample": t["sample_idx"],
            "reward": t["reward"], "advantage": t["advantage"], "tokens": t["completion_tokens"],
            "finish": t["finish_reason"], "id": t["id"], "completion": _preview(t["completion"]),
        }
        for t in store.group(traj["run_id"], traj["step"], traj["group_idx"])
    ]
    return pd.DataFrame(rows)


EXECUTION_COLUMNS = ["created_at", "run_id", "step", "kind", "outcome", "exit_code", "latency_ms", "queue_ms",
                     "attempts", "backend", "sandbox", "command", "error"]


def sandbox_executions_frame(store: Store, limit: int = 200, run_id: str | None = None) -> pd.DataFrame:
    """Recent sandbox executions (newest first) with the columns the Sandboxes page shows."""
    rows = store.sandbox_executions(limit=limit, run_id=run_id)
    frame = pd.DataFrame(rows, columns=["id", *EXECUTION_COLUMNS])
    frame["command"] = frame["command"].fillna("").map(_preview)
    return frame[EXECUTION_COLUMNS]


def sandbox_summary(store: Store, run_id: str | None = None) -> dict:
    """Executions by outcome and latency percentiles (ms) over the last 1000 executions."""
    # on first use: it pulls in pydantic
    from sandboxes.pool import percentile

    rows = store.sandbox_executions(limit=1000, run_id=run_id)
    lat = [r["latency_ms"] for r in rows if r["latency_ms"] is not None]
    return {"by_outcome": store.sandbox_failures(run_id), "executions": len(rows),
            "latency_p50_ms": percentile(lat, 50) if lat else None,
            "latency_p99_ms": percentile(lat, 99) if lat else None}


def turns_frame(traj: dict) -> pd.DataFrame:
    """The turns of a multi-turn trajectory, one row each (empty for single-turn ones):
    terminal turns with their command, exit code and time; tool turns with their calls
    (names) and error codes; game turns with their move."""
    cols = ["turn", "action", "command", "exit_code", "duration_ms", "timed_out", "calls", "errors", "move"]
    rows = []
    for t in traj.get("turns") or []:
        row = {c: t.get(c) for c in cols[:6]}
        if "calls" in t:
            row["calls"] = ", ".join(str(c.get("name")) for c in t["calls"]) or "(none)"
            row["errors"] = ", ".join(c["error"] for c in t["calls"] if c.get("error")) or ""
            row["duration_ms"] = round(sum(c.get("duration_ms") or 0 for c in t["calls"]), 1)
        row["move"] = t.get("move")
        rows.append(row)
    return pd.DataFrame(rows, columns=cols)


def calls_frame(traj: dict) -> pd.DataFrame:
    """Every tool call of a trajectory, one row each: turn, index in the turn, tool name,
    arguments (JSON), valid (parsed and met the tool's schema), error code (contract or
    tool failure; empty when it ran), time in ms, and the start of the observation."""

    cols = ["turn", "call", "name", "arguments", "valid", "error", "duration_ms", "observation"]
    rows = []
    for t in traj.get("turns") or []:
        for c in t.get("calls") or []:
            rows.append({"turn": t.get("turn"), "call": c.get("index"), "name": c.get("name"),
                         "arguments": json.dumps(c.get("arguments"), ensure_ascii=False)[:300],
                         "valid": c.get("error") not in CONTRACT_ERRORS, "error": c.get("error") or "",
                         "duration_ms": c.get("duration_ms"), "observation": _preview(c.get("observation") or "")})
    return pd.DataFrame(rows, columns=cols)


DOMAIN_COLUMNS = ["name", "family", "kind", "levels", "validation", "source", "license", "gen_ms", "description",
                  "reasons"]
FAMILY_COLUMNS = ["family", "domains", "passed", "failed", "not validated", "kinds", "sources", "levels",
                  "median gen ms"]
OWN_SOURCE = "rl-workbench"  # the package name of the domains this project generates itself


def source_package(source: str) -> str:
    """The package a domain's tasks come from, from its `source` line: "reasoning-gym
    0.1.25, chain_sum" -> "reasoning-gym"; the project's own generators -> "rl-workbench"."""
    first = source.split(",")[0].split()[0] if source.strip() else ""
    return OWN_SOURCE if first.lower() in ("", "generated", "hand-made", "rl-workbench") else first


def _median_gen_ms(report: dict | None) -> float | None:
    times = [lv["gen_ms_per_task"] for lv in (report or {}).get("levels", []) if "gen_ms_per_task" in lv]
    return round(statistics.median(times), 2) if times else None


def domains_frame(store: Store) -> pd.DataFrame:
    """The domain catalogue: every registered domain with its newest validation verdict.

    Columns: name, family, kind, levels (e.g. "1-3"), validation ("passed", "failed" or
    "not validated"; a shipped report counts, `domains.shipped_validations`), source (the
    package, `source_package`), license, gen_ms (median over levels of the report's
    generation time per task, milliseconds of CPU; None without a report), description,
    reasons (why the newest validation failed, "; "-joined). Rows sorted by name. Builds
    the registry on first use (~2 s).
    """

    latest = current_validations(store)
    rows = []
    for name, d in registry().items():
        v = latest.get(name)
        status = "not validated" if v is None else ("passed" if v["passed"] else "failed")
        rows.append({"name": name, "family": d.family, "kind": d.kind, "levels": f"{min(d.levels)}-{max(d.levels)}",
                     "validation": status, "source": source_package(d.source), "license": d.license,
                     "gen_ms": _median_gen_ms(validation_report(store, name)) if v else None,
                     "description": d.description,
                     "reasons": "; ".join(v["reasons"]) if v and not v["passed"] else ""})
    return pd.DataFrame(rows, columns=DOMAIN_COLUMNS).sort_values("name", ignore_index=True)


def family_overview(catalogue: pd.DataFrame) -> pd.DataFrame:
    """One row per family of a `domains_frame`: how many domains, how many passed, failed
    or were never validated, its kinds and sources, its level range and the median of its
    domains' generation times (ms per task). Sorted by domains, most first."""
    rows = []
    for family, g in catalogue.groupby("family"):
        lo = min(int(x.split("-")[0]) for x in g["levels"])
        hi = max(int(x.split("-")[1]) for x in g["levels"])
        counts = g["validation"].value_counts()
        gen = g["gen_ms"].dropna()
        rows.append({"family": family, "domains": len(g), "passed": int(counts.get("passed", 0)),
                     "failed": int(counts.get("failed", 0)), "not validated": int(counts.get("not validated", 0)),
                     "kinds": ", ".join(sorted(g["kind"].unique())), "sources": ", ".join(sorted(g["source"].unique())),
                     "levels": f"{lo}-{hi}", "median gen ms": round(float(gen.median()), 2) if len(gen) else None})
    frame = pd.DataFrame(rows, columns=FAMILY_COLUMNS)
    return frame.sort_values(["domains", "family"], ascending=[False, True], ignore_index=True)


_CHATML = re.compile(r"<\|im_start\|>(\w+)\n(.*?)(?:<\|im_end\|>\n?|\Z)", re.S)


def readable_prompt(prompt: str) -> str:
    """A chat-templated prompt as role-labelled messages ("[system] ...", "[user] ...", then
    "[assistant]" where the model's reply starts) when it is ChatML (SmolLM2's and Qwen's
    template); any other text unchanged."""
    parts = _CHATML.findall(prompt or "")
    if not parts:
        return prompt
    return "\n\n".join(f"[{role}] {content.strip()}" if content.strip() else f"[{role}]" for role, content in parts)
