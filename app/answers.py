"""The "Held-out answers" panel of the Evaluation page: for the evaluations reported (B, and
A beside it), one domain's held-out tasks with the question (and the prompt's chat messages),
the reference, each side's
extracted answer, right or wrong and reward; one task's completions side by side.

UI only: the rows come from `backend.heldout` (`task_pairs`, `filter_pairs`, `pair_rows`)
through a cached loader. The domain can be named in the page's URL (``?domain=D``, with
``a``/``b`` naming the evaluations: the Runs page's links), see
`app.screens.evaluation.follow_link`.
"""

from __future__ import annotations

import streamlit as st

from app.common import follow_table_selection, get_store
from backend import heldout

DOMAIN_KEY, FILTER_KEY, SAMPLE_KEY, TASK_KEY = ("eval_answers_domain", "eval_answers_filter", "eval_answers_sample",
                                                "eval_answers_task")
LINK_DOMAIN_KEY = "eval_answers_link_domain"  # the domain a link asked for, checked once


@st.cache_data(ttl=300, show_spinner=False)
def load_pairs(path: str, eval_id: str, domain: str, vs: str | None, sample: int) -> list[dict]:
    return heldout.task_pairs(get_store(path), eval_id, domain, vs=vs, sample=sample)  # completed: unchanging


def _side(col, tag: str, label: str, side: dict | None) -> None:
    with col:
        st.markdown(" · ".join(p for p in (f"**{tag}**" if tag else "", label) if p))  # no empty ** ** without a tag
        if side is None:
            st.caption("This evaluation did not play this task.")
            return
        verdict = "right" if side["correct"] else "wrong"
        st.caption(f"answer {side['answer']!r} · {verdict} · reward {side['reward']:.3f} · "
                   f"{side['finish_reason'] or '—'}" + (f" · fault {side['fault']}" if side["fault"] else "")
                   + (f" · {side['solved']}/{side['samples']} samples right" if side["samples"] > 1 else ""))
        st.code(side["completion"] or "(empty completion)", language=None, wrap_lines=True)


def show(path: str, report: dict) -> None:
    """The panel for `report` (`backend.eval_report.build_report` of [A, B] or [B])."""
    sides = report["sides"]
    if not sides:
        return
    two = len(sides) == 2
    domains = sorted({d for s in report["summaries"] for d in s["domains"]})
    if not domains:
        return
    st.subheader("Held-out answers")
    st.caption("What the model answered on each held-out task: the extracted answer (the verifier's own rule) "
               "against the reference" + (", A beside B for the same task (same domain, level and seed)" if two
                                          else "") + ". Pick a row or a task to read its completions.")
    asked = st.session_state.pop(LINK_DOMAIN_KEY, None)
    if asked is not None and asked not in domains:
        st.warning(f"The link's domain '{asked}' is not one of these evaluations' domains "
                   f"({', '.join(domains)}); showing {domains[0]}.")
    if st.session_state.get(DOMAIN_KEY) not in domains:
        st.session_state[DOMAIN_KEY] = domains[0]
    filters = list(heldout.FILTERS) if two else ["all", "wrong after"]
    if st.session_state.get(FILTER_KEY) not in filters:
        st.session_state[FILTER_KEY] = "all"
    samples = max(int(s["settings"].get("samples") or 1) for s in sides)
    cols = st.columns([3, 3, 2])
    domain = cols[0].selectbox("Domain", domains, key=DOMAIN_KEY)
    which = cols[1].selectbox("Show", filters, key=FILTER_KEY,
                              format_func=lambda f: f"{f}: {heldout.FILTERS[f]}" if f != "all" else "all tasks")
    sample = 0
    if samples > 1:
        sample = int(cols[2].number_input("Sample", 0, samples - 1, 0, key=SAMPLE_KEY,
                                          help="Which of each task's samples to show"))
    pairs = load_pairs(path, sides[-1]["id"], domain, sides[0]["id"] if two else None, sample)
    shown = heldout.filter_pairs(pairs, which)
    st.caption(f"{len(shown)} of {len(pairs)} {domain} tasks")
    if not shown:
        return
    keys = [f"{p['level']}:{p['seed']}" for p in shown]
    event = st.dataframe(heldout.pair_rows(shown), hide_index=True, on_select="rerun",
                         selection_mode="single-row", key="eval_answers_table")
    follow_table_selection(event, keys, TASK_KEY)
    by_key = dict(zip(keys, shown))
    if st.session_state.get(TASK_KEY) not in by_key:
        st.session_state[TASK_KEY] = keys[0]
    key = st.selectbox("Task", keys, key=TASK_KEY, format_func=lambda k: f"level {by_key[k]['level']} · seed "
                       f"{by_key[k]['seed']} · {str(by_key[k]['question'] or '')[:80]}")
    pair = by_key[key]
    st.markdown(f"**{domain}, level {pair['level']}, seed {pair['seed']}** — reference answer: "
                f"`{pair['reference']}`")
    st.code(pair["question"] or "(the task could not be regenerated)", language=None, wrap_lines=True)
    if pair.get("prompt"):
        with st.expander("The prompt: the chat messages the model was given (before its chat template)"):
            st.code(pair["prompt"], language=None, wrap_lines=True)
    if two:
        left, right = st.columns(2)
        _side(left, "A", sides[0]["label"], pair["a"])
        _side(right, "B", sides[1]["label"], pair["b"])
    else:
        _side(st.container(), "", sides[0]["label"], pair["b"])
