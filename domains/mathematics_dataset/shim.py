"""Patches that make mathematics-dataset 1.0.1 run on sympy 1.14 / numpy 2 / Python 3.12 and
generate the same task in every process.

mathematics-dataset was last released in 2019, for sympy 1.2-1.5, numpy 1.x and Python
3.7. Five things break here, and `apply()` mends each (idempotent: a second call does nothing):

- sympy >= 1.6 moved `base_solution_linear` out of the `sympy.solvers.diophantine` package
  namespace, so importing `mathematics_dataset.sample.polynomials` fails;
- numpy 1.24 removed the `np.object` alias and numpy 2.0 removed `ndarray.itemset`, both
  used by `mathematics_dataset.sample.polynomials`;
- `composition.Context.pop` draws a fresh variable name with
  `random.choice(list(a_set_of_str))`, whose order depends on the process's string hash
  seed (PYTHONHASHSEED), so a seeded RNG still picks different names in different processes;
- `composition.expand_entities` dedupes the entities of a composed question with
  `list(set(entities))`, an order that depends on the entities' `id()`s (memory addresses),
  so the order of the "Let ... Suppose ..." sentences differs between runs;
- `modules.numbers.round_number` passes floats to `random.randint`: a DeprecationWarning
  per task on Python 3.10-3.11, a TypeError on 3.12 (which this project supports);
- and one for speed: the probability modules sum ~10^6 sympy Rationals for some extrapolate
  tasks (1-5 s each, against a 10 s generation limit); integer arithmetic gives the same
  values in milliseconds.

Measured by the proof of concept (every module, 5 seeds, at every level, in two processes
with different hash seeds and opposite generation orders): without the two composition
patches 554 of 1,195 tasks differed, with them none. The speed patch changes no task (660
probability tasks compared with upstream's method: none differed).

    from domains.mathematics_dataset import shim
    shim.apply()                      # before the first `import mathematics_dataset...`
    from mathematics_dataset.modules import modules

Must run before anything imports `mathematics_dataset.sample.polynomials` (the first patch
is needed for that import to succeed). Not thread-safe on its own: callers hold
`domains.reasoning_gym.domain.GLOBAL_STATE`.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

_APPLIED = False


def _numpy_with_old_names() -> Any:
    """A stand-in for the `numpy` module as `mathematics_dataset.sample.polynomials` sees it:
    numpy itself, plus `np.object` (removed in numpy 1.24: upstream builds object arrays of
    sympy coefficients with `dtype=np.object`) and with `zeros` / `empty` returning arrays
    that still have `itemset` (removed in numpy 2.0: upstream fills coefficient arrays with
    `array.itemset(index, value)`)."""
    import numpy as np

    class ArrayWithItemset(np.ndarray):
        """An ndarray with numpy 1.x's `itemset(index, value)` (i.e. `self[index] = value`)."""

        def itemset(self, index: Any, value: Any) -> None:
            self[index] = value

    class NumpyWithOldNames:
        """`numpy`, with `object` and the `zeros` / `empty` above; every other name is numpy's."""

        object = object

        def __getattr__(self, name: str) -> Any:
            return getattr(np, name)

        def zeros(self, *args: Any, **kwargs: Any) -> Any:
            return np.zeros(*args, **kwargs).view(ArrayWithItemset)

        def empty(self, *args: Any, **kwargs: Any) -> Any:
            return np.empty(*args, **kwargs).view(ArrayWithItemset)

    return NumpyWithOldNames()


def _patch_sympy_diophantine() -> None:
    """sympy 1.6 split `sympy/solvers/diophantine.py` into a package whose `__init__` no
    longer exports `base_solution_linear`; upstream's
    `from sympy.solvers.diophantine import base_solution_linear` then raises ImportError.
    Put the function back in the package's namespace (found in `sys.modules`: the attribute
    `sympy.solvers.diophantine` is the function `diophantine`, which shadows the package)."""
    import sys

    from sympy.solvers.diophantine.diophantine import base_solution_linear

    package = sys.modules["sympy.solvers.diophantine"]
    if not hasattr(package, "base_solution_linear"):
        package.base_solution_linear = base_solution_linear


