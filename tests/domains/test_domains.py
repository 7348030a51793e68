"""Tests for the domain registry (domains/registry.py): tasks, verifiers, seeds. No model."""

import json
import random

import pytest

from domains import answers
from domains import contract
from domains import registry
from domains import splits
from core.errors import ConfigError, DomainNotFound

NAMES = ["basic_arithmetic", "chain_sum", "gsm_symbolic", "letter_counting", "spell_backward"]
LEVELS = [1, 2, 3]
OTHER_PACKAGES = ("reasoning-core", "mathematics-dataset", "chuk-puzzles-gym", "rl-workbench professional",
                  "textarena", "rl-workbench generated")  # families of their own


def _wrong(task):
    """A wrong answer that shares no character position with the reference (so partial
    credit rules — substring, per-position — give 0; gsm_symbolic gives 0.01 to any
    wrong number, see test_gsm_symbolic_wrong_number)."""
    if task.domain == "spell_backward":
        return "".join("y" if c.lower() == "x" else "x" for c in task.answer)
    return "".join(str((int(c) + 1) % 10) if c.isdigit() else c for c in task.answer)


@pytest.fixture(scope="module", params=[(n, lvl) for n in NAMES for lvl in LEVELS], ids=lambda p: f"{p[0]}-{p[1]}")
def domain_tasks(request):
    name, level = request.param
    d = registry.get_domain(name)
    rng = random.Random(1234)
    return d, [d.make_task(splits.train_seed(rng), level) for _ in range(50)]


def test_registry_has_every_reasoning_gym_generator_and_the_sandboxed_domains():
    from reasoning_gym.factory import DATASETS

    from domains.reasoning_gym.catalogue import SKIPPED

    # generated here, no sandbox
    ours = {"financial_report", "tool_sql", "tool_calc", "tool_docs", "whole_number_arithmetic", "largest_number"}
    rg = [n for n in registry.domain_names() if not registry.get_domain(n).needs_sandbox and n not in ours
          and not registry.get_domain(n).source.startswith(OTHER_PACKAGES)]
    assert sorted(rg) == sorted(set(DATASETS) - set(SKIPPED)) and set(NAMES) <= set(rg)
    # reasoning-gym's own short needle_haystack is replaced by the long-document one
    assert registry.get_domain("needle_haystack").kind == registry.get_domain("financial_report").kind == "retrieval"
    sandboxed = [n for n in registry.domain_names() if registry.get_domain(n).needs_sandbox]
    assert "humaneval" in sandboxed and sum(n.startswith("terminal_") for n in sandboxed) >= 8
    assert {"tool_files", "cad_bracket", "cad_shaft", "cad_table"} <= set(sandboxed)
    assert {registry.get_domain(n).family
            for n in ours - {"financial_report", "whole_number_arithmetic", "largest_number"}} == {"tool_use"}
    assert len(registry.domain_names()) >= 110
    for name in registry.domain_names():  # every domain carries what the page shows
        d = registry.get_domain(name)
        assert d.name == name and d.family and d.description and d.source and d.license
        assert 1 <= len(d.levels) <= 5 and sorted(d.levels) == list(range(1, len(d.levels) + 1))
        assert sorted(d.level_notes) == sorted(d.levels) and isinstance(d.environment, dict)
    for name in NAMES:
        d = registry.get_domain(name)
        assert d.name == name and d.kind == "single_turn"
        assert d.source.startswith("reasoning-gym 0.1.") and d.source.endswith(f", {name}")
        assert d.license == "Apache-2.0" and d.family and d.description
        assert sorted(d.levels) == LEVELS == sorted(d.level_notes)


def test_get_domain_unknown_names_valid_domains():
    with pytest.raises(DomainNotFound) as err:
        registry.get_domain("no_such_domain")
    msg = str(err.value)
    assert "no_such_domain" in msg and "rlwb domains list" in msg
    with pytest.raises(DomainNotFound, match="did you mean chain_sum"):
        registry.get_domain("chainsum")
    with pytest.raises(KeyError):  # DomainNotFound is also a KeyError
        registry.get_domain("")


