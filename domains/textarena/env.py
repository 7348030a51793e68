"""A TextArena single-player game as the Gymnasium environment of an episode.

    env = GameEnv(get_domain("play_frozen_lake"))
    obs, info = env.reset(options={"task": get_domain("play_frozen_lake").make_task(3)})
    obs, reward, terminated, truncated, info = env.step("I go right: [right]")
    ...                                                   # reward 1.0 once the game is won

A model turn's move is the first bracketed group in it on one line ("[right]", "[3 7 9]"),
at most `MAX_MOVE_CHARS` long; only that is handed to the game, so the reasoning around it
never trips a game that wants the move alone. A turn without one (or with control
characters) hands the game `NO_MOVE`, which it refuses as it refuses any invalid move
(TextArena's own error allowance: the first invalid move of a run is forgiven with a
message, the second in a row ends the game). The observation after a turn is what the
game said since the last one (feedback, the board).

The episode ends when the game does, or after the level's turn limit
(`Game.turn_limits`: the game's own rules, not the run's `max_turns`, which would make a
sudoku or a walk across the lake unwinnable at its default of 4). Reward: 1.0 if the game
was won (TextArena's outcome reward 1), else 0.0; the breakdown keeps TextArena's own
partial score as "progress" (how close the last guess was, the share of lights off) for
display, never as reward.

Determinism and threads: TextArena games call the `random` module (and reseed it in
`reset(seed=...)`), which every thread of the process shares. In the TextArena modules a
game uses, the name `random` is swapped for `ThreadRandom`, which hands each call to the
calling thread's own `random.Random`; that one is seeded from (task seed, turn) before
each call into the game. So an episode is a function of its task and its moves, whatever
other threads draw meanwhile, and the process's own `random` never sees a game's draws.
"""

from __future__ import annotations

import importlib
import random
import re
import sys
import threading
from typing import Any

import gymnasium as gym

from core.errors import ConfigError
from domains.answers import malformed
from domains.contract import EpisodeEnv
from domains.terminal.env import text_spaces

MAX_MOVE_CHARS = 60
MAX_OBSERVATION_CHARS = 4000
MOVE = re.compile(r"\[[^\[\]\n]{1," + str(MAX_MOVE_CHARS) + r"}\]")
NO_MOVE = "(no bracketed move)"  # what the game is handed for a turn without one: it refuses it by its own rules


class ThreadRandom:
    """Stands in for the `random` module inside TextArena's modules: `random.randint(...)`,
    `random.seed(...)` and the rest go to the calling thread's own `random.Random`;
    `random.Random` itself stays the class."""

    _local = threading.local()

    def rng(self) -> random.Random:
        """This thread's generator (made on first use)."""
        if not hasattr(self._local, "rng"):
            self._local.rng = random.Random()
        return self._local.rng

    def __getattr__(self, name: str) -> Any:
        if name in ("Random", "SystemRandom"):
            return getattr(random, name)
        return getattr(self.rng(), name)


THREAD_RANDOM = ThreadRandom()


def _isolate(module_name: str) -> None:
    """Swap `random` for `THREAD_RANDOM` in the TextArena module and in textarena.core and
    textarena.state (which reseed it), once each."""
    for name in (module_name, "textarena.core", "textarena.state"):
        module = sys.modules[name]
        if getattr(module, "random", None) is random:
            module.random = THREAD_RANDOM


def new_game(env_class: str, kwargs: dict, seed: int) -> Any:
    """A TextArena env of `env_class` ("module:Class") built with `kwargs` and reset with
    `seed` (the task's hidden state is then in it).

    Raises:
        ZeroDivisionError: the game's own reset failed so (LightsOut when the scramble
            turned every light off); the domain tries another candidate seed.
    """
    module, name = env_class.split(":")
    cls = getattr(importlib.import_module(module), name)  # first use: `import textarena`, ~2 s
    _isolate(module)
    game = cls(**kwargs)
    THREAD_RANDOM.seed(seed)
    game.reset(num_players=1, seed=seed)
    return game


def game_said(game: Any) -> str:
    """What the game told the player since it was last asked (its own messages, not the
    player's echoed move), one message per paragraph."""
    _, messages = game.get_observation()
    text = "\n\n".join(m for who, m, _ in messages if who != 0).strip()
    return text if len(text) <= MAX_OBSERVATION_CHARS else text[:MAX_OBSERVATION_CHARS] + "\n[cut]"


def first_move(text: str) -> str | None:
    """The first bracketed move in a model turn ("[up]", "[2 3]"), on one line; None if
    there is none or the turn holds control characters or lone surrogates."""
    if not isinstance(text, str) or malformed(text, "\n\t\r"):
        return None
    m = MOVE.search(text)
    return m.group(0) if m else None


