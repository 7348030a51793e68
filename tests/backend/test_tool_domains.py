"""Tool-use tasks: every reference tool sequence reaches the answer through the real tools
and scores 1; wrong answers and invalid calls show in the breakdown."""

import pytest

from backend.errors import ConfigError
from backend.tool_domains import make_calc_task, make_sql_task, reference_turn, score_tool_episode
from backend.toolbox import ToolContext, ToolRunner


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
    assert reward == pytest.approx(0.2) and breakdown["call_validity"] == 0.5
    assert breakdown["error_codes"] == ["schema_violation"]
    assert score_tool_episode(task, "no answer line", [])[0] == 0.0


def test_bad_seeds_and_levels():
    for bad in ((-1, 1), (1, 4), (True, 1), ("3", 1)):
        with pytest.raises(ConfigError):
            make_sql_task(*bad)
