"""Every mathematics-dataset module as a workbench domain, with numbered difficulty levels.

mathematics-dataset 1.0.1 has 56 training modules (`TRAIN_MODULES`) and 15 extrapolation
modules, 14 of which exist only there (`EXTRAPOLATE_ONLY`: `_big`, `_longer`, `_more`,
`_more_samples` variants; the 15th, `measurement__conversion`, is a training module too and
keeps its training levels). Each becomes one domain named like the module, in the family of
the module's first part (algebra, arithmetic, calculus, comparison, measurement, numbers,
polynomials, probability):

- a training module: levels 1, 2, 3 = train-easy, train-medium, train-hard (upstream's
  training entropy range in thirds);
- an extrapolation-only module: one level, upstream's extrapolate settings.

The module lists are written out here, so building the catalogue imports neither
mathematics-dataset nor sympy (tests/domains/test_mathematics_dataset.py checks them
against upstream's own tables).

    from domains.mathematics_dataset.catalogue import build_md_domains
    domains = build_md_domains()          # name -> MathematicsDatasetDomain
"""

from __future__ import annotations

from domains.mathematics_dataset.domain import EXTRAPOLATE, MD_VERSION, TRAIN_LEVELS, MathematicsDatasetDomain

TRAIN_MODULES = (
    "algebra__linear_1d", "algebra__linear_1d_composed", "algebra__linear_2d", "algebra__linear_2d_composed",
    "algebra__polynomial_roots", "algebra__polynomial_roots_composed", "algebra__sequence_next_term",
    "algebra__sequence_nth_term",
    "arithmetic__add_or_sub", "arithmetic__add_or_sub_in_base", "arithmetic__add_sub_multiple", "arithmetic__div",
    "arithmetic__mixed", "arithmetic__mul", "arithmetic__mul_div_multiple", "arithmetic__nearest_integer_root",
    "arithmetic__simplify_surd",
    "calculus__differentiate", "calculus__differentiate_composed",
    "comparison__closest", "comparison__closest_composed", "comparison__kth_biggest",
    "comparison__kth_biggest_composed", "comparison__pair", "comparison__pair_composed", "comparison__sort",
    "comparison__sort_composed",
    "measurement__conversion", "measurement__time",
    "numbers__base_conversion", "numbers__div_remainder", "numbers__div_remainder_composed", "numbers__gcd",
    "numbers__gcd_composed", "numbers__is_factor", "numbers__is_factor_composed", "numbers__is_prime",
    "numbers__is_prime_composed", "numbers__lcm", "numbers__lcm_composed", "numbers__list_prime_factors",
    "numbers__list_prime_factors_composed", "numbers__place_value", "numbers__place_value_composed",
    "numbers__round_number", "numbers__round_number_composed",
    "polynomials__add", "polynomials__coefficient_named", "polynomials__collect", "polynomials__compose",
    "polynomials__evaluate", "polynomials__evaluate_composed", "polynomials__expand", "polynomials__simplify_power",
    "probability__swr_p_level_set", "probability__swr_p_sequence",
)

EXTRAPOLATE_ONLY = (
    "algebra__polynomial_roots_big",
    "arithmetic__add_or_sub_big", "arithmetic__add_sub_multiple_longer", "arithmetic__div_big",
    "arithmetic__mixed_longer", "arithmetic__mul_big", "arithmetic__mul_div_multiple_longer",
    "comparison__closest_more", "comparison__kth_biggest_more", "comparison__sort_more",
    "numbers__place_value_big", "numbers__round_number_big",
    "probability__swr_p_level_set_more_samples", "probability__swr_p_sequence_more_samples",
)

FAMILIES = ("algebra", "arithmetic", "calculus", "comparison", "measurement", "numbers", "polynomials", "probability")