def test_reference_answer_scores_one(domain_tasks):
    d, tasks = domain_tasks
    for t in tasks:
        reward, br = d.score(t, f"Let me think.\nAnswer: {t.answer}")
        assert (reward, br) == (1.0, {"format": 1.0, "correct": 1.0, "score": 1.0, "extracted": t.answer})


def test_wrong_answer_in_format_scores_format_only(domain_tasks):
    d, tasks = domain_tasks
    for t in tasks:
        reward, br = d.score(t, f"Answer: {_wrong(t)}")
        assert br["format"] == 1.0 and br["extracted"] == _wrong(t)
        expected = 0.01 if d.name == "gsm_symbolic" else 0.0  # gsm_symbolic's own partial credit
        assert br["score"] == expected and br["correct"] == 0.0  # partial credit is reported, not rewarded
        assert reward == pytest.approx(contract.FORMAT_WEIGHT)
        assert d.score(t, "Answer: ???")[0] == pytest.approx(0.2)  # non-numeric, no letters


def test_gsm_symbolic_wrong_number():
    d = registry.get_domain("gsm_symbolic")
    t = d.make_task(5, 1)
    reward, br = d.score(t, f"Answer: {int(float(t.answer)) + 1}")
    assert br["score"] == 0.01 and br["correct"] == 0.0 and reward == pytest.approx(contract.FORMAT_WEIGHT)


MALFORMED = [
    None,
    b"Answer: 5",
    5,
    "",
    "   ",
    "The answer is 5.",
    "Answer:",
    "Answer:   \n  \n",
    "Answer: \x00\x01\x02",
    "Answer: 5\x07",
    "Answer: \ud800",
    "Answer: 5\udfff",
    "\x00" * 1000,
    "a" * (answers.MAX_COMPLETION_CHARS + 1) + "\nAnswer: 5",
    "Answer: 5\nAnswer:",
]


@pytest.mark.parametrize("completion", MALFORMED, ids=range(len(MALFORMED)))
def test_blank_and_malformed_score_zero(completion):
    for name in NAMES:
        d = registry.get_domain(name)
        t = d.make_task(3, 1)
        reward, br = d.score(t, completion)
        assert (reward, br) == (0.0, {"format": 0.0, "correct": 0.0, "score": 0.0, "extracted": None})


def test_fuzzed_completions_stay_in_unit_interval():
    rng = random.Random(0)
    for name in NAMES:
        d = registry.get_domain(name)
        t = d.make_task(11, 2)
        for _ in range(100):
            junk = "".join(chr(rng.randrange(0x20, 0x2FF)) for _ in range(rng.randrange(40)))
            completion = rng.choice(["", "Answer: ", "answer:", "ANSWER:\n"]) + junk
            reward, br = d.score(t, completion)
            assert 0.0 <= reward <= 1.0 and 0.0 <= br["correct"] <= 1.0
            assert br["format"] == (0.0 if br["extracted"] is None else 1.0)


def test_extract_answer():
    assert answers.extract_answer("Answer: 3\nso Answer: 12 \nmore") == "12"
    assert answers.extract_answer("ANSWER:7") == "7"
    assert answers.extract_answer("the answer: -4") == "-4"
    assert answers.extract_answer("Answer:\n  42\n") == "42"
    assert answers.extract_answer("Answer: 1\r\n") == "1"
    assert answers.extract_answer("no final line") is None
    assert answers.extract_answer("Answer: 12\nAnswer:  ") is None


def test_tasks_are_deterministic_by_seed():
    for name in NAMES:
        d = registry.get_domain(name)
        for lvl in LEVELS:
            assert d.make_task(77, lvl) == d.make_task(77, lvl)
            assert d.make_task(77, lvl).difficulty == lvl
    # Pinned across processes and machines (reasoning-gym seeds items with Random(seed)).
    t = registry.get_domain("chain_sum").make_task(1000, 1)
    assert (t.question, t.answer) == ("State the final answer to the following arithmetic problem: 6 - 5 + 1 =", "2")
    t = registry.get_domain("spell_backward").make_task(1000, 2)
    assert (t.question, t.answer) == ("Spell this word backward (example: sun -> nus): wavably", "ylbavaw")


def test_seeds_give_diverse_tasks(domain_tasks):
    d, tasks = domain_tasks
    assert len({t.question for t in tasks}) > 40
    assert len({t.seed for t in tasks}) == 50


