"""Trajectories page: filter a run's trajectories, read one, compare it with its group.

UI only: data comes from `backend.views` and `Store` verbs through cached loaders. Shows
single-turn samples (prompt, completion, reward breakdown) and, for multi-turn episodes,
each turn: the model's text, the parsed command, its exit code, timing and output, or each
tool call with its arguments, validation result and observation; for cad domains the
exported mesh (Plotly Mesh3d) and the geometry checks; for retrieval domains, the fragments
the context was assembled from (with their scores).

Filters: steps, domain, reward, finish reason and a full-text search over prompts,
completions and turns, or completions only (`Store.trajectories`); the shown trajectory's
prompt and completion mark what the search matched. They outlive reruns and page switches in
page-prefixed session state; a live run's new step leaves the step range as the user set
it, except that a range ending at the last step extends to the new last step. The table shows at most `LIMIT` rows; the
count above it and the JSONL export cover every matching row (the export up to
`EXPORT_LIMIT`, written only when the button is clicked). A ``?traj=<id>`` link opens that
trajectory (`follow_link`). "Compare with" diffs the
completion against a second trajectory, by default the sample of the same group whose
reward differs most.
"""

from __future__ import annotations

import html
import io

import pandas as pd
import streamlit as st

from app.common import db_path, follow_table_selection, get_store, run_picker, runs_or_notice
from backend import views
from core.errors import DomainNotFound, TrajectoryNotFound
from domains.registry import get_domain
from backend.retrieval_service import fragments_frame
from backend.trajectory_query import fts_query, highlight_pattern

LIMIT = 500
COUNT_CAP = 100_000  # count matching rows up to this many, then say "more than"
EXPORT_LIMIT = 10_000  # trajectories in one JSONL export (~5 KB each for multi-turn episodes)
ALL_DOMAINS = "All domains"
ALL_REASONS = "All finish reasons"
STEP_RANGES = "traj_step_ranges"  # session state: run id -> the user's step range (see step_filter)
STEPS_RUN = "traj_steps_run"  # session state: the run the steps slider last showed
FILTER_VALUES = "traj_filter_values"  # session state: widget key -> the user's last value (see remembered)
SHOWN_CHARS = 100_000  # characters of one text block on the page; the JSONL export has all of it
SEARCH_HELP = ('Finds trajectories whose prompt, completion or turns (model text, commands, '
               'tool calls, outputs) contain every word. "Quoted words" must appear in that '
               "order; a word ending in * matches its prefix (err* finds error). Case and "
               "accents are ignored; operators like AND, OR, NEAR are searched as plain words.")


def shown(text) -> str:
    """`text` cut to `SHOWN_CHARS` with a note saying how much more there is (a giant reply
    would otherwise ship megabytes to the browser)."""
    text = text if isinstance(text, str) else str(text)
    if len(text) <= SHOWN_CHARS:
        return text
    return text[:SHOWN_CHARS] + f"\n[... {len(text) - SHOWN_CHARS:,} more characters: export the trajectory for all of it]"


@st.cache_data(ttl=5, show_spinner=False)
def load_scope(path: str, run_id: str) -> tuple[tuple[int, int] | None, list[str], list[str]]:
    store = get_store(path)
    return store.trajectory_step_range(run_id), store.trajectory_domains(run_id), store.finish_reasons(run_id)


@st.cache_data(ttl=10, show_spinner=False)
def load_count(path: str, run_id: str, **filters) -> int:
    return get_store(path).count_trajectories(run_id, cap=COUNT_CAP, **filters)


@st.cache_data(ttl=10, show_spinner=False)
def load_trajectories(path: str, run_id: str, **filters) -> pd.DataFrame:
    return views.trajectories_frame(get_store(path), run_id, limit=LIMIT, **filters)


