"""The mathematics-dataset family (domains/mathematics_dataset): the catalogue against
upstream's own module tables, one domain per family end to end on a few seeds (reference
passes, blank and wrong fail, the same seed gives the same task after a fresh start), the
generator's determinism and RNG hygiene, the shim, and the answer checker (equivalent forms
pass, echoing the question fails, code-like input is refused quickly)."""

import random
import time

import numpy as np
import pytest

from domains import registry
from domains.conformance import check_domain
from domains.contract import TextDomain
from domains.mathematics_dataset import shim
from domains.mathematics_dataset.catalogue import (DESCRIPTIONS, EXTRAPOLATE_ONLY, FAMILIES, TRAIN_MODULES,
                                                   build_md_domains, description)
from domains.mathematics_dataset.checker import check
from domains.mathematics_dataset.domain import MD_VERSION, MathematicsDatasetDomain, module_names, reset_caches
from domains.reasoning_gym.domain import UPSTREAM

# one domain of each family, with different kinds of answers; and one extrapolation-only domain
SAMPLE = {"algebra": "algebra__polynomial_roots", "arithmetic": "arithmetic__mixed",
          "calculus": "calculus__differentiate", "comparison": "comparison__sort",
          "measurement": "measurement__time", "numbers": "numbers__base_conversion",
          "polynomials": "polynomials__expand", "probability": "probability__swr_p_sequence"}
EXTRA = "comparison__sort_more"


@pytest.fixture(scope="module")
def domains():
    return build_md_domains()


def _reset() -> None:
    """Fresh module tables here and in the upstream workers."""
    reset_caches()
    UPSTREAM.reset(reset_caches)


def test_catalogue_has_every_module_with_its_levels(domains):
    assert MD_VERSION == "1.0.1"
    assert len(TRAIN_MODULES) == 56 and len(EXTRAPOLATE_ONLY) == 14
    assert sorted(domains) == sorted(TRAIN_MODULES + EXTRAPOLATE_ONLY)
    # the lists written out in the catalogue are upstream's
    assert module_names("train-easy") == module_names("train-medium") == module_names("train-hard") \
        == sorted(TRAIN_MODULES)
    assert sorted(set(module_names("extrapolate")) - set(TRAIN_MODULES)) == sorted(EXTRAPOLATE_ONLY)
    assert {d.family for d in domains.values()} == set(FAMILIES) == set(SAMPLE)
    for name, d in domains.items():
        assert isinstance(d, MathematicsDatasetDomain) and isinstance(d, TextDomain)
        assert d.family == name.split("__")[0] and d.kind == "single_turn" and d.answer_format == "line"
        assert d.source == f"mathematics-dataset {MD_VERSION}, {name}" and d.license == "Apache-2.0"
        assert d.description == description(name) and d.description.endswith(".")
        if name in TRAIN_MODULES:
            assert d.levels == {1: "train-easy", 2: "train-medium", 3: "train-hard"}
            assert d.level_notes[1] == "train-easy (entropy range 0-1/3)"
        else:
            assert d.levels == {1: "extrapolate"} and d.level_notes[1].startswith("extrapolate")
    assert description("numbers__gcd_composed") == (
        "Give the greatest common divisor of two integers, with the quantities defined by earlier steps.")
    assert description("comparison__kth_biggest_more").startswith(DESCRIPTIONS["comparison__kth_biggest"][:-1])


def test_names_are_free_in_the_registry(domains):
    """No other family registers one of these names (once this family is registered, its
    own domains are the ones found there)."""
    for name in domains:
        found = registry.registry().get(name)
        assert found is None or isinstance(found, MathematicsDatasetDomain), name


@pytest.mark.parametrize("family", sorted(SAMPLE))
def test_a_domain_of_each_family_scores_and_repeats(domains, family):
    d = domains[SAMPLE[family]]
    levels = (1, 3)
    tasks = [d.make_task(seed, level) for level in levels for seed in (0, 1, 2)]
    assert len({t.question for t in tasks}) >= 5  # seeds and levels give different tasks
    for t in tasks:
        assert t.entry == {"question": t.question, "answer": t.answer, "module": d.name}
        reward, breakdown = d.score(t, d.reference_completion(t))
        assert reward == 1.0 and breakdown["correct"] == 1.0, (t.question, t.answer)
        assert d.score(t, "")[0] == 0.0
        assert d.score(t, "Answer: zq7 not it")[0] == pytest.approx(0.2)  # the format, not the answer
        assert d.score(t, f"The answer is {t.answer}")[0] == 0.0  # no answer line: no answer
    _reset()
    assert [d.make_task(seed, level) for level in levels for seed in (0, 1, 2)] == tasks


def test_an_extrapolation_domain_scores_and_repeats(domains):
    d = domains[EXTRA]
    tasks = [d.make_task(seed, 1) for seed in (0, 1, 2)]
    for t in tasks:
        assert len(t.answer) > 30  # over upstream's own limit (see ANSWER_LENGTH_OVERRIDES)
        assert d.score(t, d.reference_completion(t))[0] == 1.0
        assert d.score(t, "Answer: " + ", ".join(reversed(t.answer.split(", "))))[0] == pytest.approx(0.2)
    _reset()
    assert [d.make_task(seed, 1) for seed in (0, 1, 2)] == tasks


