"""A reasoning-core generator as a workbench domain: tasks, prompts and its verifier.

reasoning-core (MIT, `pip install reasoning-core`) ships symbolic task generators, each a
`reasoning_core.template.Task` with a `Config` whose `set_level(k)` (k = 0, 1, ...) makes
its tasks harder, and a `score_answer(answer, entry)` in [0, 1]. `ReasoningCoreDomain`
is a `ReasoningGymDomain` (same prompt, answer extraction, reward rule and upstream worker
processes with their time limits) whose entries come from reasoning-core instead:

- **determinism**: reasoning-core draws from Python's and numpy's global RNGs, so a task is
  generated with both seeded from (domain, level, seed) (`seeded_global_random`), from a
  generator instance built for that one level (a level change rebuilds caches, which
  would make a task depend on the levels asked for before it).
- **nothing fetched, the same tasks everywhere**: upstream loads tiktoken's `o200k_base`
  (a download) only to drop examples over 8,192 tokens; this family counts whitespace
  words instead, on every machine, so a task does not depend on whether that download
  happened. `_generator_commit` (upstream runs `git rev-parse` in site-packages, which
  finds the enclosing repository) and timings are dropped from the entry.
- **reseeding from the OS**: the grammar library many generators build on starts every
  derivation with `random.seed(seed)`, and its callers pass no seed, which reseeds Python's
  global RNG from `os.urandom`; some generators make a `random.Random()`, seeded from the OS
  too. Either way a seed gave another task on every call. In gramforge's `generate` module
  and in reasoning-core's own modules, `random` is `_RandomFromGlobal` here and `np` is
  `_NumpyFromGlobal`: a seedless `seed()`, `Random()` or `np.random.default_rng()` draws
  its seed from the (seeded) global RNG instead.
- **Faker**: generators that draw names and words from Faker share its module-level RNG,
  seeded from the OS at import; it is reseeded from the seeded global RNG before each task
  (`_seed_faker`).
- **time limits**: upstream retries a generation that ran past its own SIGALRM limit,
  with the RNG moved on; its limit is set far beyond `GENERATION_TIMEOUT_S`, so the
  worker's limit always comes first and a task is never a retry's.

    d = ReasoningCoreDomain(name="planning", family="graphs_planning", description="...",
                            levels={1: 0, 2: 1}, level_notes={1: "...", 2: "..."})
    task = d.make_task(seed=7, difficulty=1)
    reward, breakdown = d.score(task, "<answer>" + task.answer + "</answer>")
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import os
import random
import sys
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from domains.reasoning_gym.domain import GLOBAL_STATE, ReasoningGymDomain, seeded_global_random
from domains.upstream import package_version


RC_VERSION = package_version("reasoning-core")
UPSTREAM_LIMIT_S = 3600  # upstream's own per-example SIGALRM limit: never reached (see above)
# entry metadata that varies between calls, machines or checkouts, not with the task
VOLATILE_KEYS = ("_time", "_generator_commit", "_prompt_tokens", "_answer_tokens", "_cot_tokens")


@dataclass(frozen=True, eq=False)  # compared by identity; hashable
class ReasoningCoreDomain(ReasoningGymDomain):
    """A reasoning-core generator registered as a workbench domain.

    Attributes (beyond `ReasoningGymDomain`'s):
        levels: Difficulty level (1 easy .. n hard) -> reasoning-core's 0-based level
            (`Config.set_level`).
        license: "MIT" (reasoning-core's).
    """

    license: str = "MIT"
    answer_format: str = "tag"

    def __post_init__(self) -> None:
        object.__setattr__(self, "upstream", self.name)
        if not self.source:
            object.__setattr__(self, "source", f"reasoning-core {RC_VERSION}, {self.name}")

    @property
    def environment(self) -> dict:
        """Where tasks run and how they are verified, for the catalogue."""
        return {"runtime": "in-process (upstream worker)",
                "verifier": f"reasoning_core {self.name}.score_answer, pass = score 1",
                "answer_format": self.answer_format}

    def generate_entry(self, seed: int, difficulty: int) -> dict:
        """The generator's entry {"question", "answer", "metadata"} for a checked (seed,
        difficulty), made in this process without a time limit (`make_task` runs it in an
        upstream worker), with the global RNGs seeded from (name, difficulty, seed)."""
        task = _generator(self.name, self.levels[difficulty])
        with GLOBAL_STATE, seeded_global_random(f"reasoning-core {self.name} {difficulty} {seed}"), \
                warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _seed_faker()
            example = task.generate_example(level=self.levels[difficulty], timeout=UPSTREAM_LIMIT_S)
        meta = {k: v for k, v in dict(example.metadata).items() if k not in VOLATILE_KEYS}
        return {"question": example.prompt, "answer": str(example.answer), "metadata": meta}

    def verify(self, difficulty: int, answer: str, raw_entry: Any) -> float:
        """reasoning-core's `score_answer` for one answer (in this process, no time limit;
        `score` runs it in an upstream worker)."""
        import reasoning_core  # on first use: the scorers pull in sympy, z3, duckdb, problog

        score = reasoning_core.score_answer(answer, dict(raw_entry))
        return float(score)

    def _build(self, difficulty: int) -> None:
        _generator(self.name, self.levels[difficulty])


def _seed_faker() -> None:
    """Reseed Faker's shared RNG (`faker.generator.random`) from the global RNG, when a
    generator has loaded Faker (see the module docstring)."""
    faker_generator = sys.modules.get("faker.generator")
    if faker_generator is not None:
        faker_generator.random.seed(random.getrandbits(64))


class _RandomFromGlobal:
    """`random` as a generator's module sees it: a seedless `seed()` or `Random()` takes its
    seed from the global RNG (seeded per task here) rather than from the OS; everything
    else is `random`'s own."""

    def seed(self, a: Any = None, version: int = 2) -> None:
        random.seed(random.getrandbits(64) if a is None else a, version)

    def Random(self, x: Any = None) -> random.Random:  # noqa: N802 - `random.Random`'s name
        return random.Random(random.getrandbits(64) if x is None else x)

    def __getattr__(self, name: str) -> Any:
        return getattr(random, name)


