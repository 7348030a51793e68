"""Domains page: the catalogue of domains, one domain in detail, and the mix editor.

UI only. The catalogue comes from `backend.views.domains_frame`; a domain's sample tasks
from its `make_task` and `domains.registry.build_messages`; scores from
`domains.validation.try_verifier`; validation reports from the store (written by
`domains.validation.validate` when "Validate now" is pressed) or, for a built-in domain
never validated here, the one shipped with the workbench (`domains.shipped_validations`); mixes from
`domains.mixes` (`parse_spec`, `draw`, `save_mix`) and the store's mix verbs.

The "New domain" tab (a user's data file as a domain) is `app.screens.new_domain`.

Not covered here: validating many domains at once (use `rlwb domains validate`), and
anything about runs. Nothing heavy runs on page load: one sample task of the picked domain
is generated and nothing is validated until a button asks for it.
"""

from __future__ import annotations

import random
from collections import Counter

import pandas as pd
import plotly.express as px
import plotly.graph_objects as go
import streamlit as st

from app.common import db_path, follow_table_selection, get_store
from app.screens.new_domain import show_new_domain
from backend import views
from domains import mixes
from domains.splits import HELDOUT_SEED_RANGE
from domains.contract import EpisodeDomain, RetrievalDomain, SandboxDomain, ToolUseDomain
from domains.registry import build_messages, registry
from core.errors import WorkbenchError
from domains.validation import try_verifier, validate, validation_report

STATUSES = ("passed", "failed", "not validated")
NEW_MIX = "(new mix)"
PREVIEW_DRAWS = 2000
VALIDATE_TASKS = 30
DEFAULT_DOMAIN = "chain_sum"
MARGIN = {"l": 10, "r": 10, "t": 40, "b": 10}  # plotly chart margins (px)


@st.cache_resource(show_spinner="Loading the domain registry…")
def load_registry() -> dict:
    return registry()


@st.cache_data(ttl=5, show_spinner=False)
def load_catalogue(path: str) -> pd.DataFrame:
    return views.domains_frame(get_store(path))


@st.cache_data(ttl=5, show_spinner=False)
def load_report(path: str, name: str) -> dict | None:
    return validation_report(get_store(path), name)


@st.cache_data(ttl=5, show_spinner=False)
def load_mixes(path: str) -> list[dict]:
    return get_store(path).list_mixes()


@st.cache_data(ttl=5, show_spinner=False)
def load_mix_versions(path: str, name: str) -> list[dict]:
    return get_store(path).mix_versions(name)


@st.cache_resource(max_entries=64, show_spinner=False)
def load_task(name: str, level: int, seed: int):
    return load_registry()[name].make_task(seed, level)


def clear_store_caches() -> None:
    """Forget cached store reads after this page wrote to the store."""
    for loader in (load_catalogue, load_report, load_mixes, load_mix_versions):
        loader.clear()


# ---------------------------------------------------------------- catalogue


