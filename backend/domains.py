"""The domain registry: every reasoning-gym generator, code and terminal domains.

A *domain* is a family of tasks with one automatic verifier. This module registers all of
reasoning-gym's procedural generators (six of them -- `basic_arithmetic`, `chain_sum`,
`products`, `gsm_symbolic`, `letter_counting`, `spell_backward` -- with hand-picked levels, the rest
with levels from their curricula, see `backend.rg_domains`), turns a
`(domain, seed, difficulty)` triple into a deterministic `Task`, renders it as chat
messages that ask for a final `Answer: <answer>` line (or `<answer>...</answer>` tags for
multi-line answers), and scores a completion with reasoning-gym's own `score_answer`.
Upstream generators and verifiers run in worker processes under their time limits
(`backend.upstream`: the limits hold on any thread); the answer a completion is scored on
follows one rule for every domain (`backend.answers`). The registry is built on first use
(importing reasoning-gym and its curricula takes ~2 s).

    from backend.domains import get_domain, build_messages, train_seed
    d = get_domain("chain_sum")
    task = d.make_task(seed=train_seed(rng), difficulty=2)
    messages = build_messages(task)            # -> the trainer's chat template
    reward, breakdown = d.score(task, completion)
    # "...\nAnswer: 17" with task.answer == "17" ->
    #   1.0, {"format": 1.0, "correct": 1.0, "score": 1.0, "extracted": "17"}

Seeds: training seeds come from `TRAIN_SEED_RANGE`, held-out (evaluation) seeds from the
disjoint `HELDOUT_SEED_RANGE`. Disjoint seeds are not enough where a domain draws from a
finite set of items (a pooled generator's 500 items, HumanEval's 164 problems, the CAD
domains' small parameter grids): there the items themselves are split, one in
`POOL_HELDOUT_EVERY` held out (`split_pool`, `heldout_item`, `draw_on_side`), and a seed
reaches only its own side, so an evaluation task is never a training task (checked by
tests/backend/test_heldout_separation.py).

Sandbox-verified domains live in their own modules and are registered here too:
`humaneval` (`backend.code_domains`) and the multi-turn `terminal_*` family
(`backend.terminal_env`); they have `needs_sandbox = True` and are scored through a sandbox
pool instead of `score`.

Not covered here: mixes (`backend.mixes`), validation (`backend.validation`) and the
curriculum (`trainer.curriculum`) -- they use this registry; chat templates (the trainer
applies the model's template to `build_messages`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import operator
import random
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any, TypeVar

from backend.answer_guard import EVALUATING_DOMAINS, unsafe_reason
from backend.answers import MAX_COMPLETION_CHARS, extract_answer, numeric_answer  # noqa: F401 - re-exported
from backend.errors import ConfigError, DomainNotFound
from backend.upstream import Setup, WorkerPool

# Reward = FORMAT_WEIGHT * format + CORRECT_WEIGHT * correct. The format term exists
# because SmolLM2-135M rarely writes the answer line at all (0-10% of samples), so the
# first gains of RL come from learning the format; correctness carries most of the weight.
FORMAT_WEIGHT = 0.2
CORRECT_WEIGHT = 0.8

TRAIN_SEED_RANGE = (0, 1_000_000_000)  # [low, high)
HELDOUT_SEED_RANGE = (1_000_000_000, 1_100_000_000)  # [low, high), disjoint from training

DIFFICULTIES = (1, 2, 3)  # levels of the hand-made domains (1 easy .. 3 hard)

SYSTEM_PROMPT = "You are a helpful assistant. Solve the problem and keep your reply short."
ANSWER_INSTRUCTION = "Give your final answer on the last line as: Answer: <answer>"
TAG_INSTRUCTION = "Give your final answer between <answer> and </answer> tags; it may span several lines."
# a pass is full marks; partial credit that sums to 0.9999999999999999 (spell_backward
# gives that to the answer followed by junk) is not
PASS_THRESHOLD = 1.0

def _reasoning_gym_version() -> str:
    try:
        return metadata.version("reasoning-gym")
    except metadata.PackageNotFoundError:
        return "not installed"


RG_VERSION = _reasoning_gym_version()


@dataclass(frozen=True)
class Task:
    """One instance of a domain.

    Attributes:
        domain: Domain name, e.g. "basic_arithmetic".
        seed: Task seed; the same (domain, seed, difficulty) always gives the same task.
        question: The generator's question text (shown to the model).
        answer: Hidden reference answer (never shown to the model).
        difficulty: Level 1..3 (1 easy .. 3 hard).
        entry: The reasoning-gym entry (question/answer/metadata) as plain JSON types
            (for storage and display).
        raw_entry: The entry exactly as the generator made it (tuples, Fractions): the
            verifier gets this one, since some scorers compare with `==` (arc_agi boards
            are tuples). None for tasks rebuilt from JSON; `score` then regenerates it.
    """

    domain: str
    seed: int
    question: str
    answer: str
    difficulty: int
    entry: dict
    raw_entry: Any = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, eq=False)  # compared by identity; hashable
class Domain:
    """A reasoning-gym generator registered as a workbench domain.

    Attributes:
        name: Registry name, equal to the reasoning-gym dataset name.
        family: reasoning-gym category ("arithmetic", "algorithmic", "games", ...).
        description: One line for the page.
        source: "reasoning-gym <version>, <dataset name>".
        license: License of the generator's code and data.
        levels: Difficulty level (1 easy .. n hard) -> reasoning-gym config kwargs.
        level_notes: Difficulty level -> what the level means, for the page.
        kind: "single_turn" here; "multi_turn" for terminal domains, "retrieval" later.
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

    def __post_init__(self) -> None:
        if not self.source:
            object.__setattr__(self, "source", f"reasoning-gym {RG_VERSION}, {self.name}")

    @property
    def environment(self) -> dict:
        """Where tasks run and how they are verified, for the catalogue."""
        return {"runtime": "in-process", "verifier": f"reasoning_gym {self.name}.score_answer, pass = score 1",
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

        The generator runs in an upstream worker process (`backend.upstream`), so its time
        limit holds on any thread; the entry is the one `generate_entry` gives in-process.

        Raises:
            ConfigError: If seed is not a non-negative int or difficulty is not a level.
            GenerationTimeout: The generator ran past GENERATION_TIMEOUT_S (number_sequence
                loops on rare seeds), or building it ran past its `_setup` limit.
            UpstreamCrash: The worker died while generating.
        """
        difficulty, index = _check_difficulty(difficulty, self.levels), _as_int(seed)
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
        return self.generate(ds, seed, difficulty) if self.generate else ds[seed]

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
        dataset (GENERATION_TIMEOUT_S), a pooled one with its split (plus POOL_SPLIT_TIMEOUT_S)."""
        seconds = GENERATION_TIMEOUT_S + (POOL_SPLIT_TIMEOUT_S if self.pooled and not self.generate else 0.0)
        return Setup((self.name, difficulty), functools.partial(self._build, difficulty), seconds,
                     f"building the {self.name} level {difficulty} generator")

    def _pool_item(self, ds: Any, seed: int, difficulty: int) -> dict:
        """The pool item for a seed: `side[seed % len(side)]` of the seed's side of the pool
        (`_pool_side`). The item's question is checked against the side again, because
        some upstream items are not reproducible (list_functions' generator 14 draws from
        the global `random`): one that changed sides is passed over for the next item of
        the side, so no seed ever gets an item of the other side.

        Raises:
            ConfigError: no item of the side is on its side any more.
        """
        heldout = is_heldout(seed)
        side = _pool_side(self, difficulty, ds, heldout)
        for k in range(len(side)):
            raw = ds[side[(seed + k) % len(side)]]
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
        it runs in an upstream worker, `backend.upstream`) scores 0, its error in the
        breakdown's "verifier_error". The answer is the last one the completion commits to
        (`extract_answer`); where the reference is one number it is normalised first
        ("\u22125" -> "-5", "1,234" -> "1234") and a list of different numbers ("3 or 4") is
        refused as ambiguous (`backend.answers.numeric_answer`). For the domains whose
        upstream verifier evaluates the answer as code (`backend.answer_guard`), an answer
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
        _check_difficulty(task.difficulty, self.levels)
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
SCORE_TIMEOUT_S = 5.0  # a verifier taking longer than this scores 0
# Upstream generators and verifiers run in these workers (a time limit that holds on any
# thread; see `backend.upstream`); each worker keeps its own `_DATASETS`.
UPSTREAM = WorkerPool(preload=("backend.domains", "reasoning_gym"))


