"""Token-aware chunking: exact spans, token bounds, overlap, sections, stability."""

import pytest

from core.errors import ConfigError
from retrieval.chunking import chunk_document, count_tokens

DOC = "# Annual report\n\nThe company grew. " + " ".join(
    f"Sentence number {i} talks about revenue and costs in region {i % 7}." for i in range(120)) + (
    "\n\n## Segment review\n\n" + " ".join(f"The segment sold {i} units in week {i}." for i in range(80)))


def test_chunks_are_exact_spans_within_the_token_limit(policy_tokenizer):
    chunks = chunk_document(DOC, policy_tokenizer, "d", chunk_tokens=64, overlap_tokens=12)
    assert len(chunks) > 5
    for c in chunks:
        assert c.text == DOC[c.start_char:c.end_char]
        assert c.n_tokens == sum(count_tokens(policy_tokenizer, [c.text])) or c.n_tokens <= 64
        assert c.n_tokens <= 64
    assert [c.index for c in chunks] == list(range(len(chunks)))
    starts = [c.start_token for c in chunks]
    assert starts == sorted(starts)
    # every sentence of the document lies in some chunk
    covered = set()
    for c in chunks:
        covered.update(range(c.start_char, c.end_char))
    assert all(i in covered for i, ch in enumerate(DOC) if not ch.isspace())


def test_consecutive_chunks_overlap_and_headings_start_sections(policy_tokenizer):
    chunks = chunk_document(DOC, policy_tokenizer, "d", chunk_tokens=96, overlap_tokens=40)
    same_section = [(a, b) for a, b in zip(chunks, chunks[1:]) if a.section == b.section]
    assert same_section and all(b.start_char < a.end_char for a, b in same_section)
    assert {c.section for c in chunks} == {"Annual report", "Segment review"}
    seg = next(c for c in chunks if c.section == "Segment review")
    assert seg.text.startswith("## Segment review")
    no_overlap = chunk_document(DOC, policy_tokenizer, "d", chunk_tokens=64, overlap_tokens=0)
    assert all(b.start_char >= a.end_char for a, b in zip(no_overlap, no_overlap[1:]))


def test_an_edit_in_one_section_leaves_the_other_sections_chunks_unchanged(policy_tokenizer):
    before = chunk_document(DOC, policy_tokenizer, "d", chunk_tokens=64, overlap_tokens=12)
    edited = DOC.replace("Sentence number 5 talks", "A needle sentence sits here. Sentence number 5 talks")
    after = chunk_document(edited, policy_tokenizer, "d", chunk_tokens=64, overlap_tokens=12)
    seg = lambda cs: [c.text for c in cs if c.section == "Segment review"]
    assert seg(before) == seg(after)
    assert [c.text for c in before] != [c.text for c in after]


def test_a_sentence_longer_than_a_chunk_is_cut_at_token_boundaries(policy_tokenizer):
    text = "word " * 2000
    chunks = chunk_document(text, policy_tokenizer, chunk_tokens=32, overlap_tokens=0)
    assert len(chunks) > 10 and all(c.n_tokens <= 32 for c in chunks)
    assert "".join(c.text for c in chunks).replace(" ", "") == text.replace(" ", "")


def test_empty_and_bad_settings(policy_tokenizer):
    assert chunk_document("", policy_tokenizer) == []
    assert chunk_document("   \n\n  ", policy_tokenizer) == []
    with pytest.raises(ConfigError, match="chunk_tokens"):
        chunk_document(DOC, policy_tokenizer, chunk_tokens=4)
    with pytest.raises(ConfigError, match="overlap_tokens"):
        chunk_document(DOC, policy_tokenizer, chunk_tokens=64, overlap_tokens=40)


def test_token_counts_are_kept_per_tokenizer(policy_tokenizer, embedder):
    text = "Tomatoes need sun and water in the morning; basil grows well beside them."
    tiny = count_tokens(policy_tokenizer, [text])[0]
    minilm = count_tokens(embedder.tokenizer, [text])[0]
    assert tiny == len(policy_tokenizer(text, add_special_tokens=False)["input_ids"])
    assert minilm == len(embedder.tokenizer(text, add_special_tokens=False)["input_ids"])
    assert tiny != minilm and count_tokens(policy_tokenizer, [text])[0] == tiny


def test_headings_everywhere(policy_tokenizer):
    many = "\n".join(f"## H {i}" for i in range(1500)) + "\n\nBody."
    chunks = chunk_document(many, policy_tokenizer, chunk_tokens=64, overlap_tokens=8)  # no recursion limit
    assert len(chunks) == 1500 and chunks[-1].text.endswith("Body.")
    last = chunk_document("# A\n\ntext here.\n\n   ## Appendix", policy_tokenizer)
    assert [c.section for c in last] == ["A", "Appendix"] and last[-1].text == "## Appendix"