def show_catalogue(frame: pd.DataFrame) -> list[str]:
    """Family overview, search box, filters, counts and the table; returns the names shown, in order."""
    counts = frame["validation"].value_counts()
    st.caption(f"{len(frame)} domains in {frame['family'].nunique()} families from {frame['source'].nunique()} "
               f"sources: {counts.get('passed', 0)} passed, {counts.get('failed', 0)} failed, "
               f"{counts.get('not validated', 0)} not validated. Pick a row to see the domain below.")
    with st.expander("Families", expanded=False):
        st.caption("Per family: its domains, their validation verdicts (a shipped report counts until you "
                   "validate again), levels, and the median generation time per task (ms of CPU).")
        st.dataframe(views.family_overview(frame), hide_index=True, key="dom_families")
    cols = st.columns([2, 1, 1, 1, 1, 1])
    query = cols[0].text_input("Search name and description", key="dom_search", placeholder="e.g. maze, sort, count")
    families = cols[1].multiselect("Family", sorted(frame["family"].unique()), key="dom_family")
    kinds = cols[2].multiselect("Kind", sorted(frame["kind"].unique()), key="dom_kind")
    sources = cols[3].multiselect("Source", sorted(frame["source"].unique()), key="dom_source")
    licenses = cols[4].multiselect("License", sorted(frame["license"].unique()), key="dom_license")
    statuses = cols[5].multiselect("Validation", STATUSES, key="dom_status")
    shown = frame
    for term in query.lower().split():
        text = (shown["name"] + " " + shown["description"]).str.lower()
        shown = shown[text.str.contains(term, regex=False)]
    if families:
        shown = shown[shown["family"].isin(families)]
    if kinds:
        shown = shown[shown["kind"].isin(kinds)]
    if sources:
        shown = shown[shown["source"].isin(sources)]
    if licenses:
        shown = shown[shown["license"].isin(licenses)]
    if statuses:
        shown = shown[shown["validation"].isin(statuses)]
    if len(shown) < len(frame):
        st.caption(f"Showing {len(shown)} of {len(frame)} domains.")
    ids = list(shown["name"])
    event = st.dataframe(shown.drop(columns="reasons"), hide_index=True, key="dom_table", on_select="rerun",
                         selection_mode="single-row", height=300)
    rows = event.selection.rows if event is not None else []
    follow_table_selection(event if rows and rows[0] < len(ids) else None, ids, "dom_domain")
    return ids


# ---------------------------------------------------------------- one domain


def answer_hint(domain) -> str:
    """What the try-the-verifier box expects for this domain."""
    if isinstance(domain, ToolUseDomain):
        return ("Tool calls as `<tool_call>{\"name\": ..., \"arguments\": {...}}</tool_call>`, one turn per line; "
                "the last line is the final turn (`Answer: ...`, or DONE when the result is in the sandbox). "
                "Each call is checked against its tool's schema and run" +
                (" in a sandbox." if domain.needs_sandbox else "."))
    if domain.answer_format == "move":
        return ("Moves in square brackets, as the game asks (`[up]`, `[3 7]`): each bracketed move is one turn, in "
                "order; the reward is 1 if they win the game.")
    if isinstance(domain, EpisodeDomain):
        return ("Shell commands, one shell command per line: each line is one turn in a fresh sandbox, then the "
                "episode ends with DONE and the checker decides the reward.")
    if isinstance(domain, SandboxDomain):
        return "The Python function (a ```python block or its body); its unit tests run in a sandbox."
    if domain.answer_format == "tag":
        return "Put the final answer between `<answer>` and `</answer>` tags (it may span lines)."
    return "End with the final answer on its own last line as `Answer: ...`."


def show_facts(domain) -> None:
    st.text(domain.description)  # plain text: upstream descriptions hold *, _ and brackets
    cols = st.columns(4)
    cols[0].metric("Family", domain.family)
    cols[1].metric("Kind", domain.kind)
    cols[2].metric("Levels", f"{min(domain.levels)}-{max(domain.levels)}")
    cols[3].metric("Sandbox", "yes" if domain.needs_sandbox else "no")
    st.caption(f"Source: {domain.source} · License: {domain.license}")
    left, right = st.columns(2)
    with left:
        st.markdown("**Levels**")
        st.dataframe(pd.DataFrame([{"level": lvl, "notes": domain.level_notes.get(lvl, ""), "config": str(cfg)}
                                   for lvl, cfg in sorted(domain.levels.items())]),
                     hide_index=True, key="dom_levels")
    with right:
        st.markdown("**Environment**")
        st.json(domain.environment, expanded=True)


