"""A mathematics-dataset module as a workbench domain: tasks, prompts and its checker.

mathematics-dataset (DeepMind, Apache-2.0, `pip install mathematics-dataset`) generates
school-level maths questions with short reference answers from "modules"
(`algebra__linear_1d`, `numbers__gcd_composed`, ...), each a callable returning a
`Problem(question, answer)`, built for a difficulty regime: train-easy, train-medium and
train-hard (the training entropy range split in thirds) and extrapolate (bigger numbers,
longer expressions, more items: modules of their own). `MathematicsDatasetDomain` is a
`ReasoningGymDomain` (same prompt, `Answer: ...` line, reward rule and upstream worker
processes with their time limits) whose entries come from one module:

- **determinism**: upstream draws from Python's `random`, numpy's global RNG and sympy's
  own RNGs (`sympy.core.random`: `randprime`), so a task is generated with all of them
  seeded from (module, level, seed) under `GLOBAL_STATE`, and their states restored after
  (`seeded_rngs`); upstream's hash-seed and memory-address dependent orders are patched
  (`domains.mathematics_dataset.shim`). The module table of a level holds no state between
  tasks, so a task does not depend on what was generated before it.
- **length filter**: like upstream's `generate.sample_from_module`, a problem whose question
  is over 160 characters or answer over 30 is drawn again (from the same seeded stream);
  extrapolate `comparison__sort_more` allows 80 (its answers are 31-49 characters: upstream's
  own filter never accepts one and loops forever).
- **verifier**: `domains.mathematics_dataset.checker.check` (exact rational equality for
  numbers, bounded sympy equivalence for expressions); pass = 1.0, else 0.0.

    d = MathematicsDatasetDomain(name="algebra__linear_1d", family="algebra", description="...",
                                 levels={1: "train-easy"}, level_notes={1: "..."})
    task = d.make_task(seed=7, difficulty=1)
    reward, breakdown = d.score(task, "Answer: " + task.answer)       # 1.0
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from core.errors import ConfigError
from domains.mathematics_dataset import checker, shim
from domains.reasoning_gym.domain import GLOBAL_STATE, ReasoningGymDomain, seeded_global_random
from domains.upstream import package_version


MD_VERSION = package_version("mathematics-dataset")
TRAIN_LEVELS = ("train-easy", "train-medium", "train-hard")  # levels 1, 2, 3 of a training module
EXTRAPOLATE = "extrapolate"  # level 1 of an extrapolation-only module
MAX_TRIES = 1000  # draws of a problem before its length filter gives up
# answer length limits beyond upstream's MAX_ANSWER_LENGTH (30): see the module docstring
ANSWER_LENGTH_OVERRIDES = {"comparison__sort_more": 80}


@dataclass(frozen=True, eq=False)  # compared by identity; hashable
class MathematicsDatasetDomain(ReasoningGymDomain):
    """A mathematics-dataset module registered as a workbench domain.

    Attributes (beyond `ReasoningGymDomain`'s):
        name: The module's name, e.g. "algebra__linear_1d" (also `upstream`).
        levels: Difficulty level (1 easy .. n hard) -> the upstream regime ("train-easy",
            "train-medium", "train-hard", or "extrapolate" for the one level of an
            extrapolation-only module).
        source: "mathematics-dataset <version>, <module>".
        license: "Apache-2.0" (mathematics-dataset's).
        answer_format: "line" (a one-line `Answer: ...`).
    """

    license: str = "Apache-2.0"
    answer_format: str = "line"

    def __post_init__(self) -> None:
        object.__setattr__(self, "upstream", self.name)
        if not self.source:
            object.__setattr__(self, "source", f"mathematics-dataset {MD_VERSION}, {self.name}")

    @property
    def environment(self) -> dict:
        """Where tasks run and how they are verified, for the catalogue."""
        return {"runtime": "in-process (upstream worker)",
                "verifier": "domains.mathematics_dataset.checker.check (exact rational equality for numbers, "
                            "bounded sympy equivalence for expressions), pass = 1",
                "answer_format": self.answer_format}

    def generate_entry(self, seed: int, difficulty: int) -> dict:
        """The entry {"question", "answer", "module"} for a checked (seed, difficulty), made in
        this process without a time limit (`make_task` runs it in an upstream worker), with
        Python's, numpy's and sympy's RNGs seeded from (module, level, seed).

        Raises:
            ConfigError: MAX_TRIES problems in a row were over the length limits (not seen
                for any module at any level).
        """
        from mathematics_dataset import generate_settings

        level = self.levels[difficulty]
        sample = _module_table(level)[self.name]
        max_answer = ANSWER_LENGTH_OVERRIDES.get(self.name, generate_settings.MAX_ANSWER_LENGTH)
        with GLOBAL_STATE, seeded_rngs(f"mathematics-dataset {self.name} {level} {seed}"):
            for _ in range(MAX_TRIES):
                problem = sample()
                question, answer = str(problem.question), str(problem.answer)
                if len(question) <= generate_settings.MAX_QUESTION_LENGTH and len(answer) <= max_answer:
                    return {"question": question, "answer": answer, "module": self.name}
        raise ConfigError(f"{self.name} {level} seed {seed}: {MAX_TRIES} problems in a row were over the "
                          f"length limits ({generate_settings.MAX_QUESTION_LENGTH} / {max_answer} characters)")

    def verify(self, difficulty: int, answer: str, raw_entry: Any) -> float:
        """1.0 if `checker.check` passes the answer against the entry's reference, else 0.0
        (in this process, no time limit; `score` runs it in an upstream worker)."""
        entry = dict(raw_entry)
        return 1.0 if checker.check(answer, str(entry["answer"]), str(entry.get("module", self.name))) else 0.0

    def _build(self, difficulty: int) -> None:
        """Build (and cache, in this process) the module table of the level's regime."""
        _module_table(self.levels[difficulty])


@contextlib.contextmanager
def seeded_rngs(key: str) -> Iterator[None]:
    """Seed Python's global `random`, numpy's global RNG (`seeded_global_random`) and sympy's
    two RNGs (`sympy.core.random.rng` and `_assumptions_rng`, which `randprime` and friends
    use) from `key` for the block, then restore all four. Callers hold `GLOBAL_STATE`."""
    import sympy.core.random as sympy_random

    digest = int.from_bytes(hashlib.sha256(key.encode()).digest()[:4], "big")
    kept = sympy_random.rng.getstate(), sympy_random._assumptions_rng.getstate()
    with seeded_global_random(key):
        sympy_random.seed(digest)
        try:
            yield
        finally:
            sympy_random.rng.setstate(kept[0])
            sympy_random._assumptions_rng.setstate(kept[1])


def _entropy_fn(level: int, num_levels: int = 3) -> Callable[[tuple[float, float]], tuple[float, float]]:
    """Upstream's `generate._make_entropy_fn`: the `level`-th of `num_levels` equal slices of
    a module's entropy range (copied: importing `generate` defines absl flags)."""
    lower, upper = level / num_levels, (level + 1) / num_levels

    def modify_entropy(range_: tuple[float, float]) -> tuple[float, float]:
        length = range_[1] - range_[0]
        return (range_[0] + lower * length, range_[0] + upper * length)

    return modify_entropy


def _flatten(tree: dict, prefix: str | None = None) -> dict[str, Callable]:
    """{"algebra": {"linear_1d": f}} -> {"algebra__linear_1d": f}, as upstream names modules."""
    out: dict[str, Callable] = {}
    for key, value in tree.items():
        name = key if prefix is None else f"{prefix}__{key}"
        out.update(_flatten(value, name) if isinstance(value, dict) else {name: value})
    return out


@functools.lru_cache(maxsize=None)
def _module_table(level: str) -> dict[str, Callable]:
    """Module name -> problem callable for an upstream regime ("train-easy", "train-medium",
    "train-hard" or "extrapolate"), built once per process with the shim applied.

    Raises:
        ConfigError: `level` is none of those.
        ImportError: mathematics-dataset is not installed.
    """
    with GLOBAL_STATE:
        shim.apply()
        from mathematics_dataset.modules import modules

        if level in TRAIN_LEVELS:
            tree = modules.train(_entropy_fn(TRAIN_LEVELS.index(level)))
        elif level == EXTRAPOLATE:
            tree = modules.test_extra()
        else:
            raise ConfigError(f"mathematics-dataset level must be one of {[*TRAIN_LEVELS, EXTRAPOLATE]}, "
                              f"got {level!r}")
    return dict(sorted(_flatten(tree).items()))


def module_names(level: str) -> list[str]:
    """The names of upstream's modules at a regime (see `_module_table`), sorted."""
    return list(_module_table(level))


def reset_caches() -> None:
    """Forget the built module tables in this process (validation's determinism check; run
    it in the upstream workers too: `UPSTREAM.reset(reset_caches)`)."""
    _module_table.cache_clear()
