"""The embedding model's dtype: bfloat16 only where the CPU computes it natively (or where
RLWB_EMBEDDING_DTYPE asks), float32 vectors either way, and a collection built in one dtype
is not reused by an embedder of the other."""

import numpy as np
import pytest
import torch

from backend.system import system_status
from core.errors import ConfigError, DocumentError
from retrieval.embeddings import DTYPE_ENV, MODEL_NAME, Embedder, embedding_dtype, model_name
from retrieval.pipeline import Collection, RetrievalConfig, Retriever

AVX2 = "processor\t: 0\nflags\t\t: fpu sse2 avx avx2 fma\n"
AVX512_BF16 = "processor\t: 0\nflags\t\t: fpu avx2 avx512f avx512bw avx512_bf16 avx512_vnni\n"
AMX = "processor\t: 0\nflags\t\t: fpu avx2 avx512f amx_bf16 amx_tile amx_int8\n"

TEXTS = ["The secret code for the amber vault is 48213.",
         "Paragraph 7 discusses the weather in town number 7, which was mild and dry that year.",
         "Revenue in the third quarter rose 12% to $48.2 million, led by the services segment."]


@pytest.mark.parametrize("flags, want", [(AVX512_BF16, "bfloat16"), (AMX, "bfloat16"), (AVX2, "float32"),
                                         ("processor\t: 0\n", "float32")])
def test_bf16_only_where_the_cpu_computes_it_natively(tmp_path, flags, want):
    (tmp_path / "cpuinfo").write_text(flags)
    dtype, why = embedding_dtype(environ={}, cpuinfo=tmp_path / "cpuinfo")
    assert dtype == want
    assert ("native bf16" in why) if want == "bfloat16" else ("no native bf16" in why)
    assert embedding_dtype(environ={}, cpuinfo=tmp_path / "missing")[0] == "float32"


def test_the_environment_variable_chooses_and_a_bad_value_is_named(tmp_path):
    (tmp_path / "cpuinfo").write_text(AVX512_BF16)
    assert embedding_dtype({DTYPE_ENV: "float32"}, tmp_path / "cpuinfo") == ("float32", f"{DTYPE_ENV}=float32")
    assert embedding_dtype({DTYPE_ENV: " Float32 "}, tmp_path / "cpuinfo")[0] == "float32"  # any case
    (tmp_path / "cpuinfo").write_text(AVX2)
    assert embedding_dtype({DTYPE_ENV: "bfloat16"}, tmp_path / "cpuinfo")[0] == "bfloat16"
    with pytest.raises(ConfigError, match=f"{DTYPE_ENV} must be one of float32, bfloat16.*'fp16'"):
        embedding_dtype({DTYPE_ENV: "fp16"})
    with pytest.raises(ConfigError, match="embedding dtype must be one of"):
        Embedder(dtype="float16")


def test_the_name_says_the_dtype_so_digests_differ():
    assert model_name(MODEL_NAME, "float32") == MODEL_NAME
    assert model_name(MODEL_NAME, "bfloat16") == f"{MODEL_NAME} (bfloat16)"


@pytest.fixture(scope="module")
def embedders():
    return Embedder(dtype="float32"), Embedder(dtype="bfloat16")


def test_bf16_vectors_are_float32_unit_vectors_close_to_float32s(embedders):
    f32, b16 = embedders
    assert (f32.dtype, b16.dtype) == ("float32", "bfloat16")
    assert next(b16.model.parameters()).dtype == torch.bfloat16
    a, b = f32.encode(TEXTS), b16.encode(TEXTS)
    assert a.dtype == b.dtype == np.float32 and a.shape == b.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(b, axis=1), 1.0, atol=1e-5)
    cos = (a * b).sum(axis=1)
    assert cos.min() > 0.995, cos
    assert not np.array_equal(a, b)  # really computed in another dtype
    # the ranking that matters: each text is nearest to itself across dtypes
    assert ((a @ b.T).argmax(axis=1) == np.arange(3)).all()


def test_a_collection_built_in_one_dtype_is_rebuilt_for_the_other(embedders, policy_tokenizer, tmp_path):
    f32, b16 = embedders
    cfg = RetrievalConfig(chunk_tokens=64, overlap_tokens=8, budget_tokens=400, summary_tokens=60)
    docs = {"notes": "\n\n".join(TEXTS[1:] * 10 + TEXTS[:1] + TEXTS[1:] * 10)}
    first = Collection.open("notes", docs, policy_tokenizer, cfg, f32, root=tmp_path)
    other = Collection.open("notes", docs, policy_tokenizer, cfg, b16, root=tmp_path)
    assert other.meta["embedding_model"] == f"{MODEL_NAME} (bfloat16)" != first.meta["embedding_model"]
    assert other.meta["digest"] != first.meta["digest"]
    ranked = Retriever(other, cfg, b16).rerank("What is the secret code for the amber vault?",
                                                 Retriever(other, cfg, b16).search("secret code amber vault"))
    assert ranked[0]["best_sentence"].strip() == TEXTS[0]
    # a saved collection is searched in the dtype it was built in, whatever this machine's default
    loaded = Collection.load(tmp_path / "notes")
    assert Retriever(loaded).embedder.dtype == "bfloat16"
    assert Retriever(first).embedder.dtype == "float32"
    with pytest.raises(DocumentError, match=r"embedded with all-MiniLM-L6-v2, and questions would be embedded "
                                            r"with all-MiniLM-L6-v2 \(bfloat16\); rebuild it"):
        Retriever(first, cfg, b16)


def test_the_home_page_row_says_the_dtype(monkeypatch):
    monkeypatch.setenv(DTYPE_ENV, "float32")
    row = next(r for r in system_status() if r["part"] == "Retrieval embeddings")
    assert row["available"] and "float32" in row["detail"] and DTYPE_ENV in row["detail"]
    monkeypatch.setenv(DTYPE_ENV, "half")
    row = next(r for r in system_status() if r["part"] == "Retrieval embeddings")
    assert not row["available"] and "'half'" in row["detail"]


def test_a_bad_value_stops_a_launch_and_the_cli_before_anything_starts(monkeypatch, tmp_path, tiny_model_dir, capsys):
    from backend import runs
    from backend.cli import main
    from backend.store import Store
    from trainer.config import parse_config

    monkeypatch.setenv(DTYPE_ENV, "int8")
    monkeypatch.setattr(runs, "_spawn", lambda *a, **k: pytest.fail("no worker may start"))
    cfg = parse_config({"name": "x", "model": str(tiny_model_dir), "domains": ["chain_sum"], "group_size": 2,
                        "micro_batch_size": 2})
    with Store(tmp_path / "s.db") as store:
        with pytest.raises(ConfigError, match=f"{DTYPE_ENV} must be one of"):
            runs.launch(cfg, store)
        assert store.list_runs() == []
    monkeypatch.setenv("RLWB_CACHE", str(tmp_path / "cache"))
    assert main(["--db", str(tmp_path / "s.db"), "retrieval", "search", "notes", "a question"]) == 2
    err = capsys.readouterr().err
    assert f"error: {DTYPE_ENV} must be one of float32, bfloat16" in err and "'int8'" in err and err.count("\n") == 1
