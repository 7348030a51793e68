"""The TextArena game family: tasks are a function of (game, level, seed) in any thread and
leave the process's `random` alone, the Lights Out solver is right, and replies are scored
the game's way (every bracketed move one turn; malformed replies 0)."""

import itertools
import random
from concurrent.futures import ThreadPoolExecutor

import pytest

from domains.answers import MAX_COMPLETION_CHARS
from domains.conformance import check_domain
from domains.registry import get_domain, registry
from domains.textarena.games import GAMES, frozen_lake_path, lights_out_presses

NAMES = [f"play_{g.key}" for g in GAMES]


def test_every_game_is_registered_and_keeps_the_contract():
    assert {n for n, d in registry().items() if d.family == "interactive_games"} == set(NAMES)
    for name in NAMES:
        check_domain(get_domain(name), seeds=(0, 7))


def test_tasks_are_the_same_in_threads_and_leave_random_alone():
    pairs = [(name, seed, level) for name in NAMES for seed in (1, 2, 3) for level in (1, 3)]
    random.seed(123)
    before = random.getstate()
    one_by_one = [get_domain(n).make_task(s, lv) for n, s, lv in pairs]
    assert random.getstate() == before
    with ThreadPoolExecutor(8) as pool:
        threaded = list(pool.map(lambda p: get_domain(p[0]).make_task(p[1], p[2]), pairs * 2))
    assert threaded == one_by_one * 2
    assert len({t.question + t.answer for t in one_by_one if t.domain == "play_sudoku"}) == 6


@pytest.mark.parametrize("size", [3, 4, 5])
def test_lights_out_presses_turn_every_light_off(size):
    rng = random.Random(size)
    for _ in range(30):
        grid = [[False] * size for _ in range(size)]
        for _ in range(rng.randint(1, 12)):
            r, c = rng.randrange(size), rng.randrange(size)
            for dr, dc in ((0, 0), (1, 0), (-1, 0), (0, 1), (0, -1)):
                if 0 <= r + dr < size and 0 <= c + dc < size:
                    grid[r + dr][c + dc] = not grid[r + dr][c + dc]
        presses = lights_out_presses(grid)
        for r, c in presses:
            for dr, dc in ((0, 0), (1, 0), (-1, 0), (0, 1), (0, -1)):
                if 0 <= r + dr < size and 0 <= c + dc < size:
                    grid[r + dr][c + dc] = not grid[r + dr][c + dc]
        assert not any(itertools.chain.from_iterable(grid))
        assert len(presses) == len(set(presses)) <= 12  # never more presses than the scramble had
    with pytest.raises(ValueError, match="no solution"):  # one lone light in a 5x5 corner can't be put out
        lights_out_presses([[True] + [False] * 4] + [[False] * 5 for _ in range(4)])


def test_frozen_lake_path_avoids_holes_and_is_shortest():
    grid = [[" ", "H", " "], [" ", "H", " "], [" ", " ", "G"]]
    assert frozen_lake_path(grid, (0, 0), (2, 2)) == ["[down]", "[down]", "[right]", "[right]"]
    assert frozen_lake_path([[" ", "H"], ["H", "G"]], (0, 0), (1, 1)) == []


def test_scoring_a_text_plays_its_moves_and_refuses_malformed_replies():
    d = get_domain("play_sudoku")
    task = d.make_task(4, 2)
    moves = d.reference_turns(task)
    prose = "Let me think. " + " then ".join(f"I place {m}" for m in moves)
    assert d.score(task, prose)[0] == 1.0
    assert d.score(task, " ".join(moves[:-1]))[0] == 0.0  # one cell short
    bad = moves[0][:-2] + str(int(moves[0][-2]) % 9 + 1) + "]"  # a wrong digit is refused by the game
    reward, b = d.score(task, " ".join([bad, bad]))
    assert reward == 0.0 and b["invalid_turns"] == 2 and "Invalid Move" in b["check"]
    assert b["format"] == 1.0  # in the move format, refused by the game's rules
    for text in ("", "no move at all", None, "\x00".join(moves), "x" * (MAX_COMPLETION_CHARS + 1) + moves[0]):
        assert d.score(task, text)[0] == 0.0
    with pytest.raises(Exception, match="reset"):
        env = d.make_env(None, max_turns=2)
        env.step("[1 1 1]")


def test_a_game_that_stores_a_text_reward_scores_0_not_a_crash():
    # ThreeCardMonte calls set_invalid_move(0.0, "Bad action...") with its arguments swapped,
    # so two turns without a move end the game with the text as its "reward"
    d = get_domain("play_three_card_monte")
    task = d.make_task(1, 1)
    env = d.make_env(None, max_turns=4)
    env.reset(options={"task": task})
    env.step("hmm")
    _, reward, terminated, _, info = env.step("no idea")
    assert terminated and reward == 0.0 and info["breakdown"]["progress"] == 0.0
    assert [r["action"] for r in (info["turn"],)] == ["invalid"]


def test_games_draw_from_their_own_thread_random_whatever_other_threads_do():
    import threading

    want = [get_domain("play_sudoku").make_task(s, 3) for s in range(6)]
    stop = threading.Event()

    def hammer():
        while not stop.is_set():
            random.random()
            random.seed(7)

    noise = threading.Thread(target=hammer)
    noise.start()
    try:
        got = [get_domain("play_sudoku").make_task(s, 3) for s in range(6)]
        d = get_domain("play_lights_out")
        task = d.make_task(2, 2)
        won = d.score(task, d.reference_completion(task))[0]
    finally:
        stop.set()
        noise.join()
    assert got == want and won == 1.0


def test_a_scramble_that_leaves_every_light_off_moves_to_the_next_candidate():
    d = get_domain("play_lights_out")
    task = d.make_task(491, 1)  # its first candidate's reset divides by zero in TextArena
    assert task.entry["package_seed"] != 491 and d.score(task, d.reference_completion(task))[0] == 1.0


def test_moves_must_be_on_one_line_and_free_of_control_characters():
    d = get_domain("play_three_card_monte")
    task = d.make_task(5, 2)
    env = d.make_env()
    env.reset(options={"task": task})
    _, _, done, _, info = env.step(task.answer.replace("[", "[\n").replace("]", "\n]"))
    assert not done and info["turn"]["action"] == "invalid" and info["turn"]["move"] is None
    _, reward, done, _, info = env.step("\x00" + task.answer)
    assert done and reward == 0.0 and "Invalid Move" in info["check"]  # the second invalid turn in a row
    assert d.score(task, "\x00" + task.answer)[0] == 0.0


def test_the_turn_limit_is_the_levels_not_the_runs():
    d = get_domain("play_sudoku")
    task = d.make_task(0, 3)
    assert task.entry["turn_limit"] == 16 and len(d.reference_turns(task)) == 9
    assert d.score(task, d.reference_completion(task))[0] == 1.0  # 9 moves, whatever max_turns a run has
