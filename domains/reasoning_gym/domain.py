"""A reasoning-gym generator as a workbench domain: tasks, prompts and its verifier.

`ReasoningGymDomain` turns a `(seed, difficulty)` pair into a deterministic `Task`, renders
it as chat messages that ask for a final `Answer: <answer>` line (or `<answer>...</answer>`
tags for multi-line answers), and scores a completion with reasoning-gym's own
`score_answer`. Upstream generators and verifiers run in worker processes under their time
limits (`domains.upstream`: the limits hold on any thread); the answer a completion is
scored on follows one rule for every domain (`domains.answers`).

    d = ReasoningGymDomain(name="chain_sum", family="arithmetic", description="...",
                           levels={1: dict(min_terms=2, max_terms=3)}, level_notes={1: "..."})
    task = d.make_task(seed=7, difficulty=1)
    reward, breakdown = d.score(task, "...\nAnswer: 17")

Which generators are registered and with which levels: `domains.reasoning_gym.catalogue`
(every generator, levels from its curriculum) and `domains.reasoning_gym.hand_made` (six
with hand-picked levels).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from core.errors import ConfigError
from domains.answer_guard import EVALUATING_DOMAINS, unsafe_reason
from domains.answers import extract_answer, numeric_answer
from domains.contract import (ANSWER_INSTRUCTION, CORRECT_WEIGHT, FORMAT_WEIGHT, PASS_THRESHOLD, SYSTEM_PROMPT,
                              TAG_INSTRUCTION, TextDomain, Task, as_int, check_difficulty)
from domains.splits import heldout_item, is_heldout, split_pool
from domains.upstream import Setup, WorkerPool, package_version

RG_VERSION = package_version("reasoning-gym")


@dataclass(frozen=True, eq=False)  # compared by identity; hashable
class ReasoningGymDomain(TextDomain):
    """A reasoning-gym generator registered as a workbench domain (a `TextDomain`).

    Attributes:
        name: Registry name, equal to the reasoning-gym dataset name.
        family: reasoning-gym category ("arithmetic", "algorithmic", "games", ...).
        description: One line for the page.
        source: "reasoning-gym <version>, <dataset name>".
        license: License of the generator's code and data.
        levels: Difficulty level (1 easy .. n hard) -> reasoning-gym config kwargs.
        level_notes: Difficulty level -> what the level means, for the page.
        kind: "single_turn" (the catalogue word of a `TextDomain`).
        answer_format: "line" (a final `Answer: ...` line) or "tag" (`<answer>...</answer>`,
            for answers that span lines).
        multiple_answers: A task may have several valid answers (validation then doesn't
            treat other tasks' answers as wrong ones).
        pooled: The generator holds a finite pool of items (built up front; indexing past
            its `size` fails). The pool is split by `split_pool` (about one item in
            `POOL_HELDOUT_EVERY`, chosen by a hash of its question, is held out); a training
            seed maps onto the training side by `seed % len(side)`, a held-out seed onto the
            held-out side, so the two never share a question.
        generate: Optional custom item function `(dataset, seed, level) -> entry`; None
            means `dataset[seed]`, which reasoning-gym seeds as `Random(dataset.seed + idx)`.
        upstream: The reasoning-gym dataset whose config `levels` are and whose
            `score_answer` scores; "" means `name` (a hand-made domain with its own
            `generate` may borrow another dataset's verifier).
    """

    name: str
    family: str
    description: str
    levels: dict[int, dict[str, Any]]
    level_notes: dict[int, str]
    source: str = ""
    license: str = "Apache-2.0"
    kind: str = "single_turn"
    answer_format: str = "line"
    pooled: bool = False
    multiple_answers: bool = False
    needs_sandbox = False
    generate: Callable[[Any, int, int], dict] | None = field(default=None, repr=False, compare=False)
    upstream: str = ""

    def __post_init__(self) -> None:
        if not self.upstream:
            object.__setattr__(self, "upstream", self.name)
        if not self.source:
            object.__setattr__(self, "source", f"reasoning-gym {RG_VERSION}, {self.upstream}")

    @property
    def environment(self) -> dict:
        """Where tasks run and how they are verified, for the catalogue."""
        return {"runtime": "in-process", "verifier": f"reasoning_gym {self.upstream}.score_answer, pass = score 1",
                "answer_format": self.answer_format}

    def messages(self, task: Task) -> list[dict]:
        """Chat messages for a task: a short system message, then the question plus the
        answer-format instruction (`ANSWER_INSTRUCTION` or `TAG_INSTRUCTION`)."""
        instruction = TAG_INSTRUCTION if self.answer_format == "tag" else ANSWER_INSTRUCTION
        return [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": f"{task.question}\n{instruction}"},
        ]

    def reference_completion(self, task: Task) -> str:
        """A completion that states the reference answer in this domain's format (used by
        validation and the page's try-the-verifier box)."""
        return self.wrap_answer(task.answer)

    def wrap_answer(self, answer: str) -> str:
        """`answer` written the way this domain asks for it."""
        return f"<answer>{answer}</answer>" if self.answer_format == "tag" else f"Answer: {answer}"

    def make_task(self, seed: int, difficulty: int = 1) -> Task:
        """Generate the task for a seed at a difficulty level.

        Args:
            seed: Non-negative integer; see `train_seed` and `heldout_seeds`.
            difficulty: A level of this domain (`levels`), 1 easy .. n hard.

        Returns:
            The deterministic `Task` for (domain, seed, difficulty).

        The generator runs in an upstream worker process (`domains.upstream`), so its time
        limit holds on any thread; the entry is the one `generate_entry` gives in-process.

        Raises:
            ConfigError: If seed is not a non-negative int or difficulty is not a level.
            GenerationTimeout: The generator ran past GENERATION_TIMEOUT_S (number_sequence
                loops on rare seeds), or building it ran past its `_setup` limit.
            UpstreamCrash: The worker died while generating.
        """
        difficulty, index = check_difficulty(difficulty, self.levels), as_int(seed)
        if index is None or index < 0:
            raise ConfigError(f"seed must be a non-negative int, got {seed!r}")
        seed = index
        raw = UPSTREAM.call(self.generate_entry, seed, difficulty, seconds=GENERATION_TIMEOUT_S,
                            what=f"generating {self.name} level {difficulty} seed {seed}",
                            setup=self._setup(difficulty))
        entry = json.loads(json.dumps(raw, default=str))  # Fraction etc. -> str
        return Task(self.name, seed, entry["question"], str(entry["answer"]), difficulty, entry, raw)

    def generate_entry(self, seed: int, difficulty: int) -> dict:
        """The generator's raw entry for a checked (seed, difficulty), computed in this
        process without a time limit (`make_task` runs it in an upstream worker)."""
        ds = _dataset(self, difficulty)
        if self.pooled and not self.generate:
            return self._pool_item(ds, seed, difficulty)
        if self.generate:
            with GLOBAL_STATE, seeded_global_random(f"{self.name} {difficulty} {seed}"):
                return self.generate(ds, seed, difficulty)
        return _item(ds, seed)

    def verify(self, difficulty: int, answer: str, raw_entry: Any) -> float:
        """reasoning-gym's `score_answer` for one answer, in this process without a time
        limit (`score` runs it in an upstream worker)."""
        return float(_dataset(self, difficulty).score_answer(answer, raw_entry))

    def _build(self, difficulty: int) -> None:
        """Build (and cache, in this process) the level's dataset and, if pooled, its split."""
        ds = _dataset(self, difficulty)
        if self.pooled and not self.generate:
            _pool_side(self, difficulty, ds, heldout=False)

    def _setup(self, difficulty: int) -> Setup:
        """What a worker does once per level before it generates or scores: build the
        dataset (BUILD_TIMEOUT_S), a pooled one with its split (plus POOL_SPLIT_TIMEOUT_S)."""
        seconds = BUILD_TIMEOUT_S + (POOL_SPLIT_TIMEOUT_S if self.pooled and not self.generate else 0.0)
        return Setup((self.name, difficulty), functools.partial(self._build, difficulty), seconds,
                     f"building the {self.name} level {difficulty} generator")

    def _pool_item(self, ds: Any, seed: int, difficulty: int) -> dict:
        """The pool item for a seed: `side[seed % len(side)]` of the seed's side of the pool
        (`_pool_side`). The item's question is checked against the side again (list_functions'
        generator 14 draws from the global `random`, which `_item` now seeds, so this no
        longer happens): one that changed sides is passed over for the next item of the
        side, so no seed ever gets an item of the other side.

        Raises:
            ConfigError: no item of the side is on its side any more.
        """
        heldout = is_heldout(seed)
        side = _pool_side(self, difficulty, ds, heldout)
        for k in range(len(side)):
            raw = _item(ds, side[(seed + k) % len(side)])
            if heldout_item(raw["question"]) == heldout:
                return raw
        raise ConfigError(f"{self.name} level {difficulty}: no item of the pool's "
                          f"{'held-out' if heldout else 'training'} side stays on it")

    def score(self, task: Task, completion: str) -> tuple[float, dict]:
        """Score a completion for a task.

        reward = FORMAT_WEIGHT * format + CORRECT_WEIGHT * correct, in [0, 1], where
        correct is 1 only if reasoning-gym's `score_answer` gives full marks (its partial
        credit for near misses -- string similarity, 0.01 for any answer -- is reported
        as `score` but not rewarded). Malformed completions (not a str, over
        MAX_COMPLETION_CHARS, an answer with control characters or lone surrogates) score
        0 with format 0; a verifier that raises or runs past SCORE_TIMEOUT_S (on any thread:
        it runs in an upstream worker, `domains.upstream`) scores 0, its error in the
        breakdown's "verifier_error". The answer is the last one the completion commits to
        (`extract_answer`); where the reference is one number it is normalised first
        ("\u22125" -> "-5", "1,234" -> "1234") and a list of different numbers ("3 or 4") is
        refused as ambiguous (`domains.answers.numeric_answer`). For the domains whose
        upstream verifier evaluates the answer as code (`domains.answer_guard`), an answer
        with anything beyond arithmetic, symbols and math functions is refused. A refused
        answer gets the format credit only (correct 0, the reason in breakdown "rejected").
        This never raises on them.

        Args:
            task: A task of this domain (from `make_task`).
            completion: The model's text.

        Returns:
            (reward, breakdown) where breakdown is {"format": 0.0|1.0, "correct": 0.0|1.0,
            "score": reasoning-gym's score in [0, 1] (0 if no answer), "extracted": the
            extracted answer or None} plus "verifier_error" when the verifier raised or
            timed out ("GenerationTimeout: scoring a ... answer took over 5 s").

        Raises:
            ConfigError: If the task belongs to another domain or has no valid difficulty.
        """
        if task.domain != self.name:
            raise ConfigError(f"task of domain {task.domain!r} given to domain {self.name!r}")
        check_difficulty(task.difficulty, self.levels)
        tags_only = self.answer_format == "tag"
        extracted = extract_answer(completion, tags_only=tags_only)
        if extracted is None:
            return 0.0, {"format": 0.0, "correct": 0.0, "score": 0.0, "extracted": None}
        breakdown: dict[str, Any] = {"format": 1.0}
        extracted, refused = numeric_answer(extracted, task.answer)  # "ambiguous: ..." for a list of numbers
        if refused is None and self.name in EVALUATING_DOMAINS and (why := unsafe_reason(extracted)):
            refused = f"unsafe answer: {why}"  # the upstream scorer would eval this answer
        if refused is not None:  # rewarded as an answer in the format that is not right
            breakdown.update(correct=0.0, score=0.0, extracted=extracted[:200], rejected=refused)
            return FORMAT_WEIGHT, breakdown
        raw = task.raw_entry if task.raw_entry is not None else self.make_task(task.seed, task.difficulty).raw_entry
        # the answer as extracted, then as written with its final period (sentence answers)
        with_period = numeric_answer(extract_answer(completion, tags_only=tags_only, keep_period=True), task.answer)
        candidates = dict.fromkeys([extracted] + ([with_period[0]] if with_period[1] is None else []))
        score = 0.0
        for candidate in candidates:
            try:
                s = UPSTREAM.call(self.verify, task.difficulty, candidate, raw, seconds=SCORE_TIMEOUT_S,
                                  what=f"scoring a {self.name} answer", setup=self._setup(task.difficulty))
            except Exception as e:  # noqa: BLE001 - upstream scorers parse free text and may raise
                s, breakdown["verifier_error"] = 0.0, f"{type(e).__name__}: {e}"[:200]
            s = min(1.0, max(0.0, s)) if s == s else 0.0  # NaN -> 0
            if s > score:
                score, extracted = s, candidate
            if score >= PASS_THRESHOLD:
                break
        correct = 1.0 if score >= PASS_THRESHOLD else 0.0
        reward = FORMAT_WEIGHT * 1.0 + CORRECT_WEIGHT * correct
        breakdown.update(correct=correct, score=score, extracted=extracted)
        return min(1.0, reward), breakdown


GENERATION_TIMEOUT_S = 10.0  # a task taking longer than this to generate is abandoned
# building a level's dataset, once per level and worker: analogical_case_matching's took 4.3 s here
# alone and over 10 s under the test suite's load (a CI rehearsal, 2026-12-07); a hung build still ends
BUILD_TIMEOUT_S = 60.0
SCORE_TIMEOUT_S = 5.0  # a verifier taking longer than this scores 0
# Upstream generators and verifiers run in these workers (a time limit that holds on any
# thread; see `domains.upstream`); each worker keeps its own `_DATASETS`.
UPSTREAM = WorkerPool(preload=("domains.reasoning_gym.domain", "reasoning_gym"))


_DATASETS: dict[tuple[str, int], Any] = {}


@contextlib.contextmanager
def seeded_global_random(key: str):
    """Seed Python's global `random` (and numpy's) from `key` for the block, then restore
    both: codeio's input generators and list_functions' pool draw from the global `random`,
    so without this the same (seed, difficulty) could give another task on each call.
    Generators that keep their own `Random(seed)` are unaffected."""
    digest = int.from_bytes(hashlib.sha256(key.encode()).digest()[:4], "big")
    state, np_state = random.getstate(), np.random.get_state()
    random.seed(digest)
    np.random.seed(digest)
    try:
        yield
    finally:
        random.setstate(state)
        np.random.set_state(np_state)


# Upstream datasets that keep a level's data in a class attribute, so the level built last
# wins for every instance (codeio's `_jsonl_data`, filtered by difficulty): the value each
# instance was built with is kept beside it (`_dataset`) and put back before it makes an item.
CLASS_STATE = {"codeio": "_jsonl_data"}
_CLASS_STATE_KEPT: dict[int, tuple[str, Any]] = {}  # id(dataset) -> (attribute, its value)
GLOBAL_STATE = threading.RLock()  # the global RNGs and class attributes are process-wide


def _item(ds: Any, index: int) -> dict:
    """`ds[index]` with the global RNGs seeded from the dataset's name and the index
    (`seeded_global_random`) and the dataset's own class state in place (`CLASS_STATE`),
    so an item is the same whenever, and after whichever other level, it is asked for."""
    with GLOBAL_STATE:
        kept = _CLASS_STATE_KEPT.get(id(ds))
        if kept is not None:
            setattr(type(ds), *kept)
        with seeded_global_random(f"{type(ds).__name__} {index}"):
            return ds[index]


def _dataset(domain: ReasoningGymDomain, difficulty: int) -> Any:
    """The cached reasoning-gym dataset of a domain at a level (built once per process).

    Built with seed=0, so item `idx` is generated from `Random(idx)`: the task seed is the
    item index. Datasets ignore `size` when indexing (except gsm_symbolic; see below).
    """
    key = (domain.name, difficulty)
    if key not in _DATASETS:
        import reasoning_gym  # lazy: ~1 s import

        # seeded: list_functions draws its pool from the global `random`
        with GLOBAL_STATE, seeded_global_random(f"{domain.name} {difficulty} build"):
            ds = reasoning_gym.create_dataset(domain.upstream, **{"seed": 0, **domain.levels[difficulty]})
            if domain.name in CLASS_STATE:
                _CLASS_STATE_KEPT[id(ds)] = (CLASS_STATE[domain.name], getattr(type(ds), CLASS_STATE[domain.name]))
            _DATASETS[key] = ds
    return _DATASETS[key]


def _forget_datasets() -> None:
    _DATASETS.clear()
    _CLASS_STATE_KEPT.clear()


def reset_caches() -> None:
    """Forget every built generator, here and in the idle upstream workers, so the next
    task comes from a fresh instance (validation's determinism check)."""
    _forget_datasets()
    UPSTREAM.reset(_forget_datasets)


POOL_SPLIT_TIMEOUT_S = 60.0  # generating a whole pool once to split it (word_ladder level 2: 2-4 s here)
_POOL_SIDES: dict[tuple[str, int], tuple[Any, tuple[tuple[int, ...], tuple[int, ...]]]] = {}


def _pool_side(domain: ReasoningGymDomain, difficulty: int, ds: Any, heldout: bool) -> tuple[int, ...]:
    """Indices of the pooled dataset `ds` on one side of its split (`split_pool` over the
    items' questions), computed once per dataset instance (a rebuilt dataset is split again; its pool is
    drawn under the same seeded global RNGs, `_dataset`, so it is the same pool).

    Raises:
        ConfigError: that side of the pool is empty.
    """
    key = (domain.name, difficulty)
    cached = _POOL_SIDES.get(key)
    if cached is None or cached[0] is not ds:
        texts = []
        for i in range(len(ds)):
            try:
                texts.append(_item(ds, i)["question"])
            except IndexError:  # word_ladder shrinks its size when it runs out of word pairs
                break
        cached = _POOL_SIDES[key] = (ds, split_pool(texts))
    side = cached[1][heldout]
    if not side:
        raise ConfigError(f"the {domain.name} level {difficulty} pool has no "
                          f"{'held-out' if heldout else 'training'} items ({len(cached[1][0]) + len(cached[1][1])} "
                          "distinct); it is too small to split")
    return side
