"""The professional calculations family (domains/professional): every calculation at every
level on a few seeds, the tolerance rule, and answers checked against the libraries by an
independent formula where one is short."""

import random
import re

import pytest

from core.errors import ConfigError
from domains import registry
from domains.professional.calculations import CALCULATIONS
from domains.professional.science import spoken
from domains.professional.domain import CalculationDomain


@pytest.mark.parametrize("name", sorted(CALCULATIONS))
def test_every_calculation_scores_its_reference_and_rejects_others(name):
    d = registry.get_domain(name)
    assert isinstance(d, CalculationDomain) and d.family in ("finance", "units", "physics", "chemistry", "statistics")
    tasks = [d.make_task(seed, level) for level in d.levels for seed in range(6)]
    assert len({t.question for t in tasks}) >= 12
    answers = [t.answer for t in tasks]
    for t in tasks:
        assert d.make_task(t.seed, t.difficulty) == t
        assert d.score(t, d.reference_completion(t)) == (1.0, {"format": 1.0, "correct": 1.0, "extracted": t.answer})
        assert d.score(t, "")[0] == 0.0 and d.score(t, "no answer line")[0] == 0.0
        assert d.score(t, "Answer: none")[0] == pytest.approx(0.2)
        others = [a for a in answers if abs(float(a) - float(t.answer)) > 0.01 * abs(float(t.answer)) + 1e-6]
        assert d.score(t, f"Answer: {others[0]}")[0] == pytest.approx(0.2)


def test_tolerance_is_relative_or_half_a_last_place():
    d = registry.get_domain("fin_npv")
    task = next(t for t in (d.make_task(s, 2) for s in range(50)) if abs(float(t.answer)) > 1000)
    ref = float(task.answer)
    assert d.score(task, f"Answer: ${ref:,.2f}")[0] == 1.0  # currency sign and grouping are read past
    assert d.score(task, f"Answer: {ref * (1 + 0.0009):.2f}")[0] == 1.0
    assert d.score(task, f"Answer: {ref * (1 + 0.003):.2f}")[0] == pytest.approx(0.2)
    assert d.score(task, f"I think {ref}\nAnswer: {ref * 2}")[0] == pytest.approx(0.2)  # the answer line counts


def test_answers_match_independent_formulas():
    pmt = registry.get_domain("fin_loan_payment")
    for seed in range(10):
        t = pmt.make_task(seed, 1)
        m = re.search(r"loan of \$([\d,.]+) .* over (\d+) years at an annual interest rate of ([\d.]+)%", t.question)
        principal, years, rate = float(m[1].replace(",", "")), int(m[2]), float(m[3]) / 100 / 12
        n = years * 12
        assert float(t.answer) == pytest.approx(principal * rate / (1 - (1 + rate) ** -n), rel=1e-3)
    temp = registry.get_domain("units_temperature")
    for seed in range(20):
        t = temp.make_task(seed, 1)
        if "Celsius to degrees Fahrenheit" in t.question:
            c = float(t.question.split()[1])
            assert float(t.answer) == pytest.approx(c * 9 / 5 + 32, abs=0.01)
    assert spoken("meter ** 3 / hour") == "cubic meter per hour"


def test_bad_seeds_and_levels_raise_config_error():
    d = registry.get_domain("stats_z_test")
    for seed, level in [(-1, 1), (1.5, 1), (0, 4), (0, 0)]:
        with pytest.raises(ConfigError):
            d.make_task(seed, level)
    with pytest.raises(ConfigError, match="given to domain"):
        d.score(registry.get_domain("fin_irr").make_task(0, 1), "Answer: 1")
    rng = random.Random(0)
    t = d.make_task(rng.randrange(1000), 3)
    assert d.score(t, "x" * 200_000)[0] == 0.0 and d.score(t, None)[0] == 0.0


def test_tiny_answers_signs_hedges_and_exponents():
    """What a breaker found: 'Answer: 0' passed for a tiny reference, a minus before the
    currency sign was dropped, hedged lists passed, scientific notation was misread."""
    time = registry.get_domain("units_time")
    tiny = next(t for t in (time.make_task(s, 2) for s in range(60)) if abs(float(t.answer)) < 1e-3)
    assert "e-" in tiny.answer and time.score(tiny, "Answer: 0")[0] == pytest.approx(0.2)
    assert time.score(tiny, f"Answer: {float(tiny.answer):.6e}")[0] == 1.0  # the same value, more digits
    npv = registry.get_domain("fin_npv")
    pos = next(t for t in (npv.make_task(s, 1) for s in range(60)) if float(t.answer) > 1000)
    neg = next(t for t in (npv.make_task(s, 1) for s in range(200)) if float(t.answer) < -1000)
    value = abs(float(neg.answer))
    for right in (f"-${value:,.2f}", f"$-{value:,.2f}", f"(${value:,.2f})", f"\u2212{value:.2f}"):
        assert npv.score(neg, f"Answer: {right}")[0] == 1.0, right
    assert npv.score(pos, f"Answer: -${float(pos.answer):,.0f}")[0] == pytest.approx(0.2)  # wrong sign
    for hedge in (f"0 or {pos.answer}", f"1, 2, {pos.answer}", f"{pos.answer} or 0"):
        reward, breakdown = npv.score(pos, f"Answer: {hedge}")
        assert reward == pytest.approx(0.2) and breakdown["rejected"].startswith("ambiguous")
    assert npv.score(pos, f"Answer: {float(pos.answer):.4e}")[0] == 1.0
