"""The seven hand-made reasoning-gym domains, with levels picked by hand and kept stable.

`basic_arithmetic`, `whole_number_arithmetic`, `chain_sum`, `products`, `gsm_symbolic`,
`letter_counting` and `spell_backward` ask for a one-line `Answer: ...` (the rest of reasoning-gym's generators,
`domains.reasoning_gym.catalogue`, use `<answer>` tags). The quickstart trains on
basic_arithmetic, chain_sum and products at level 1; their levels stay fixed so measured
results stay comparable.

    domains = hand_made_domains()          # name -> ReasoningGymDomain
"""

from __future__ import annotations

import functools
import random
from typing import Any

from domains.reasoning_gym.domain import RG_VERSION, ReasoningGymDomain
from domains.splits import MAX_SIDE_DRAWS, draw_on_side

# gsm_symbolic has one config knob, `difficulty`, and its validator accepts only 1.0
# (values above 1 make some templates raise). Its templates differ in the number of
# solution steps (constant per template: lines of the reference chain of thought), so
# levels pick templates by steps: 1 -> 2 steps, 2 -> 3 steps, 3 -> 4 to 14 steps.
_GSM_STEP_BOUNDS = {1: (1, 2), 2: (3, 3), 3: (4, 1000)}
_GSM_TEMPLATES: dict[int, list[int]] = {}


def _gsm_templates(ds: Any, level: int) -> list[int]:
    """Template ids of gsm_symbolic (upstream `tasks_ok`) whose step count fits `level`."""
    if not _GSM_TEMPLATES:  # computed once (~2 ms); one update, so threads never see half
        from reasoning_gym.arithmetic.gsm_symbolic.gsm_symbolic import tasks_ok

        steps = {}
        for t in tasks_ok:
            cot = ds.generators[t](random.Random(0), 1.0)["metadata"]["answer_cot"]
            steps[t] = sum(1 for ln in cot.splitlines() if ln.strip() and not ln.startswith("####"))
        _GSM_TEMPLATES.update(
            {lvl: sorted(t for t, s in steps.items() if lo <= s <= hi) for lvl, (lo, hi) in _GSM_STEP_BOUNDS.items()}
        )
    return _GSM_TEMPLATES[level]


def _gsm_symbolic_item(ds: Any, seed: int, level: int) -> dict:
    """A gsm_symbolic item for a seed, as upstream `__getitem__` builds it.

    Upstream picks the template from a list sized `config.size`, so `ds[seed]` fails for
    large seeds; here the template is `templates[seed % len(templates)]` (consecutive
    held-out seeds cycle through all templates) and the values come from `Random(seed)`.
    """
    templates = _gsm_templates(ds, level)
    template = templates[seed % len(templates)]
    item = ds.generators[template](random.Random(seed), ds.config.difficulty)
    item["question"] += " Give the result as your final answer. Do not include units."
    item["metadata"].update(source_dataset="gsm_symbolic", source_index=seed, template=template)
    return item


TIMES_TABLE = (2, 12)  # products level 1: both factors in this range (inclusive)


def _times_table_entry(seed: int, attempt: int) -> dict:
    """Products level 1: a * b with a, b in TIMES_TABLE, in reasoning-gym's products wording
    and entry shape (its `score_answer` scores it). Factors 0 and 1 are left out: with them
    copying a factor or answering "0" is right on a fifth of the tasks, and GRPO learned
    exactly that."""
    rng = random.Random(seed * MAX_SIDE_DRAWS + attempt)
    a, b = rng.randint(*TIMES_TABLE), rng.randint(*TIMES_TABLE)
    return {"question": f"Solve the following multiplication: {a} * {b}. Give only the result as your final answer.",
            "answer": str(a * b),
            "metadata": {"source_dataset": "products", "source_index": seed, "expression": f"{a} * {b}",
                         "num_terms": 2, "num_digits": len(str(max(a, b))),
                         "difficulty": {"num_terms": (2, 2), "num_digits": (1, 2), "factors": TIMES_TABLE}}}


def _times_table_fact(item: dict) -> str:
    """The split key of a level-1 products item: its factors in ascending order, so "3 * 4"
    and "4 * 3" (one fact) fall on the same side of the split."""
    return "products fact " + " * ".join(sorted(item["metadata"]["expression"].split(" * "), key=int))


def _products_item(ds: Any, seed: int, level: int) -> dict:
    """The products item of `seed` on its side of the split (`draw_on_side`, one in 2 held
    out). Level 1 has only 66 facts (121 questions, `_times_table_entry`), split by fact
    (`_times_table_fact`): a held-out "4 * 3" is never trained as "3 * 4", and with the
    usual one in 5 only about 13 facts would be held out (35 of the 66 are). Above level 1 the split is by
    question; attempt 0 is `ds[seed]`, attempt a > 0 `ds[seed * MAX_SIDE_DRAWS + a]`."""
    if level == 1:
        draw, key = functools.partial(_times_table_entry, seed), _times_table_fact
    else:
        def draw(a: int) -> dict:
            return ds[seed * MAX_SIDE_DRAWS + a if a else seed]

        def key(it: dict) -> str:
            return it["question"]
    item = draw_on_side(seed, draw, key, every=2)
    item["metadata"]["source_index"] = seed
    return item

