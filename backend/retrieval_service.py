"""What the Retrieval page asks of the backend: documents in, collections, queries, the
policy's answer and context-length sweep grids out, as plain values and pandas frames.

    from backend import retrieval_service as rs
    text = rs.read_text(upload_bytes, "report.txt")          # DocumentError if unusable
    tok = rs.load_tokenizer(None)                           # the embedding model's (fallback)
    col = rs.build_collection({"report": text}, tok)
    q = rs.run_query(col, tok, "What was 2024 revenue?", budget_tokens=1536, order="document")
    q.context.text, rs.ranking_frame(q.ranked, q.in_context)
    model = rs.load_policy_model(path); rs.ask(model, rs.load_tokenizer(path), q.context.text, question)

Every function is usable without Streamlit (the page adds caching and widgets). Documents
built on the page are limited to `PAGE_MAX_BYTES` in all: embedding more on a 2-core CPU
takes many minutes (MiniLM encodes ~25 chunks/s here).

The retrieval pipeline and the embedding model (faiss, sentence-transformers, torch) are
imported inside the functions that use them, so the page opens without them.

Not covered: building collections in the background (the page blocks with a spinner),
sampling (answers are greedy), GPUs (the model runs on the CPU).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from core.errors import ConfigError, DocumentError, ModelNotFound
from domains.answers import extract_answer
from domains.contract import ANSWER_INSTRUCTION, SYSTEM_PROMPT
from domains.long_docs.domain import long_doc_domains
from trainer.models import MODELS, resolve_model
from retrieval.embeddings import default_model_path, Embedder, embedding_dtype, model_name, MODEL_NAME
from retrieval.documents import read_document
from retrieval.pipeline import (Collection, collection_digest, collection_path, collections_dir, RetrievalConfig,
                                Retriever)

PAGE_MAX_BYTES = 4 * 2**20  # documents built on the page, in all (~1M tokens)
MAX_NEW_TOKENS = 48
EMBEDDING_TOKENIZER = "embedding"  # `load_tokenizer` key of the embedding model's tokenizer


# ---------------------------------------------------------------- policies and tokenizers


def policy_choices(store) -> list[tuple[str, str]]:
    """Policies the page can use: fetched base models, then run checkpoints on disk.

    Args:
        store: A `backend.store.Store`.

    Returns:
        (label, checkpoint directory) pairs; empty when no model is fetched and no run
        checkpoint exists.
    """
    out = []
    for name in MODELS:
        try:
            out.append((name, str(resolve_model(name))))
        except ModelNotFound:
            pass
    for run in store.list_runs():
        for ck in store.checkpoints(run["id"]):
            if (Path(ck["path"]) / "config.json").is_file():
                out.append((f"run {run['name']} · step {ck['step']} ({run['id']})", ck["path"]))
    return out


def load_tokenizer(path: str | None):
    """The tokenizer of checkpoint `path`, or the embedding model's (MiniLM WordPiece) for
    None / `EMBEDDING_TOKENIZER`.

    Raises:
        ModelNotFound: `path` holds no loadable tokenizer.
    """
    if path in (None, EMBEDDING_TOKENIZER):
        return Embedder.shared().tokenizer
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(path)
    except (OSError, ValueError) as e:
        raise ModelNotFound(f"no tokenizer in {path}: {e}; pick another policy") from e


def collection_tokenizer_path(meta: dict) -> str:
    """Where to load the tokenizer a persisted collection was chunked with.

    Returns:
        A checkpoint directory, or `EMBEDDING_TOKENIZER`.

    Raises:
        ModelNotFound: that tokenizer is no longer on disk.
    """
    path = meta.get("tokenizer", "")
    if path and Path(path).resolve() == default_model_path().resolve():
        return EMBEDDING_TOKENIZER
    if path and Path(path).is_dir():
        return path
    raise ModelNotFound(f"the collection was chunked with tokenizer {path or '(unnamed)'!r}, which is not on "
                        "disk; token counts below use the page's tokenizer and may differ")


# ---------------------------------------------------------------- documents and collections


def check_size(n_bytes: int, name: str) -> None:
    """Refuse what the page should not build.

    Args:
        n_bytes: Size in bytes (UTF-8 for text).
        name: Shown in the message.

    Raises:
        DocumentError: over `PAGE_MAX_BYTES`.
    """
    if n_bytes > PAGE_MAX_BYTES:
        raise DocumentError(
            f"{name} is {n_bytes / 2**20:.1f} MiB, over this page's {PAGE_MAX_BYTES // 2**20} MiB limit "
            "(~1M tokens): building embeddings for more on a 2-core CPU takes many minutes. "
            "Split it into parts under 4 MiB and build a collection of each.")


def read_text(data: bytes | str, name: str) -> str:
    """Decode a pasted or uploaded document within the page's size limit.

    Raises:
        DocumentError: over `PAGE_MAX_BYTES`, empty, binary or undecodable.
    """
    check_size(len(data.encode("utf-8", "surrogatepass")) if isinstance(data, str) else len(data), name)
    return read_document(data, name, max_bytes=PAGE_MAX_BYTES)


def long_doc_domain(name: str):
    """The retrieval-kind domain `name` ("needle_haystack" or "financial_report").

    Raises:
        ConfigError: another name.
    """
    domains = long_doc_domains()
    if name not in domains:
        raise ConfigError(f"{name!r} is not a retrieval domain; use one of {', '.join(domains)}")
    return domains[name]


def task_documents(domain: str, level: int, seed: int) -> tuple[object, dict[str, str]]:
    """A retrieval task and its rebuilt documents (doc_id -> text).

    Raises:
        ConfigError: bad domain, level or seed.
    """
    d = long_doc_domain(domain)
    task = d.make_task(seed, level)
    return task, d.documents(task)


def collection_key(documents: dict[str, str], tokenizer, chunk_tokens: int, overlap_tokens: int) -> str:
    """A digest of the documents and chunking settings (32 hex digits): same key, same collection
    (`retrieval.pipeline.collection_digest` with the default embedding model in this machine's
    `embedding_dtype`).

    Raises:
        ConfigError: chunk or overlap settings out of range; a bad ``RLWB_EMBEDDING_DTYPE``.
    """
    cfg = RetrievalConfig(chunk_tokens=chunk_tokens, overlap_tokens=overlap_tokens)
    return collection_digest(documents, tokenizer, cfg, model_name(MODEL_NAME, embedding_dtype()[0]))


def build_collection(documents: dict[str, str], tokenizer, cfg=None):
    """Chunk, embed and index `documents` (`retrieval.pipeline.Collection.build`).

    Raises:
        DocumentError: no text, or over `PAGE_MAX_BYTES` in all.
    """
    check_size(sum(len(t.encode("utf-8", "replace")) for t in documents.values()), "the collection")
    return Collection.build(documents, tokenizer, cfg)


def saved_collections(root: Path | None = None) -> list[dict]:
    """Persisted collections (directories with a meta.json), by name.

    Returns:
        {"name", "path", "chunks", "documents", "tokenizer", "digest"} per collection;
        unreadable ones are left out.
    """
    root = root or collections_dir()
    out = []
    for meta_path in sorted(root.glob("*/meta.json")) if root.is_dir() else []:
        try:
            meta = json.loads(meta_path.read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(meta, dict) or meta_path.parent.name.startswith("."):
            continue  # damaged, or a collection being written
        out.append({"name": meta_path.parent.name, "path": str(meta_path.parent), "chunks": meta.get("chunks", 0),
                    "documents": len(meta.get("documents", {})), "tokenizer": meta.get("tokenizer", ""),
                    "digest": meta.get("digest", "")})
    return out


def load_collection(path: str):
    """A persisted collection (`Collection.load`).

    Raises:
        DocumentError: the directory holds no complete, readable collection.
    """
    return Collection.load(Path(path))


def save_collection(collection, name: str, root: Path | None = None) -> Path:
    """Persist `collection` under `name` (replacing one of that name); returns its directory.

    Raises:
        ConfigError: a name that is not 1-100 letters, digits, '_', '.', '-'.
    """
    path = collection_path(name, root)
    collection.save(path)
    return path


def chunks_frame(collection, limit: int = 5000) -> pd.DataFrame:
    """The first `limit` chunks: id, section, start token, tokens, first 120 characters."""
    return pd.DataFrame([{"chunk": c.chunk_id, "section": c.section, "start_token": c.start_token,
                          "tokens": c.n_tokens, "text": c.text[:120].replace("\n", " ")}
                         for c in collection.chunks[:limit]],
                        columns=["chunk", "section", "start_token", "tokens", "text"])


# ---------------------------------------------------------------- queries


@dataclass
class Query:
    """One question over a collection.

    Attributes:
        hits: Coarse hits best first (dense, bm25, fused scores; `Retriever.search`).
        ranked: The same hits fine-ranked (fine, best_sentence; `Retriever.rerank`).
        context: The assembled `retrieval.context.Context`.
        in_context: chunk ids of the fragments that made it into the context.
    """
    hits: list[dict]
    ranked: list[dict]
    context: object
    in_context: set[str]


def run_query(collection, tokenizer, question: str, budget_tokens: int, order: str = "document") -> Query:
    """Coarse search, fine ranking and the context for `question`.

    Args:
        collection: A `retrieval.pipeline.Collection`.
        tokenizer: The tokenizer it was chunked with (budget in its tokens).
        question: Non-empty question text.
        budget_tokens: Context budget (tokens).
        order: "document" or "edges".

    Raises:
        ConfigError: empty question, bad budget or order.
    """
    if not question.strip():
        raise ConfigError("type a question first")
    r = Retriever(collection)
    hits = r.search(question)
    ranked = r.rerank(question, hits)
    ctx = r.build_context(question, budget_tokens=budget_tokens, tokenizer=tokenizer, order=order)
    ctx.document_tokens = sum(collection.doc_tokens.values())
    return Query(hits, ranked, ctx, {f["chunk_id"] for f in ctx.fragments})


def hits_frame(hits: list[dict], in_context: set[str]) -> pd.DataFrame:
    """Coarse hits as a table, marking those in the context."""
    return pd.DataFrame([{"chunk": h["chunk_id"], "in_context": h["chunk_id"] in in_context,
                          "section": h["section"], "start_token": h["start_token"], "tokens": h["n_tokens"],
                          "dense": h["dense"], "bm25": h["bm25"], "fused": h["fused"]} for h in hits],
                        columns=["chunk", "in_context", "section", "start_token", "tokens", "dense", "bm25", "fused"])


def ranking_frame(ranked: list[dict], in_context: set[str]) -> pd.DataFrame:
    """Fine ranking as a table (best first, ranks from 1), marking those in the context."""
    return pd.DataFrame([{"rank": i, "chunk": h["chunk_id"], "in_context": h["chunk_id"] in in_context,
                          "fine": h["fine"], "best_sentence": h["best_sentence"]} for i, h in enumerate(ranked, 1)],
                        columns=["rank", "chunk", "in_context", "fine", "best_sentence"])


def fragments_frame(fragments: list[dict]) -> pd.DataFrame:
    """Fragments of a context or of a stored trajectory's retrieval record, in context order:
    rank (from 1, as people count; stored from 0), section, start token, depth (0..1), the
    scores and the best sentence."""
    cols = ["rank", "chunk_id", "section", "start_token", "n_tokens", "depth", "dense", "bm25", "fused", "fine",
            "best_sentence"]
    return pd.DataFrame([{**{c: f.get(c) for c in cols}, "rank": f["rank"] + 1 if isinstance(f.get("rank"), int)
                          else f.get("rank")} for f in fragments], columns=cols)


# ---------------------------------------------------------------- asking the policy


def load_policy_model(path: str):
    """The checkpoint at `path` for greedy CPU generation (float32, eval mode).

    Raises:
        ModelNotFound: not a loadable causal-LM checkpoint.
    """
    import torch
    from transformers import AutoModelForCausalLM

    try:
        return AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    except (OSError, ValueError) as e:
        raise ModelNotFound(f"can't load a model from {path}: {e}") from e


def ask(model, tokenizer, context: str, question: str, max_new_tokens: int = MAX_NEW_TOKENS) -> dict:
    """A short greedy answer to `question` given `context`, with the domains' prompt (system
    message, context, question, answer-line instruction) through the chat template.

    Args:
        model: From `load_policy_model`.
        tokenizer: The model's own tokenizer (with a chat template).
        context: The assembled context text.
        question: The question.
        max_new_tokens: Answer budget (tokens).

    Returns:
        {"completion", "answer" (the `Answer:` line or None), "prompt_tokens", "new_tokens", "seconds"}.

    Raises:
        ConfigError: no chat template, or the prompt does not fit the model's window.
    """
    import torch


    if not getattr(tokenizer, "chat_template", None):
        raise ConfigError("this checkpoint's tokenizer has no chat template; pick a chat model")
    messages = [{"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": f"{context}\n\nQuestion: {question}\n{ANSWER_INSTRUCTION}"}]
    prompt = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    enc = tokenizer(prompt, return_tensors="pt", add_special_tokens=False)
    n = enc["input_ids"].shape[1]
    window = int(getattr(model.config, "max_position_embeddings", 0) or 0)
    if window and n + max_new_tokens > window:
        raise ConfigError(f"the prompt is {n:,} tokens and the model's window {window:,}; lower the context budget")
    start = time.monotonic()
    with torch.inference_mode():
        out = model.generate(**enc, max_new_tokens=max_new_tokens, do_sample=False,
                             pad_token_id=tokenizer.pad_token_id or tokenizer.eos_token_id)
    new = out[0, n:]
    text = tokenizer.decode(new, skip_special_tokens=True)
    return {"completion": text, "answer": extract_answer(text), "prompt_tokens": n, "new_tokens": len(new),
            "seconds": round(time.monotonic() - start, 2)}


# ---------------------------------------------------------------- context-length sweeps


def length_label(tokens: int) -> str:
    """Short label of a token count: 4000 -> "4k", 1500 -> "1.5k", 1000000 -> "1M"."""
    for unit, size in (("M", 1_000_000), ("k", 1_000)):
        if tokens >= size:
            return f"{tokens / size:.1f}".rstrip("0").rstrip(".") + unit
    return str(tokens)


def sweep_grid(result: dict, mode: str, metric: str) -> pd.DataFrame | None:
    """One heat map's values from a sweep result (`trainer.context_length.run_sweep`).

    Args:
        result: The sweep result with "cells".
        mode: "retrieval" or "full".
        metric: "evidence_rate", "accuracy" or "mention_rate" (0..1).

    Returns:
        Rows = depth (percent, ascending), columns = length labels (ascending length),
        NaN where not measured; None when no cell of `mode` has `metric`.
    """
    cells = [c for c in result.get("cells", []) if c.get("mode") == mode and c.get(metric) is not None]
    if not cells:
        return None
    frame = pd.DataFrame(cells).pivot_table(index="depth", columns="length", values=metric, aggfunc="mean")
    frame = frame.sort_index().reindex(sorted(frame.columns), axis=1)
    frame.columns = [length_label(int(n)) for n in frame.columns]
    return frame