@st.cache_data(ttl=60, show_spinner=False)
def load_trajectory(path: str, traj_id: int) -> tuple[dict, pd.DataFrame, list[dict]]:
    store = get_store(path)
    traj = store.trajectory(traj_id)
    group = store.group(traj["run_id"], traj["step"], traj["group_idx"])
    return traj, views.group_frame(store, traj), group


def kept_step_range(chosen: tuple[int, int, int] | None, steps: tuple[int, int]) -> tuple[int, int]:
    """The step range to show now that the run's trajectories span `steps` (first, last).

    Args:
        chosen: the user's last range on this run and the run's last step then,
            (lo, hi, last_then); None if the user hasn't drawn it yet.

    Returns:
        The chosen range, clamped into `steps`; a range that ended at the run's last step
        ends at the new last step (a live run's new steps join it, as they join the default
        range); every step when nothing was chosen or nothing of the choice is left.
    """
    first, last = steps
    if chosen is None:
        return first, last
    lo, hi, last_then = chosen
    lo, hi = max(lo, first), last if hi >= last_then else min(hi, last)
    return (lo, hi) if lo <= hi else (first, last)


def remembered(key: str, default):
    """The value the user last gave the filter widget `key` on this page, kept in
    ``traj_filter_values`` (widget state goes when its widget does: a page switch, a
    widget whose range changed)."""
    return st.session_state.setdefault(FILTER_VALUES, {}).get(key, default)


def remember(**values) -> None:
    st.session_state.setdefault(FILTER_VALUES, {}).update(values)


def step_filter(run_id: str, steps: tuple[int, int]) -> tuple[int, int]:
    """Draw the steps slider at the range `kept_step_range` keeps for this run. A new step
    changes the slider's maximum, so Streamlit makes it a new widget, which starts at the
    value given here rather than the user's (hence ``traj_step_ranges``: run id -> (lo, hi,
    the run's last step then)); a run with the same steps as the last one shown would keep
    that run's slider state, so a switch of run drops it."""
    if steps[0] == steps[1]:
        st.caption(f"Step {steps[0]} (the only step with trajectories)")
        return steps
    ranges = st.session_state.setdefault(STEP_RANGES, {})
    if st.session_state.get(STEPS_RUN) != run_id:  # another run: the slider's own state is the last run's
        st.session_state.pop("traj_steps", None)
        st.session_state[STEPS_RUN] = run_id
    lo, hi = st.slider("Steps", steps[0], steps[1], kept_step_range(ranges.get(run_id), steps), key="traj_steps")
    ranges[run_id] = (lo, hi, steps[1])
    return lo, hi


def _pick(options: list[str], key: str) -> int:
    """Index of the remembered choice of selectbox `key` in `options` (0 if it isn't there)."""
    choice = remembered(key, options[0])
    return options.index(choice) if choice in options else 0


def filters_for(path: str, run_id: str) -> dict | None:
    """Draw the filter widgets; None if the run has no trajectories yet. The user's choices
    are kept in session state (`step_filter`, `remember`), so a rerun after a live run
    records a step, or a visit to another page, leaves them as they were."""
    steps, domains, reasons = load_scope(path, run_id)
    if steps is None:
        st.info("No trajectories recorded for this run yet; they appear after the first step.")
        return None
    cols = st.columns(3)
    with cols[0]:
        lo, hi = step_filter(run_id, steps)
    domains, reasons = [ALL_DOMAINS, *domains], [ALL_REASONS, *reasons]
    domain = cols[1].selectbox("Domain", domains, _pick(domains, "traj_domain"), key="traj_domain")
    rmin, rmax = cols[2].slider("Reward", 0.0, 1.0, remembered("traj_reward", (0.0, 1.0)), step=0.05,
                                key="traj_reward")
    cols = st.columns([2, 3, 2], vertical_alignment="bottom")
    reason = cols[0].selectbox("Finish reason", reasons, _pick(reasons, "traj_finish"), key="traj_finish")
    text = cols[1].text_input("Search text", remembered("traj_search", ""), key="traj_search", max_chars=500,
                              help=SEARCH_HELP,
                              placeholder='words in the prompt, completion or turns · "exact phrase" · prefix*')
    only = cols[2].toggle("Completions only", remembered("traj_search_completions", False),
                          key="traj_search_completions",
                          help="Search the model's completions only (a multi-turn episode: its transcript), "
                               "not the prompts")
    remember(traj_domain=domain, traj_reward=(rmin, rmax), traj_finish=reason, traj_search=text,
             traj_search_completions=only)
    if text.strip() and fts_query(text) is None:
        cols[1].caption("The search text has no letters or digits to look for; it is ignored.")
        text = ""
    return {
        "step_min": lo, "step_max": hi,
        "domain": None if domain == ALL_DOMAINS else domain,
        "reward_min": rmin if rmin > 0.0 else None,  # full range: no reward filter at all
        "reward_max": rmax if rmax < 1.0 else None,
        "finish_reason": None if reason == ALL_REASONS else reason,
        "query": text.strip() or None,
        "search_in": "completion" if only else "all",
    }


