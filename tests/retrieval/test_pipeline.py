"""The pipeline end to end on small documents: the evidence reaches the context, within
budget, with the summary on top; collections persist and are reused."""

import pytest

from core.errors import ConfigError, DocumentError
from retrieval.chunking import count_tokens
from retrieval.pipeline import Collection, RetrievalConfig, Retriever

FILLER = [f"Paragraph {i} discusses the weather in town number {i}, which was mild and dry that year."
          for i in range(60)]
NEEDLE = "The secret code for the amber vault is 48213."


def _doc(position: int) -> str:
    parts = ["# Town notes", "## Spring"] + FILLER[:30] + ["## Autumn"] + FILLER[30:]
    parts.insert(position, NEEDLE)
    return "\n\n".join(parts)


CFG = RetrievalConfig(chunk_tokens=64, overlap_tokens=8, budget_tokens=400, summary_tokens=60)


@pytest.fixture(scope="module")
def collection(policy_tokenizer, embedder):
    return Collection.build({"notes": _doc(40)}, policy_tokenizer, CFG, embedder)


def test_coarse_hits_fuse_dense_and_bm25(collection, embedder):
    hits = Retriever(collection, CFG, embedder).search("What is the secret code for the amber vault?")
    assert NEEDLE in hits[0]["text"] or NEEDLE in hits[1]["text"]
    top = next(h for h in hits if NEEDLE in h["text"])
    assert top["dense"] is not None and top["bm25"] is not None and top["fused"] > 0
    assert all(a["fused"] >= b["fused"] for a, b in zip(hits, hits[1:]))


def test_fine_ranking_puts_the_needle_first_and_names_its_sentence(collection, embedder):
    r = Retriever(collection, CFG, embedder)
    ranked = r.rerank("What is the secret code for the amber vault?", r.search("secret code amber vault"))
    assert NEEDLE in ranked[0]["text"] and ranked[0]["best_sentence"].strip() == NEEDLE


@pytest.mark.parametrize("order", ["document", "edges"])
def test_context_fits_the_budget_and_holds_summary_and_evidence(collection, embedder, policy_tokenizer, order):
    ctx = Retriever(collection, CFG, embedder).build_context(
        "What is the secret code for the amber vault?", tokenizer=policy_tokenizer, order=order)
    assert NEEDLE in ctx.text
    assert ctx.tokens <= 400 and ctx.tokens == count_tokens(policy_tokenizer, [ctx.text])[0]
    assert ctx.text.startswith("Document summary:") and "Spring; Autumn" in ctx.summary
    assert len(ctx.fragments) >= 2 and "text" not in ctx.fragments[0]
    if order == "document":
        starts = [f["start_token"] for f in ctx.fragments]
        assert starts == sorted(starts)
    else:  # strongest fragment first, second strongest last
        assert ctx.fragments[0]["rank"] == 0 and ctx.fragments[-1]["rank"] == 1
    rec = ctx.record()
    assert rec["context_tokens"] == ctx.tokens and rec["fragments"] == ctx.fragments


def test_open_reuses_a_persisted_collection_and_rebuilds_on_change(tmp_path, policy_tokenizer, embedder):
    docs = {"notes": _doc(3)}
    first = Collection.open("town", docs, policy_tokenizer, CFG, embedder, root=tmp_path)
    meta = (tmp_path / "town" / "meta.json").stat().st_mtime_ns
    again = Collection.open("town", docs, policy_tokenizer, CFG, embedder, root=tmp_path)
    assert (tmp_path / "town" / "meta.json").stat().st_mtime_ns == meta  # loaded, not rebuilt
    assert [c.text for c in again.chunks] == [c.text for c in first.chunks]
    assert again.dense.params == first.dense.params
    changed = Collection.open("town", {"notes": _doc(50)}, policy_tokenizer, CFG, embedder, root=tmp_path)
    assert changed.meta["digest"] != first.meta["digest"]
    assert not [p for p in tmp_path.iterdir() if p.is_dir() and p.name.startswith(".")]  # no half-written dirs


def test_bad_input(policy_tokenizer, embedder, tmp_path):
    with pytest.raises(DocumentError):
        Collection.build({}, policy_tokenizer, CFG, embedder)
    with pytest.raises(DocumentError):
        Collection.build({"d": "  \n\n "}, policy_tokenizer, CFG, embedder)
    with pytest.raises(ConfigError, match="collection name"):
        Collection.open("../escape", {"d": "text."}, policy_tokenizer, CFG, embedder, root=tmp_path)
    with pytest.raises(ConfigError, match="budget_tokens"):
        RetrievalConfig(budget_tokens=0)
    with pytest.raises(ConfigError, match="order"):
        RetrievalConfig(order="random")
    with pytest.raises(ConfigError, match="summary_tokens"):
        RetrievalConfig(budget_tokens=100, summary_tokens=100)


def test_text_without_indexable_words_builds_a_dense_only_collection(policy_tokenizer, embedder):
    col = Collection.build({"d": "The and of the it is. " * 20 + "\n\n1 2 3 4\n\nx y z"}, policy_tokenizer, CFG, embedder)
    assert col.lexical.search("the", 5) == []
    assert Retriever(col, CFG, embedder).search("what is it?")  # the dense side still answers


@pytest.mark.parametrize("name, content", [("dense.faiss", None), ("meta.json", "{not json"), ("meta.json", "[1, 2]"),
                                           ("chunks.jsonl", ""), ("chunks.jsonl", '{"foo": 1}\n'), ("bm25.json", None),
                                           ("dense.faiss", "garbage")])
def test_a_damaged_collection_is_reported_and_rebuilt_by_open(tmp_path, policy_tokenizer, embedder, name, content):
    docs = {"notes": _doc(3)}
    Collection.open("town", docs, policy_tokenizer, CFG, embedder, root=tmp_path)
    d = tmp_path / "town"
    if content is None:
        (d / name).unlink()
    else:
        (d / name).write_text(content)
    with pytest.raises(DocumentError, match="rebuild it"):
        Collection.load(d)
    again = Collection.open("town", docs, policy_tokenizer, CFG, embedder, root=tmp_path)
    assert Collection.load(d).meta["digest"] == again.meta["digest"] and again.chunks


def test_concurrent_saves_of_one_name_never_expose_half_a_collection(tmp_path, policy_tokenizer, embedder):
    import threading

    col = Collection.build({"notes": _doc(3)}, policy_tokenizer, CFG, embedder)
    errors = []

    def save():
        try:
            for _ in range(15):
                col.save(tmp_path / "c")
                Collection.load(tmp_path / "c")
        except Exception as e:  # noqa: BLE001 - collected for the assertion
            errors.append(e)

    threads = [threading.Thread(target=save) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["c"]


def test_questions_and_budgets_that_cannot_work(collection, embedder, policy_tokenizer):
    r = Retriever(collection, CFG, embedder)
    for bad in ("", "   ", None, b"bytes"):
        with pytest.raises(ConfigError, match="question"):
            r.build_context(bad, tokenizer=policy_tokenizer)
    assert r.search("rev\ud800enue in spring")  # undecodable command-line bytes are replaced, not fatal
    with pytest.raises(ConfigError, match="at least 64"):
        r.build_context("secret code?", budget_tokens=1, tokenizer=policy_tokenizer)
    with pytest.raises(ConfigError, match="overlap_tokens"):
        RetrievalConfig(overlap_tokens=-5)
    with pytest.raises(ConfigError, match="collection name"):
        Collection.open("evil\n", {"d": "text."}, policy_tokenizer, CFG, embedder)