class _NumpyRandomFromGlobal:
    """`numpy.random` as a generator's module sees it: a seedless `default_rng()` takes its
    seed from Python's global RNG (seeded per task here), not from the OS."""

    def default_rng(self, seed: Any = None) -> np.random.Generator:
        return np.random.default_rng(random.getrandbits(64) if seed is None else seed)

    def __getattr__(self, name: str) -> Any:
        return getattr(np.random, name)


class _NumpyFromGlobal:
    """`numpy` as a generator's module sees it: everything numpy's own but `random`
    (`_NumpyRandomFromGlobal`)."""

    random = _NumpyRandomFromGlobal()

    def __getattr__(self, name: str) -> Any:
        return getattr(np, name)


class _WordCounter:
    """Counts whitespace-separated words: the tokenizer this family gives upstream."""

    def encode(self, text: Any) -> list[str]:
        return str(text).split()


@functools.lru_cache(maxsize=1)
def _task_classes() -> dict[str, type]:
    """Every reasoning-core generator's class by name, imported once per process in one
    order with Faker's and the global RNGs seeded: some modules draw word lists at import
    (`wordlist = fake.words(...)`), so which words a process gets must not depend on which
    generator it imported first. Also points upstream's tokenizer at `_WordCounter` and its
    modules' `random` at `_RandomFromGlobal` (see the module docstring)."""
    import faker.generator  # on first use
    import reasoning_core  # on first use: the generators pull in their own libraries
    from reasoning_core import template

    os.environ.setdefault("SOURCE_COMMIT", f"reasoning-core {RC_VERSION}")  # else a `git` call per task
    template._load_tokenizer = _WordCounter  # no tiktoken download
    classes = {}
    with GLOBAL_STATE, seeded_global_random("reasoning-core imports"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        faker.generator.random.seed(0)
        for name in sorted(reasoning_core.list_tasks()):
            with contextlib.suppress(ImportError):  # a generator whose own imports fail is skipped
                classes[name] = reasoning_core.DATASETS[name]._resolved
    modules = {m for n, m in list(sys.modules.items()) if n.startswith("reasoning_core.") and m is not None}
    with contextlib.suppress(ImportError):
        modules.add(importlib.import_module("gramforge.generate"))
    for module in modules:
        if getattr(module, "random", None) is random:
            module.random = _RandomFromGlobal()
        if getattr(module, "np", None) is np:
            module.np = _NumpyFromGlobal()
    return classes


@functools.lru_cache(maxsize=None)
def _generator(name: str, level: int) -> Any:
    """The reasoning-core Task for `name` built at 0-based `level` (cached per process),
    built with the global RNGs seeded (a task's set-up may draw from them)."""
    task_cls = _task_classes()[name]
    with GLOBAL_STATE, seeded_global_random(f"reasoning-core {name} {level} build"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _seed_faker()
        config_cls = task_cls.config_cls or type(task_cls().config)
        return task_cls(config=config_cls(level=level))


def reset_caches() -> None:
    """Forget the built generators in this process (validation's determinism check; the
    reasoning-gym family's `reset_caches` runs this in the upstream workers too)."""
    _generator.cache_clear()