def _as_int(value: Any) -> int | None:
    """value as a plain int (numpy ints too), or None for bools, floats and the rest."""
    if isinstance(value, bool):
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None


def _check_difficulty(difficulty: Any, levels: Any = DIFFICULTIES) -> int:
    """difficulty as an int if it is one of `levels` (a sequence or a dict of levels).

    Raises:
        ConfigError: naming the valid levels.
    """
    level = _as_int(difficulty)
    if level not in levels:
        raise ConfigError(f"difficulty must be one of {sorted(levels)}, got {difficulty!r}")
    return level


_DATASETS: dict[tuple[str, int], Any] = {}


def _dataset(domain: Domain, difficulty: int) -> Any:
    """The cached reasoning-gym dataset of a domain at a level (built once per process).

    Built with seed=0, so item `idx` is generated from `Random(idx)`: the task seed is the
    item index. Datasets ignore `size` when indexing (except gsm_symbolic; see below).
    """
    key = (domain.name, difficulty)
    if key not in _DATASETS:
        import reasoning_gym  # lazy: ~1 s import

        _DATASETS[key] = reasoning_gym.create_dataset(domain.name, **{"seed": 0, **domain.levels[difficulty]})
    return _DATASETS[key]


def _forget_datasets() -> None:
    _DATASETS.clear()