@pytest.mark.parametrize("name", [SAMPLE["algebra"], EXTRA])
def test_domains_keep_the_contract(domains, name):
    check_domain(domains[name])


def test_tasks_depend_on_seed_and_level_not_on_history(domains):
    """In-process: the same (seed, level) after other modules, levels and seeds is the same
    entry, and generating leaves the global RNGs as they were."""
    d = domains["algebra__linear_1d_composed"]
    first = d.generate_entry(5, 3)
    random.seed(123)
    np.random.seed(123)
    expected = (random.random(), np.random.random())
    random.seed(123)
    np.random.seed(123)
    for other in ("numbers__gcd_composed", "polynomials__expand", "algebra__linear_1d_composed"):
        for level in (1, 2, 3):
            domains[other].generate_entry(9, level)
    assert (random.random(), np.random.random()) == expected  # states restored
    reset_caches()
    assert d.generate_entry(5, 3) == first and d.generate_entry(5, 1) != first


def test_shim_apply_is_idempotent():
    from mathematics_dataset.sample import polynomials
    from mathematics_dataset.util import composition

    shim.apply()
    np_stand_in, pop = polynomials.np, composition.Context.pop
    shim.apply()
    assert polynomials.np is np_stand_in and composition.Context.pop is pop
    assert polynomials.np.object is object and hasattr(polynomials.np.zeros(2), "itemset")


@pytest.mark.parametrize("candidate, reference, module", [
    ("0.75", "3/4", "arithmetic__div"),
    ("-1/5", "-0.2", "arithmetic__add_or_sub"),
    ("4000.0", "4000", "measurement__conversion"),
    ("u = 16", "16", "algebra__linear_1d"),
    ("3*x + 2*x^2", "2*x**2 + 3*x", "polynomials__expand"),
    ("-59*w - 2*w**2", "-2*w**2 - 59*w", "polynomials__collect"),
    ("-4*t**2*(t+1)**2*(t-8)", "-4*t**2*(t - 8)*(t + 1)**2", "algebra__polynomial_roots_composed"),
    ("200*sqrt(11) - 12", "-12 + 200*sqrt(11)", "arithmetic__simplify_surd"),
    ("10, -1, 0", "-1, 0, 10", "algebra__polynomial_roots"),
    ("yes", "True", "numbers__is_prime"),
    ("(b)", "b", "comparison__closest"),
    ("A7", "a7", "numbers__base_conversion"),
    ("7:56 am", "7:56 AM", "measurement__time"),
    ("\\boxed{-9}", "-9", "arithmetic__mixed"),
])
def test_checker_accepts_equivalent_forms(candidate, reference, module):
    assert check(candidate, reference, module)


@pytest.mark.parametrize("candidate, reference, module", [
    # the question's own expression where expanding, collecting or evaluating was asked
    ("x*(2*x + 3)", "2*x**2 + 3*x", "polynomials__expand"),
    ("(-2*x + 1 - 1)*(2 + 4 - 7) + 0*x - x + 2*x", "3*x", "polynomials__expand"),
    ("-7*w**2 + 2*w**2 - 59*w - 5*w**2 + 6*w**2 + 2*w**2", "-2*w**2 - 59*w", "polynomials__collect"),
    ("15 + 4743/(-170) + 13", "1/10", "arithmetic__mixed"),
    # wrong answers
    ("0.333", "1/3", "arithmetic__div"),
    ("2/7, -2/9, 2/3", "-2/9, 2/7, 2/3", "comparison__sort"),
    ("2, 2, 5", "2, 5", "numbers__list_prime_factors"),
    ("no", "True", "numbers__is_prime"),
    ("16 zzz 12345", "16", "algebra__linear_1d"),
    ("", "16", "algebra__linear_1d"),
])
def test_checker_refuses_echoes_and_wrong_answers(candidate, reference, module):
    assert not check(candidate, reference, module)


@pytest.mark.parametrize("candidate", [
    "__import__('os')", "__import__('os').system('true')", "9**9**9**9", "sqrt(9**9**9**9)", "(x+1)**100000",
    "((x**99)**99)**99", "1e999999", "x.n()", "lambda: 1", "open('x')", "(a+b+c+x+1)**100", "1" * 5000,
])
def test_checker_refuses_code_like_input_quickly(candidate):
    for reference in ("2*x**2 + 3*x", "1", "x"):
        start = time.perf_counter()
        assert check(candidate, reference, "polynomials__expand") is False
        assert time.perf_counter() - start < 1.0


def test_checker_never_raises():
    for candidate, reference in ((None, "1"), ("1", None), (b"1", "1"), ("1", 1), ("x" * 10**6, "x")):
        assert check(candidate, reference, "arithmetic__add_or_sub") is False


def test_shim_probability_gives_upstream_values(domains):
    """The integer-arithmetic `SampleWithoutReplacementSpace.probability` makes the same
    tasks as upstream's sympy one."""
    from mathematics_dataset.util import probability

    d = domains["probability__swr_p_level_set"]
    patched = probability.SampleWithoutReplacementSpace.probability
    fast = [d.generate_entry(seed, level) for level in (1, 3) for seed in range(8)]
    try:
        probability.SampleWithoutReplacementSpace.probability = patched.__wrapped__
        slow = [d.generate_entry(seed, level) for level in (1, 3) for seed in range(8)]
    finally:
        probability.SampleWithoutReplacementSpace.probability = patched
    assert fast == slow