def show_sample(domain):
    """Level and seed pickers and the rendered task; returns the task (None if it failed)."""
    levels = sorted(domain.levels)
    if st.session_state.get("dom_level") not in levels:
        st.session_state["dom_level"] = levels[0]
    st.session_state.setdefault("dom_seed", 0)
    cols = st.columns(2)
    level = cols[0].selectbox("Level", levels, key="dom_level",
                              format_func=lambda lv: f"{lv} — {domain.level_notes.get(lv, '')}".rstrip(" —"))
    seed = cols[1].number_input("Seed", min_value=0, max_value=HELDOUT_SEED_RANGE[1] - 1, step=1, key="dom_seed")
    try:
        task = load_task(domain.name, int(level), int(seed))
    except Exception as e:  # noqa: BLE001 - a third-party generator may raise anything; show it
        st.error(f"Generating {domain.name} level {level} seed {seed} failed: {type(e).__name__}: {e}")
        return None
    if isinstance(domain, RetrievalDomain):  # its context is assembled per policy tokenizer; the Retrieval page shows it
        st.markdown("**Question** (the model sees it after the retrieved context)")
        st.code(task.question, language=None, wrap_lines=True)
        st.caption("The prompt holds a global summary and the best fragments of the task's documents, fitted to "
                   "the policy's token budget. Open this task on the Retrieval page (source: task) to see the "
                   "chunks, the ranking and the assembled context.")
        st.page_link("screens/retrieval.py", label="Retrieval page", icon=":material/manage_search:")
        messages = []
    else:
        messages = build_messages(task)
    for message in messages:
        if message["role"] == "system":
            st.caption(f"System: {message['content']}")
        else:
            st.markdown(f"**{message['role'].capitalize()}** (as the model sees it)")
            st.code(message["content"], language=None, wrap_lines=True)
    with st.expander("Reference answer"):
        st.code(task.answer, language=None, wrap_lines=True)
        if isinstance(domain, EpisodeDomain) and "reference" in task.entry:
            st.caption("Reference commands")
            st.code("\n".join(task.entry.get("reference", [])), language="bash")
        if "reference_calls" in task.entry:
            st.caption("Reference tool sequence (the verifier accepts it with reward 1)")
            st.json(task.entry["reference_calls"], expanded=False)
    return task


def _fill(text: str) -> None:
    st.session_state["dom_try_text"] = text


def show_try_verifier(domain, task) -> None:
    st.markdown("**Try the verifier**")
    st.caption(answer_hint(domain))
    text = st.text_area("Answer", key="dom_try_text", height=120, placeholder="Write an answer and press Score")
    cols = st.columns([1, 2, 6])
    score = cols[0].button("Score", key="dom_try_score", type="primary")
    cols[1].button("Fill in the reference", key="dom_try_fill", on_click=_fill, args=(domain.reference_completion(task),))
    task_key = (task.domain, task.difficulty, task.seed, text)
    if score:
        try:
            with st.spinner("Scoring…" if not domain.needs_sandbox else "Scoring in a sandbox…"):
                reward, breakdown = try_verifier(task, text)
            st.session_state["dom_try_result"] = (task_key, reward, breakdown, None)
        except WorkbenchError as e:
            st.session_state["dom_try_result"] = (task_key, None, None, str(e))
    result = st.session_state.get("dom_try_result")
    if not result or result[0] != task_key:
        return
    _, reward, breakdown, error = result
    if error:
        st.error(f"Could not score: {error}")
        return
    cols = st.columns([1, 3])
    cols[0].metric("Reward", f"{reward:.2f}")
    with cols[1]:
        st.json(breakdown, expanded=True)


def levels_frame(report: dict) -> pd.DataFrame:
    """The per-level rows of a validation report, prompt lengths flattened."""
    rows = []
    for row in report.get("levels", []):
        flat = {k: "; ".join(v) if isinstance(v, list) else v for k, v in row.items() if k != "prompt_chars"}
        for q, v in (row.get("prompt_chars") or {}).items():
            flat[f"chars_{q}"] = v
        rows.append(flat)
    return pd.DataFrame(rows)


