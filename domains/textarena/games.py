"""The TextArena single-player games the workbench plays, and how each is won.

Each `Game` names a TextArena env class, its constructor arguments per difficulty level
and two policies read off the env right after `reset` (the hidden state is there: the
secret number, the code, the holes, the solved grid):

- `gold(env) -> moves`: a move sequence that wins (one move per model turn, each written
  the way the game's prompt asks, e.g. "[3 7 9]"); validation and the tests play it
  through the episode loop and it must score 1.
- `wrong(env, gold) -> moves`: a sequence that must not win (a wrong guess, or the gold
  sequence without its last move).

Left out, and why: Tower of Hanoi, Countdown and Cryptarithm (one fixed puzzle per level,
no task diversity); Hangman, Wordle, Crosswords and Spelling Bee (`nltk.download` at import,
offline here); Bandit, Blackjack and Secretary (the outcome is luck, not verifiable skill);
Sokoban, Rush Hour, Fifteen Puzzle, Peg Jump, Klondike and 2048 (a gold sequence needs a
search solver, and many exceed a 32-turn episode); FrozenLake with a random start corner
(its prompt still says the start is top-left); Twenty Questions and Guess Who (an LLM
plays the other side); Minesweeper (mines are placed at the first click, so a gold
sequence depends on it; many boards need more than 16 reveals).
"""

from __future__ import annotations

import itertools
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

Moves = list[str]


@dataclass(frozen=True)
class Game:
    """One TextArena single-player game.

    Attributes:
        key: The domain name's tail ("guess_the_number" -> play_guess_the_number).
        env_class: "module:Class" of the TextArena env (imported on first use).
        levels: Level -> the env's constructor keyword arguments.
        level_notes: Level -> what it means, with the gold episode's length in turns.
        description: One line for the catalogue.
        gold: env after reset -> a winning move sequence.
        wrong: (env after reset, the gold sequence) -> a sequence that must not win.
        multiple_answers: Other move sequences win too (several shortest walks across a
            lake), so validation doesn't take another task's gold sequence for a wrong one.
        turns: Level -> the episode's turn limit, where the env's arguments have no
            "max_turns" (then that is the limit): see `turn_limits`.
    """

    key: str
    env_class: str
    levels: dict[int, dict[str, Any]]
    level_notes: dict[int, str]
    description: str
    gold: Callable[[Any], Moves] = field(repr=False)
    wrong: Callable[[Any, Moves], Moves] = field(repr=False)
    multiple_answers: bool = False
    turns: dict[int, int] | None = None

    @property
    def turn_limits(self) -> dict[int, int]:
        """Level -> turns an episode may take: the game's own "max_turns", else `turns`."""
        return {lv: int(kw["max_turns"]) if "max_turns" in kw else self.turns[lv] for lv, kw in self.levels.items()}


def _without_last(env: Any, gold: Moves) -> Moves:
    """The gold sequence less its last move (the game is left unfinished)."""
    return gold[:-1]


def _guess_gold(env: Any) -> Moves:
    return [f"[{env.game_number}]"]


def _guess_wrong(env: Any, gold: Moves) -> Moves:
    other = env.game_number + 1 if env.game_number < env.max_number else env.game_number - 1
    return [f"[{other}]"]


def _mastermind_gold(env: Any) -> Moves:
    return ["[" + " ".join(map(str, env.state.game_state["secret_code"])) + "]"]


def _mastermind_wrong(env: Any, gold: Moves) -> Moves:
    code = list(env.state.game_state["secret_code"])
    code[0], code[1] = code[1], code[0]  # two distinct digits (no-duplicate levels) swapped
    return ["[" + " ".join(map(str, code)) + "]"]


_STEPS = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}


