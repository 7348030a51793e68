"""Guard for verifiers that evaluate the model's answer as code.

Nine reasoning-gym scorers pass the answer text to Python's `eval` (string_insertion,
spiral_matrix, binary_matrix, n_queens) or to sympy's `parse_expr`, which also ends in
`eval` (simple_integration, intermediate_integration, polynomial_multiplication,
puzzle24, countdown). Unguarded, a completion such as
`<answer>__import__('os').system('...')</answer>` runs in the trainer or the page's
process, and `9**9**9**9` never returns. `unsafe_reason` lets through only what those
scorers need -- numbers, names of symbols and math functions, arithmetic, brackets, lists,
strings -- and refuses calls of anything else, attribute access, dunders, Python builtins,
comprehensions and lambdas, huge literals and exponents; such answers score 0.

    unsafe_reason("x**2/2 + C")                           # None: fine
    unsafe_reason("__import__('os').system('id')")        # "names Python internals (__)"
"""

from __future__ import annotations

import ast
import builtins
import re

EVALUATING_DOMAINS = frozenset({
    "string_insertion", "spiral_matrix", "binary_matrix", "n_queens", "simple_integration",
    "intermediate_integration", "polynomial_multiplication", "puzzle24", "countdown",
})
MAX_CHARS = 20_000
MAX_DIGITS = 60
MAX_EXPONENT = 100
MATH_FUNCTIONS = frozenset({
    "sin", "cos", "tan", "cot", "sec", "csc", "asin", "acos", "atan", "sinh", "cosh", "tanh", "exp", "log",
    "ln", "sqrt", "Abs", "abs", "atan2", "asinh", "acosh", "atanh", "erf", "gamma", "Integer", "Rational",
    "Symbol", "Float", "Integral",
})
_BUILTINS = frozenset(dir(builtins)) - MATH_FUNCTIONS
_ALLOWED = (ast.Expression, ast.Constant, ast.List, ast.Tuple, ast.BinOp, ast.UnaryOp, ast.Name, ast.Load,
            ast.Call, ast.operator, ast.unaryop)
_ATTRIBUTE = re.compile(r"[A-Za-z0-9_)\]}'\"]\s*\.\s*[A-Za-z_]")
_POWER = re.compile(r"(\*\*|\^)\s*\(?\s*([0-9]+)")
_TOWER = re.compile(r"(\*\*|\^)\s*\(?\s*[-+]?[0-9A-Za-z_.]+\s*\)?\s*(\*\*|\^)")


def unsafe_reason(answer: str) -> str | None:
    """Why an answer must not reach an evaluating verifier, or None if it may.

    Args:
        answer: the extracted answer text.

    Returns:
        A short reason ("calls 'open'", "exponent 99999 over 100", ...) or None.
    """
    if len(answer) > MAX_CHARS:
        return f"over {MAX_CHARS} characters"
    if "__" in answer:
        return "names Python internals (__)"
    if "!" in answer:
        return "factorial or negation syntax"
    if _ATTRIBUTE.search(answer.replace("...", "")):
        return "attribute access"
    for m in _POWER.finditer(answer):
        if int(m[2]) > MAX_EXPONENT:
            return f"exponent {m[2]} over {MAX_EXPONENT}"
    if _TOWER.search(answer):
        return "a power of a power"
    if len(re.findall(r"\*\*|\^", answer)) > 8:
        return "too many powers"
    if any(len(d) > MAX_DIGITS for d in re.findall(r"[0-9]+", answer)):
        return f"a number over {MAX_DIGITS} digits"
    names = set(re.findall(r"[A-Za-z_][A-Za-z_0-9]*", answer))
    bad = sorted(names & _BUILTINS) + sorted(n for n in names if n in ("lambda", "import", "yield", "await"))
    if bad:
        return f"names Python builtin {bad[0]!r}"
    try:
        tree = ast.parse(answer.strip(), mode="eval")
    except (SyntaxError, ValueError):
        return None  # not Python (e.g. "2x", "x^2"): sympy's own transformations read it
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED):
            return f"Python syntax {type(node).__name__}"
        if isinstance(node, ast.Call) and not (isinstance(node.func, ast.Name) and node.func.id in MATH_FUNCTIONS):
            return "calls something other than a math function"
        if isinstance(node, ast.Call) and node.keywords:
            return "keyword arguments"
    return None