def _patch_composition() -> None:
    """Replace `Context.pop` and `expand_entities` (mathematics_dataset.util.composition)
    with versions that draw from the same seeded `random` in an order that does not depend
    on the hash seed or on memory addresses. Same distribution of tasks as upstream."""
    from mathematics_dataset.util import composition

    def pop(self: Any) -> str:
        """An unused symbol (and keeps track of it being used). Upstream:
        `random.choice(list(allowed))` over a set of str, whose order follows the hash seed;
        here the same choice over the sorted symbols."""
        allowed = sorted(composition._ALLOWED_SYMBOLS - self._relation_symbols - self._self_symbols
                         - self._child_symbols)
        if not allowed:
            raise ValueError("Ran out of symbols")
        symbol = composition.random.choice(allowed)
        self._self_symbols.add(symbol)
        return symbol

    def expand_entities(context: Any, **kwargs: Any) -> tuple[str, dict]:
        """(child description, kwargs with entities replaced by their handles). Upstream
        dedupes the entities through a `set` (ordered by `id()`); here they are deduped in
        the order they were added, then shuffled by the same seeded `random`."""
        kwargs = kwargs.copy()
        entities = list(context.child_entities)
        for key, maybe_entity in list(kwargs.items()):
            if isinstance(maybe_entity, composition.Entity):
                entities.append(maybe_entity)
                kwargs[key] = maybe_entity.handle
        entities = list(dict.fromkeys(entities))  # Entity hashes by identity: insertion order kept
        composition.random.shuffle(entities)
        descriptions = []
        for entity in entities:
            descriptions.append(entity.child_description)
            if not entity.expression_used:
                descriptions.append(entity.description)
        return " ".join(s for s in descriptions if s), kwargs

    composition.Context.pop = pop
    composition.expand_entities = expand_entities  # looked up as a module global by its callers


def _patch_probability() -> None:
    """Speed, not correctness: `SampleWithoutReplacementSpace.probability` (the probability
    modules) sums, over every sequence of an event, products of sympy Rationals; for the
    extrapolate `probability__swr_p_level_set_more_samples` that is ~10^6 sympy operations
    and 1-5 s per task (upstream's own design), against a 10 s generation limit. Here the
    weights are written as integer counts over their common denominator N, so a sequence's
    probability prod(w / (1 - removed)) is prod(count) / prod(N - removed count): integer
    products, summed per denominator, and one exact `Fraction` sum at the end. Same value
    (a sympy Rational, or int 0 where upstream's sum stays int 0), far faster. Weights that
    are not Rationals fall back to upstream's method, as does a zero denominator (which
    upstream turns into sympy's complex infinity)."""
    import math

    import sympy
    from mathematics_dataset.util import probability as upstream

    original = upstream.SampleWithoutReplacementSpace.probability

    def probability(self: Any, event: Any) -> Any:
        if not all(isinstance(w, sympy.Rational) for w in self._weights.values()):
            return original(self, event)
        try:
            all_sequences = event.all_sequences()
        except AttributeError:
            raise ValueError(f"Unhandled event type {type(event)}") from None
        n = math.lcm(*(int(w.q) for w in self._weights.values()))
        counts = {key: int(w.p) * (n // int(w.q)) for key, w in self._weights.items()}
        numerators: dict[int, int] = {}  # denominator -> summed numerators
        for sequence in all_sequences:
            if len(sequence) != len(set(sequence)):
                continue  # not all unique, so not "without replacement"
            numerator, denominator, removed = 1, 1, 0
            for item in sequence:
                count = counts.get(item, 0)
                if count == 0:
                    numerator = 0
                    break
                numerator *= count
                denominator *= n - removed
                removed += count
            if numerator:
                if denominator == 0:
                    return original(self, event)
                numerators[denominator] = numerators.get(denominator, 0) + numerator
        if not numerators:
            return 0
        total = sum((Fraction(num, den) for den, num in numerators.items()), Fraction(0))
        return sympy.Rational(total.numerator, total.denominator)

    probability.__wrapped__ = original  # upstream's method (the equivalence test compares them)
    upstream.SampleWithoutReplacementSpace.probability = probability


def _patch_round_number_randint() -> None:
    """`modules.numbers.round_number` calls `random.randint(-10**k / 2, 10**k / 2)` with
    floats: deprecated since Python 3.10 (a DeprecationWarning per task here, in 3.11) and a
    TypeError from Python 3.12, which this project supports. The module's `random` becomes
    `random` itself with a `randint` that passes integral floats on as ints: what Python
    3.10-3.11 do with them (`int(x)`, the same draw from the same seeded RNG)."""
    import random

    from mathematics_dataset.modules import numbers

    def integral(x: Any) -> Any:
        return int(x) if isinstance(x, float) and x.is_integer() else x

    class RandomWithIntegralFloats:
        """Python's `random` module, with `randint` taking integral floats."""

        def __getattr__(self, name: str) -> Any:
            return getattr(random, name)

        def randint(self, a: Any, b: Any) -> int:
            return random.randint(integral(a), integral(b))

    numbers.random = RandomWithIntegralFloats()


def apply() -> None:
    """Apply every patch of the module docstring, once per process (later calls do nothing).

    Raises:
        ImportError: mathematics-dataset (or sympy / numpy) is not installed.
    """
    global _APPLIED
    if _APPLIED:
        return
    _patch_sympy_diophantine()
    from mathematics_dataset.sample import polynomials  # needs the diophantine patch

    polynomials.np = _numpy_with_old_names()
    _patch_composition()
    _patch_probability()
    _patch_round_number_randint()
    _APPLIED = True