def frozen_lake_path(grid: list[list[str]], start: tuple[int, int], goal: tuple[int, int]) -> Moves:
    """The shortest walk from `start` to `goal` that steps on no hole ('H'), by breadth-first
    search: moves "[up]", "[down]", "[left]", "[right]" ([] if no path)."""
    n = len(grid)
    came: dict[tuple[int, int], tuple[tuple[int, int], str] | None] = {start: None}
    queue = deque([start])
    while queue:
        cell = queue.popleft()
        if cell == goal:
            break
        for name, (dr, dc) in _STEPS.items():
            nxt = (cell[0] + dr, cell[1] + dc)
            if 0 <= nxt[0] < n and 0 <= nxt[1] < n and nxt not in came and grid[nxt[0]][nxt[1]] != "H":
                came[nxt] = (cell, name)
                queue.append(nxt)
    if goal not in came:
        return []
    moves, cell = [], goal
    while came[cell] is not None:
        cell, name = came[cell]
        moves.append(f"[{name}]")
    return moves[::-1]


def _frozen_gold(env: Any) -> Moves:
    gs = env.state.game_state
    return frozen_lake_path(gs["grid"], tuple(gs["player_pos"]), tuple(gs["goal_pos"]))


def lights_out_presses(grid: list[list[bool]]) -> list[tuple[int, int]]:
    """The fewest presses (row, col) that turn every light off: x with A x = b over GF(2),
    A the press-toggles-light matrix, b the lights that are on (Gaussian elimination, then
    the lightest of the solutions over the free variables; 5x5 has four).

    Raises:
        ValueError: the grid has no solution.
    """
    n = len(grid)
    size = n * n
    aug = np.zeros((size, size + 1), dtype=np.uint8)
    for r, c in itertools.product(range(n), repeat=2):
        for dr, dc in ((0, 0), (1, 0), (-1, 0), (0, 1), (0, -1)):
            if 0 <= r + dr < n and 0 <= c + dc < n:
                aug[(r + dr) * n + c + dc, r * n + c] = 1
        aug[r * n + c, size] = bool(grid[r][c])
    pivots, row = [], 0
    for col in range(size):
        hit = next((i for i in range(row, size) if aug[i, col]), None)
        if hit is None:
            continue
        aug[[row, hit]] = aug[[hit, row]]
        for i in range(size):
            if i != row and aug[i, col]:
                aug[i] ^= aug[row]
        pivots.append(col)
        row += 1
    if aug[row:, size].any():
        raise ValueError("this Lights Out grid has no solution")
    free = [c for c in range(size) if c not in pivots]
    best = None
    for bits in itertools.product((0, 1), repeat=len(free)):
        x = np.zeros(size, dtype=np.uint8)
        x[free] = bits
        for i, col in enumerate(pivots):
            x[col] = (aug[i, size] + int(aug[i, free] @ x[free])) % 2 if free else aug[i, size]
        if best is None or x.sum() < best.sum():
            best = x
    return [(int(i) // n, int(i) % n) for i in np.flatnonzero(best)]


def _lights_gold(env: Any) -> Moves:
    return [f"[{r} {c}]" for r, c in lights_out_presses(env.state.game_state["grid"])]


def _lights_wrong(env: Any, gold: Moves) -> Moves:
    if len(gold) > 1:
        return gold[:-1]
    return ["[0 0]"] if gold != ["[0 0]"] else ["[0 1]"]


def _monte_gold(env: Any) -> Moves:
    return [f"[{env.ball_pos}]"]


def _monte_wrong(env: Any, gold: Moves) -> Moves:
    return [f"[{(env.ball_pos + 1) % env.num_cups}]"]


def _sudoku_gold(env: Any) -> Moves:
    board, full = env.state.game_state["board"], env.full_grid
    return [f"[{r + 1} {c + 1} {full[r][c]}]" for r, c in itertools.product(range(9), repeat=2) if board[r][c] == 0]


GAMES: tuple[Game, ...] = (
    Game("guess_the_number", "textarena.envs.GuessTheNumber.env:GuessTheNumberEnv",
         {1: {"min_number": 1, "max_number": 50, "max_turns": 10},
          2: {"min_number": 1, "max_number": 100, "max_turns": 9},
          3: {"min_number": 1, "max_number": 1000, "max_turns": 12}},
         {1: "a number in 1-50, 10 guesses (bisection needs at most 6)",
          2: "1-100, 9 guesses (bisection: 7)", 3: "1-1000, 12 guesses (bisection: 10)"},
         "Guess a hidden number; each wrong guess is answered 'higher' or 'lower' (TextArena GuessTheNumber).",
         _guess_gold, _guess_wrong),
    Game("mastermind", "textarena.envs.Mastermind.env:MastermindEnv",
         {1: {"code_length": 3, "num_numbers": 5, "max_turns": 12, "duplicate_numbers": False},
          2: {"code_length": 4, "num_numbers": 6, "max_turns": 20, "duplicate_numbers": False},
          3: {"code_length": 4, "num_numbers": 8, "max_turns": 30, "duplicate_numbers": False}},
         {1: "3 digits from 1-5, no repeats, 12 guesses", 2: "4 digits from 1-6, no repeats, 20 guesses (TextArena's "
          "Mastermind-v0)", 3: "4 digits from 1-8, no repeats, 30 guesses (Mastermind-v0-hard)"},
         "Crack a hidden code from black/white peg feedback (TextArena Mastermind).",
         _mastermind_gold, _mastermind_wrong),
    Game("frozen_lake", "textarena.envs.FrozenLake.env:FrozenLakeEnv",
         {1: {"size": 4, "num_holes": 3, "randomize_start_goal": False},
          2: {"size": 4, "num_holes": 5, "randomize_start_goal": False},
          3: {"size": 5, "num_holes": 6, "randomize_start_goal": False}},
         {1: "4x4 ice, 3 holes, 10 turns (gold: 6 moves)", 2: "4x4, 5 holes, 10 turns (gold: 6 moves or more)",
          3: "5x5, 6 holes (TextArena's FrozenLake-v0-hardcore), 14 turns (gold: 8 moves or more)"},
         "Walk across a frozen lake from the top-left corner to the goal without falling into a hole, one step "
         "per turn (TextArena FrozenLake).", _frozen_gold, _without_last, multiple_answers=True,
         turns={1: 10, 2: 10, 3: 14}),
    Game("lights_out", "textarena.envs.LightsOut.env:LightsOutEnv",
         {1: {"size": 3, "max_turns": 12}, 2: {"size": 4, "max_turns": 20}, 3: {"size": 5, "max_turns": 20}},
         {1: "3x3 grid, 12 presses (gold: at most 9)", 2: "4x4 grid, 20 presses (gold: at most 15)",
          3: "5x5 grid, 20 presses (TextArena's LightsOut-v0 size; gold: at most 15)"},
         "Turn every light off; a press toggles a light and its neighbours (TextArena LightsOut).",
         _lights_gold, _lights_wrong),
    Game("three_card_monte", "textarena.envs.ThreeCardMonte.env:ThreeCardMonteEnv",
         {1: {"num_cups": 3, "steps": 5}, 2: {"num_cups": 3, "steps": 10}, 3: {"num_cups": 5, "steps": 15}},
         {1: "3 cups, 5 swaps, one guess (2 turns: one invalid reply is forgiven)",
          2: "3 cups, 10 swaps (TextArena's ThreeCardMonte-v0)", 3: "5 cups, 15 swaps"},
         "Track a ball under shuffled cups and name its cup (TextArena ThreeCardMonte).",
         _monte_gold, _monte_wrong, turns={1: 2, 2: 2, 3: 2}),
    Game("sudoku", "textarena.envs.Sudoku.env:SudokuEnv",
         {1: {"clues": 77, "max_turns": 12}, 2: {"clues": 75, "max_turns": 14}, 3: {"clues": 72, "max_turns": 16}},
         {1: "4 empty cells, one placement per turn, 12 turns", 2: "6 empty cells, 14 turns (TextArena's "
          "Sudoku-v0-very-easy)", 3: "9 empty cells, 16 turns"},
         "Fill a nearly solved sudoku one cell per turn; a wrong digit is refused (TextArena Sudoku).",
         _sudoku_gold, _without_last),
)