def follow_link(path: str) -> None:
    """Open the trajectory a link asks for (``?traj=<id>``, e.g. the Runs page's reward audit):
    its run, the filters narrowed to its step and domain, it selected. The parameter is then
    dropped, so the user's next choices stand; an unknown id is ignored."""
    wanted = st.query_params.get("traj")
    if wanted is None:
        return
    del st.query_params["traj"]
    try:
        traj = get_store(path).trajectory(int(wanted))
    except (ValueError, TrajectoryNotFound):
        return
    run_id, step = traj["run_id"], traj["step"]
    st.session_state["traj_run"] = run_id
    st.session_state.setdefault(STEP_RANGES, {})[run_id] = (step, step, step + 1)  # ends before any last step
    remember(traj_domain=traj["domain"], traj_reward=(0.0, 1.0), traj_finish=ALL_REASONS, traj_search="",
             traj_search_completions=False)
    for key in ("traj_steps", "traj_domain", "traj_reward", "traj_finish", "traj_search", "traj_search_completions"):
        st.session_state.pop(key, None)  # widgets start from the values set above
    st.session_state["traj_selected"] = traj["id"]


def show_text(text: str, pattern) -> int:
    """A text block as `st.code` would show it, with the search's matches marked when
    `pattern` (`backend.trajectory_query.highlight_pattern`) finds any; returns how many."""
    text = shown(text)
    spans = list(pattern.finditer(text)) if pattern is not None else []
    if not spans:
        st.code(text, language=None, wrap_lines=True)
        return 0
    out, at = [], 0
    for m in spans:
        out += [html.escape(text[at:m.start()]), f"<mark>{html.escape(m.group())}</mark>"]
        at = m.end()
    out.append(html.escape(text[at:]))
    st.html('<pre class="rlwb-search-hit" style="white-space: pre-wrap; word-break: break-word; padding: 0.75rem 1rem; '
            'border-radius: 0.5rem; background: rgba(151, 166, 195, 0.15); font-size: 0.85rem">'
            + "".join(out) + "</pre>")
    return len(spans)


