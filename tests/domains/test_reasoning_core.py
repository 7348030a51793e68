"""The reasoning-core family (domains/reasoning_core): the catalogue, and one domain per
family end to end on a few seeds (reference passes, wrong, blank and junk fail, the same
seed gives the same task after a fresh start). Every level of every domain is checked by
`rlwb domains validate` (slow; the shipped reports hold its verdicts)."""

import pytest

from domains import registry
from domains.contract import TextDomain
from domains.reasoning_core.catalogue import FAMILIES, LEVEL_FLOORS, SKIPPED, build_rc_domains
from domains.reasoning_core.domain import RC_VERSION, ReasoningCoreDomain

# one deterministic domain of each family
SAMPLE = {"logic": "logic_qa", "state_tracking": "rule_switching", "mathematics": "equation_system",
          "spatial_causal": "qualitative_causal_reasoning", "formal_languages": "regex_reasoning",
          "graphs_planning": "planning", "sets_tables": "set_missing_element"}


def test_catalogue_registers_every_generator_but_the_skipped_ones():
    import reasoning_core

    built = build_rc_domains()
    assert sorted(built) == sorted(set(reasoning_core.list_tasks()) - set(SKIPPED)) and len(built) >= 45
    assert {d.family for d in built.values()} == set(FAMILIES.values()) == set(SAMPLE)
    for name, d in built.items():
        assert registry.get_domain(name) is not None and isinstance(registry.get_domain(name), ReasoningCoreDomain)
        assert d.source == f"reasoning-core {RC_VERSION}, {name}" and d.license == "MIT"
        assert sorted(d.levels) == list(range(1, len(d.levels) + 1)) and d.levels[1] == LEVEL_FLOORS.get(name, 0)
        assert d.description and not d.description.startswith("reasoning-core's")  # its own summary
    assert not set(SKIPPED) & set(registry.domain_names())


@pytest.mark.parametrize("family", sorted(SAMPLE))
def test_a_domain_of_each_family_scores_and_repeats(family):
    d = registry.get_domain(SAMPLE[family])
    assert isinstance(d, TextDomain) and d.family == family
    levels = (min(d.levels), max(d.levels))
    tasks = [d.make_task(seed, level) for level in levels for seed in (0, 1, 2)]
    assert len({t.question for t in tasks}) >= 4  # seeds and levels give different tasks
    for t in tasks:
        reward, breakdown = d.score(t, d.reference_completion(t))
        assert reward == 1.0 and breakdown["correct"] == 1.0, (t.question, t.answer)
        assert d.score(t, "")[0] == 0.0
        assert d.score(t, "<answer>zq7 not it</answer>")[0] == pytest.approx(0.2)  # the format, not the answer
        assert d.score(t, f"The answer is {t.answer}")[0] == 0.0  # no tags: no answer
        assert "_time" not in t.entry["metadata"] and "_generator_commit" not in t.entry["metadata"]
    registry.reset_generator_caches()  # fresh generators, here and in the upstream workers
    assert [d.make_task(seed, level) for level in levels for seed in (0, 1, 2)] == tasks


def test_tasks_differ_by_level_not_by_history():
    """The same (seed, level) after other levels and seeds were asked for is the same task."""
    d = registry.get_domain("rule_switching")
    first = d.make_task(5, 3)
    for level in d.levels:
        d.make_task(9, level)
    assert d.make_task(5, 3) == first and d.make_task(5, 1) != first
