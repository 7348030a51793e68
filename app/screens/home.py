"""Home page: recent runs, domain coverage, and what this machine can run (vLLM, DeepSpeed,
Docker, a GPU) with the sandbox pools' state.

UI only: runs from `app.common.load_runs`, coverage from the domain registry and the
store's validation reports, parts from `backend.system`.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app.common import db_path, get_store, load_runs
from domains.registry import registry
from domains.validation import current_validations
from backend.system import system_status

RECENT = 8
WHAT_IT_DOES = ("Post-train a language model with reinforcement learning on tasks whose answers are checked "
                "automatically: pick or bring **domains** (Domains), **launch** a GRPO-family run (Launch), watch it "
                "learn per domain (Runs), read every sample (Trajectories) and compare the base model with the "
                "trained one against honest baselines (Evaluation).")


@st.cache_data(ttl=60, show_spinner=False)
def load_system() -> list[dict]:
    return system_status()


@st.cache_data(ttl=30, show_spinner=False)
def load_coverage(path: str) -> pd.DataFrame:
    """Domains per family: how many, how many passed or failed their latest validation and
    how many were never validated here, task kinds."""
    validations = current_validations(get_store(path))
    rows = {}
    for name, domain in registry().items():
        row = rows.setdefault(domain.family, {"family": domain.family, "domains": 0, "passed": 0, "failed": 0,
                                              "not validated yet": 0, "kinds": set()})
        row["domains"] += 1
        report = validations.get(name)
        row["not validated yet" if report is None else "passed" if report.get("passed") else "failed"] += 1
        row["kinds"].add(domain.kind)
    frame = pd.DataFrame([{**r, "kinds": ", ".join(sorted(r["kinds"]))} for r in rows.values()])
    return frame.sort_values(["domains", "family"], ascending=[False, True]).reset_index(drop=True)


@st.cache_data(ttl=10, show_spinner=False)
def load_pools(path: str) -> pd.DataFrame:
    return pd.DataFrame(get_store(path).pool_states(limit=10))


def show_runs(path: str) -> None:
    st.subheader("Recent runs")
    runs = load_runs(path)
    if runs.empty:
        st.info("No runs yet. Launch one from the Launch page, or `rlwb run configs/quickstart.yaml`.")
    else:
        live = runs[runs["status"].isin(["pending", "running"])]
        cols = st.columns(3)
        cols[0].metric("Runs", len(runs))
        cols[1].metric("Running now", len(live))
        cols[2].metric("Failed", int((runs["status"] == "failed").sum()))
        st.dataframe(runs.head(RECENT), hide_index=True, key="home_runs")
    st.page_link("screens/launch.py", label="Launch a run", icon=":material/rocket_launch:")


def show_coverage(path: str) -> None:
    st.subheader("Domain coverage")
    frame = load_coverage(path)
    cols = st.columns(4)
    cols[0].metric("Domains", int(frame["domains"].sum()))
    cols[1].metric("Families", len(frame))
    cols[2].metric("Passed validation", int(frame["passed"].sum()))
    cols[3].metric("Not validated yet", int(frame["not validated yet"].sum()))
    if not frame["passed"].sum() and not frame["failed"].sum():
        st.caption("No domain has been validated on this machine yet; that is not a failure. Validation checks "
                   "a domain's tasks and verifier before it may join a mix: the Domains page, or "
                   "`rlwb domains validate --all` (about 12 minutes).")
    # every family in view: 35 px a row plus the header (the default height cuts off after ~10 rows)
    st.dataframe(frame, hide_index=True, key="home_coverage", height=35 * (len(frame) + 1) + 3)


def show_system(path: str) -> None:
    st.subheader("System")
    for row in load_system():
        icon = ":material/check_circle:" if row["available"] else ":material/cancel:"
        st.markdown(f"{icon} **{row['part']}** — {row['detail']}")
    pools = load_pools(path)
    st.markdown("**Sandbox pools** (latest state per run)")
    if pools.empty:
        st.caption("No sandbox pool has been opened yet (runs with sandboxed domains open one).")
    else:
        st.dataframe(pools, hide_index=True, key="home_pools")


def render() -> None:
    st.title("RL Workbench")
    st.markdown(WHAT_IT_DOES)
    path = db_path()
    left, right = st.columns([3, 2])
    with left:
        show_runs(path)
        show_coverage(path)
    with right:
        show_system(path)


render()