# One line per module group (the module name without its variant suffix, `SUFFIXES`).
DESCRIPTIONS = {
    "algebra__linear_1d": "Solve a linear equation in one variable.",
    "algebra__linear_2d": "Solve a system of two linear equations for one of its variables.",
    "algebra__polynomial_roots": "Find the roots of a polynomial, or factor it.",
    "algebra__sequence_next_term": "Give the next term of a polynomial sequence.",
    "algebra__sequence_nth_term": "Give a formula for the n-th term of a polynomial sequence.",
    "arithmetic__add_or_sub": "Add or subtract two numbers (integers or decimals).",
    "arithmetic__add_or_sub_in_base": "Add or subtract two integers written in a base from 2 to 16.",
    "arithmetic__add_sub_multiple": "Evaluate a bracketed sum of several integers.",
    "arithmetic__div": "Divide one number by another, giving an integer or a fraction.",
    "arithmetic__mixed": "Evaluate an expression mixing the four operations on integers and fractions.",
    "arithmetic__mul": "Multiply two numbers (integers or decimals).",
    "arithmetic__mul_div_multiple": "Evaluate a chain of multiplications and divisions.",
    "arithmetic__nearest_integer_root": "Give a square, cube or higher root to the nearest integer.",
    "arithmetic__simplify_surd": "Simplify an expression with square roots.",
    "calculus__differentiate": "Take a first or higher (partial) derivative of a polynomial.",
    "comparison__closest": "Pick the number in a list closest to a given one.",
    "comparison__kth_biggest": "Pick the k-th biggest or smallest number of a list.",
    "comparison__pair": "Compare two numbers: true or false, or which is bigger or smaller.",
    "comparison__sort": "Sort a list of numbers in increasing or decreasing order.",
    "measurement__conversion": "Convert a quantity between units of length, mass, time or volume.",
    "measurement__time": "Work with clock times: the time after a duration, or the minutes between two times.",
    "numbers__base_conversion": "Convert an integer from one base to another.",
    "numbers__div_remainder": "Give the remainder of an integer division.",
    "numbers__gcd": "Give the greatest common divisor of two integers.",
    "numbers__is_factor": "Say whether one integer divides another (true or false).",
    "numbers__is_prime": "Say whether an integer is prime or composite (true or false).",
    "numbers__lcm": "Give the least common multiple (or common denominator) of two numbers.",
    "numbers__list_prime_factors": "List the prime factors of an integer.",
    "numbers__place_value": "Give the digit of an integer at a named place value.",
    "numbers__round_number": "Round a number to a given place value or number of decimal places.",
    "polynomials__add": "Combine multiples of polynomial functions into one polynomial.",
    "polynomials__coefficient_named": "Rearrange a polynomial into a given form and give one of its coefficients.",
    "polynomials__collect": "Collect the like terms of a polynomial.",
    "polynomials__compose": "Compose two polynomial functions.",
    "polynomials__evaluate": "Evaluate a polynomial function at a value.",
    "polynomials__expand": "Expand a product of polynomials.",
    "polynomials__simplify_power": "Simplify a product and quotient of powers of one variable.",
    "probability__swr_p_level_set": "The probability of drawing given letter counts without replacement.",
    "probability__swr_p_sequence": "The probability of drawing a given letter sequence without replacement.",
}

# variant suffix -> what it adds to its group's description (the longest suffix is tried first)
SUFFIXES = {
    "_composed": ", with the quantities defined by earlier steps",
    "_more_samples": ", with more letters drawn than in training",
    "_big": ", with bigger numbers than in training",
    "_longer": ", with longer expressions than in training",
    "_more": ", with more numbers than in training",
}

LEVEL_NOTES = {
    "train-easy": "train-easy (entropy range 0-1/3)",
    "train-medium": "train-medium (entropy range 1/3-2/3)",
    "train-hard": "train-hard (entropy range 2/3-1)",
    EXTRAPOLATE: "extrapolate (beyond the training range: bigger numbers, longer expressions or more items)",
}


def description(module: str) -> str:
    """The one-line description of a module: its group's (`DESCRIPTIONS`) plus what its
    variant suffix adds (`SUFFIXES`): "numbers__gcd_composed" -> "Give the greatest common
    divisor of two integers, with the quantities defined by earlier steps."

    Raises:
        KeyError: the module's group has no description.
    """
    for suffix in sorted(SUFFIXES, key=len, reverse=True):
        group = module.removesuffix(suffix)
        if group != module and group in DESCRIPTIONS:
            return DESCRIPTIONS[group].removesuffix(".") + SUFFIXES[suffix] + "."
    return DESCRIPTIONS[module]


def build_md_domains() -> dict[str, MathematicsDatasetDomain]:
    """A `MathematicsDatasetDomain` for every training module (levels 1-3) and every
    extrapolation-only module (level 1), in name order; an empty dict when
    mathematics-dataset is not installed. Imports neither mathematics-dataset nor sympy."""
    if MD_VERSION == "not installed":
        return {}
    out = {}
    for module in sorted(TRAIN_MODULES + EXTRAPOLATE_ONLY):
        regimes = TRAIN_LEVELS if module in TRAIN_MODULES else (EXTRAPOLATE,)
        levels = {n: regime for n, regime in enumerate(regimes, start=1)}
        out[module] = MathematicsDatasetDomain(
            name=module,
            family=module.split("__")[0],
            description=description(module),
            levels=levels,
            level_notes={n: LEVEL_NOTES[regime] for n, regime in levels.items()},
        )
    return out
