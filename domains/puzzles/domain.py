"""A chuk-puzzles-gym game as a workbench domain: seeded puzzles, one answer, a rule checker.

chuk-puzzles-gym (MIT, `pip install chuk-puzzles-gym`) ships constraint puzzles as
interactive games: `AVAILABLE_GAMES[key](difficulty="easy"|"medium"|"hard", seed=s)`,
then `generate_puzzle()`. `PuzzleDomain` poses one generated puzzle as a single-turn task
(the whole solution between `<answer>` tags) and scores it with the game's own rule
checker (`domains.puzzles.games`), never with the package's `is_complete()`, which compares
with one stored solution although many puzzles have several.

- **no event loop**: `generate_puzzle` is declared `async` but never awaits, so it is
  driven with `send(None)` (`_run`); a coroutine that did suspend raises RuntimeError.
- **determinism**: every game draws from its own `random.Random(seed)`; no global RNG, no
  clock, no network (checked with audit hooks when the family was written). A task is a
  function of (game, level, seed) in any process.
- **candidate seeds**: a seed whose stored solution breaks the rules the question states
  (binary rows that repeat, fillomino regions of the wrong size), whose reference search
  found nothing (sokoban), or that gave the generator's fixed fallback puzzle
  (`GameSpec.fallback`) is not served: the task moves on to the next candidate,
  package seed `seed + k * 2**40` for k = 1, 2, ... (`CANDIDATE_STRIDE`; past every task
  seed, so two task seeds never share a puzzle), up to `MAX_CANDIDATES` tries.
- **facts, not games**: the task's entry holds the puzzle's plain-JSON facts, which is
  all the checker reads, so a task rebuilt from the store is scored without regenerating.
- **bad answers**: the answer is the last `<answer>...</answer>` of the reply
  (`domains.answers.extract_answer`, at most 100,000 characters); the parsers read only
  numbers of at most six digits and the checkers are polynomial in the board, so a huge
  or garbage answer scores 0 in milliseconds.

    d = PuzzleDomain(game="sudoku", levels={1: "easy", 2: "medium", 3: "hard"}, level_notes={...})
    task = d.make_task(seed=7, difficulty=1)
    reward, breakdown = d.score(task, d.reference_completion(task))      # 1.0
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from core.errors import ConfigError, WorkbenchError
from domains.answers import extract_answer
from domains.contract import (CORRECT_WEIGHT, FORMAT_WEIGHT, SYSTEM_PROMPT, TAG_INSTRUCTION, Task, TextDomain,
                              as_int, check_difficulty)
from domains.puzzles.games import GAMES, GameSpec
from domains.upstream import package_version

PACKAGE = "chuk-puzzles-gym"
CANDIDATE_STRIDE = 2**40  # candidate k of task seed s is package seed s + k * 2**40
MAX_CANDIDATES = 200  # binary: ~75% of stored solutions repeat a row or column; 0.8**200 ~ 4e-20


PACKAGE_VERSION = package_version(PACKAGE)


class PuzzleGenerationError(WorkbenchError):
    """No candidate seed of a task gave a puzzle whose reference passes its checker."""


def _run(coroutine: Any) -> Any:
    """The result of a coroutine that never suspends (the package's `async` methods).

    Raises:
        RuntimeError: it did suspend (it would need an event loop).
    """
    try:
        coroutine.send(None)
    except StopIteration as stop:
        return stop.value
    coroutine.close()
    raise RuntimeError("a chuk-puzzles-gym coroutine suspended; it needs an event loop")


def generate(spec: GameSpec, level: str, package_seed: int) -> Any:
    """The package's game `spec.key` at `level` ("easy", "medium", "hard"), generated from
    `package_seed` (with the spec's fast helpers swapped in first)."""
    from chuk_puzzles_gym.games import AVAILABLE_GAMES  # on first use: ~0.3 s (pydantic models)

    game = AVAILABLE_GAMES[spec.key](difficulty=level, seed=package_seed)
    if spec.prepare is not None:
        spec.prepare(game)
    _run(game.generate_puzzle())
    return game


def puzzle_entry(spec: GameSpec, level: str, seed: int) -> dict:
    """The entry {"question", "answer", "puzzle" (the checker's facts), "game", "level",
    "package_seed"} for task seed `seed`: the first candidate package seed whose reference
    passes the game's checker.

    Raises:
        PuzzleGenerationError: none of MAX_CANDIDATES candidates did.
    """
    for k in range(MAX_CANDIDATES):
        package_seed = seed + k * CANDIDATE_STRIDE
        game = generate(spec, level, package_seed)
        if spec.fallback is not None and spec.fallback(game):
            continue
        facts = spec.facts(game)
        answer = spec.reference(game)
        if not answer or not answer.strip():  # none found, or nothing to do (an empty answer is no answer)
            continue
        parsed = spec.parse(answer, facts)
        if parsed is not None and spec.check(facts, parsed):
            return {"question": spec.question(game), "answer": answer, "puzzle": facts, "game": spec.key,
                    "level": level, "package_seed": package_seed}
    raise PuzzleGenerationError(f"{spec.key} {level} seed {seed}: no candidate of {MAX_CANDIDATES} gave a puzzle "
                                "whose reference passes the checker")


@dataclass(frozen=True, eq=False)  # compared by identity; hashable
class PuzzleDomain(TextDomain):
    """One chuk-puzzles-gym game as a single-turn domain.

    Attributes:
        game: The game's key in `domains.puzzles.games.GAMES` (the package's key).
        levels: Difficulty level (1 easy .. n hard) -> the package's difficulty
            ("easy", "medium", "hard"); levels too slow to generate are left out.
        level_notes: Level -> what it means (board size, givens), for the page.
        name: "puzzle_<game>" unless given.
        description: The game's one line unless given.
        source: "chuk-puzzles-gym <version>, <game>" unless given.
        family: "puzzles".
        license: "MIT" (the package's).
        answer_format: "tag": the answer spans lines.
        multiple_answers: True: a puzzle may have several valid answers, all accepted.
    """

    game: str
    levels: dict[int, str]
    level_notes: dict[int, str]
    name: str = ""
    description: str = ""
    source: str = ""
    family: str = "puzzles"
    license: str = "MIT"
    kind: str = "single_turn"
    answer_format: str = "tag"
    multiple_answers: bool = True
    needs_sandbox = False
    spec: GameSpec = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.game not in GAMES:
            raise ConfigError(f"unknown puzzle game {self.game!r}; known: {sorted(GAMES)}")
        object.__setattr__(self, "spec", GAMES[self.game])
        if not self.name:
            object.__setattr__(self, "name", f"puzzle_{self.game}")
        if not self.description:
            object.__setattr__(self, "description", self.spec.description)
        if not self.source:
            object.__setattr__(self, "source", f"{PACKAGE} {PACKAGE_VERSION}, {self.game}")

    @property
    def environment(self) -> dict:
        """Where tasks run and how they are verified, for the catalogue."""
        return {"runtime": "in-process", "generator": f"{PACKAGE} {PACKAGE_VERSION} {self.game}",
                "verifier": f"domains.puzzles.games.{self.spec.check.__name__}: every rule of the puzzle (not "
                            "equality with the stored solution), pass = all rules hold",
                "answer_format": self.answer_format}

    def make_task(self, seed: int, difficulty: int = 1) -> Task:
        """The puzzle for (seed, difficulty), the same in every process.

        Args:
            seed: Non-negative int; see `train_seed` and `heldout_seeds`.
            difficulty: A level of this domain (`levels`), 1 easy .. n hard.

        Raises:
            ConfigError: seed is not a non-negative int or difficulty is not a level.
            PuzzleGenerationError: no candidate seed gave a puzzle whose reference passes
                (never seen for the levels registered).
        """
        level = check_difficulty(difficulty, self.levels)
        index = as_int(seed)
        if index is None or index < 0:
            raise ConfigError(f"seed must be a non-negative int, got {seed!r}")
        entry = puzzle_entry(self.spec, self.levels[level], index)
        return Task(self.name, index, entry["question"], entry["answer"], level, entry, entry["puzzle"])

    def messages(self, task: Task) -> list[dict]:
        """A short system message, then the question and `TAG_INSTRUCTION`."""
        return [{"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": f"{task.question}\n{TAG_INSTRUCTION}"}]

    def reference_completion(self, task: Task) -> str:
        """The reference answer (from the stored solution or this family's own search) in tags."""
        return self.wrap_answer(task.answer)

    def wrap_answer(self, answer: str) -> str:
        """`answer` between `<answer>` tags."""
        return f"<answer>{answer}</answer>"

    def near_miss(self, task: Task) -> str | None:
        """The game's own near miss (`GameSpec.near_miss`), where it has one."""
        return None if self.spec.near_miss is None else self.spec.near_miss(task.entry["puzzle"], task.answer)

    def score(self, task: Task, completion: str) -> tuple[float, dict]:
        """Score a completion: reward = FORMAT_WEIGHT * format + CORRECT_WEIGHT * correct.

        format is 1 if the completion has a non-empty last `<answer>...</answer>`
        (`extract_answer`, tags only); correct is 1 if that answer parses in the game's
        answer format and passes every rule of the puzzle (`GameSpec.check`). Never
        raises on a bad completion: an unreadable answer gets the format credit only
        ("rejected" says why), a checker that raised counts as wrong ("verifier_error").

        Returns:
            (reward, breakdown) with "format", "correct" (0.0 or 1.0) and "extracted" (the
            answer, at most 200 characters, or None), plus "rejected" or "verifier_error".

        Raises:
            ConfigError: the task belongs to another domain or has no valid level.
        """
        if task.domain != self.name:
            raise ConfigError(f"task of domain {task.domain!r} given to domain {self.name!r}")
        check_difficulty(task.difficulty, self.levels)
        extracted = extract_answer(completion, tags_only=True)
        if extracted is None:
            return 0.0, {"format": 0.0, "correct": 0.0, "extracted": None}
        breakdown: dict[str, Any] = {"format": 1.0, "correct": 0.0, "extracted": extracted[:200]}
        facts = task.raw_entry if task.raw_entry is not None else (task.entry or {}).get("puzzle")
        if facts is None:  # a task stored without its facts: regenerate them
            facts = self.make_task(task.seed, task.difficulty).raw_entry
        try:
            parsed = self.spec.parse(extracted, facts)
            if parsed is None:
                breakdown["rejected"] = f"unreadable: not in the answer format of {self.game}"
            elif self.spec.check(facts, parsed):
                breakdown["correct"] = 1.0
        except Exception as e:  # noqa: BLE001 - a checker bug must not take a rollout down
            breakdown["verifier_error"] = f"{type(e).__name__}: {e}"[:200]
        reward = FORMAT_WEIGHT * breakdown["format"] + CORRECT_WEIGHT * breakdown["correct"]
        return min(1.0, reward), breakdown
