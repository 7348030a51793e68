"""Retrieval page: build a collection from a document, see its chunks and index, follow a
question through coarse search, fine ranking and context assembly, ask the policy, and
read context-length sweeps as heat maps.

UI only: documents, collections, queries and answers come from `backend.retrieval_service`
(over `retrieval.pipeline`), sweeps from `Store.context_sweeps`. Built collections are
cached per content digest (`st.cache_resource`) and can be saved under a name; the policy
model is cached once loaded.

Not covered here: documents over 4 MiB in all (~1M tokens; embedding more on a 2-core CPU
takes many minutes, so the page refuses them), running sweeps (`rlwb eval context-length`),
and anything that changes runs.
"""

from __future__ import annotations

from pathlib import Path

import plotly.graph_objects as go
import streamlit as st

from domains.contract import RetrievalDomain
from domains.registry import registry

from app.common import db_path, get_store
from backend import retrieval_service as rs
from core.errors import ConfigError, DocumentError, ModelNotFound, WorkbenchError
from retrieval.embeddings import embedding_dtype
from retrieval.pipeline import RetrievalConfig, collections_dir

SOURCES = ("Paste text", "Upload a file", "Saved collection", "Domain task")
UPLOAD_TYPES = ["txt", "md", "markdown", "rst", "csv", "tsv", "json", "jsonl", "log", "html", "xml", "yaml", "yml"]
TASK_DOMAINS = ("needle_haystack", "financial_report")
MODES = ("retrieval", "full")
CHUNKS_PER_S = 25  # MiniLM on this 2-core CPU
BYTES_PER_TOKEN = 4
CFG = RetrievalConfig()
MARGIN = {"l": 10, "r": 10, "t": 50, "b": 10}  # plotly chart margins (px)


@st.cache_data(ttl=10, show_spinner=False)
def load_policies(path: str) -> list[tuple[str, str]]:
    return rs.policy_choices(get_store(path))


@st.cache_resource(max_entries=4, show_spinner="Loading the tokenizer…")
def load_tokenizer(path: str):
    return rs.load_tokenizer(path)


@st.cache_resource(max_entries=2, show_spinner=False)
def load_model(path: str):
    return rs.load_policy_model(path)


@st.cache_resource(max_entries=8, show_spinner=False)
def build_collection(key: str, _documents: dict, _tokenizer):
    """Keyed by `key` (the content digest, `rs.collection_key`); the rest is not hashed."""
    return rs.build_collection(_documents, _tokenizer, CFG)


@st.cache_resource(max_entries=8, show_spinner="Loading the collection…")
def open_collection(path: str, digest: str):
    return rs.load_collection(path)


@st.cache_data(ttl=10, show_spinner=False)
def load_saved(root: str) -> list[dict]:
    return rs.saved_collections(Path(root))


@st.cache_resource(max_entries=4, show_spinner="Rebuilding the task's documents…")
def load_task(domain: str, level: int, seed: int):
    return rs.task_documents(domain, level, seed)


@st.cache_data(ttl=10, show_spinner=False)
def load_sweeps(path: str) -> list[dict]:
    return get_store(path).context_sweeps(limit=50)


# ---------------------------------------------------------------- policy and source


def pick_policy(path: str) -> tuple[str | None, str, object]:
    """The policy selectbox; returns (checkpoint path or None, its label, tokenizer).
    Without a policy, the embedding model's tokenizer, and the page says so."""
    choices = load_policies(path)
    if not choices:
        st.warning("No policy model is fetched and no run checkpoint is on disk, so chunks and budgets are "
                   "counted in the **embedding model's (all-MiniLM-L6-v2) tokens**, not a policy's. "
                   "Fetch one with `rlwb model fetch smollm2-135m`.")
        return None, "", load_tokenizer(rs.EMBEDDING_TOKENIZER)
    labels = {p: label for label, p in choices}
    policy = st.selectbox("Policy (its tokenizer measures chunks and budgets; it answers below)", list(labels),
                          format_func=labels.get, key="ret_policy")
    try:
        return policy, labels[policy], load_tokenizer(policy)
    except ModelNotFound as e:
        st.error(f"{e}. Falling back to the embedding model's (all-MiniLM-L6-v2) tokens.")
        return None, "", load_tokenizer(rs.EMBEDDING_TOKENIZER)


def pasted_documents() -> dict[str, str] | None:
    text = st.text_area("Document text (markdown headings `#` name sections)", height=200, key="ret_paste")
    if text == "":
        st.info("Paste a document above, or pick another source.")
        return None
    try:
        return {"pasted": rs.read_text(text, "the pasted text")}
    except DocumentError as e:
        st.error(str(e))
        return None


