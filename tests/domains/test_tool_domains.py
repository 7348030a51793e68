"""Tool-use tasks: every reference tool sequence reaches the answer through the real tools
and scores 1; wrong answers and invalid calls show in the breakdown."""

import pytest

from core.errors import ConfigError
from domains.tools.domain import make_calc_task, make_sql_task, reference_turn, score_tool_episode
from domains.tools.toolbox import ToolContext, ToolRunner


def _answer_from(task, observation: str) -> str:
    import json

    if task.domain == "tool_sql":
        row = json.loads(observation.splitlines()[1])
        return ", ".join(str(v) for v in row) if len(row) > 1 else (f"{row[0]:.2f}" if isinstance(row[0], float)
                                                                      else str(row[0]))
    return f"{float(observation):.2f}"


@pytest.mark.parametrize("make", [make_sql_task, make_calc_task])
@pytest.mark.parametrize("level", [1, 2, 3])
def test_reference_calls_reach_the_answer_and_score_1(make, level, tmp_path):
    for seed in range(8):
        task = make(seed, level)
        assert task == make(seed, level)  # deterministic
        ctx = ToolContext(database=task.database_path(tmp_path) if task.tables else None)
        results = ToolRunner(list(task.tools), ctx).run_turn(reference_turn(task))
        assert [r.error for r in results] == [None]
        final = f"Answer: {_answer_from(task, results[0].observation)}"
        reward, breakdown = score_tool_episode(task, final, results)
        assert reward == 1.0 and breakdown["call_validity"] == 1.0, (task.question, task.answer, final)


def test_wrong_answers_and_invalid_calls_are_counted():
    task = make_calc_task(3, 2)
    runner = ToolRunner(["calculator"])
    results = runner.run_turn('<tool_call>{"name": "calculator", "arguments": {"expr": "1"}}</tool_call>'
                              + reference_turn(task))
    reward, breakdown = score_tool_episode(task, "Answer: 1.00", results)
    # 0.1 answer line + 0.1 x validity 1/2 + 0.8 x wrong
    assert reward == pytest.approx(0.15) and breakdown["call_validity"] == 0.5
    assert breakdown["error_codes"] == {"schema_violation": 1} and breakdown["ok_calls"] == 1
    assert score_tool_episode(task, "no answer line", [])[0] == 0.0
    assert score_tool_episode(task, "Answer: 1.00", [])[0] == pytest.approx(0.1)  # no calls: validity 0


def test_bad_seeds_and_levels():
    for bad in ((-1, 1), (1, 4), (True, 1), ("3", 1)):
        with pytest.raises(ConfigError):
            make_sql_task(*bad)


def test_files_tasks_have_a_matching_row_and_a_stable_answer():
    from domains.tools.domain import make_files_task

    for level in (1, 2, 3):
        for seed in range(20):
            t = make_files_task(seed, level)
            assert t == make_files_task(seed, level) and float(t.answer) > 0
            assert len(t.files) == {1: 1, 2: 3, 3: 5}[level]
    t = make_files_task(0, 3)
    assert any(text.startswith("#") for text in t.files.values())
    assert any("amount,region,date,product" in text.split("\n")[:2] for text in t.files.values())


def test_the_demonstration_is_a_real_reference_episode_on_a_reserved_seed():
    from domains.splits import HELDOUT_SEED_RANGE, TRAIN_SEED_RANGE
    from domains.registry import get_domain
    from domains.tools.domain import DEMO_SEED

    assert DEMO_SEED >= max(TRAIN_SEED_RANGE[1], HELDOUT_SEED_RANGE[1])
    for name in ("tool_sql", "tool_calc"):
        d = get_domain(name)
        demo = d.demonstration()
        assert [m["role"] for m in demo] == ["user", "assistant", "tool", "assistant"]
        ref = d.make_task(DEMO_SEED, 1)
        assert demo[-1]["content"] == f"Answer: {ref.answer}"
        assert '"result"' in demo[2]["content"] and "error" not in demo[2]["content"]
        task = d.make_task(5, 2)
        assert task.question not in "".join(m["content"] for m in demo)  # the task itself is not shown
    assert get_domain("tool_files").demonstration() == []


def test_non_finite_answers_never_match():
    from domains.registry import get_domain

    for name in ("tool_calc", "tool_sql"):
        d = get_domain(name)
        task = d.make_task(5, 3)
        for junk in ("nan", "NaN", "-nan", "n a n", "inf", "central, nan"):
            reward, b = d.score(task, d.reference_turns(task)[0] + f"\nAnswer: {junk}")
            assert b["correct"] == 0.0 and reward < 1.0, (name, junk)


def test_tie_redraws_keep_the_seed_in_its_range():
    from domains.splits import HELDOUT_SEED_RANGE

    for seed in list(range(200)) + [HELDOUT_SEED_RANGE[0] - 1]:
        task = make_sql_task(seed, 3)
        assert task.seed == seed and "," in task.answer
