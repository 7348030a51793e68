"""The pipeline end to end on small documents: the evidence reaches the context, within
budget, with the summary on top; collections persist and are reused."""

import pytest

from backend.errors import ConfigError, DocumentError
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
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no half-written dirs left


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