def reset_caches() -> None:
    """Forget every built generator, here and in the idle upstream workers, so the next
    task comes from a fresh instance (validation's determinism check)."""
    _forget_datasets()
    UPSTREAM.reset(_forget_datasets)


POOL_SPLIT_TIMEOUT_S = 60.0  # generating a whole pool once to split it (word_ladder level 2: 2-4 s here)
_POOL_SIDES: dict[tuple[str, int], tuple[Any, tuple[tuple[int, ...], tuple[int, ...]]]] = {}


def _pool_side(domain: Domain, difficulty: int, ds: Any, heldout: bool) -> tuple[int, ...]:
    """Indices of the pooled dataset `ds` on one side of its split (`split_pool` over the
    items' questions), computed once per dataset instance (a rebuilt dataset is split again:
    list_functions draws its pool with unseeded randomness, so the pool may differ).

    Raises:
        ConfigError: that side of the pool is empty.
    """
    key = (domain.name, difficulty)
    cached = _POOL_SIDES.get(key)
    if cached is None or cached[0] is not ds:
        texts = []
        for i in range(len(ds)):
            try:
                texts.append(ds[i]["question"])
            except IndexError:  # word_ladder shrinks its size when it runs out of word pairs
                break
        cached = _POOL_SIDES[key] = (ds, split_pool(texts))
    side = cached[1][heldout]
    if not side:
        raise ConfigError(f"the {domain.name} level {difficulty} pool has no "
                          f"{'held-out' if heldout else 'training'} items ({len(cached[1][0]) + len(cached[1][1])} "
                          "distinct); it is too small to split")
    return side


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


TIMES_TABLE = (2, 9)  # products level 1: both factors in this range (inclusive)


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
                         "num_terms": 2, "num_digits": 1,
                         "difficulty": {"num_terms": (2, 2), "num_digits": (1, 1), "factors": TIMES_TABLE}}}


def _times_table_fact(item: dict) -> str:
    """The split key of a level-1 products item: its factors in ascending order, so "3 * 4"
    and "4 * 3" (one fact) fall on the same side of the split."""
    return "products fact " + " * ".join(sorted(item["metadata"]["expression"].split(" * "), key=int))


