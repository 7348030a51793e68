"""The answer checker of the mathematics-dataset family: `check(candidate, reference, module)`.

mathematics-dataset's references are short strings (at most 30 characters; 80 for
`comparison__sort_more`) of a few kinds, each checked its own way:

| reference | example | what passes |
|---|---|---|
| digits in a base (`BASE_MODULES`) | `-295165`, `a7` | the same digits (case, spaces aside) |
| a list (has a comma) | `-2/9, 2/7, 108` | as many items, each passing, in order for `comparison__sort*`, else any |
| True / False | `False` | true/yes or false/no, the same way |
| one letter | `b` | that letter (case, brackets aside: `(b)`, `B`) |
| a time of day | `6:23 PM` | the same time (case, spaces aside) |
| a number | `-1/5`, `0.0023` | a plain number of that exact value (`-0.2`, `2/-10`, `2.3e-3`), not an expression |
| an expression | `-2*w**2 - 59*w` | an expression equal by sympy, no more operations, expanded if the reference is |

A number reference accepts only a written-out number, so the question's own expression
("Evaluate 15 + 4743/(-170) + 13" answered with `15 + 4743/(-170) + 13`) fails; likewise
for expressions, the operation count and the expanded-form rule make echoing the question
("Expand (x + 1)*(x - 2)", "Collect the terms in ...", "Simplify ...") fail. An answer
`u = 16` counts as `16` (one lower-case variable name before `=`). Written forms read
alike: unicode minus, `^` for `**`, `$...$`, `\\boxed{...}`, `\\frac{a}{b}`, a final period.

Safety: expressions are parsed with sympy's `parse_expr`, which ends in `eval`. A candidate
reaches it only if it passes `domains.answer_guard.unsafe_reason` (no towers of powers,
exponents over 100, long numbers, builtins) and this module's whitelist: at most
`MAX_CHARS` characters of digits, lower-case letters, `+-*/().` and spaces; every name one
letter or `sqrt`; a `.` only before a digit (no attribute access); no letter right after a
digit (`1e999999`, `0x1f`). It is then parsed
unevaluated, and evaluated only if every exponent is a rational of at most `MAX_EXPONENT`
(nested ones multiplied), its symbols are the reference's, and its degree is at most
`max(2 * reference degree, MIN_DEGREE_BUDGET)`. So `__import__('os')` and `9**9**9**9`
return False in microseconds to milliseconds.

    check("0.75", "3/4", "arithmetic__div")                                    # True
    check("3*x + 2*x^2", "2*x**2 + 3*x", "polynomials__expand")                # True
    check("x*(2*x + 3)", "2*x**2 + 3*x", "polynomials__expand")                # False: not expanded

Not covered: answers in words, numbers with units, approximate decimals (`0.333` for
`1/3` fails), factored forms where the reference is expanded (and expanded forms where it
is factored pass only if they have no more operations).
"""

from __future__ import annotations

import re
import warnings
from fractions import Fraction
from typing import Any

from domains.answer_guard import unsafe_reason

BASE_MODULES = frozenset({"arithmetic__add_or_sub_in_base", "numbers__base_conversion"})  # digit strings
ORDERED_PREFIX = "comparison__sort"  # list answers whose order matters
MAX_CHARS = 200  # an expression longer than this is not parsed
MAX_ANSWER_CHARS = 1_000  # a whole candidate (a list) longer than this fails
MAX_DIGITS = 60  # a digit run longer than this is not parsed
MAX_EXPONENT = 100  # |exponent|, nested exponents multiplied
MIN_DEGREE_BUDGET = 12  # a candidate's degree may reach max(2 * the reference's, this)
_MAX_EXPONENT_BITS = 10_000  # an integer power computed inside an exponent stays below this size

_TRUE, _FALSE = frozenset({"true", "yes"}), frozenset({"false", "no"})
_SAFE_CHARS = re.compile(r"[0-9a-z+\-*/().\s]*")
_BAD_DOT = re.compile(r"[a-z)]\s*\.|\.(?!\d)")  # attribute access, "1.", ".."
_LETTER_AFTER_DIGIT = re.compile(r"\d[a-z]")  # 1e999999 (sympy spent minutes on it), 0x1f, 2j
_WORD = re.compile(r"[a-z]+")
_DIGIT_RUN = re.compile(r"\d+")
_PLAIN_NUMBER = re.compile(r"[-+]?(?:\d+(?:\.\d+)?|\.\d+)(?:e[-+]?\d{1,2})?", re.IGNORECASE)
_TIME = re.compile(r"\d{1,2}:\d\d\s*[ap]\.?m\.?", re.IGNORECASE)
_ASSIGNMENT = re.compile(r"[a-z]\s*=\s*(.+)")
_FRAC = re.compile(r"\\d?frac\{([^{}]*)\}\{([^{}]*)\}")
_BOXED = re.compile(r"\\boxed\{(.*)\}")