def show_difficulty_plots(frame: pd.DataFrame) -> None:
    ok = frame[frame["n"].notna()] if "n" in frame else frame.iloc[0:0]
    if ok.empty or "chars_p50" not in ok:
        st.info("The stored report has no level that generated tasks; nothing to plot.")
        return
    lv = ok["level"].astype(str)
    cols = st.columns(3)
    box = go.Figure(go.Box(x=lv, lowerfence=ok["chars_min"], q1=ok["chars_p10"], median=ok["chars_p50"],
                           q3=ok["chars_p90"], upperfence=ok["chars_max"], mean=ok["chars_mean"],
                           name="prompt chars"))
    box.update_layout(title="Prompt length (characters)", xaxis_title="level", yaxis_title="characters",
                      margin=MARGIN)
    cols[0].plotly_chart(box, key="dom_plot_chars")
    cols[0].caption("Box p10-p90 with the median; whiskers min-max.")
    gen = px.bar(ok.assign(level=lv), x="level", y="gen_ms_per_task", title="Generation time (ms per task)")
    gen.update_layout(margin=MARGIN)
    cols[1].plotly_chart(gen, key="dom_plot_gen")
    distinct = ok.assign(level=lv).melt(id_vars="level", value_vars=["distinct_per_100", "distinct_prompts_per_100"],
                                        var_name="what", value_name="per 100")
    distinct["what"] = distinct["what"].map({"distinct_per_100": "tasks", "distinct_prompts_per_100": "prompts"})
    fig = px.bar(distinct, x="level", y="per 100", color="what", barmode="group", title="Distinct per 100 tasks")
    fig.update_layout(margin=MARGIN, legend_title_text="")
    cols[2].plotly_chart(fig, key="dom_plot_distinct")


def show_validation(path: str, domain) -> None:
    report = load_report(path, domain.name)
    cols = st.columns([3, 1])
    cols[0].subheader("Validation")
    if cols[1].button("Validate now", key="dom_validate",
                      help=f"{VALIDATE_TASKS} tasks per level; sandboxed domains need Docker"):
        try:
            with st.spinner(f"Validating {domain.name} ({VALIDATE_TASKS} tasks per level)…"):
                [fresh] = validate([domain.name], n_tasks=VALIDATE_TASKS)
                get_store(path).record_validation(fresh)
        except WorkbenchError as e:
            st.error(f"Validation could not run: {e}")
        else:
            clear_store_caches()
            st.rerun()
    if report is None:
        st.info(f"{domain.name} has not been validated yet. It is validated when it first joins a saved mix, "
                f"or press Validate now (or run `rlwb domains validate {domain.name}`).")
        return
    when = (report.get("created_at") or "")[:19].replace("T", " ")
    shipped = (" This is the report shipped with the workbench (made with the same generator version); "
               "Validate now replaces it with one made here.") if report.get("shipped") else ""
    if report["passed"]:
        st.success(f"Passed validation ({when} UTC, {report.get('duration_s', '?')} s).{shipped}")
    else:
        reasons = "\n".join(f"- {r}" for r in report.get("reasons") or ["(no reason recorded)"])
        st.error(f"**{domain.name} failed validation ({when} UTC), so it can't join a mix.**{shipped}\n\n{reasons}")
    xproc = report.get("cross_process_deterministic")
    st.caption("Cross-process determinism: " + {True: "same tasks", False: "tasks differ"}.get(xproc, "not checked"))
    frame = levels_frame(report)
    if frame.empty:
        return
    st.markdown("**Difficulty distribution**")
    show_difficulty_plots(frame)
    st.dataframe(frame, hide_index=True, key="dom_report_levels")


def show_domain(path: str, names: list[str], status: dict[str, str]) -> None:
    reg = load_registry()
    if st.session_state.get("dom_domain") not in reg:
        wanted = st.query_params.get("domain")
        st.session_state["dom_domain"] = wanted if wanted in reg else (
            DEFAULT_DOMAIN if DEFAULT_DOMAIN in reg else names[0])
    name = st.selectbox("Domain", list(reg), key="dom_domain")
    st.query_params["domain"] = name
    domain = reg[name]
    st.header(name)
    if status.get(name) == "failed":
        st.error(f"{name} failed validation and can't join a mix (see Validation below).")
    show_facts(domain)
    st.subheader("Sample task")
    task = show_sample(domain)
    if task is not None:
        show_try_verifier(domain, task)
    show_validation(path, domain)