def uploaded_documents() -> dict[str, str] | None:
    files = st.file_uploader("Text files (one collection; 4 MiB in all)", type=UPLOAD_TYPES,
                             accept_multiple_files=True, key="ret_upload")
    if not files:
        st.info("Upload one or more plain-text files (convert PDF or Word files to text first).")
        return None
    try:
        rs.check_size(sum(f.size for f in files), ", ".join(f.name for f in files))
        names = [f.name for f in files]
        return {(f.name if names.count(f.name) == 1 else f"{f.name} ({i + 1})"): rs.read_text(f.getvalue(), f.name)
                for i, f in enumerate(files)}
    except DocumentError as e:
        st.error(str(e))
        return None


def task_source() -> tuple[object, dict[str, str]] | None:
    cols = st.columns(3)
    domain = cols[0].selectbox("Domain", TASK_DOMAINS, key="ret_task_domain")
    levels = rs.long_doc_domain(domain).level_notes
    level = cols[1].selectbox("Level", list(levels), format_func=lambda lv: f"{lv}: {levels[lv]}",
                              key=f"ret_task_level_{domain}")
    seed = cols[2].number_input("Seed", min_value=0, max_value=10**9, value=0, step=1, key="ret_task_seed")
    try:
        task, documents = load_task(domain, int(level), int(seed))
        rs.check_size(sum(len(t.encode("utf-8", "replace")) for t in documents.values()), "this task's documents")
    except WorkbenchError as e:
        st.error(str(e))
        return None
    with st.expander(f"The task: {task.question}"):
        st.markdown(f"Reference answer: `{task.answer}`")
        for sentence in task.entry.get("evidence", []):
            st.markdown(f"- evidence: {sentence}")
    return task, documents


def size_kib(documents: dict[str, str]) -> float:
    return sum(len(t.encode("utf-8", "replace")) for t in documents.values()) / 1024


