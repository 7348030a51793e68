"""TextArena games through the trainer's episode loop: every game's gold episode scores 1,
a failing one 0, invalid turns are recorded and masked like any other turn, and the
game's feedback reaches the model as a user observation."""

import pytest

from domains.registry import get_domain
from domains.textarena.games import GAMES
from trainer.episodes import rollout_episodes
from trainer.groups import assign_advantages

from tests.trainer.test_episodes import ScriptedEngine


def _play(tokenizer, task, script, max_turns):
    engine = ScriptedEngine(tokenizer, [script])
    [sample] = rollout_episodes(engine, tokenizer, [task], 1, None, max_turns=max_turns, max_new_tokens=64,
                                max_episode_tokens=8192, temperature=1.0, top_p=1.0, command_timeout_s=10.0)
    return engine, sample


@pytest.mark.parametrize("key", [g.key for g in GAMES])
def test_gold_episode_wins_and_a_failing_one_scores_0(tokenizer, key):
    domain = get_domain(f"play_{key}")
    for level in domain.levels:
        task = domain.make_task(11, level)
        gold = [f"My move: {m}" for m in domain.reference_turns(task)]  # reasoning around the move is fine
        _, won = _play(tokenizer, task, gold, max_turns=len(gold))
        assert won.reward == 1.0 and won.breakdown["correct"] == 1.0 and won.fault is None, won.breakdown
        assert won.completion.finish_reason == "stop" and won.breakdown["invalid_turns"] == 0
        assert [t["action"] for t in won.turns] == ["move"] * len(gold)
        wrong = domain.wrong_turns(task) + ["Let me think.", "Still thinking."]  # two invalid turns end it
        _, lost = _play(tokenizer, task, wrong, max_turns=4)
        assert lost.reward == 0.0 and lost.breakdown["correct"] == 0.0, lost.breakdown
        assign_advantages([won, lost], 2, "grpo")
        assert won.advantage > 0 > lost.advantage


def test_feedback_is_a_masked_user_turn_and_invalid_turns_count(tokenizer):
    domain = get_domain("play_guess_the_number")
    task = domain.make_task(5, 1)
    secret = int(task.answer.strip("[]"))
    low = 1 if secret != 1 else 2
    engine, s = _play(tokenizer, task, ["I am not sure yet.", f"[{low}]", task.answer], max_turns=5)
    assert [t["action"] for t in s.turns] == ["invalid", "move", "move"] and s.reward == 1.0
    assert s.breakdown["invalid_turns"] == 1 and s.breakdown["format"] == pytest.approx(2 / 3)
    assert "invalid move" in s.turns[0]["observation"]
    assert ("higher" if low < secret else "lower") in s.turns[1]["observation"]
    # the model's tokens are trained; the game's feedback between them is masked out
    text = tokenizer.decode([t for t, m in zip(s.completion.token_ids, s.completion.mask) if not m])
    assert "higher" in text or "lower" in text
    assert tokenizer.decode([t for t, m in zip(s.completion.token_ids, s.completion.mask) if m]).count("[") == 2


def test_two_invalid_turns_in_a_row_lose_and_the_turn_budget_truncates(tokenizer):
    domain = get_domain("play_mastermind")
    task = domain.make_task(3, 2)
    _, s = _play(tokenizer, task, ["no idea", "still no idea"], max_turns=6)
    assert s.reward == 0.0 and [t["action"] for t in s.turns] == ["invalid", "invalid"]
    assert "Invalid Move" in s.breakdown["check"] and s.completion.finish_reason == "stop"
    # the level's turn limit ends an episode, not the run's max_turns (4 here)
    guess = get_domain("play_guess_the_number")
    task = guess.make_task(3, 1)
    secret = int(task.answer.strip("[]"))
    misses = [f"[{n}]" for n in range(1, 51) if n != secret][:10]
    _, s = _play(tokenizer, task, misses, max_turns=4)
    assert s.reward == 0.0 and s.completion.finish_reason == "length" and len(s.turns) == 10
    assert s.breakdown["check"] == "the episode ended before the game did" and s.breakdown["progress"] == 0.0