class _Unsafe(Exception):
    """An expression outside the bounds of the module docstring."""


def check(candidate: str, reference: str, module: str) -> bool:
    """True if `candidate` is a right answer to a task whose reference answer is `reference`.

    Args:
        candidate: The model's answer (the text after "Answer:", already extracted).
        reference: The task's reference answer as mathematics-dataset wrote it.
        module: The task's module ("algebra__linear_1d"): picks the digit-string and ordered-list
            rules (see the module docstring).

    Returns:
        True or False; never raises (anything unparsable, unsafe or not a str is False).
    """
    try:
        if not isinstance(candidate, str) or not isinstance(reference, str) or len(candidate) > MAX_ANSWER_CHARS:
            return False
        with warnings.catch_warnings():  # sympy's deprecations, ast's SyntaxWarnings on odd input
            warnings.simplefilter("ignore")
            return _check(normalize(candidate), normalize(reference), str(module))
    except Exception:  # noqa: BLE001 - sympy may raise anything on odd input; such an answer fails
        return False


def normalize(text: str) -> str:
    """`text` with written forms read alike: unicode minus and times signs, `^` as `**`,
    `$...$`, `\\boxed{...}` and `\\frac{a}{b}` unwrapped, no final period, single spaces."""
    s = str(text).strip().replace("\u2212", "-").replace("^", "**").replace("\u00d7", "*").replace("\u00b7", "*")
    s = s.strip("$").strip()
    if (boxed := _BOXED.fullmatch(s)) is not None:
        s = boxed[1].strip()
    s = _FRAC.sub(lambda m: _fraction_text(m[1].strip(), m[2].strip()), s)
    s = s.rstrip(".").strip()
    return re.sub(r"\s+", " ", s)


def _fraction_text(numerator: str, denominator: str) -> str:
    """`a/b` for plain numbers (so a number reference still reads it), `(a)/(b)` otherwise."""
    if _PLAIN_NUMBER.fullmatch(numerator) and _PLAIN_NUMBER.fullmatch(denominator):
        return f"{numerator}/{denominator}"
    return f"({numerator})/({denominator})"


def _squash(text: str) -> str:
    return text.replace(" ", "")


def _check(c: str, r: str, module: str) -> bool:
    if not c:
        return False
    if module in BASE_MODULES:
        return _squash(c).lower() == _squash(r).lower()
    if "," in r:
        return _list_ok(c, r, ordered=module.startswith(ORDERED_PREFIX))
    return _scalar_ok(c, r)


def _list_ok(c: str, r: str, ordered: bool) -> bool:
    """A list answer: the same number of items, each passing `_scalar_ok`; in the same order
    if `ordered`, else matched one to one in any order (a multiset: `2, 2, 5` is not `2, 5`)."""
    if len(c) >= 2 and c[0] + c[-1] in ("[]", "()", "{}"):
        c = c[1:-1].strip()
    cs, rs = [x.strip() for x in c.split(",")], [x.strip() for x in r.split(",")]
    if len(cs) != len(rs):
        return False
    if ordered:
        return all(_scalar_ok(a, b) for a, b in zip(cs, rs))
    left = list(rs)
    for item in cs:
        hit = next((i for i, b in enumerate(left) if _scalar_ok(item, b)), None)
        if hit is None:
            return False
        left.pop(hit)
    return True


def _scalar_ok(c: str, r: str) -> bool:
    """One answer against one reference item, by the reference's kind (module docstring)."""
    if not c:
        return False
    if r.lower() in _TRUE | _FALSE:
        return c.lower() in _TRUE | _FALSE and (c.lower() in _TRUE) == (r.lower() in _TRUE)
    if re.fullmatch(r"[a-z]", r):  # a multiple-choice letter, or a variable named in the question
        return c.lower().strip("() ") == r
    if _TIME.fullmatch(r):
        return _squash(c).upper().replace(".", "") == _squash(r).upper().replace(".", "")
    if "=" not in r and (assigned := _ASSIGNMENT.fullmatch(c)) is not None:
        c = assigned[1].strip()  # "u = 16" for "Solve ... for u."
    number = _number(r)
    if number is not None:
        return _number(c) == number
    return _squash(c) == _squash(r) or _expressions_equal(c, r)


