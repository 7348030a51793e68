"""Trajectories page: filter a run's trajectories, read one, compare it with its group.

UI only: data comes from `backend.views` and `Store` verbs through cached loaders. Shows
single-turn samples (prompt, completion, reward breakdown) and, for multi-turn episodes,
each turn: the model's text, the parsed command, its exit code, timing and output, or each
tool call with its arguments, validation result and observation; for cad domains the
exported mesh (Plotly Mesh3d) and the geometry checks; for retrieval domains, the fragments
the context was assembled from (with their scores).
The table shows at most `LIMIT` rows.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app.common import db_path, follow_table_selection, get_store, run_picker, runs_or_notice
from backend import views
from backend.retrieval_service import fragments_frame

LIMIT = 500
ALL_DOMAINS = "All domains"


@st.cache_data(ttl=5, show_spinner=False)
def load_scope(path: str, run_id: str) -> tuple[tuple[int, int] | None, list[str]]:
    store = get_store(path)
    return store.trajectory_step_range(run_id), store.trajectory_domains(run_id)


@st.cache_data(ttl=10, show_spinner=False)
def load_trajectories(path: str, run_id: str, **filters) -> pd.DataFrame:
    return views.trajectories_frame(get_store(path), run_id, limit=LIMIT, **filters)


@st.cache_data(ttl=60, show_spinner=False)
def load_trajectory(path: str, traj_id: int) -> tuple[dict, pd.DataFrame, list[dict]]:
    store = get_store(path)
    traj = store.trajectory(traj_id)
    group = store.group(traj["run_id"], traj["step"], traj["group_idx"])
    return traj, views.group_frame(store, traj), group


def filters_for(path: str, run_id: str) -> dict | None:
    """Draw the filter widgets; None if the run has no trajectories yet."""
    steps, domains = load_scope(path, run_id)
    if steps is None:
        st.info("No trajectories recorded for this run yet; they appear after the first step.")
        return None
    cols = st.columns(3)
    with cols[0]:
        if steps[0] < steps[1]:
            lo, hi = st.slider("Steps", steps[0], steps[1], steps, key="traj_steps")
        else:
            lo = hi = steps[0]
            st.caption(f"Step {lo} (the only step with trajectories)")
    domain = cols[1].selectbox("Domain", [ALL_DOMAINS, *domains], key="traj_domain")
    rmin, rmax = cols[2].slider("Reward", 0.0, 1.0, (0.0, 1.0), step=0.05, key="traj_reward")
    return {
        "step_min": lo, "step_max": hi,
        "domain": None if domain == ALL_DOMAINS else domain,
        "reward_min": rmin if rmin > 0.0 else None,  # full range: no reward filter at all
        "reward_max": rmax if rmax < 1.0 else None,
    }


def show_trajectory(traj: dict) -> None:
    st.subheader(f"Trajectory #{traj['id']}")
    st.caption(f"{traj['domain']} · step {traj['step']} · group {traj['group_idx']} · "
               f"sample {traj['sample_idx']} · task seed {traj['task_seed']}"
               + (f" · level {traj['difficulty']}" if traj.get("difficulty") else ""))
    cols = st.columns(4)
    cols[0].metric("Reward", f"{traj['reward']:.3f}")
    cols[1].metric("Advantage", f"{traj['advantage']:+.3f}")
    cols[2].metric("Finish reason", traj["finish_reason"] or "—")
    cols[3].metric("Tokens (prompt / completion)",
                   f"{traj['prompt_tokens']} / {traj['completion_tokens']}")
    st.markdown("**Prompt**")
    st.code(traj["prompt"], language=None, wrap_lines=True)
    st.markdown("**Completion**")
    st.code(traj["completion"], language=None, wrap_lines=True)
    if traj.get("turns"):
        show_turns(traj)
    breakdown = traj.get("breakdown") or {}
    if breakdown.get("checks") is not None:
        show_geometry(breakdown)
    if traj.get("retrieval"):
        show_retrieval(traj["retrieval"])
    st.markdown("**Reference answer**")
    st.code(traj["answer"] or "(none)", language=None, wrap_lines=True)
    st.markdown("**Reward breakdown**")
    st.json({k: v for k, v in breakdown.items() if k != "mesh"})


def show_turns(traj: dict) -> None:
    """Turn-by-turn view of a multi-turn episode."""
    st.markdown(f"**Turns** ({len(traj['turns'])})")
    st.dataframe(views.turns_frame(traj), hide_index=True, key="traj_turns")
    calls = views.calls_frame(traj)
    if len(calls):
        valid = int(calls["valid"].sum())
        st.caption(f"{len(calls)} tool calls · {valid} valid ({valid / len(calls):.0%}) · "
                   f"{int((calls['error'] == '').sum())} ran without an error code")
        st.dataframe(calls, hide_index=True, key="traj_calls")
    for t in traj["turns"]:
        status = ("timed out" if t.get("timed_out") else f"exit {t.get('exit_code')}") if t.get("command") else t["action"]
        with st.expander(f"turn {t['turn']} · {t['action']} · {status}"):
            st.markdown("Model")
            st.code(t.get("text", ""), language=None, wrap_lines=True)
            for c in t.get("calls") or []:
                verdict = f"error `{c['error']}`" if c.get("error") else "valid, ran"
                st.markdown(f"Call {c.get('index')} · `{c.get('name')}` · {verdict} · "
                            f"{c.get('duration_ms') or 0:.0f} ms")
                st.json(c.get("arguments"), expanded=False)
                st.code(c.get("observation") or "(empty)", language=None, wrap_lines=True)
            if t.get("command"):
                st.markdown(f"Command · {t.get('duration_ms', 0):.0f} ms")
                st.code(t["command"], language="bash", wrap_lines=True)
                st.markdown("stdout")
                st.code(t.get("stdout") or "(empty)", language=None, wrap_lines=True)
                if t.get("stderr"):
                    st.markdown("stderr")
                    st.code(t["stderr"], language=None, wrap_lines=True)


def show_geometry(breakdown: dict) -> None:
    """A cad episode's exported mesh (Plotly Mesh3d) and the verifier's checks."""
    st.markdown("**Geometry**")
    failing = breakdown.get("failing") or []
    st.caption(f"rollbacks {breakdown.get('rollbacks', 0)} · failed modeling calls {breakdown.get('failed_ops', 0)}"
               + (f" · failing: {', '.join(failing)}" if failing else " · every check passed"))
    checks = breakdown.get("checks") or []
    if checks:
        st.dataframe(pd.DataFrame([{**c, "expected": str(c["expected"]), "measured": str(c["measured"])}
                                   for c in checks]), hide_index=True, key="traj_checks")
    mesh = breakdown.get("mesh")
    if mesh and mesh.get("triangles"):
        import plotly.graph_objects as go

        v, f = mesh["vertices"], mesh["triangles"]
        fig = go.Figure(go.Mesh3d(x=[p[0] for p in v], y=[p[1] for p in v], z=[p[2] for p in v],
                                  i=[t[0] for t in f], j=[t[1] for t in f], k=[t[2] for t in f],
                                  color="#4c78a8", flatshading=True, opacity=1.0))
        fig.update_layout(scene={"aspectmode": "data"}, margin={"l": 0, "r": 0, "t": 0, "b": 0}, height=420)
        st.plotly_chart(fig, key="traj_mesh")
    elif not failing or "exported" not in failing:
        st.caption("No mesh stored for this episode.")


def show_retrieval(record: dict) -> None:
    """Sizes, evidence flag and fragments of a retrieval domain's assembled context."""
    st.markdown("**Retrieved fragments**")
    evidence = record.get("evidence_in_context")
    cols = st.columns(3)
    cols[0].metric("Context / budget (tokens)",
                   f"{record.get('context_tokens', 0):,} / {record.get('budget_tokens', 0):,}")
    cols[1].metric("Document (tokens)", f"{record.get('document_tokens', 0):,}")
    cols[2].metric("Evidence in context", "unknown" if evidence is None else ("yes" if evidence else "no"))
    st.caption(f"{len(record.get('fragments', []))} fragments in the context, in context order; "
               f"{record.get('dropped', 0)} ranked fragments did not fit. "
               "Depth is the share of the document before each fragment.")
    st.dataframe(fragments_frame(record.get("fragments", [])), hide_index=True, key="traj_fragments")