# whole_number_arithmetic: operand ranges per level and operator. Every result is a whole
# number: a difference never goes below 1 and a quotient is exact (the dividend is b * q).
# Level 1 adds and subtracts two-digit numbers: with one-digit operands everywhere,
# SmolLM2-135M already answered 82% right once its format was forgiven (README, "Measured").
_WHOLE_RANGES = {
    1: {"+": (10, 99), "-": (10, 99), "*": (2, 9), "/": (2, 9)},
    2: {"+": (100, 999), "-": (100, 999), "*": (2, 19), "/": (2, 19)},
}


def _whole_number_entry(level: int, seed: int, attempt: int) -> dict:
    """One whole_number_arithmetic question, `a op b`, in basic_arithmetic's wording and entry
    shape (its `score_answer` scores it). "+" and "*" draw both operands from the level's
    range; "-" draws two distinct ones and puts the larger first (the result is 1 or more);
    "/" draws the divisor b and the quotient q and asks for (b * q) / b."""
    rng = random.Random(f"whole_number_arithmetic {level} {seed} {attempt}")
    op = rng.choice("+-*/")
    lo, hi = _WHOLE_RANGES[level][op]
    if op == "-":
        b, a = sorted(rng.sample(range(lo, hi + 1), 2))
    elif op == "/":
        b, q = rng.randint(lo, hi), rng.randint(lo, hi)
        a = b * q
    else:
        a, b = rng.randint(lo, hi), rng.randint(lo, hi)
    expression = f"{a} {op} {b}"
    answer = {"+": a + b, "-": a - b, "*": a * b, "/": a // b}[op]
    return {"question": f"Calculate {expression}.", "answer": str(answer),
            "metadata": {"source_dataset": "whole_number_arithmetic", "source_index": seed, "expression": expression,
                         "num_terms": 2, "difficulty": {"operands": _WHOLE_RANGES[level]}}}


def _whole_number_fact(item: dict) -> str:
    """The split key of a whole_number_arithmetic item: for "+" and "*" the operands in
    ascending order ("3 + 4" and "4 + 3" are one fact), else the expression itself."""
    a, op, b = item["metadata"]["expression"].split(" ")
    if op in "+*":
        a, b = sorted((a, b), key=int)
    return f"whole {a} {op} {b}"


def _whole_number_item(ds: Any, seed: int, level: int) -> dict:
    """The whole_number_arithmetic item of `seed` on its side of the split, by fact, one in 2
    held out (`draw_on_side`): level 1 has only 100 facts of "*" and "/" (36 + 64), so the
    usual one in 5 would hold out too few of them to measure a gain."""
    item = draw_on_side(seed, functools.partial(_whole_number_entry, level, seed), _whole_number_fact, every=2)
    item["metadata"]["source_index"] = seed
    return item


# largest_number: how many numbers, and their range, per level
_LARGEST_LEVELS = {1: (3, 10, 99), 2: (5, 10, 999), 3: (7, -999, 999)}


def _largest_entry(level: int, seed: int, attempt: int) -> dict:
    """One largest_number question: `n` distinct numbers of the level's range in random
    order, in an entry basic_arithmetic's `score_answer` scores (the answer is one integer)."""
    n, lo, hi = _LARGEST_LEVELS[level]
    rng = random.Random(f"largest_number {level} {seed} {attempt}")
    numbers = rng.sample(range(lo, hi + 1), n)
    return {"question": f"Which is the largest of these numbers: {', '.join(map(str, numbers))}?",
            "answer": str(max(numbers)),
            "metadata": {"source_dataset": "largest_number", "source_index": seed, "numbers": numbers,
                         "difficulty": {"count": n, "range": [lo, hi]}}}


def _largest_item(ds: Any, seed: int, level: int) -> dict:
    """The largest_number item of `seed` on its side of the split, by the set of numbers (an
    order of them held out is never trained in another order)."""
    item = draw_on_side(seed, functools.partial(_largest_entry, level, seed),
                        lambda it: "largest " + " ".join(map(str, sorted(it["metadata"]["numbers"]))))
    item["metadata"]["source_index"] = seed
    return item


def hand_made_domains() -> dict[str, ReasoningGymDomain]:
    """The eight hand-made domains (the first quickstart used five; today's uses
    basic_arithmetic, chain_sum and products), with levels picked by hand and kept stable so measured results
    stay comparable. They ask for a one-line `Answer: ...`."""
    return {d.name: d for d in [*_arithmetic_domains(), *_text_domains()]}


def _arithmetic_domains() -> list[ReasoningGymDomain]:
    """basic_arithmetic, whole_number_arithmetic, chain_sum, products, largest_number and gsm_symbolic."""
    return [
        ReasoningGymDomain(
            name="basic_arithmetic",
            family="arithmetic",
            description="Evaluate an integer expression with + - * / (floor division) and parentheses.",
            levels={
                1: dict(min_terms=2, max_terms=2, min_digits=1, max_digits=1),
                2: dict(min_terms=3, max_terms=3, min_digits=1, max_digits=2),
                3: dict(min_terms=3, max_terms=4, min_digits=2, max_digits=2),
            },
            level_notes={1: "2 terms, 1 digit", 2: "3 terms, 1-2 digits", 3: "3-4 terms, 2 digits"},
        ),
        ReasoningGymDomain(
            name="whole_number_arithmetic",
            family="arithmetic",
            description="Add, subtract, multiply or divide two whole numbers; every result is a whole "
                        "number (no negatives, exact division).",
            # the tasks are `_whole_number_entry`'s; the config only builds basic_arithmetic's verifier
            levels={1: dict(min_terms=2, max_terms=2, min_digits=1, max_digits=1),
                    2: dict(min_terms=2, max_terms=2, min_digits=1, max_digits=2)},
            level_notes={1: "two-digit + and -, one-digit * and / (2-9)", 2: "three-digit + and -, * and / over 2-19"},
            generate=_whole_number_item,
            upstream="basic_arithmetic",
            source=f"hand-made generator, scored by reasoning-gym {RG_VERSION} basic_arithmetic",
        ),
        ReasoningGymDomain(
            name="chain_sum",
            family="arithmetic",
            description="Add and subtract a chain of non-negative integers.",
            levels={
                1: dict(min_terms=2, max_terms=3, min_digits=1, max_digits=1),
                2: dict(min_terms=3, max_terms=4, min_digits=1, max_digits=2),
                3: dict(min_terms=4, max_terms=6, min_digits=2, max_digits=3),
            },
            level_notes={1: "2-3 terms, 1 digit", 2: "3-4 terms, 1-2 digits", 3: "4-6 terms, 2-3 digits"},
        ),
        ReasoningGymDomain(
            name="products",
            family="arithmetic",
            description="Multiply integers (the times table from 2 to 12 at level 1).",
            # level 1's tasks are `_times_table_entry`'s (the config only builds the verifier);
            # levels 3-5 are reasoning-gym's curriculum levels 0, 2 and 4
            levels={
                1: dict(min_terms=2, max_terms=2, min_digits=1, max_digits=1),
                2: dict(min_terms=2, max_terms=2, min_digits=1, max_digits=2),
                3: dict(min_terms=2, max_terms=3, min_digits=1, max_digits=2),
                4: dict(min_terms=4, max_terms=5, min_digits=3, max_digits=4),
                5: dict(min_terms=6, max_terms=7, min_digits=5, max_digits=6),
            },
            level_notes={1: "2 terms, each 2-12", 2: "2 terms, 1-2 digits", 3: "2-3 terms, 1-2 digits",
                         4: "4-5 terms, 3-4 digits", 5: "6-7 terms, 5-6 digits"},
            generate=_products_item,
        ),
        ReasoningGymDomain(
            name="largest_number",
            family="arithmetic",
            description="Pick the largest of a few whole numbers given in random order.",
            # the tasks are `_largest_entry`'s; the config only builds basic_arithmetic's verifier
            levels={1: dict(min_terms=2, max_terms=2, min_digits=1, max_digits=1),
                    2: dict(min_terms=2, max_terms=2, min_digits=1, max_digits=2),
                    3: dict(min_terms=2, max_terms=2, min_digits=1, max_digits=3)},
            level_notes={1: "three two-digit numbers", 2: "five numbers of two or three digits",
                         3: "seven numbers from -999 to 999"},
            generate=_largest_item,
            upstream="basic_arithmetic",
            source=f"hand-made generator, scored by reasoning-gym {RG_VERSION} basic_arithmetic",
        ),
        ReasoningGymDomain(
            name="gsm_symbolic",
            family="arithmetic",
            description="Grade-school math word problems (GSM-Symbolic templates) with a numeric answer.",
            levels={1: {}, 2: {}, 3: {}},
            level_notes={1: "2-step templates", 2: "3-step templates", 3: "4-14-step templates"},
            generate=_gsm_symbolic_item,
        ),
    ]


def _text_domains() -> list[ReasoningGymDomain]:
    """letter_counting and spell_backward."""
    return [
        ReasoningGymDomain(
            name="letter_counting",
            family="algorithmic",
            description="Count how often a letter occurs in a span of words from a novel.",
            levels={
                1: dict(min_words=3, max_words=5),
                2: dict(min_words=6, max_words=10),
                3: dict(min_words=11, max_words=15),
            },
            level_notes={1: "3-5 words", 2: "6-10 words", 3: "11-15 words"},
        ),
        ReasoningGymDomain(
            name="spell_backward",
            family="algorithmic",
            description="Spell an English word backward.",
            levels={
                1: dict(min_word_len=3, max_word_len=4),
                2: dict(min_word_len=5, max_word_len=7),
                3: dict(min_word_len=8, max_word_len=10),
            },
            level_notes={1: "3-4 letters", 2: "5-7 letters", 3: "8-10 letters"},
        ),
    ]
