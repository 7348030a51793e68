"""Sandboxes page: what sandboxes are for and which domains use them, which backends work
here, a box that runs one command in a new Docker sandbox (`rlwb sandbox exec`), the
containers on the engine, recent executions, failures by kind and latency.

UI only: backend status from `sandboxes.backend_status`, containers from
`sandboxes.engine_containers`, executions from the store through `backend.views`. A pool
lives inside the training process that owns it; what the page sees of it is its
containers on the engine and the executions it recorded.
"""

from __future__ import annotations

import plotly.express as px
import streamlit as st

from domains.registry import registry

from app.common import db_path, get_store
from backend import views
from core.errors import WorkbenchError
from sandboxes import SandboxSpec, backend_status, engine_containers, open_sandbox

ALL_RUNS = "All runs"


@st.cache_data(ttl=10, show_spinner=False)
def load_status() -> dict:
    return backend_status()


@st.cache_data(ttl=3, show_spinner=False)
def load_containers() -> list[dict]:
    return engine_containers()


@st.cache_data(ttl=3, show_spinner=False)
def load_pools(path: str) -> list[dict]:
    return get_store(path).pool_states()


@st.cache_data(ttl=3, show_spinner=False)
def load_executions(path: str, run_id: str | None):
    store = get_store(path)
    return views.sandbox_executions_frame(store, limit=300, run_id=run_id), views.sandbox_summary(store, run_id)


def show_backends(status: dict) -> None:
    cols = st.columns(len(status))
    for col, (name, st_) in zip(cols, status.items()):
        with col:
            st.markdown(f"**{name}** — {'available' if st_['available'] else 'unavailable'}")
            st.caption(st_["detail"])
            if st_["isolation"]:
                (st.warning if st_["isolation"].startswith("WEAKER") else st.success)(st_["isolation"])
    if not status["docker"]["available"]:
        st.error("Docker sandboxes are unavailable here: runs with sandboxed domains need "
                 "`sandbox_backend: local` (weaker isolation), which is never chosen for you.")


@st.cache_data(ttl=60, show_spinner=False)
def sandboxed_domains() -> dict[str, list[str]]:
    """family -> the names of its domains that need a sandbox (user domains too)."""
    out: dict[str, list[str]] = {}
    for name, domain in registry().items():
        if domain.needs_sandbox:
            out.setdefault(domain.family, []).append(name)
    return out


RESULT_KEY = "sbx_exec_result"


def command_box(status: dict) -> None:
    """Run one command in a new Docker sandbox (as `rlwb sandbox exec`) and show its output,
    exit code, outcome and time. Docker only: the page never runs commands with the local
    backend's weaker isolation (the CLI does, when asked by name)."""
    st.subheader("Run a command in a sandbox")
    if not status["docker"]["available"]:
        st.info("Needs the Docker engine, unavailable here; `rlwb sandbox exec --backend local CMD` runs one with "
                "the local backend's weaker isolation.")
        return
    st.caption("A new container of the sandbox image, as a run's domains get it: no network, the limits below, "
               "removed afterwards. The same as `rlwb sandbox exec CMD`.")
    c1, c2, c3 = st.columns([6, 1, 1])
    command = c1.text_area("Command (bash -c, in the workspace, as an unprivileged user)", "python3 -c 'import sys; print(sys.version)'",
                           height=80, key="sbx_command")
    memory = c2.number_input("Memory (MiB)", 16, 4096, 256, key="sbx_memory_mb")
    timeout = c3.number_input("Timeout (s)", 1, 120, 10, key="sbx_timeout_s")
    if st.button("Run in a new sandbox", key="sbx_run_command", icon=":material/terminal:"):
        if not command.strip():
            st.session_state[RESULT_KEY] = {"error": "Command: type a command first, e.g. ls -la"}
        else:
            with st.spinner("Starting a container and running the command…"):
                try:
                    with open_sandbox("docker", SandboxSpec(memory_mb=int(memory),
                                                            command_timeout_s=float(timeout))) as sb:
                        r = sb.exec(command)
                    st.session_state[RESULT_KEY] = {"command": command, "outcome": r.outcome,
                                                    "exit_code": r.exit_code, "ms": r.duration_ms,
                                                    "stdout": r.stdout, "stderr": r.stderr,
                                                    "cut": r.truncated_bytes}
                except WorkbenchError as e:
                    st.session_state[RESULT_KEY] = {"error": f"The sandbox could not run it: {e}"}
    result = st.session_state.get(RESULT_KEY)
    if not result:
        return
    if "error" in result:
        st.error(result["error"], icon=":material/error:")
        return
    (st.success if result["outcome"] == "ok" else st.warning)(
        f"`{result['command'][:80]}{'…' if len(result['command']) > 80 else ''}`: {result['outcome']}, exit {result['exit_code']} in {result['ms']:.0f} ms"
        + (f"; {result['cut']} bytes of output cut" if result["cut"] else ""))
    o1, o2 = st.columns(2)
    o1.caption("stdout")
    o1.code(result["stdout"] or "(empty)", language=None)
    o2.caption("stderr")
    o2.code(result["stderr"] or "(empty)", language=None)


