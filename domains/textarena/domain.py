"""TextArena single-player games as multi-turn domains (family "interactive_games").

TextArena (MIT, `pip install textarena`) ships text games behind one interface: `reset`,
then `step(move)` until the game is over, with a win/lose outcome. `GameDomain` makes each
game of `domains.textarena.games` a domain `play_<game>`: a task is the game reset with the
task's seed at a level's settings (its opening text is the question; the hidden state,
such as the secret code, stays in the game), and an episode is played in a `GameEnv`,
one move per model turn, rewarded 1 for a win.

- **determinism**: a task is a function of (game, level, seed) in any process: the game is
  reset with `random` seeded by the task seed under a lock (`domains.textarena.env`).
- **gold episodes**: `reference_turns` is the game's gold sequence (`Game.gold`, read from
  the hidden state), `wrong_turns` one that must not win; the answer is the gold sequence
  on one line, so another task's answer is a wrong episode for validation.
- **one text as an episode** (`score`, validation and the page's verifier box): every
  bracketed move in the text is one turn, in order.

    d = get_domain("play_lights_out")
    task = d.make_task(seed=4, difficulty=1)
    d.score(task, d.reference_completion(task))      # (1.0, {"correct": 1.0, ...})
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from domains.answers import MAX_COMPLETION_CHARS, malformed
from domains.contract import EpisodeDomain, Task, check_difficulty, check_seed, play_turns
from core.errors import ConfigError
from domains.textarena.env import MOVE, GameEnv, game_said, new_game
from domains.textarena.games import GAMES, Game
from domains.upstream import package_version

PACKAGE = "textarena"
PACKAGE_VERSION = package_version(PACKAGE)
CANDIDATE_STRIDE = 2**40  # candidate k of task seed s is package seed s + k * 2**40: past every task seed
MAX_CANDIDATES = 20
SYSTEM_PROMPT = ("You are playing a game, one move per turn. Each turn, think briefly, then write your move in "
                 "square brackets exactly as the game shows (for example [3] or [up]); only the first bracketed "
                 "move of a turn counts. The game answers after every move.")


@dataclass(frozen=True, eq=False)  # compared by identity; hashable
class GameDomain(EpisodeDomain):
    """One TextArena game as a multi-turn domain (see the module docstring).

    Attributes:
        game: Its `domains.textarena.games.Game`.
    """

    game: Game
    family: str = "interactive_games"
    kind: str = "multi_turn"
    license: str = "MIT"
    answer_format: str = "move"
    reward_rule: str = ("1 if the game is won within the turn budget (TextArena's outcome), else 0; TextArena's "
                        "partial score is shown as 'progress', not rewarded")

    @property
    def name(self) -> str:
        return f"play_{self.game.key}"

    @property
    def description(self) -> str:
        return self.game.description

    @property
    def source(self) -> str:
        return f"textarena {PACKAGE_VERSION}, {self.game.env_class.split(':')[1]}"

    @property
    def multiple_answers(self) -> bool:
        return self.game.multiple_answers

    @property
    def levels(self) -> dict:
        return self.game.levels

    @property
    def level_notes(self) -> dict:
        return self.game.level_notes

    @property
    def environment(self) -> dict:
        """Where tasks run and how they are verified, for the catalogue."""
        return {"runtime": "in-process TextArena game", "gymnasium": "GameEnv", "move_format": "[move]",
                "verifier": "the game's own outcome: won or not"}

    def new_game(self, task: Task) -> Any:
        """The TextArena env of `task`, reset (its hidden state drawn from the task's package seed)."""
        return new_game(self.game.env_class, self.game.levels[task.difficulty], task.entry["package_seed"])

    def _first_game(self, level: int, seed: int) -> tuple[Any, int]:
        """(the game, its package seed) for task seed `seed`: the first candidate seed
        `seed + k * CANDIDATE_STRIDE` whose reset succeeds (LightsOut's divides by zero when
        its scramble turned every light off: 0.4% of level-1 seeds).

        Raises:
            ConfigError: none of MAX_CANDIDATES did.
        """
        for k in range(MAX_CANDIDATES):
            package_seed = seed + k * CANDIDATE_STRIDE
            try:
                return new_game(self.game.env_class, self.levels[level], package_seed), package_seed
            except ZeroDivisionError:
                continue
        raise ConfigError(f"{self.name} seed {seed} level {level}: no candidate game of {MAX_CANDIDATES} could be reset")

    def make_task(self, seed: int, difficulty: int = 1) -> Task:
        """The task of (seed, level): the game's opening text, and its gold sequence as the answer.

        Raises:
            ConfigError: seed is not a non-negative int, or difficulty is not a level.
        """
        s = check_seed(seed)
        level = check_difficulty(difficulty, self.levels)
        game, package_seed = self._first_game(level, s)
        question = game_said(game)
        gold = self.game.gold(game)
        wrong = self.game.wrong(game, gold)
        if not gold:
            raise ConfigError(f"{self.name} seed {s} level {level}: the gold policy found no winning sequence")
        entry = {"game": self.game.key, "settings": dict(self.levels[level]), "package_seed": package_seed,
                 "turn_limit": self.game.turn_limits[level], "gold": gold, "wrong": wrong}
        return Task(self.name, s, question, " ".join(gold), level, entry)

    def messages(self, task: Task) -> list[dict]:
        """How to play (one bracketed move per turn), then the game's opening text."""
        return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": task.question}]

    def make_env(self, sandbox: Any = None, max_turns: int = 4, timeout_s: float = 10.0) -> GameEnv:
        """A `GameEnv` for this domain's tasks (no sandbox: the game runs in process). The
        run's `max_turns` does not apply: a task's turn limit is its level's
        (`Game.turn_limits`)."""
        return GameEnv(self)

    def reference_turns(self, task: Task) -> list[str]:
        """The gold episode: one move per turn."""
        return list(task.entry["gold"])

    def wrong_turns(self, task: Task) -> list[str]:
        """An episode that must not win (a wrong guess, or the gold moves less the last)."""
        return list(task.entry["wrong"]) or ["[]"]

    def scripted_turns(self, text: str) -> list[str]:
        """Every bracketed move of a pasted reply, one turn each, in order."""
        return MOVE.findall(text) if isinstance(text, str) else []

    def reference_completion(self, task: Task) -> str:
        """The gold moves, one per line."""
        return "\n".join(task.entry["gold"])

    def wrap_answer(self, answer: str) -> str:
        """An answer (moves on one line) is already a reply `score` plays."""
        return answer

    def score(self, task: Task, completion: str) -> tuple[float, dict]:
        """Play the text's moves as one episode each turn (`scripted_turns`) and score the
        game as it ends: (reward, breakdown with "correct", "format", "progress", "check").
        Never raises on the text; a text without a move scores 0."""
        if not isinstance(completion, str) or len(completion) > MAX_COMPLETION_CHARS or malformed(completion, "\n\t\r"):
            return 0.0, {"correct": 0.0, "format": 0.0, "progress": 0.0, "turns": 0, "invalid_turns": 0,
                         "check": "malformed reply (not text, over-long, control characters or lone surrogates)"}
        turns = self.scripted_turns(completion)
        if not turns:
            return 0.0, {"correct": 0.0, "format": 0.0, "progress": 0.0, "turns": 0, "invalid_turns": 0,
                         "check": "no bracketed move in the reply"}
        reward, breakdown, _ = play_turns(self, task, turns, None)
        return reward, breakdown


def game_domains() -> dict[str, GameDomain]:
    """Every game of `domains.textarena.games.GAMES` as a domain, by name."""
    return {d.name: d for d in (GameDomain(g) for g in GAMES)}