def _number(s: str) -> Fraction | None:
    """The exact value of a plain number ("3", "-0.25", "2.3e-3", "7/3", "2/-10"), else None."""
    parts = s.split("/")
    if len(parts) > 2 or not all(_PLAIN_NUMBER.fullmatch(p.strip()) for p in parts):
        return None
    values = [Fraction(p.strip()) for p in parts]
    if len(values) == 2:
        return values[0] / values[1] if values[1] != 0 else None
    return values[0]


def _expressions_equal(c: str, r: str) -> bool:
    """sympy equivalence of two expressions under the bounds and form rules of the module
    docstring; a reference sympy can't read is compared as text (already done: False)."""
    import sympy

    if unsafe_reason(c) is not None:
        return False
    ref_tree, cand_tree = _parse(r, evaluate=False), _parse(c, evaluate=False)
    if ref_tree is None or cand_tree is None:
        return False
    if not cand_tree.free_symbols <= ref_tree.free_symbols:
        return False
    if sympy.count_ops(cand_tree) > sympy.count_ops(ref_tree):  # echoing "Expand/Collect/Simplify X"
        return False
    try:
        ref_degree, cand_degree = _degree(ref_tree), _degree(cand_tree)
    except _Unsafe:
        return False
    if cand_degree > max(2 * ref_degree, MIN_DEGREE_BUDGET):
        return False
    ref_value, cand_value = _parse(r, evaluate=True), _parse(c, evaluate=True)
    if ref_value is None or cand_value is None:
        return False
    difference = sympy.expand(cand_value - ref_value)
    if difference != 0 and sympy.simplify(difference) != 0:
        return False
    if sympy.expand(ref_value) == ref_value and sympy.expand(cand_value) != cand_value:
        return False  # the reference is expanded: the candidate must be too
    return True


def _parse(s: str, evaluate: bool) -> Any:
    """sympy's reading of `s` if it passes the whitelist (module docstring), else None."""
    from sympy.parsing.sympy_parser import parse_expr

    if not s or len(s) > MAX_CHARS or not _SAFE_CHARS.fullmatch(s) or _BAD_DOT.search(s) \
            or _LETTER_AFTER_DIGIT.search(s):
        return None
    if any(len(w) > 1 and w != "sqrt" for w in _WORD.findall(s)):
        return None
    if any(len(d) > MAX_DIGITS for d in _DIGIT_RUN.findall(s)):
        return None
    try:
        return parse_expr(s, local_dict=_names(), evaluate=evaluate)
    except Exception:  # noqa: BLE001 - SyntaxError, TokenError, TypeError ...: not an expression
        return None


def _names() -> dict:
    """The only names an expression may use: one-letter symbols (`e` and `i` too: never
    Euler's number or the imaginary unit, as in mathematics-dataset) and `sqrt`."""
    import sympy

    names: dict[str, Any] = {c: sympy.Symbol(c) for c in "abcdefghijklmnopqrstuvwxyz"}
    names["sqrt"] = sympy.sqrt
    return names


def _degree(node: Any, scale: Fraction = Fraction(1)) -> Fraction:
    """An upper bound of the total degree of an unevaluated expression, checking its bounds:
    every exponent a rational with |exponent| x `scale` (the enclosing exponents) at most
    MAX_EXPONENT.

    Raises:
        _Unsafe: an exponent that is not a bounded rational, or a node of another kind.
    """
    if node.is_Number:
        return Fraction(0)
    if node.is_Symbol:
        return Fraction(1)
    if node.is_Pow:
        exponent = _exponent_value(node.exp)
        if exponent is None or abs(exponent) * scale > MAX_EXPONENT:
            raise _Unsafe
        return _degree(node.base, scale * max(Fraction(1), abs(exponent))) * abs(exponent)
    if node.is_Add:
        return max(_degree(arg, scale) for arg in node.args)
    if node.is_Mul:
        return sum((_degree(arg, scale) for arg in node.args), Fraction(0))
    raise _Unsafe


def _exponent_value(node: Any) -> Fraction | None:
    """The rational value of a numeric exponent (integers, fractions, sums, products and
    bounded integer powers of them), or None (symbols, floats, irrational or huge)."""
    if node.is_Rational:  # Integer too
        return Fraction(int(node.p), int(node.q))
    parts = [_exponent_value(arg) for arg in node.args] if (node.is_Add or node.is_Mul or node.is_Pow) else [None]
    if any(p is None for p in parts):
        return None
    if node.is_Add:
        return sum(parts, Fraction(0))
    if node.is_Mul:
        out = Fraction(1)
        for p in parts:
            out *= p
        return out
    base, power = parts
    if power.denominator != 1 or abs(power) > MAX_EXPONENT or (base == 0 and power < 0):
        return None
    if max(base.numerator.bit_length(), base.denominator.bit_length()) * abs(power) > _MAX_EXPONENT_BITS:
        return None
    return base ** int(power)