def estimate(documents: dict[str, str]) -> int:
    """About how many chunks the documents make (before they are tokenized)."""
    return max(1, int(size_kib(documents) * 1024) // BYTES_PER_TOKEN // (CFG.chunk_tokens - CFG.overlap_tokens))


def built(documents: dict[str, str], tokenizer):
    """The collection of `documents` (built on a click, then from the cache), or None."""
    key = rs.collection_key(documents, tokenizer, CFG.chunk_tokens, CFG.overlap_tokens)
    note = st.empty()  # the estimate before the build, replaced by what was built
    if st.session_state.get("ret_built") != key:
        note.caption(f"{len(documents)} document(s), {size_kib(documents):,.1f} KiB, not indexed yet: about "
                     f"{estimate(documents):,} chunks, ~{max(1, estimate(documents) // CHUNKS_PER_S):,} s to embed on "
                     "this CPU.")
        if not st.button("Build collection", key="ret_build", type="primary"):
            return None
    try:
        with st.spinner("Chunking, embedding and indexing…"):
            col = build_collection(key, documents, tokenizer)
    except WorkbenchError as e:
        st.error(str(e))
        return None
    note.caption(f"{len(documents)} document(s), {size_kib(documents):,.1f} KiB: indexed as {len(col.chunks):,} chunks.")
    st.session_state["ret_built"] = key
    save_form(col)
    return col


def save_form(col) -> None:
    cols = st.columns([3, 1])
    name = cols[0].text_input("Save as (a name, to reuse it under Saved collection)", key="ret_save_name")
    if cols[1].button("Save collection", key="ret_save"):
        try:
            where = rs.save_collection(col, name.strip())
        except (ConfigError, OSError) as e:
            st.error(str(e))
            return
        load_saved.clear()
        st.success(f"Saved as `{name.strip()}` in `{where}`.")


def saved_source(tokenizer):
    """A persisted collection and the tokenizer it was chunked with, or None."""
    saved = load_saved(str(collections_dir()))
    if not saved:
        st.info("No saved collections yet: build one from pasted text, a file or a task and save it.")
        return None
    by_name = {s["name"]: s for s in saved}
    name = st.selectbox("Collection", list(by_name), key="ret_saved",
                        format_func=lambda n: f"{n} · {by_name[n]['documents']} docs · {by_name[n]['chunks']} chunks")
    try:
        col = open_collection(by_name[name]["path"], by_name[name]["digest"])
    except DocumentError as e:
        st.error(str(e))
        return None
    try:
        tokenizer = load_tokenizer(rs.collection_tokenizer_path(col.meta))
    except ModelNotFound as e:
        st.warning(str(e))
    return col, tokenizer


def source_collection(policy_tokenizer):
    """Draw the source widgets; returns (collection, its tokenizer, task or None) or None."""
    source = st.radio("Source", SOURCES, horizontal=True, key="ret_source")
    if source == "Saved collection":
        got = saved_source(policy_tokenizer)
        return None if got is None else (*got, None)
    task = None
    if source == "Paste text":
        documents = pasted_documents()
    elif source == "Upload a file":
        documents = uploaded_documents()
    else:
        got = task_source()
        task, documents = got if got else (None, None)
    if not documents:
        return None
    col = built(documents, policy_tokenizer)
    return None if col is None else (col, policy_tokenizer, task)


# ---------------------------------------------------------------- collection and query


def show_collection(col) -> None:
    st.subheader("Collection")
    cols = st.columns(4)
    cols[0].metric("Documents", len(col.doc_tokens))
    cols[1].metric("Chunks", f"{len(col.chunks):,}")
    cols[2].metric("Tokens", f"{sum(col.doc_tokens.values()):,}")
    cols[3].metric("Index", col.meta.get("index", {}).get("kind", "?"))
    st.caption(f"Tokenizer `{col.meta.get('tokenizer') or '(unnamed)'}` · embeddings "
               f"{col.meta.get('embedding_model', '?')} · chunks of at most {CFG.chunk_tokens} tokens")
    left, right = st.columns([3, 1])
    with left:
        table = rs.chunks_frame(col)
        more = f" (the first {len(table):,})" if len(table) < len(col.chunks) else ""
        st.caption(f"Chunks{more}")
        st.dataframe(table, hide_index=True, key="ret_chunks")
    with right:
        st.caption("Index parameters")
        st.json(col.meta.get("index", {}))


def ask_question(col, tokenizer, task) -> tuple[str, object] | None:
    """Question, budget and order widgets; shows the query's stages; returns (question, query)."""
    st.subheader("A question")
    task_key = None if task is None else (task.domain, task.seed, task.difficulty)
    if task_key is not None and st.session_state.get("ret_question_task") != task_key:
        st.session_state["ret_question_task"] = task_key
        st.session_state["ret_question"] = task.question
    question = st.text_input("Question", key="ret_question")
    cols = st.columns(2)
    budget = cols[0].slider("Context budget (tokens)", 128, 8192, CFG.budget_tokens, step=64, key="ret_budget")
    order = cols[1].radio("Fragment order", ("document", "edges"), horizontal=True, key="ret_order",
                          help="edges: the strongest fragments first and last, against 'lost in the middle'")
    if not question.strip():
        st.info("Type a question to see the coarse hits, the fine ranking and the assembled context.")
        return None
    try:
        with st.spinner("Searching…"):
            q = rs.run_query(col, tokenizer, question, budget, order)
    except WorkbenchError as e:
        st.error(str(e))
        return None
    left, right = st.columns(2)
    with left:
        st.markdown("**Coarse hits** (dense + BM25, fused by reciprocal rank)")
        st.dataframe(rs.hits_frame(q.hits, q.in_context), hide_index=True, key="ret_hits")
    with right:
        st.markdown("**Fine ranking** (best sentence)")
        st.dataframe(rs.ranking_frame(q.ranked, q.in_context), hide_index=True, key="ret_ranking")
    show_context(q, task)
    return question, q


def show_context(q, task) -> None:
    ctx = q.context
    st.markdown("**Assembled context**")
    cols = st.columns(3)
    cols[0].metric("Context tokens / budget", f"{ctx.tokens:,} / {ctx.budget_tokens:,}")
    cols[1].metric("Fragments in / dropped", f"{len(ctx.fragments)} / {ctx.dropped}")
    if task is not None and task.entry.get("evidence"):
        inside = all(e in ctx.text for e in task.entry["evidence"])
        cols[2].metric("Evidence in the context", "yes" if inside else "no")
    st.progress(min(1.0, ctx.tokens / max(1, ctx.budget_tokens)))
    st.caption("The summary comes first, then each fragment under its label (document, section, token span, depth).")
    st.code(ctx.text, language=None, wrap_lines=True)
    st.dataframe(rs.fragments_frame(ctx.fragments), hide_index=True, key="ret_fragments")


def show_ask(policy: str | None, label: str, question: str, q, task, collection_key: str) -> None:
    st.subheader("Ask the model")
    if policy is None:
        st.info("No policy model is fetched: run `rlwb model fetch smollm2-135m` (or train a run; its "
                "checkpoints are listed too), then reload the page.")
        return
    st.caption(f"{label} answers greedily on the CPU, at most {rs.MAX_NEW_TOKENS} new tokens, from the context "
               "above, the question and 'Give your final answer on the last line as: Answer: <answer>'.")
    key = (policy, collection_key, question, q.context.budget_tokens, q.context.text)
    if st.button("Ask", key="ret_ask"):
        try:
            with st.spinner(f"Loading {label} and generating…"):
                out = rs.ask(load_model(policy), load_tokenizer(policy), q.context.text, question)
        except WorkbenchError as e:
            st.error(str(e))
            return
        st.session_state["ret_answer"] = (key, out)
    saved = st.session_state.get("ret_answer")
    if not saved or saved[0] != key:
        return
    out = saved[1]
    cols = st.columns(3)
    cols[0].metric("Answer", out["answer"] or "(no Answer: line)")
    cols[1].metric("Prompt / new tokens", f"{out['prompt_tokens']:,} / {out['new_tokens']}")
    if task is not None:
        reward, _ = rs.long_doc_domain(task.domain).score(task, out["completion"])
        cols[2].metric("Reward", f"{reward:.2f}", help=f"reference answer: {task.answer}")
    st.code(out["completion"], language=None, wrap_lines=True)
    st.caption(f"{out['seconds']} s")


def explore(path: str) -> None:
    policy, label, tokenizer = pick_policy(path)
    got = source_collection(tokenizer)
    if got is None:
        return
    col, col_tokenizer, task = got
    show_collection(col)
    asked = ask_question(col, col_tokenizer, task)
    if asked:
        show_ask(policy, label, *asked, task, col.meta.get("digest", ""))


# ---------------------------------------------------------------- sweeps


def heatmap(grid, title: str) -> go.Figure:
    fig = go.Figure(go.Heatmap(
        z=grid.values, x=list(grid.columns), y=[f"{d}%" for d in grid.index], zmin=0, zmax=1,
        colorscale="RdYlGn", texttemplate="%{z:.0%}", colorbar={"tickformat": ".0%"},
        hovertemplate="length %{x} · depth %{y}: %{z:.0%}<extra></extra>"))
    fig.update_layout(title=title, margin=MARGIN, height=380, xaxis={"title": "haystack (tokens)", "type": "category"},
                      yaxis={"title": "needle depth", "type": "category", "autorange": "reversed"})
    return fig


def show_sweeps(path: str) -> None:
    sweeps = load_sweeps(path)
    if not sweeps:
        st.info("No context-length sweep stored yet. Run one with `rlwb eval context-length smollm2-135m`: a "
                "needle sweep over haystack lengths and depths, with retrieval and with the full haystack; "
                "it shows up here as heat maps.")
        return
    by_id = {s["id"]: s for s in sweeps}
    sid = st.selectbox("Sweep", list(by_id), key="ret_sweep",
                       format_func=lambda i: f"#{i} · {by_id[i]['model']} · {by_id[i]['created_at'][:16]}")
    row, result = by_id[sid], by_id[sid]["result"] or {}
    cfg = result.get("config", {})
    st.caption(f"Model {row['model']} · {row['created_at'][:16]} · "
               f"window {result.get('window_tokens', '?')} tokens · "
               f"retrieval budget {cfg.get('budget_tokens', '?')} tokens · {cfg.get('haystacks', '?')} haystacks "
               f"per length · {result.get('seconds', '?')} s")
    for metric, name in (("evidence_rate", "Evidence rate"), ("accuracy", "Accuracy"),
                         ("mention_rate", "Number mentioned")):
        grids = {mode: rs.sweep_grid(result, mode, metric) for mode in MODES}
        if all(g is None for g in grids.values()):
            if metric == "accuracy":
                st.caption("No accuracy: this sweep ran without a model (evidence only).")
            elif metric == "mention_rate" and not all(g is None for g in
                                                      (rs.sweep_grid(result, m, "accuracy") for m in MODES)):
                st.caption("This sweep predates the mention rate.")
            continue
        cols = st.columns(len(MODES))
        for col, mode in zip(cols, MODES):
            if grids[mode] is None:
                col.info(f"No {mode} cells with {name.lower()} in this sweep.")
                continue
            title = f"{name} · {mode} · {row['model']} · {row['created_at'][:10]}"
            col.plotly_chart(heatmap(grids[mode], title), key=f"ret_heat_{metric}_{mode}")


def render() -> None:
    st.title("Retrieval")
    try:
        embedding_dtype()
    except ConfigError as e:  # a bad RLWB_EMBEDDING_DTYPE: said here, not a traceback at the first build
        st.error(f"{e}; fix it in the page's environment and restart it")
        st.stop()
    users = sorted(n for n, d in registry().items() if isinstance(d, RetrievalDomain) or n == "tool_docs")
    st.caption("Long documents don't fit a small model's context: retrieval cuts them into chunks, finds the "
               "candidates (FAISS dense search + BM25), ranks them finely, and puts only the relevant fragments "
               "with a global summary in the prompt. Try it on your own text here; the long-document domains use it "
               f"in every run ({', '.join(users)}).")
    path = db_path()
    explore_tab, sweep_tab = st.tabs(["Collection and question", "Context-length sweeps"])
    with explore_tab:
        explore(path)
    with sweep_tab:
        show_sweeps(path)


render()