# ---------------------------------------------------------------- mix editor


def _load_mix_into_editor(path: str) -> None:
    """on_change of the mix picker: fill the editor with the picked mix's newest version."""
    pick = st.session_state.get("dom_mix_pick")
    reg = load_registry()
    if pick == NEW_MIX or pick is None:
        st.session_state.update(dom_mix_domains=[], dom_mix_name="", dom_mix_note="")
        return
    row = get_store(path).get_mix(pick)
    spec = (row or {}).get("spec", {}).get("domains", {})
    st.session_state["dom_mix_domains"] = [d for d in spec if d in reg]
    for d, item in spec.items():
        if d in reg:
            st.session_state[f"dom_mix_w_{d}"] = float(item.get("weight", 1.0))
            st.session_state[f"dom_mix_lv_{d}"] = tuple(item.get("levels") or (min(reg[d].levels), max(reg[d].levels)))
    st.session_state.update(dom_mix_name=pick, dom_mix_note="")


def _clamp(levels, lo: int, hi: int) -> tuple[int, int]:
    try:
        a, b = (int(x) for x in levels)
    except (TypeError, ValueError):
        return lo, hi
    a, b = min(max(a, lo), hi), min(max(b, lo), hi)
    return (a, b) if a <= b else (lo, hi)


def edit_domains(chosen: list[str], reg: dict, status: dict[str, str]) -> dict:
    """One row per chosen domain (weight, level range); returns the spec mapping."""
    spec = {}
    for d in chosen:
        lo, hi = min(reg[d].levels), max(reg[d].levels)
        wkey, lkey = f"dom_mix_w_{d}", f"dom_mix_lv_{d}"
        st.session_state.setdefault(wkey, 1.0)
        st.session_state[lkey] = _clamp(st.session_state.get(lkey, (lo, hi)), lo, hi)
        cols = st.columns([2, 1, 3])
        cols[0].markdown(f"**{d}**  \n{status.get(d, 'not validated')}")
        weight = cols[1].number_input("Weight", min_value=0.0, step=0.5, key=wkey)
        if lo < hi:
            levels = cols[2].slider("Levels", min_value=lo, max_value=hi, key=lkey)
        else:
            levels = (lo, hi)
            cols[2].caption(f"Level {lo} (its only level)")
        spec[d] = {"weight": weight, "levels": [int(levels[0]), int(levels[1])]}
    return {"domains": spec}


def show_preview(spec: mixes.MixSpec) -> None:
    specs = spec.as_specs()
    draws = mixes.draw(specs, random.Random(0), PREVIEW_DRAWS)
    total = sum(w for w, _, _ in specs.values())
    by_domain = Counter(d for d, _ in draws)
    rows = []
    for d, (w, _, _) in specs.items():
        rows += [{"domain": d, "share": by_domain[d] / len(draws), "series": f"drawn ({PREVIEW_DRAWS:,})"},
                 {"domain": d, "share": w / total, "series": "target weight"}]
    cols = st.columns(2)
    fig = px.bar(pd.DataFrame(rows), x="domain", y="share", color="series", barmode="group",
                 title="Share per domain")
    fig.update_layout(margin=MARGIN, legend_title_text="", yaxis_tickformat=".0%")
    cols[0].plotly_chart(fig, key="dom_mix_preview_domains")
    levels = pd.DataFrame([{"level": str(lv), "domain": d, "share": n / len(draws)}
                           for (d, lv), n in sorted(Counter(draws).items(), key=lambda x: (x[0][1], x[0][0]))])
    fig = px.bar(levels, x="level", y="share", color="domain", title="Share per level")
    fig.update_layout(margin=MARGIN, yaxis_tickformat=".0%")
    cols[1].plotly_chart(fig, key="dom_mix_preview_levels")


