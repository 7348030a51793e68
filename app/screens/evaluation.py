"""Evaluation page: the stored capability evaluations (`rlwb eval MODEL --mix NAME`); one
evaluation's results, or a baseline A against a model B side by side with paired deltas,
regressions highlighted, the baselines the verdicts are against (best constant answer,
copying from the question, format-only reward), the held-out answers themselves (A beside
B task by task, `app.answers`), and the report as a self-contained HTML download. Training
runs' own held-out evaluations (in-run, greedy) are reported the same way when "Include
in-run evaluations" is on; the Runs page links here with ``?a=ID&b=ID&domain=D``.

UI only: the list comes from `Store.list_evals` (evaluations whose process is gone are
marked failed first, `backend.evaluation.refresh_eval_liveness`), the report from
`backend.eval_report`, its tables from `backend.eval_tables`, figures and HTML from
`backend.eval_html`, all through cached loaders. Running and failed
evaluations are listed but can't be reported.

"Start an evaluation" (`app.eval_start`) starts one as a background process and lists the
running ones with their progress and a Stop button.

Not covered here: the curves of in-run evaluations
(the Runs page shows them), and comparing more than two evaluations.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app import answers, eval_start
from app.common import db_path, get_store
from backend import eval_html as eh
from backend import eval_report as er
from backend import eval_tables as et
from backend import heldout
from core.errors import WorkbenchError
from trainer.eval_stats import MIN_TASKS_FOR_VERDICT
from backend.evaluation import refresh_eval_liveness

ROW_COLORS = {"regression": "background-color: #f8d0d0", "improvement": "background-color: #d4f0d4"}


@st.cache_data(ttl=5, show_spinner=False)
def load_evals(path: str, in_run: bool) -> list[dict]:
    """The newest evaluations: `rlwb eval`'s, and the training runs' own with `in_run`."""
    store = get_store(path)
    refresh_eval_liveness(store)
    return store.list_evals(in_run=None if in_run else False)


@st.cache_data(ttl=300, show_spinner="Computing the report…")
def load_report(path: str, ids: tuple[str, ...]) -> dict:
    return er.build_report(get_store(path), list(ids))  # completed evaluations don't change


@st.cache_data(ttl=300, show_spinner=False)
def load_html(path: str, ids: tuple[str, ...]) -> str:
    report = load_report(path, ids)
    return eh.report_html(report, heldout.answer_examples(get_store(path), report))


def styled(rows: list[dict]):
    """A table with regression rows red and improvement rows green (by its "verdict")."""
    frame = pd.DataFrame(rows)
    if "verdict" not in frame.columns:
        return frame
    return frame.style.apply(lambda r: [ROW_COLORS.get(r["verdict"], "")] * len(r), axis=1)


def swap() -> None:
    st.session_state["eval_a"], st.session_state["eval_b"] = st.session_state["eval_b"], st.session_state["eval_a"]


def pick(completed: list[dict]) -> list[str]:
    """The evaluations to report: the only one, or A (baseline) and B picked by the user
    (defaults: B a trained checkpoint's, A a base model's; else the newest two)."""
    ids = [e["id"] for e in completed]
    if len(ids) == 1:
        st.caption("One completed evaluation: its results alone. Evaluate another model or checkpoint "
                   "(Start an evaluation, above) to compare the two here.")
        return ids
    labels = {e["id"]: f"{er.side_label(e)} · {e['id']}" for e in completed}
    # defaults: B the newest evaluation of a training run's weights (else the newest), A the newest
    # of a model no run trained (a base model) other than B, else the next newest
    base = [e["id"] for e in completed if not e.get("run_id")]
    if st.session_state.get("eval_b") not in ids:
        st.session_state["eval_b"] = next((i for i in ids if i not in base), ids[0])
    if st.session_state.get("eval_a") not in ids:
        b = st.session_state["eval_b"]
        st.session_state["eval_a"] = next((i for i in base if i != b), next(i for i in ids if i != b))
    cols = st.columns([4, 4, 1], vertical_alignment="bottom")
    a = cols[0].selectbox("A (baseline, e.g. the base model)", ids, format_func=labels.get, key="eval_a")
    b = cols[1].selectbox("B (compared with A, e.g. a checkpoint)", ids, format_func=labels.get, key="eval_b")
    cols[2].button("Swap", key="eval_swap", on_click=swap, icon=":material/swap_horiz:", help="Swap A and B")
    if a == b:
        st.warning("A and B are the same evaluation; pick two different ones to compare. Showing it alone.")
        return [a]
    return [a, b]


def show_report(path: str, ids: tuple[str, ...], report: dict) -> None:
    compared = report["comparison"] is not None
    for w in report["warnings"]:
        st.warning(w)
    st.dataframe(et.side_rows(report), hide_index=True, key="eval_sides")
    st.subheader("Headline")
    st.markdown(f"**{et.summary_sentence(report)}**")
    st.caption("pass@1 with its 95% bootstrap interval over tasks" + (
        "; Δ is B − A paired over the shared tasks, in percentage points; a regression's whole interval "
        f"lies below 0; under {MIN_TASKS_FOR_VERDICT} shared tasks there is no verdict (\"too few tasks\")"
        if compared else "") + ". " + et.BASELINE_NOTE[0].upper() + et.BASELINE_NOTE[1:])
    st.dataframe(styled(et.headline_rows(report)), hide_index=True, key="eval_headline")
    figures = eh.report_figures(report)
    cols = st.columns(2)
    for i, (title, fig) in enumerate(figures):
        if title.startswith("Deltas"):
            st.plotly_chart(fig, key=f"eval_fig_{i}")
        else:
            with cols[i % 2]:
                st.plotly_chart(fig, key=f"eval_fig_{i}")
    if compared:
        st.subheader("Changes, worst first")
        st.dataframe(styled(et.delta_rows(report)), hide_index=True, key="eval_deltas")
    baselines = et.baselines_table(report)
    if baselines:
        st.subheader("Baselines")
        st.caption("Per domain, on the held-out tasks played (no model): the constant answer and the rule copying "
                   "from the question that score best with the domain's verifier, the format-only reward (the "
                   "reward floor: right format, wrong answer), and each model's most common answer and share of "
                   "answers copied from the question.")
        st.dataframe(baselines, hide_index=True, key="eval_baselines")
    st.subheader("Per family")
    st.dataframe(styled(et.family_rows(report)), hide_index=True, key="eval_families")
    transfer = et.transfer_rows(report)
    if transfer:
        st.subheader("Transfer")
        st.caption("B's training run trained on some of these domains and never saw the others: pass@1, B - A over "
                   "the shared tasks, per group; a domain improved (regressed) when its own delta's 95% interval is "
                   "above (below) 0.")
        st.dataframe(transfer, hide_index=True, key="eval_transfer")
    for i, (tag, side) in enumerate(zip(["A", "B"] if compared else [""], report["sides"])):
        with st.expander(f"Per domain: {tag} {side['label']}".replace("  ", " "), expanded=not compared):
            st.dataframe(et.domain_rows(report, i), hide_index=True, key=f"eval_domains_{i}")
            st.json(side["settings"], expanded=False)
    capabilities = et.capability_rows(report)
    if capabilities:
        st.subheader("Tool use, multi-turn and context length")
        st.dataframe(capabilities, hide_index=True, key="eval_capabilities")
    answers.show(path, report)
    st.download_button("Download the report (one HTML file)", data=load_html(path, ids),
                       file_name=f"eval-{'-vs-'.join(reversed(ids))}.html", mime="text/html",
                       key="eval_download", icon=":material/download:")


LINKED_KEY = "eval_linked"  # the completed evaluations a link named: offered even past the list's limit


def follow_link(path: str) -> None:
    """Take the evaluations and domain a link names (``?a=ID&b=ID&domain=D``; ``?b=ID``
    alone puts that one in B) as the page's choices, turning on the in-run evaluations when
    it names one; the parameters are then dropped so the user's next choices stand. An id
    that is unknown or names an evaluation not completed gets a warning and is ignored."""
    wanted = {k: st.query_params.get(k) for k in ("a", "b", "domain")}
    if not any(wanted.values()):
        return
    for k in wanted:
        if k in st.query_params:
            del st.query_params[k]
    picked = {}
    for k in ("a", "b"):
        if not wanted[k]:
            continue
        try:
            ev = get_store(path).get_eval(wanted[k])
        except WorkbenchError:
            st.warning(f"The link's evaluation {k.upper()} '{wanted[k]}' is not in this store; pick one below "
                       "(`rlwb eval list --in-run` lists them).")
            continue
        if ev["status"] != "completed":
            st.warning(f"The link's evaluation {k.upper()} '{wanted[k]}' is {ev['status']}, not completed; only "
                       "completed evaluations can be reported.")
            continue
        picked[k] = ev
    if any(ev.get("phase") for ev in picked.values()):
        st.session_state["eval_in_run"] = True
    st.session_state[LINKED_KEY] = list(picked.values())
    for k, ev in picked.items():
        st.session_state[f"eval_{k}"] = ev["id"]
    if wanted["domain"]:
        st.session_state[answers.DOMAIN_KEY] = wanted["domain"]
        st.session_state[answers.LINK_DOMAIN_KEY] = wanted["domain"]
        st.session_state.pop(answers.TASK_KEY, None)


def with_linked(completed: list[dict], in_run: bool) -> list[dict]:
    """`completed` and, after them, the linked evaluations it lacks (older than the list's
    newest `Store.list_evals` rows; in-run ones only while they are shown)."""
    have = {e["id"] for e in completed}
    extra = [e for e in st.session_state.get(LINKED_KEY) or []
             if e["id"] not in have and (in_run or not e.get("phase"))]
    return completed + extra


#: what the quickstart does and does not show (README, "Measured": run r20261202-161603-4092)
QUICKSTART_SENTENCE = (
    "What the quickstart shows: in about 11 minutes SmolLM2-135M learns the Answer: format and, on held-out "
    "largest_number, chain_sum and products tasks, 16-23 points more than its own untrained replies read with the "
    "format forgiven (its strongest baseline); it does not show general arithmetic (basic_arithmetic never beat "
    "that baseline) or anything beyond such small tasks.")


def render() -> None:
    st.title("Evaluation")
    st.caption(QUICKSTART_SENTENCE)
    path = db_path()
    follow_link(path)
    evals = load_evals(path, in_run=bool(st.session_state.get("eval_in_run")))
    with st.expander("Start an evaluation", icon=":material/play_arrow:",
                     expanded=not any(e["status"] == "completed" for e in evals)):
        eval_start.form(get_store(path))
    eval_start.running(path, on_end=load_evals.clear)
    in_run = st.toggle("Include in-run evaluations", key="eval_in_run",
                       help="Training runs' own held-out evaluations (greedy, one completion per task, recorded "
                            "before, during and after training); `rlwb eval` samples several per task.")
    evals = load_evals(path, in_run)
    completed = with_linked([e for e in evals if e["status"] == "completed"], in_run)
    if evals:
        st.dataframe(et.evaluation_rows(evals), hide_index=True, key="eval_list")
    if not completed:
        hidden = 0 if in_run else len(load_evals(path, True)) - len(evals)
        st.info("No completed evaluations yet: start one above (or `rlwb eval smollm2-135m --mix NAME` in a "
                "terminal, NAME a mix saved on the Domains page), e.g. the base model and then a run's checkpoint, "
                "and compare the two here."
                + (f" {hidden} in-run evaluations of training runs are hidden: turn on \"Include in-run "
                   "evaluations\"." if hidden else ""))
        return
    ids = tuple(pick(completed))
    try:
        report = load_report(path, ids)
    except WorkbenchError as e:
        st.error(f"Can't build the report: {e}")
        return
    show_report(path, ids, report)


render()