def show_trajectory(traj: dict, search: str | None = None, search_in: str = "all") -> None:
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
    head = st.columns([3, 2])
    head[0].markdown("**Prompt**")
    raw = head[1].toggle("Raw chat template", key="traj_raw_prompt",
                         help="The exact text the model was given, special tokens included")
    pattern = highlight_pattern(search)
    hits = show_text(traj["prompt"] if raw else views.readable_prompt(traj["prompt"]),
                     pattern if search_in == "all" else None)
    st.markdown("**Completion**")
    hits += show_text(traj["completion"], pattern)
    if pattern is not None:
        st.caption(f"{hits} match{'es' if hits != 1 else ''} of the search marked above"
                   + ("" if hits else " (it matched the turns' text or the group's prompt, or words the marking "
                                      "reads differently)"))
    if traj.get("turns"):
        show_turns(traj)
    breakdown = traj.get("breakdown") or {}
    if breakdown.get("checks") is not None:
        show_geometry(breakdown)
    if traj.get("retrieval"):
        show_retrieval(traj["retrieval"])
    st.markdown("**Reference answer**")
    st.code(shown(traj["answer"] or "(none)"), language=None, wrap_lines=True)
    st.markdown("**Reward breakdown**")
    rule = reward_rule(traj["domain"])
    if rule:
        st.caption(f"reward = {rule}")
    st.json({k: v for k, v in breakdown.items() if k != "mesh"})


def reward_rule(domain: str) -> str:
    """How `domain` makes a reward ("" for a domain not registered here)."""
    try:
        return get_domain(domain).reward_rule
    except DomainNotFound:
        return ""


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
            st.code(shown(t.get("text", "")), language=None, wrap_lines=True)
            for c in t.get("calls") or []:
                verdict = f"error `{c['error']}`" if c.get("error") else "valid, ran"
                st.markdown(f"Call {c.get('index')} · `{c.get('name')}` · {verdict} · "
                            f"{c.get('duration_ms') or 0:.0f} ms")
                st.json(c.get("arguments"), expanded=False)
                st.code(shown(c.get("observation") or "(empty)"), language=None, wrap_lines=True)
            if "move" in t:  # a game's turn: the move it read, and what the game answered
                st.markdown(f"Move `{t['move']}` · the game answered" if t["move"] else "No move · the game answered")
                st.code(shown(t.get("observation") or "(nothing)"), language=None, wrap_lines=True)
            if t.get("command"):
                st.markdown(f"Command · {t.get('duration_ms', 0):.0f} ms")
                st.code(shown(t["command"]), language="bash", wrap_lines=True)
                st.markdown("stdout")
                st.code(shown(t.get("stdout") or "(empty)"), language=None, wrap_lines=True)
                if t.get("stderr"):
                    st.markdown("stderr")
                    st.code(shown(t["stderr"]), language=None, wrap_lines=True)


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
    # the right-hand column is narrow: the marker joins the sample number, small columns stay in view,
    # the completion's start comes before tokens and finish (ids are in the expanders below and the table on the left)
    shown_frame = frame.assign(sample=[f"▶ {s}" if mark else str(s) for mark, s in zip(frame["this"], frame["sample"])])
    small = {c: st.column_config.Column(c, width="small") for c in ("sample", "reward", "advantage", "tokens", "finish")}
    st.dataframe(shown_frame, hide_index=True, key="traj_group_table",
                 column_order=("sample", "reward", "advantage", "completion", "tokens", "finish"),
                 column_config={**small, "completion": st.column_config.TextColumn("completion", width="medium")})
    for other in group:
        if other["id"] == traj["id"]:
            continue
        label = (f"sample {other['sample_idx']} · reward {other['reward']:.3f} · "
                 f"advantage {other['advantage']:+.3f}")
        with st.expander(label):
            st.code(shown(other["completion"]), language=None, wrap_lines=True)


def show_export(path: str, run_id: str, filters: dict, count: int) -> None:
    """The JSONL download of every row matching the filters (up to `EXPORT_LIMIT`), written
    only when the button is clicked."""
    store = get_store(path)

    def build() -> bytes:
        out = io.BytesIO()
        for line in views.trajectories_jsonl(store, run_id, limit=EXPORT_LIMIT, **filters):
            out.write(line.encode("utf-8"))
        return out.getvalue()

    cols = st.columns([1, 3])
    cols[0].download_button("Export selection (JSONL)", data=build, file_name=f"{run_id}-trajectories.jsonl",
                            mime="application/x-ndjson", on_click="ignore", key="traj_export")
    if count > EXPORT_LIMIT:
        note = (f"Exports the first {EXPORT_LIMIT:,} matching trajectories (the export is capped at "
                f"{EXPORT_LIMIT:,}; narrow the filters, e.g. the steps, for the rest)")
    else:
        note = f"Exports all {count:,} matching trajectories, not only the rows shown"
    cols[1].caption(note + ": one JSON object per line with every field, turns and breakdown included.")


