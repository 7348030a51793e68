"""The Retrieval page with AppTest: sources (paste, upload, saved collection) and the
errors a document can cause, a question through to the assembled context, asking a tiny
policy, the context-length heat maps; and the Trajectories page's retrieved fragments.

`RLWB_CACHE` points at a tmp dir in every test, so no fetched model is found (the page
falls back to the MiniLM tokenizer and says so) and saved collections stay in the tmp dir.
Documents are a few hundred words: MiniLM encodes ~25 chunks/s on this CPU.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from streamlit.testing.v1 import AppTest

from backend import retrieval_service as rs
from backend.store import Store
from tests.app.test_pages import _app
from trainer.types import Completion, Sample

PAGE = "screens/retrieval.py"
NEEDLE = "The secret code for the amber vault is 48213."
QUESTION = "What is the secret code for the amber vault?"
FILLER = ("Startups grow when founders talk to users every week. Most ideas look bad at first, and the good "
          "ones often look like toys. Writing clarifies thinking because it forces you to finish a thought. ")
DOCUMENT = ("# Notes on startups\n\n" + FILLER * 4 + "\n\n## Money\n\n" + FILLER * 3 + NEEDLE + " " + FILLER
            + "\n\n## Essays\n\n" + FILLER * 4)


@pytest.fixture
def env(tmp_path, monkeypatch):
    """A fresh store path and a model cache with nothing fetched."""
    monkeypatch.setenv("RLWB_CACHE", str(tmp_path / "cache" / "models"))
    return tmp_path / "retrieval.db"


def _open(db, monkeypatch) -> AppTest:
    return _app(db, monkeypatch, PAGE)


def _ok(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


def _errors(at: AppTest) -> str:
    return " ".join(e.value for e in at.error)


def _build_pasted(at: AppTest, text: str = DOCUMENT) -> AppTest:
    at.text_area(key="ret_paste").input(text).run()
    _ok(at)
    at.button(key="ret_build").click().run()
    _ok(at)
    return at


# AppTest does not expose a dataframe's key: tables are told apart by their columns
TABLES = {"ret_chunks": list(rs.chunks_frame(SimpleNamespace(chunks=[])).columns),
          "ret_hits": list(rs.hits_frame([], set()).columns),
          "ret_ranking": list(rs.ranking_frame([], set()).columns),
          "traj_fragments": list(rs.fragments_frame([]).columns)}


def _frame(at: AppTest, key: str):
    [frame] = [d.value for d in at.dataframe if list(d.value.columns) == TABLES[key]]
    return frame


def test_renders_on_an_empty_store_and_says_which_tokenizer(env, monkeypatch):
    at = _open(env, monkeypatch)
    assert at.title[0].value == "Retrieval"
    assert "financial_report" in at.caption[0].value and "FAISS" in at.caption[0].value  # what it is for, who uses it
    assert any("embedding model's (all-MiniLM-L6-v2) tokens" in w.value for w in at.warning)
    infos = " ".join(i.value for i in at.info)
    assert "Paste a document" in infos
    assert "rlwb eval context-length smollm2-135m" in infos
    assert not at.error and not at.get("plotly_chart")


def test_a_bad_embedding_dtype_is_said_on_the_page_not_a_traceback(env, monkeypatch):
    monkeypatch.setenv("RLWB_EMBEDDING_DTYPE", "fp8")
    at = _open(env, monkeypatch)
    _ok(at)
    assert "RLWB_EMBEDDING_DTYPE must be one of float32, bfloat16" in _errors(at) and "'fp8'" in _errors(at)
    assert not at.text_area  # stopped before the sources


def test_pasted_document_question_and_context_then_saved_and_reused(env, monkeypatch):
    at = _build_pasted(_open(env, monkeypatch))
    chunks = _frame(at, "ret_chunks")
    assert len(chunks) >= 3 and {"Money", "Essays"} <= set(chunks["section"])
    captions = " ".join(c.value for c in at.caption)
    assert f"indexed as {len(chunks)} chunks" in captions and "not indexed yet" not in captions  # no stale estimate
    assert any(j.value for j in at.json)  # the index parameters

    at.text_input(key="ret_question").input(QUESTION).run()
    _ok(at)
    assert any(NEEDLE in c.value for c in at.code)
    assert {"dense", "bm25", "fused", "in_context"} <= set(_frame(at, "ret_hits").columns)
    ranking = _frame(at, "ret_ranking")
    assert NEEDLE in ranking["best_sentence"].iloc[0] and ranking["in_context"].iloc[0]
    assert any(m.label == "Context tokens / budget" for m in at.metric)
    assert any("No policy model is fetched" in i.value for i in at.info)  # ask section, nothing to ask

    at.text_input(key="ret_save_name").input("notes").run()
    at.button(key="ret_save").click().run()
    _ok(at)
    assert any("Saved as `notes`" in s.value for s in at.success)
    at.radio(key="ret_source").set_value("Saved collection").run()
    _ok(at)
    assert len(_frame(at, "ret_chunks")) == len(chunks)
    assert any(NEEDLE in c.value for c in at.code)  # the question is kept, asked of the saved copy


def test_bad_documents_give_an_error_never_an_exception(env, monkeypatch):
    at = _open(env, monkeypatch)
    at.text_area(key="ret_paste").input("   \n\t  ").run()
    _ok(at)
    assert "is empty" in _errors(at)

    at.radio(key="ret_source").set_value("Upload a file").run()
    for name, data, expect in (
            ("blob.txt", bytes(range(256)) * 64, "looks binary"),
            ("huge.txt", b"word " * (10 * 2**20), "over this page's 4 MiB limit"),  # 50 MiB
            ("empty.txt", b"", "is empty")):
        at.file_uploader(key="ret_upload").set_value((name, data, "text/plain")).run()
        _ok(at)
        assert expect in _errors(at), (name, _errors(at))
        assert not [b for b in at.button if b.key == "ret_build"]  # nothing to build from a refused file

    at.file_uploader(key="ret_upload").set_value(("latin.txt", "Caf\xe9 cr\xe8me, na\xefve fa\xe7ade. ".encode(
        "latin-1") * 20, "text/plain")).run()
    _ok(at)  # decoded by charset detection, or refused with a message


def test_size_message_says_to_split(env, monkeypatch):
    at = _open(env, monkeypatch)
    at.radio(key="ret_source").set_value("Upload a file").run()
    at.file_uploader(key="ret_upload").set_value(("big.md", b"a" * (4 * 2**20 + 1), "text/markdown")).run()
    _ok(at)
    assert "Split it into parts under 4 MiB" in _errors(at) and "2-core CPU" in _errors(at)


def _sweep(accuracy: bool) -> dict:
    cells = [{"length": n, "depth": d, "mode": m, "needles": 2, "evidence": 1, "evidence_rate": 1.0 - d / 200,
              "answered": 1 if accuracy else 0, "correct": 1, "accuracy": 0.5 if accuracy else None}
             for n in (4_000, 1_000_000) for d in (0, 50, 100) for m in ("retrieval", "full")]
    return {"config": {"lengths": [4_000, 1_000_000], "depths": [0, 50, 100], "haystacks": 2,
                       "budget_tokens": 1536}, "window_tokens": 8192, "cells": cells, "seconds": 1.0}


def test_stored_sweep_renders_heat_maps(env, monkeypatch):
    with Store(env) as store:
        store.record_context_sweep("evidence-only", _sweep(accuracy=False))
        store.record_context_sweep("smollm2-135m", _sweep(accuracy=True))
    at = _open(env, monkeypatch)
    charts = {c.key: json.loads(c.proto.spec) for c in at.get("plotly_chart")}
    assert set(charts) == {f"ret_heat_{m}_{mode}" for m in ("evidence_rate", "accuracy")
                           for mode in ("retrieval", "full")}
    fig = charts["ret_heat_evidence_rate_retrieval"]
    assert fig["data"][0]["x"] == ["4k", "1M"] and fig["data"][0]["y"] == ["0%", "50%", "100%"]
    assert "smollm2-135m" in fig["layout"]["title"]["text"]

    at.selectbox(key="ret_sweep").select(1).run()  # the older, evidence-only sweep
    _ok(at)
    assert {c.key for c in at.get("plotly_chart")} == {"ret_heat_evidence_rate_retrieval",
                                                       "ret_heat_evidence_rate_full"}
    assert any("without a model" in c.value for c in at.caption)


def _tiny_policy(env, tmp_path) -> str:
    """A run with a tiny checkpoint (random weights, ~1000-token vocabulary) in the store at `env`."""
    from trainer.tiny import build_tiny_model

    ckpt = build_tiny_model(tmp_path / "ckpt" / "step-1")
    with Store(env) as store:
        rid = store.create_run("tiny-run", {"model": "tiny"}, total_steps=1)
        store.record_checkpoint(rid, 1, str(ckpt))
    return str(ckpt)


# A text of its own, so that its chunking doesn't depend on what the other tests built.
TINY_NEEDLE = "The secret code for the jade locker is 77120."
TINY_DOCUMENT = ("# Garden log\n\n" + "Tomatoes need sun and water in the morning. Basil grows well beside them. " * 8
                 + TINY_NEEDLE + " The river floods the lower beds in spring. " * 6)


def test_asks_a_tiny_policy_from_a_run_checkpoint(env, monkeypatch, tmp_path):
    ckpt = _tiny_policy(env, tmp_path)
    at = _open(env, monkeypatch)
    assert not at.warning  # a policy exists: no tokenizer fallback
    assert "tiny-run" in at.selectbox(key="ret_policy").format_func(ckpt)
    _build_pasted(at, TINY_DOCUMENT)
    assert ckpt in " ".join(c.value for c in at.caption)  # chunked in the policy's tokens
    at.text_input(key="ret_question").input("What is the secret code for the jade locker?").run()
    at.slider(key="ret_budget").set_value(512).run()  # the tiny model's window is 1024 tokens
    _ok(at)
    assert any(TINY_NEEDLE in c.value for c in at.code)
    at.button(key="ret_ask").click().run()
    _ok(at)
    assert not at.error, _errors(at)
    labels = {m.label for m in at.metric}
    assert {"Answer", "Prompt / new tokens"} <= labels


def test_token_counts_follow_the_policy_after_another_tokenizer(env, monkeypatch, tmp_path):
    at = _build_pasted(_open(tmp_path / "no-policy.db", monkeypatch))  # DOCUMENT in MiniLM tokens
    _tiny_policy(env, tmp_path)
    at = _build_pasted(_open(env, monkeypatch))  # the same text in the tiny policy's tokens
    at.text_input(key="ret_question").input(QUESTION).run()
    at.slider(key="ret_budget").set_value(512).run()
    _ok(at)
    assert _frame(at, "ret_ranking")["best_sentence"].iloc[0] == NEEDLE
    assert any(NEEDLE in c.value for c in at.code)


def _retrieval_record() -> dict:
    fragment = {"chunk_id": "haystack#7", "doc_id": "haystack", "section": "How to Start a Startup",
                "start_token": 2100, "n_tokens": 180, "depth": 0.52, "dense": 0.61, "bm25": 7.3, "fused": 0.0325,
                "fine": 0.71, "best_sentence": NEEDLE, "rank": 0}
    return {"context_tokens": 1400, "budget_tokens": 1536, "document_tokens": 4012, "evidence_in_context": True,
            "dropped": 5, "fragments": [fragment, {**fragment, "chunk_id": "haystack#2", "rank": 1, "depth": 0.1,
                                                   "best_sentence": "Most ideas look bad at first."}]}


def test_trajectories_page_shows_retrieved_fragments(env, monkeypatch):
    with Store(env) as store:
        rid = store.create_run("haystack", {"model": "tiny"}, total_steps=1)
        store.record_trajectories(rid, 1, [Sample(
            domain="needle_haystack", task_seed=3, group=0, index=0, prompt="<|user|>...", prompt_ids=[1] * 8,
            completion=Completion([2] * 4, [-0.5] * 4, "Answer: 48213", "stop"), reward=1.0,
            breakdown={"format": 1.0, "correct": 1.0}, answer="48213", difficulty=1,
            retrieval=_retrieval_record())])
    at = _app(env, monkeypatch, "screens/trajectories.py")
    assert any(m.value == "**Retrieved fragments**" for m in at.markdown)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Context / budget (tokens)"] == "1,400 / 1,536"
    assert metrics["Document (tokens)"] == "4,012" and metrics["Evidence in context"] == "yes"
    frame = _frame(at, "traj_fragments")
    assert list(frame["rank"]) == [1, 2] and frame["best_sentence"].iloc[0] == NEEDLE  # ranks as people count
    assert {"section", "start_token", "depth", "dense", "bm25", "fused", "fine"} <= set(frame.columns)