def _products_item(ds: Any, seed: int, level: int) -> dict:
    """The products item of `seed` on its side of the split (`draw_on_side`, one in 2 held
    out). Level 1 has only 36 facts (64 questions, `_times_table_entry`), split by fact
    (`_times_table_fact`): a held-out "4 * 3" is never trained as "3 * 4", and with the
    usual one in 5 only about 7 facts would be held out. Above level 1 the split is by
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


def _hand_made() -> dict[str, Domain]:
    """The six hand-made domains (the first quickstart used five; today's uses basic_arithmetic,
    chain_sum and products), with levels picked by hand and kept stable so measured results
    stay comparable. They ask for a one-line `Answer: ...`."""
    return {d.name: d for d in [
        Domain(
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
        Domain(
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
        Domain(
            name="products",
            family="arithmetic",
            description="Multiply integers (the times table from 2 to 9 at level 1).",
            # level 1's tasks are `_times_table_entry`'s (the config only builds the verifier);
            # levels 3-5 are reasoning-gym's curriculum levels 0, 2 and 4
            levels={
                1: dict(min_terms=2, max_terms=2, min_digits=1, max_digits=1),
                2: dict(min_terms=2, max_terms=2, min_digits=1, max_digits=2),
                3: dict(min_terms=2, max_terms=3, min_digits=1, max_digits=2),
                4: dict(min_terms=4, max_terms=5, min_digits=3, max_digits=4),
                5: dict(min_terms=6, max_terms=7, min_digits=5, max_digits=6),
            },
            level_notes={1: "2 terms, each 2-9", 2: "2 terms, 1-2 digits", 3: "2-3 terms, 1-2 digits",
                         4: "4-5 terms, 3-4 digits", 5: "6-7 terms, 5-6 digits"},
            generate=_products_item,
        ),
        Domain(
            name="gsm_symbolic",
            family="arithmetic",
            description="Grade-school math word problems (GSM-Symbolic templates) with a numeric answer.",
            levels={1: {}, 2: {}, 3: {}},
            level_notes={1: "2-step templates", 2: "3-step templates", 3: "4-14-step templates"},
            generate=_gsm_symbolic_item,
        ),
        Domain(
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
        Domain(
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
    ]}


_REGISTRY: dict[str, Domain] = {}
_REGISTRY_LOCK = threading.Lock()


def registry() -> dict[str, Domain]:
    """All registered domains by name, built on first call: the hand-made six, every
    other reasoning-gym generator (`backend.rg_domains`), `humaneval` and the
    `terminal_*` family (sandbox-verified), the long-document domains
    (`backend.long_docs`: needle_haystack, financial_report) and the tool-use domains
    (`backend.tool_domains`: tool_sql, tool_calc, tool_files, tool_docs; `backend.cad_domains`:
    cad_bracket, cad_shaft, cad_table)."""
    if not _REGISTRY:
        with _REGISTRY_LOCK:
            if not _REGISTRY:
                from backend.code_domains import HUMANEVAL
                from backend.long_docs import long_doc_domains
                from backend.rg_domains import build_rg_domains
                from backend.terminal_env import TERMINAL_DOMAINS
                from backend.cad_domains import cad_domains
                from backend.tool_domains import tool_domains

                hand = _hand_made()
                long_docs = long_doc_domains()  # replaces reasoning-gym's short needle_haystack
                built = {**hand, **build_rg_domains(skip=set(hand) | set(long_docs)), HUMANEVAL.name: HUMANEVAL,
                         **TERMINAL_DOMAINS, **long_docs, **tool_domains(), **cad_domains()}
                _REGISTRY.update(sorted(built.items()))
    return _REGISTRY


def domain_names() -> list[str]:
    """Names of the registered domains, sorted."""
    return sorted(registry())


def get_domain(name: str) -> Domain:
    """The registered domain called `name`.

    Raises:
        DomainNotFound: If no such domain; the message suggests close names.
    """
    try:
        return registry()[name]
    except (KeyError, TypeError):
        import difflib

        close = difflib.get_close_matches(str(name), domain_names(), n=3)
        hint = f"did you mean {', '.join(close)}? " if close else ""
        raise DomainNotFound(f"unknown domain {name!r}; {hint}list them with `rlwb domains list`") from None


def build_messages(task: Task, tokenizer=None, context_budget_tokens: int | None = None) -> list[dict]:
    """Chat messages that pose a task to the model (its domain's `messages`): for
    reasoning-gym domains the question plus the answer-format instruction
    (`ANSWER_INSTRUCTION`); coding and terminal domains have their own instructions;
    retrieval domains put the context assembled in `tokenizer`'s tokens (the policy's;
    None: the embedding model's, for previews) before the question, in
    `context_budget_tokens` (None: the domain's default)."""
    domain = get_domain(task.domain)
    if domain.kind == "retrieval":
        if context_budget_tokens is None:
            return domain.messages(task, tokenizer)
        return domain.messages(task, tokenizer, context_budget_tokens)
    return domain.messages(task)


def train_seed(rng: random.Random) -> int:
    """Draw a training seed uniformly from `TRAIN_SEED_RANGE` using `rng`."""
    return rng.randrange(*TRAIN_SEED_RANGE)


def heldout_seeds(n: int, offset: int = 0) -> list[int]:
    """The n held-out seeds starting `offset` seeds into `HELDOUT_SEED_RANGE`.

    Deterministic (consecutive seeds), so every evaluation sees the same tasks.

    Raises:
        ConfigError: If n or offset is negative or the seeds would leave the range.
    """
    low, high = HELDOUT_SEED_RANGE
    if n < 0 or offset < 0 or low + offset + n > high:
        raise ConfigError(f"need 0 <= n, 0 <= offset and offset + n <= {high - low}; got n={n}, offset={offset}")
    return list(range(low + offset, low + offset + n))


DISTINCT_SCAN = 4  # `heldout_tasks` tries at most this many held-out seeds per task wanted


def heldout_tasks(domain: str, levels: Sequence[int], n: int, offset: int = 0) -> list[Task]:
    """Up to `n` held-out tasks of `domain` with distinct questions, the same every time.

    The held-out seeds from `offset` are taken in order, the i-th at level
    `levels[i % len(levels)]`; a task whose (level, question) repeats an earlier kept one is
    passed over, so a small domain (products level 1 has 36 held-out questions, a pooled
    one its held-out side) is not counted several times over, which would narrow its
    intervals for nothing. At most `DISTINCT_SCAN * n` seeds are tried: a domain with fewer
    distinct held-out questions gives fewer tasks.

    Raises:
        ConfigError: an unknown level, or the seeds would leave the held-out range.
        DomainNotFound: no such domain.
    """
    span = HELDOUT_SEED_RANGE[1] - HELDOUT_SEED_RANGE[0]
    seeds = heldout_seeds(max(n, min(DISTINCT_SCAN * n, span - offset)), offset)  # raises past the range
    d, seen, out = get_domain(domain), set(), []
    for i, seed in enumerate(seeds if levels else []):
        task = d.make_task(seed, levels[i % len(levels)])
        if (task.difficulty, task.question) not in seen:
            seen.add((task.difficulty, task.question))
            out.append(task)
            if len(out) == n:
                break
    return out


def is_heldout(seed: int) -> bool:
    """True if the seed is in `HELDOUT_SEED_RANGE`."""
    return HELDOUT_SEED_RANGE[0] <= seed < HELDOUT_SEED_RANGE[1]


# One item in POOL_HELDOUT_EVERY of a finite set of items is held out. Shared by every
# domain that draws from a finite set: pooled reasoning-gym generators and the CAD
# domains split by a hash of the item's question (`heldout_item`); humaneval by problem
# index (`backend.code_domains`), its problems being fixed and distinct.
POOL_HELDOUT_EVERY = 5
MAX_SIDE_DRAWS = 200  # `draw_on_side` gives up after this many draws (a held-out miss is 4/5 per draw)

_T = TypeVar("_T")


def heldout_item(question: str, every: int = POOL_HELDOUT_EVERY) -> bool:
    """True if the item whose question (prompt text) is `question` is held out.

    The side is a property of the text itself: the first 8 bytes of its SHA-256, as a
    big-endian int, divisible by `every` (one item in `every` is held out). Equal questions
    are always on the same side, whatever pool, process or seed they come from.
    """
    digest = hashlib.sha256(question.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") % every == 0


def split_pool(questions: Sequence[str]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Split a finite pool of items into (training, held-out) indices.

    An item is held out iff `heldout_item(question)`. A question that occurs several times
    keeps only its first index, so no question is reachable twice within a side and none
    from both sides.

    Args:
        questions: The pool's items' question texts, in pool order.

    Returns:
        (training indices, held-out indices), each ascending.
    """
    first: dict[str, int] = {}
    for i, q in enumerate(questions):
        first.setdefault(q, i)
    train = tuple(i for q, i in first.items() if not heldout_item(q))
    held = tuple(i for q, i in first.items() if heldout_item(q))
    return train, held


def draw_on_side(seed: int, draw: Callable[[int], _T], question: Callable[[_T], str],
                 every: int = POOL_HELDOUT_EVERY) -> _T:
    """The first of `draw(0)`, `draw(1)`, ... that is on `seed`'s side of the item split.

    For generators over a small space of items (the CAD domains' parameter grids), where
    a held-out seed could otherwise generate exactly a training task: a training seed
    keeps only items with `not heldout_item(question(item))`, a held-out seed only items
    with `heldout_item(...)`. Deterministic if `draw` is (the same seed gives the same
    item); a training seed keeps its first draw 4 times in 5.

    Args:
        seed: The task seed (`is_heldout` picks the side).
        draw: attempt number -> item, deterministic in (seed, attempt).
        question: item -> the question text the split is computed on.
        every: one item in `every` is held out (`heldout_item`).

    Raises:
        ConfigError: no item of the seed's side within MAX_SIDE_DRAWS draws.
    """
    want = is_heldout(seed)
    for attempt in range(MAX_SIDE_DRAWS):
        item = draw(attempt)
        if heldout_item(question(item), every) == want:
            return item
    raise ConfigError(f"seed {seed}: no {'held-out' if want else 'training'} item in {MAX_SIDE_DRAWS} draws")
