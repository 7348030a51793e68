"""Runs page: the table of runs; for one run its status, progress and ETA, Stop / Resume /
Clone and edit, curves (overall, per domain, time per phase), the reward audit (collapse and
hacking flags with links to example trajectories), the held-out evaluation (accuracy with
its 95% interval, format rate, best baseline and verdict per domain, links to the held-out
answers and the full comparison on the Evaluation page, and the `rlwb eval` results of its
checkpoints), checkpoints and its process log; and a comparison of several runs with
overlaid curves.

UI only: data comes from `backend.views` and `Store` verbs through cached loaders; stop and
resume go through `backend.runs`. A live run's panel refreshes itself every few seconds.
"""

from __future__ import annotations

from datetime import datetime, timezone

import pandas as pd
import streamlit as st

from app.charts import facet_chart, line_chart
from app.common import (check_liveness, db_path, follow_table_selection, get_store, load_runs, run_picker,
                        runs_or_notice)
from backend import audit_view, heldout, views
from backend import runs as run_manager
from core.errors import WorkbenchError

LIVE_REFRESH = "10s"


@st.cache_data(ttl=5, show_spinner=False)
def load_run(path: str, run_id: str) -> dict:
    return get_store(path).get_run(run_id)


@st.cache_data(ttl=5, show_spinner=False)
def load_metrics(path: str, run_id: str) -> pd.DataFrame:
    return views.metrics_frame(get_store(path), run_id)


@st.cache_data(ttl=30, show_spinner=False)
def load_evaluations(path: str, run_id: str) -> pd.DataFrame:
    return views.evaluation_table(get_store(path), run_id)


@st.cache_data(ttl=5, show_spinner=False)
def load_evaluation_curves(path: str, run_id: str) -> pd.DataFrame:
    return views.evaluation_curves(get_store(path), run_id)


@st.cache_data(ttl=600, show_spinner="Computing the held-out figures…")
def load_heldout(path: str, run_id: str, eval_ids: tuple[str, ...]) -> dict | None:
    """`heldout.run_heldout`, cached per run and its in-run evaluations' ids (`eval_ids`, part
    of the key: a new or replaced evaluation recomputes; completed ones never change). The
    baselines cost verifier calls over every stored completion, so not once per refresh."""
    return heldout.run_heldout(get_store(path), run_id)


@st.cache_data(ttl=10, show_spinner=False)
def load_checkpoint_evals(path: str, run_id: str) -> list[dict]:
    return heldout.checkpoint_evals(get_store(path), run_id)


@st.cache_data(ttl=5, show_spinner=False)
def load_checkpoints(path: str, run_id: str) -> pd.DataFrame:
    return views.checkpoints_frame(get_store(path), run_id)


@st.cache_data(ttl=2, show_spinner=False)
def load_phases(path: str, run_id: str) -> list[dict]:
    return get_store(path).run_phases(run_id)


def show_status(run: dict, metrics: pd.DataFrame, phases: list[dict]) -> None:
    cols = st.columns(5)
    cols[0].metric("Status", run["status"])
    cols[1].metric("Step", f"{run['step'] or 0} / {run['total_steps'] or 0}")
    clock = datetime.now(timezone.utc)  # one clock for the duration and the phases: they agree on every refresh
    cols[2].metric("Duration", views.format_duration(views.run_duration(run, clock)) or "—")
    step_times = metrics.loc[metrics["name"] == "time/step"].sort_values("step")["value"].tolist()
    eta = run_manager.eta_seconds(run, step_times)
    cols[3].metric("ETA", views.format_duration(eta) if eta else "—",
                   help="Mean of the last 5 step times × steps left (evaluation not counted)")
    beat = run["heartbeat_at"]
    cols[4].metric("Last heartbeat (UTC)", beat[11:19] if beat else "—")
    # what the process is doing now, in words and for how long (an evaluation: against the previous one)
    now = views.current_phase(run, phases)
    timeline = views.phase_timeline(phases, run["total_steps"], clock)
    if now is not None:
        expected = views.expected_seconds(timeline)
        # time in this phase (this step, not the steps merged in the timeline below)
        in_phase = (clock - views.parse_time(phases[-1]["started_at"])).total_seconds()
        st.markdown(f":material/pending: **Now: {now}** · {views.format_duration(in_phase)}"
                    + (f" of about {views.format_duration(expected)} (as long as the previous evaluation)"
                       if expected else ""))
    elif run["status"] in ("pending", "running"):
        st.markdown(":material/pending: **Now: " + ("waiting to start" if run["status"] == "pending"
                                                     else "starting the run") + "**")
    if run["total_steps"]:
        st.progress(min((run["step"] or 0) / run["total_steps"], 1.0))
    if timeline:
        st.caption("Where the time went: " + " → ".join(
            f"{e['label']} {views.format_duration(e['seconds'])}" + (" (now)" if e["live"] and now else "")
            for e in timeline))
    if run["status"] == "failed":
        st.error(run["error"] or "The run failed without an error message.")
        if run["traceback"]:
            with st.expander("Traceback"):
                st.code(run["traceback"], language=None)
    elif run["error"]:
        st.warning(run["error"])