def show_history(path: str, name: str) -> None:
    versions = load_mix_versions(path, name)
    if not versions:
        return
    st.caption(f"Version history of {name} ({len(versions)} versions)")
    st.dataframe(pd.DataFrame([{
        "version": v["version"], "created_at": v["created_at"], "note": v["note"],
        "domains": ", ".join(f"{d} ×{i['weight']:g} [{i['levels'][0]}-{i['levels'][1]}]"
                             for d, i in v["spec"]["domains"].items() if i.get("levels")),
    } for v in reversed(versions)]), hide_index=True, key="dom_mix_history")


def save(path: str, name: str, data: dict, note: str) -> None:
    try:
        with st.spinner("Validating never-validated domains, then saving…"):
            version = mixes.save_mix(get_store(path), name, data, note=note)
    except WorkbenchError as e:
        st.error(f"Not saved: {e}")
        return
    clear_store_caches()
    st.session_state["dom_mix_pending"] = name
    st.session_state["dom_mix_saved"] = f"Saved {name} version {version}."
    st.rerun()


def show_mix_editor(path: str, catalogue: pd.DataFrame) -> None:
    reg = load_registry()
    stored = [m["name"] for m in load_mixes(path)]
    pending = st.session_state.pop("dom_mix_pending", None)
    if pending:
        st.session_state["dom_mix_pick"] = pending
    if st.session_state.get("dom_mix_pick") not in (NEW_MIX, *stored):
        st.session_state["dom_mix_pick"] = NEW_MIX
    pick = st.selectbox("Mix", [NEW_MIX, *stored], key="dom_mix_pick", on_change=_load_mix_into_editor, args=(path,),
                        help="Picking a stored mix loads its newest version into the editor")
    if message := st.session_state.pop("dom_mix_saved", None):
        st.success(message)
    if pick != NEW_MIX:
        show_history(path, pick)
    status = dict(zip(catalogue["name"], catalogue["validation"]))
    st.session_state["dom_mix_domains"] = [d for d in st.session_state.get("dom_mix_domains", []) if d in reg]
    chosen = st.multiselect("Domains", list(reg), key="dom_mix_domains",
                            format_func=lambda d: f"{d} (failed validation)" if status.get(d) == "failed" else d)
    data = edit_domains(chosen, reg, status)
    cols = st.columns(2)
    name = cols[0].text_input("Mix name", key="dom_mix_name", placeholder="letters, digits, _ . -")
    note = cols[1].text_input("Note", key="dom_mix_note", placeholder="what changed in this version")
    if name:
        try:
            mixes.check_name(name)
        except WorkbenchError as e:
            st.error(str(e))
    if name and name in stored and name != pick:
        st.caption(f"A mix named {name} exists: saving adds a new version to it.")
    spec = None
    if not chosen:
        st.info("Pick domains to build a mix.")
    else:
        try:
            spec = mixes.parse_spec(data)
        except WorkbenchError as e:
            st.error(str(e))
    if spec is not None:
        reasons = dict(zip(catalogue["name"], catalogue["reasons"]))
        for d in spec.as_specs():
            if status.get(d) == "failed":
                st.error(f"{d} failed validation and can't join a mix: {reasons[d]}")
        never = [d for d in spec.as_specs() if status.get(d) == "not validated"]
        if never:
            st.caption(f"Not validated yet (validated on save, a few seconds each): {', '.join(never)}")
        st.markdown("**Preview**")
        show_preview(spec)
    if st.button("Save as new version", key="dom_mix_save", type="primary"):
        save(path, name, data, note)


def render() -> None:
    st.title("Domains")
    path = db_path()
    load_registry()
    catalogue = load_catalogue(path)
    tab_domains, tab_mix, tab_new = st.tabs(["Catalogue", "Mix editor", "New domain"])
    with tab_domains:
        names = show_catalogue(catalogue)
        show_domain(path, names or list(catalogue["name"]), dict(zip(catalogue["name"], catalogue["validation"])))
    with tab_mix:
        show_mix_editor(path, catalogue)
    with tab_new:
        show_new_domain(get_store(path), clear_store_caches)


render()