def test_task_fields_and_entry_are_json(domain_tasks):
    d, tasks = domain_tasks
    for t in tasks:
        assert t.domain == d.name and t.question and t.answer
        assert json.loads(json.dumps(t.entry)) == t.entry
        assert t.entry["answer"] == t.answer and t.entry["question"] == t.question
        assert len(t.answer) <= 12  # short answers: the model has ~64 new tokens


def test_gsm_symbolic_levels_use_disjoint_templates():
    d = registry.get_domain("gsm_symbolic")
    by_level = [{d.make_task(s, lvl).entry["metadata"]["template"] for s in range(100)} for lvl in LEVELS]
    assert all(len(s) >= 20 for s in by_level)
    assert not (by_level[0] & by_level[1] or by_level[1] & by_level[2] or by_level[0] & by_level[2])


def test_bad_difficulty_and_seed_raise_config_error():
    d = registry.get_domain("chain_sum")
    for bad in (0, 4, "2", True, 2.0, None):
        with pytest.raises(ConfigError, match="difficulty"):
            d.make_task(1, bad)
    for bad in (-1, 1.5, "3", None, False):
        with pytest.raises(ConfigError, match="seed"):
            d.make_task(bad, 1)
    with pytest.raises(ConfigError, match="domain"):
        d.score(registry.get_domain("spell_backward").make_task(1, 1), "Answer: x")


def test_heldout_and_train_seeds_are_disjoint():
    rng = random.Random(0)
    train = [splits.train_seed(rng) for _ in range(10_000)]
    assert not any(splits.is_heldout(s) for s in train)
    assert all(splits.TRAIN_SEED_RANGE[0] <= s < splits.TRAIN_SEED_RANGE[1] for s in train)
    assert splits.TRAIN_SEED_RANGE[1] <= splits.HELDOUT_SEED_RANGE[0]
    held = splits.heldout_seeds(100)
    assert held == splits.heldout_seeds(100) and len(set(held)) == 100
    assert all(splits.is_heldout(s) for s in held)
    assert splits.heldout_seeds(5, offset=100) == [splits.HELDOUT_SEED_RANGE[0] + 100 + i for i in range(5)]
    assert splits.heldout_seeds(0) == []
    with pytest.raises(ConfigError):
        splits.heldout_seeds(-1)
    with pytest.raises(ConfigError):
        splits.heldout_seeds(2, offset=splits.HELDOUT_SEED_RANGE[1] - splits.HELDOUT_SEED_RANGE[0] - 1)


def test_heldout_tasks_generate():
    for name in NAMES:
        d = registry.get_domain(name)
        for s in splits.heldout_seeds(3):
            t = d.make_task(s, 3)
            assert d.score(t, f"Answer: {t.answer}")[0] == 1.0


def test_build_messages_ends_with_answer_instruction():
    t = registry.get_domain("letter_counting").make_task(9, 1)
    msgs = registry.build_messages(t)
    assert [m["role"] for m in msgs] == ["system", "user"]
    assert t.question in msgs[1]["content"]
    assert msgs[-1]["content"].endswith(contract.ANSWER_INSTRUCTION)
    assert "Answer: <answer>" in contract.ANSWER_INSTRUCTION
    assert t.answer not in msgs[0]["content"]
    assert len(msgs[0]["content"]) < 200 and len(msgs[1]["content"]) < len(t.question) + 100


def test_numpy_style_ints_are_accepted():
    class Idx:  # what numpy.int64 offers: __index__
        def __init__(self, v):
            self.v = v

        def __index__(self):
            return self.v

    d = registry.get_domain("chain_sum")
    t = d.make_task(Idx(42), Idx(2))
    assert t == d.make_task(42, 2) and type(t.seed) is int and type(t.difficulty) is int


def test_every_domain_says_how_its_reward_is_made():
    """The Trajectories page shows it beside each breakdown."""
    rules = {name: registry.get_domain(name).reward_rule for name in registry.domain_names()}
    assert all(rules.values()), [n for n, r in rules.items() if not r]
    assert rules["tool_sql"].startswith("0.1 x format") and "geometry" in rules["cad_bracket"]
    assert rules["humaneval"].startswith("1 if") and rules["chain_sum"].startswith("0.2 x format")