class GameEnv(gym.Env, EpisodeEnv):
    """One TextArena game played turn by turn (Gymnasium contract; text in and out).

    Args:
        domain: The `domains.textarena.domain.GameDomain` whose tasks it plays; a task's
            turn limit is its level's (`Game.turn_limits`).
    """

    metadata = {"render_modes": []}

    def __init__(self, domain: Any) -> None:
        self.domain = domain
        self.max_turns = 0  # the task's level sets it at reset
        self.observation_space, self.action_space = text_spaces()
        self.game: Any = None
        self.task: Any = None
        self.turn = 0
        self.invalid = 0  # turns the game refused (no move, or a move against its rules)
        self.no_move = 0  # turns without a bracketed move
        self._over = True

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[str, dict]:
        """Start the episode of `options["task"]` (a registry Task of this domain).

        Returns:
            (the game's opening text: rules and board, {"game": TextArena class}).

        Raises:
            ConfigError: no task, or a task of another domain.
        """
        super().reset(seed=seed)
        task = (options or {}).get("task")
        if task is None or task.domain != self.domain.name:
            raise ConfigError(f"reset needs options={{'task': a {self.domain.name} task}}")
        self.task, self.turn, self.invalid, self.no_move, self._over = task, 0, 0, 0, False
        self.max_turns = self.domain.game.turn_limits[task.difficulty]
        self.game = self.domain.new_game(task)
        opening = game_said(self.game)
        return opening, {"game": self.domain.game.env_class.split(":")[1]}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        """Play one model turn: its first bracketed move goes to the game.

        Returns:
            (observation, reward, terminated, truncated, info). reward is 0.0 until the
            episode ends, then 1.0 for a win, else 0.0. info["turn"] is the turn's record
            {"turn", "action", "text", "move", "observation"}, action "move" (played),
            "refused" (a move against the game's rules) or "invalid" (no bracketed move);
            at the end info["breakdown"] (format: the share of turns with a move;
            invalid_turns: the turns the game refused) and info["check"] (the game's
            closing reason).

        Raises:
            ConfigError: step after the episode ended, or before reset.
        """
        if self._over or self.game is None:
            raise ConfigError("episode is over; call reset() first")
        self.turn += 1
        text = action if isinstance(action, str) else ""
        move = first_move(text)
        state = self.game.state
        try:
            THREAD_RANDOM.seed(self.task.seed * 1009 + self.turn)
            done, _ = self.game.step(move if move is not None else NO_MOVE)
            error = ""
        except Exception as e:  # noqa: BLE001 - a game that chokes on a move ends the episode, scored as it stands
            done, error = True, f"the game raised {type(e).__name__} on this move: {str(e)[:200]}"
        # a forgiven invalid move leaves error_count at 1 (a valid one resets it); an
        # unforgiven one ends the game with game_info's "invalid_move" set
        refused = bool(error) or getattr(state, "error_count", 0) > 0 or bool(
            state.done and state.game_info[0].get("invalid_move"))
        self.invalid += refused
        self.no_move += move is None
        obs = error or game_said(self.game)
        action = "invalid" if move is None else "refused" if refused else "move"
        record = {"turn": self.turn, "action": action, "text": text, "move": move, "observation": obs}
        truncated = not done and self.turn >= self.max_turns
        info: dict = {"turn": record}
        reward = 0.0
        if done or truncated:
            self._over = True
            reward, end = self._verdict(error)
            info.update(end)
        return obs, reward, bool(done), truncated, info

    def finish(self, final_text: str) -> tuple[float, dict]:
        """End the episode now (its token budget is spent) and score the game as it stands."""
        self._over = True
        return self._verdict("")

    def _verdict(self, error: str) -> tuple[float, dict]:
        """(reward, {"breakdown", "check"}) of the game as it stands."""
        state = self.game.state
        over = bool(state.done)
        raw = (state.rewards or {}).get(0, 0.0) if over else 0.0
        # ThreeCardMonte passes set_invalid_move's arguments swapped: its "reward" is the reason text
        progress = float(raw) if isinstance(raw, (int, float)) and not isinstance(raw, bool) else 0.0
        won = over and progress >= 1.0 and not state.game_info[0].get("invalid_move") and not error
        reason = error or (state.game_info[0].get("reason") if over else "") or "the episode ended before the game did"
        turns = max(self.turn, 1)
        breakdown = {"correct": 1.0 if won else 0.0, "format": (self.turn - self.no_move) / turns,
                     "progress": round(max(progress, 0.0), 4), "turns": self.turn, "invalid_turns": self.invalid,
                     "check": str(reason)[:300]}
        return breakdown["correct"], {"breakdown": breakdown, "check": breakdown["check"]}

    def close(self) -> None:
        self.game = None