def render() -> None:
    st.title("Sandboxes")
    families = sandboxed_domains()
    st.caption("Sandboxes are where a model's code, shell commands and tool calls run, isolated from this machine "
               "(Docker containers: file read and write, resource limits, time limits, no network unless a domain "
               "lists hosts): a run keeps a warm pool of them, and their results become rewards. Domains that use "
               "them: " + "; ".join(f"{family} ({len(names)}: {', '.join(sorted(names)[:4])}"
                                    f"{', ...' if len(names) > 4 else ''})" for family, names in sorted(families.items()))
               + ".")
    status = load_status()
    show_backends(status)
    command_box(status)

    path = db_path()
    st.subheader("Pools of runs")
    pools = load_pools(path)
    if pools:
        st.caption("Each run keeps a warm pool while it runs (state as of its last step).")
        st.dataframe(pools, hide_index=True, key="sbx_pools")
    else:
        st.caption("No run has opened a sandbox pool yet.")

    st.subheader("Containers on the engine")
    containers = load_containers()
    running = sum(c["status"] == "running" for c in containers)
    st.caption(f"{len(containers)} labelled sandbox containers ({running} running). Containers of a dead owner "
               "are removed by the garbage collector when a pool starts, or with `rlwb sandbox gc`.")
    if containers:
        st.dataframe(containers, hide_index=True, key="sbx_containers")

    st.subheader("Recent executions")
    run_ids = [r["id"] for r in get_store(path).list_runs(limit=100)]
    choice = st.selectbox("Run", [ALL_RUNS, *run_ids], key="sbx_run")
    frame, summary = load_executions(path, None if choice == ALL_RUNS else choice)
    if frame.empty:
        st.info("No sandbox executions recorded yet; they appear when a run's mix has sandboxed domains "
                "(humaneval, terminal_*), e.g. `rlwb run configs/sandbox.yaml`.")
        return
    cols = st.columns(4)
    cols[0].metric("Executions (last 1000)", summary["executions"])
    cols[1].metric("Latency p50", f"{summary['latency_p50_ms']:.0f} ms" if summary["latency_p50_ms"] else "—")
    cols[2].metric("Latency p99", f"{summary['latency_p99_ms']:.0f} ms" if summary["latency_p99_ms"] else "—")
    failures = {k: v for k, v in summary["by_outcome"].items() if k != "ok"}
    cols[3].metric("Failures", sum(failures.values()))
    by_kind = [{"outcome": k, "executions": v} for k, v in sorted(summary["by_outcome"].items())]
    st.plotly_chart(px.bar(by_kind, x="outcome", y="executions", title="Executions by outcome "
                           "(harness = sandbox machinery failed; never scored as reward 0)"),
                    key="sbx_outcomes")
    st.dataframe(frame, hide_index=True, key="sbx_executions")


render()