def show_group(traj: dict, frame: pd.DataFrame, group: list[dict]) -> None:
    st.subheader(f"Its group ({len(group)} samples)")
    rewards = frame["reward"]
    st.caption(f"mean reward {rewards.mean():.3f} · std {rewards.std(ddof=0):.3f}")
    st.dataframe(frame, hide_index=True, key="traj_group_table")
    for other in group:
        if other["id"] == traj["id"]:
            continue
        label = (f"sample {other['sample_idx']} · reward {other['reward']:.3f} · "
                 f"advantage {other['advantage']:+.3f}")
        with st.expander(label):
            st.code(other["completion"], language=None, wrap_lines=True)


def render() -> None:
    st.title("Trajectories")
    path = db_path()
    runs = runs_or_notice(path)
    if runs is None:
        return
    run_id = run_picker(list(zip(runs["id"], runs["name"])), key="traj_run")
    filters = filters_for(path, run_id)
    if filters is None:
        return
    table = load_trajectories(path, run_id, **filters)
    more = f" (the first {LIMIT}; narrow the filters to see others)" if len(table) == LIMIT else ""
    st.caption(f"{len(table)} trajectories{more}")
    if table.empty:
        st.info("No trajectories match these filters.")
        return
    event = st.dataframe(table, hide_index=True, on_select="rerun",
                         selection_mode="single-row", key="traj_table")
    ids = [int(i) for i in table["id"]]
    follow_table_selection(event, ids, "traj_selected")
    rows = {int(r.id): r for r in table.itertuples()}
    traj_id = st.selectbox(
        "Trajectory", ids, key="traj_selected",
        format_func=lambda i: (f"#{i} · step {rows[i].step} · {rows[i].domain} · "
                               f"group {rows[i].group} · reward {rows[i].reward:.2f}"),
    )
    traj, group_frame, group = load_trajectory(path, traj_id)
    left, right = st.columns([3, 2])
    with left:
        show_trajectory(traj)
    with right:
        show_group(traj, group_frame, group)


render()