def show_curves(path: str, run_id: str) -> None:
    panels, other = views.metric_panels(load_metrics(path, run_id))
    if not panels and other.empty:
        st.info("No metrics recorded yet; they appear after the first training step.")
        return
    cols = st.columns(2)
    for i, (title, frame) in enumerate(panels.items()):
        with cols[i % 2]:
            st.plotly_chart(line_chart(frame, title, label=views.metric_label), key=f"runs_chart_{i}")
    if not other.empty:
        names = other["name"].nunique()
        with st.expander(f"Other metrics ({names})"):
            st.plotly_chart(facet_chart(other, (names + 1) // 2), key="runs_chart_other")


def show_domains(path: str, run_id: str) -> None:
    """Per-domain curves (reward, pass rate, length, zero-variance share, curriculum level)
    for the domains picked; nothing for runs without per-domain metrics."""
    frame = load_metrics(path, run_id)
    domains = views.metric_domains(frame)
    if not domains:
        return
    st.subheader("Per domain")
    # keyed by the domain list too: a domain first sampled at a later step joins the picked ones
    picked = st.multiselect("Domains", domains, default=domains, key=f"runs_domains_{run_id}_{'|'.join(domains)}")
    if not picked:
        st.caption("Pick one or more domains to plot.")
        return
    cols = st.columns(2)
    for i, (title, data) in enumerate(views.domain_panels(frame, picked).items()):
        with cols[i % 2]:
            st.plotly_chart(line_chart(data, title), key=f"runs_domain_chart_{i}")


@st.cache_data(ttl=10, show_spinner=False)
def load_audit(path: str, run_id: str) -> audit_view.AuditReport:
    return audit_view.audit_run(get_store(path), run_id)


#: The reward-audit table's columns (`trainer.audit.AnswerSignals`): short labels and widths in
#: pixels so all ten fit the page (the soak found them cut on the right), each explained on hover.
_text, _number = st.column_config.TextColumn, st.column_config.NumberColumn
AUDIT_COLUMNS = {
    "domain": _text("domain", width=140),
    "answers": _number("answers", width=65, help="Completions with a parsed answer"),
    "modal answer": _text("modal answer", width=140, help="The most common answer (widen the column to read it all)"),
    "modal share": _number("modal", width=75, format="percent", help="The modal answer's share of the answers"),
    "references' modal share": _number(
        "refs' modal", width=90, format="percent",
        help="The most common reference answer's share: what a policy that is always right would show as 'modal'"),
    "distinct per group": _number("distinct / group", width=110, format="%.2f",
                                  help="Distinct answers per group (the samples of one task), mean over groups"),
    "diversity": _number("diversity", width=75, format="%.2f",
                         help="Distinct per-group modal answers / distinct references (1: no collapse across tasks)"),
    "copied": _number("copied", width=70, format="percent",
                      help="Wrong answers found in their prompt, as a share of the answers"),
    "format reward": _number("format r.", width=75, format="%.3f", help="Mean reward not from correctness"),
    "correct reward": _number("correct r.", width=80, format="%.3f", help="Mean reward from correctness"),
}

#: The held-out figures (`heldout.figure_rows`) as two tables that each fit the page: the
#: accuracy by phase, then the best baseline and the verdict against it.
#: Column name prefixes of each; the second's with their widths in pixels: together they fit
#: the page, and the longest verdict ("no gain beyond copying the question's last number") may
#: end in "…" (widen the column to read it).
HELDOUT_ACCURACY = ("domain", "tasks", "accuracy", "change", "format rate")
HELDOUT_VERDICT_PX = {"domain": 140, "best baseline": 270, "gain above baseline": 180, "verdict": 330}


def _heldout_columns(rows: list[dict], wanted) -> list[str]:
    """The columns of `rows` (never empty: the "all domains" row is always there) whose names
    start with one of `wanted`, in their order."""
    return [c for c in rows[0] if c.startswith(tuple(wanted))]


def show_audit(path: str, run_id: str) -> None:
    """The reward audit (`backend.audit_view`): each flag with links to its example
    trajectories, or "no audit flags"; the figures per domain and their curves."""
    report = load_audit(path, run_id)
    if not report.domains:
        return
    st.subheader("Reward audit")
    lo, hi = report.steps
    if not report.flags:
        st.success(f"No audit flags over steps {lo}-{hi}: no domain collapsed to one answer, copied from its "
                   "prompt, or gained reward while its answers lost diversity or length.")
    for flag in report.flags:
        st.warning(f"**{flag.domain}** · `{flag.signal}` (steps {lo}-{hi}): {flag.detail}")
        for col, traj_id in zip(st.columns(audit_view.EXAMPLES), flag.examples):
            with col:
                st.page_link("screens/trajectories.py", label=f"#{traj_id}", icon=":material/route:",
                             query_params={"run": run_id, "traj": str(traj_id)})
    st.dataframe(pd.DataFrame(audit_view.audit_table(report)), hide_index=True, column_config=AUDIT_COLUMNS)
    st.caption(f"Answers pooled over steps {lo}-{hi}. A flag asks you to read its example trajectories; "
               "the rule and its thresholds: backend/audit_view.py.")
    curves = audit_view.audit_curves(load_metrics(path, run_id))
    if curves:
        with st.expander("Audit curves per domain"):
            cols = st.columns(2)
            for i, (title, data) in enumerate(curves.items()):
                with cols[i % 2]:
                    st.plotly_chart(line_chart(data, title), key=f"runs_audit_chart_{i}")


def _links(run_id: str, query: dict, domains: list[str]) -> None:
    """Links to the Evaluation page: the full comparison, and each domain's held-out answers."""
    st.page_link("screens/evaluation.py", label="Full comparison and held-out answers (Evaluation page)",
                 icon=":material/compare:", query_params=query)
    for col, d in zip(st.columns(max(len(domains), 1)), domains):
        with col:
            st.page_link("screens/evaluation.py", label=f"{d}: held-out answers", icon=":material/fact_check:",
                         query_params={**query, "domain": d})


def show_heldout(path: str, run_id: str) -> None:
    """The held-out evaluation: curves of the in-run phases; the figures of "before" against
    the latest phase (`backend.heldout.run_heldout`: the Evaluation page's report) with links
    to the answers; the `rlwb eval` results of the run's checkpoints. A run recorded before
    the completions were stored shows its aggregates only."""
    evals = load_evaluations(path, run_id)
    figures = load_heldout(path, run_id, tuple(e["id"] for e in get_store(path).in_run_evals(run_id)))
    checkpoints = load_checkpoint_evals(path, run_id)
    if evals.empty and figures is None and not checkpoints:
        return
    st.subheader("Held-out evaluation")
    curves = load_evaluation_curves(path, run_id)
    if not curves.empty and curves["step"].nunique() > 1:
        st.plotly_chart(line_chart(curves, "Held-out accuracy (greedy), mean and per domain"),
                        key=f"eval_curves_{run_id}")
    if figures is not None:
        ids, phases = figures["ids"], figures["phases"]
        st.caption(f"{' vs '.join(phases)}: accuracy (greedy pass@1) with its 95% bootstrap interval over tasks "
                   f"(\"too few tasks\" under {heldout.MIN_TASKS_FOR_VERDICT}), the answer-format rate, the best "
                   "baseline (a constant answer or a copy from the question, fitted on these tasks) and the verdict "
                   "against it and the start. " + heldout.IN_RUN_NOTE)
        st.dataframe(figures["rows"], hide_index=True, key=f"runs_heldout_{run_id}",
                     column_order=_heldout_columns(figures["rows"], HELDOUT_ACCURACY))
        verdict_columns = _heldout_columns(figures["rows"], HELDOUT_VERDICT_PX)
        widths = {c: next(w for p, w in HELDOUT_VERDICT_PX.items() if c.startswith(p)) for c in verdict_columns}
        st.dataframe(figures["rows"], hide_index=True, key=f"runs_heldout_verdict_{run_id}",
                     column_order=verdict_columns, column_config={c: _text(width=w) for c, w in widths.items()})
        query = {"a": ids[0], "b": ids[-1]} if len(ids) == 2 else {"b": ids[0]}
        _links(run_id, query, [r["domain"] for r in figures["rows"][:-1]])
    elif not evals.empty:
        st.caption("Accuracy per domain on held-out tasks, by phase. This run was recorded before its held-out "
                   "completions were stored: no intervals, baselines or answers.")
        percent = {c: st.column_config.NumberColumn(format="percent")
                   for c in evals.columns if c not in ("domain", "n")}
        st.dataframe(evals, hide_index=True, column_config=percent)
    if checkpoints:
        st.markdown("**`rlwb eval` of this run's checkpoints** — sampled pass@1 (several completions per task at "
                    "a temperature), not the greedy in-run figure above")
        st.dataframe(checkpoints, hide_index=True, key=f"runs_checkpoint_evals_{run_id}")
        for col, row in zip(st.columns(min(len(checkpoints), 4)), checkpoints[:4]):
            with col:
                st.page_link("screens/evaluation.py", label=f"{row['evaluation']} (step {row['step']})",
                             icon=":material/analytics:", query_params={"b": row["evaluation"]})


def stop_run(path: str, run_id: str) -> None:
    try:
        how = run_manager.stop(get_store(path), run_id)
        st.session_state["runs_notice"] = ("Stop signal sent; the run stops after its current writes."
                                           if how == "signalled" else "Its process had already ended; marked stopped.")
    except WorkbenchError as e:
        st.session_state["runs_notice"] = f"Can't stop: {e}"
    load_run.clear()
    load_runs.clear()


def resume_run(path: str, run_id: str) -> None:
    try:
        point = run_manager.resume(get_store(path), run_id)
        st.session_state["runs_notice"] = f"Resumed after step {point.step} from {point.path}."
    except WorkbenchError as e:
        st.session_state["runs_notice"] = f"Can't resume: {e}"
    load_run.clear()
    load_runs.clear()
    load_metrics.clear()
    load_checkpoints.clear()


def show_actions(path: str, run: dict) -> None:
    """Stop (live runs), Resume (stopped or failed runs with a checkpoint), Clone and edit."""
    live = run["status"] in ("pending", "running")
    cols = st.columns([1, 1, 2, 4])
    cols[0].button("Stop", key="runs_stop", disabled=not live, on_click=stop_run, args=(path, run["id"]),
                   help="SIGTERM to the run's process; completed steps are kept", icon=":material/stop_circle:")
    can_resume = run["status"] in ("stopped", "failed") and not load_checkpoints(path, run["id"]).empty
    cols[1].button("Resume", key="runs_resume", disabled=not can_resume, on_click=resume_run,
                   args=(path, run["id"]), icon=":material/play_circle:",
                   help="Continue from the last checkpoint in a background process" if can_resume else
                   "Only a stopped or failed run with a checkpoint can resume")
    with cols[2]:
        st.page_link("screens/launch.py", label="Clone and edit", icon=":material/content_copy:",
                     query_params={"clone": run["id"]})
    notice = st.session_state.pop("runs_notice", None)
    if notice:
        (st.warning if notice.startswith("Can't") else st.success)(notice)


def show_log(path: str, run: dict) -> None:
    """The process log's last 80 lines, known-harmless warnings left out unless asked for
    (the file keeps every line)."""
    log = run_manager.log_path(get_store(path), run["id"])
    if log.is_file():
        with st.expander("Process log (last 80 lines)", expanded=run["status"] == "failed"):
            lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
            everything = st.toggle("Show known-harmless warnings too", key=f"runs_log_all_{run['id']}")
            kept, hidden = (lines, {}) if everything else views.readable_log(lines)
            if hidden:
                st.caption(f"{sum(hidden.values())} known-harmless lines hidden: "
                           + "; ".join(f"{why} ({n})" for why, n in hidden.items()) + f". The file: `{log}`")
            st.code("\n".join(kept[-80:]), language=None)


def show_run(path: str, run_id: str, shown: tuple[str, str] | None = None) -> None:
    """Everything about one run; drawn inside a fragment so a live run refreshes alone.

    `shown` is the run's (status, progress) in the runs table above the fragment; when the
    run has moved on, the whole page reruns so the table (and the refresh rate) follow."""
    run = load_run(path, run_id)
    if run["status"] in ("pending", "running") and run_id in check_liveness(path):
        load_run.clear()  # its process is gone (killed, or ended without a word): now marked failed or stopped
        run = load_run(path, run_id)
    if shown is not None and shown != (run["status"], f"{run['step'] or 0}/{run['total_steps'] or 0}"):
        load_runs.clear()
        load_run.clear()  # both fresh after the rerun, so they agree (no rerun loop)
        st.rerun(scope="app")
    st.subheader(f"{run['name']} · `{run['id']}`")
    show_status(run, load_metrics(path, run_id), load_phases(path, run_id))
    show_actions(path, run)
    pin = (run.get("config") or {}).get("mix_spec")
    if pin:
        st.caption(f"Mix **{pin['name']}@{pin['version']}**: " + ", ".join(
            f"{d} ×{s['weight']:g} (levels {s['levels'][0]}-{s['levels'][1]})" for d, s in pin["domains"].items()))
    st.page_link("screens/trajectories.py", label="Inspect this run's trajectories",
                 icon=":material/route:", query_params={"run": run_id})
    with st.expander("Config"):
        st.json(run["config"])
    show_curves(path, run_id)
    show_domains(path, run_id)
    show_audit(path, run_id)

    show_heldout(path, run_id)

    st.subheader("Checkpoints")
    ckpts = load_checkpoints(path, run_id)
    if ckpts.empty:
        st.caption("No checkpoints saved yet.")
    else:
        st.dataframe(ckpts, hide_index=True)
    show_log(path, run)


def show_compare(path: str, table: pd.DataFrame, run_id: str) -> None:
    """Overlaid curves of several runs, one line per run, for the metrics picked."""
    st.subheader("Compare runs")
    names = dict(zip(table["id"], table["name"]))
    picked = st.multiselect("Runs", list(names), default=[run_id], key="runs_compare",
                            format_func=lambda i: f"{names[i]} · {i}")
    if len(picked) < 2:
        st.caption("Pick two or more runs to overlay their curves.")
        return
    frames = [load_metrics(path, rid).assign(run=f"{names[rid]} · {rid}") for rid in picked]
    data = pd.concat(frames, ignore_index=True)
    metrics = sorted(data["name"].unique())
    wanted = [m for m in ("reward/mean", "accuracy/mean", "kl", "response_length") if m in metrics]
    chosen = st.multiselect("Metrics", metrics, default=wanted, key="runs_compare_metrics")
    cols = st.columns(2)
    for i, metric in enumerate(chosen):
        rows = data[data["name"] == metric]
        fig = line_chart(rows, metric, color="run")
        with cols[i % 2]:
            st.plotly_chart(fig, key=f"runs_compare_chart_{i}")


def render() -> None:
    st.title("Runs")
    path = db_path()
    st.page_link("screens/launch.py", label="Launch a new run", icon=":material/rocket_launch:")
    table = runs_or_notice(path)
    if table is None:
        return
    event = st.dataframe(table, hide_index=True, on_select="rerun",
                         selection_mode="single-row", key="runs_table")
    follow_table_selection(event, table["id"].tolist(), "runs_run")
    run_id = run_picker(list(zip(table["id"], table["name"])), key="runs_run")
    live = load_run(path, run_id)["status"] in ("pending", "running")
    row = table.loc[table["id"] == run_id].iloc[0]
    st.fragment(show_run, run_every=LIVE_REFRESH if live else None)(path, run_id, (row["status"], row["progress"]))
    show_compare(path, table, run_id)


render()