def compare_options(traj: dict, group: list[dict], table: pd.DataFrame) -> dict[int, str]:
    """Trajectory id -> label of what `traj` can be compared with: the other samples of its
    group first (the one whose reward differs most leads), then the rows of the table."""
    others = sorted((g for g in group if g["id"] != traj["id"]),
                    key=lambda g: (-abs(g["reward"] - traj["reward"]), g["sample_idx"]))
    options = {g["id"]: f"#{g['id']} · sample {g['sample_idx']} of this group · reward {g['reward']:.2f}"
               for g in others}
    for r in table.itertuples():
        if int(r.id) != traj["id"] and int(r.id) not in options:
            options[int(r.id)] = (f"#{r.id} · step {r.step} · {r.domain} · group {r.group} · "
                                  f"sample {r.sample} · reward {r.reward:.2f}")
    return options


def show_compare(path: str, traj: dict, group: list[dict], table: pd.DataFrame) -> None:
    """Side by side: this completion and a second trajectory's, then their line diff."""
    st.subheader("Compare with")
    options = compare_options(traj, group, table)
    if not options:
        st.caption("No other trajectory to compare with.")
        return
    other_id = st.selectbox("Second trajectory", list(options), format_func=options.get,
                            key=f"traj_compare_{traj['id']}")
    other = load_trajectory(path, other_id)[0]
    cols = st.columns(2)
    for col, t in zip(cols, (traj, other)):
        col.markdown(f"**#{t['id']}** · step {t['step']} · sample {t['sample_idx']} · "
                     f"reward {t['reward']:.3f} · advantage {t['advantage']:+.3f}")
        col.code(shown(t["completion"]), language=None, wrap_lines=True)
    diff = views.completion_diff(traj, other)
    st.markdown(f"**Line diff** (`-` lines only in #{traj['id']}, `+` lines only in #{other['id']})")
    st.code(shown(diff or "(the completions are identical)"), language="diff", wrap_lines=True)


def render() -> None:
    st.title("Trajectories")
    path = db_path()
    runs = runs_or_notice(path)
    if runs is None:
        return
    follow_link(path)
    run_id = run_picker(list(zip(runs["id"], runs["name"])), key="traj_run")
    filters = filters_for(path, run_id)
    if filters is None:
        return
    table = load_trajectories(path, run_id, **filters)
    if table.empty:
        hint = " The search finds whole words; try fewer words or a prefix*." if filters["query"] else ""
        if filters["reward_min"] is not None or filters["reward_max"] is not None:
            unfiltered = {**filters, "reward_min": None, "reward_max": None}
            span = get_store(path).reward_range(run_id, **unfiltered)
            if span is not None:
                hint += f" Without the reward filter these trajectories' rewards run from {span[0]:.2f} to {span[1]:.2f}."
        st.info("No trajectories match these filters." + hint)
        return
    count = max(load_count(path, run_id, **filters), len(table))  # cached apart: may lag the table
    counted = f"{count:,}" if count <= COUNT_CAP else f"More than {COUNT_CAP:,}"
    more = f"; the table shows the first {LIMIT} (narrow the filters to see others)" if count > LIMIT else ""
    st.caption(f"{counted} {'trajectory matches' if count == 1 else 'trajectories match'}{more}")
    show_export(path, run_id, filters, count)
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
        show_trajectory(traj, filters["query"], filters["search_in"])
    with right:
        show_group(traj, group_frame, group)
    show_compare(path, traj, group, table)


render()
