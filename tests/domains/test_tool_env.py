"""ToolEnv: the Gymnasium contract, a hanging or raising tool inside an episode, the turn
budget, and bad use of the env."""

import time
import warnings

import pytest

from domains.tools import toolbox
from domains.registry import get_domain
from core.errors import ConfigError
from domains.tools.contract import call_text
from domains.tools.env import ToolEnv


def test_tool_env_passes_gymnasiums_env_checker():
    from gymnasium.utils.env_checker import check_env

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a checker warning fails the test
        check_env(ToolEnv(get_domain("tool_calc"), max_turns=2), skip_render_check=True)


def test_a_hanging_and_a_raising_tool_get_codes_and_the_episode_goes_on_to_its_answer(monkeypatch):
    def hang(args, ctx, timeout_s):
        time.sleep(30)

    def boom(args, ctx, timeout_s):
        raise RuntimeError("disk on fire")

    d = get_domain("tool_sql")
    task = d.make_task(4, 1)
    env = ToolEnv(d, max_turns=4, timeout_s=0.5)
    env.reset(options={"task": task})
    monkeypatch.setitem(env.runner.impls, "sql", hang)
    t0 = time.monotonic()
    obs, reward, term, trunc, info = env.step(call_text("sql", {"query": "select 1"}))
    assert time.monotonic() - t0 < 10 and not (term or trunc)
    assert '"code": "timeout"' in obs and info["turn"]["calls"][0]["error"] == "timeout"
    env.runner.impls["sql"] = boom
    obs, *_ = env.step(call_text("sql", {"query": "select 1"}))
    assert '"code": "tool_error"' in obs and "disk on fire" in obs
    env.runner.impls["sql"] = toolbox.IMPLEMENTATIONS["sql"]
    obs, *_ = env.step(d.reference_turns(task)[0])
    assert '"result"' in obs
    obs, reward, term, trunc, info = env.step(f"Answer: {task.answer}")
    assert term and not trunc and reward == 1.0  # 3 valid calls (a failing tool is not an invalid call)
    assert info["breakdown"]["error_codes"] == {"timeout": 1, "tool_error": 1}
    assert info["breakdown"]["ok_calls"] == 1 and info["breakdown"]["valid_calls"] == 3
    with pytest.raises(ConfigError, match="episode is over"):
        env.step("Answer: 1")


def test_the_turn_budget_truncates_and_scores_the_last_turn():
    d = get_domain("tool_calc")
    env = ToolEnv(d, max_turns=2)
    env.reset(seed=7)
    call = d.reference_turns(env.task)[0]
    assert env.step(call)[2:4] == (False, False)
    obs, reward, term, trunc, info = env.step(call + f"\nAnswer: {env.task.answer}")
    assert trunc and not term and reward == pytest.approx(1.0) and info["breakdown"]["turns"] == 2


def test_bad_use_is_refused_with_a_clear_error():
    with pytest.raises(ConfigError, match="max_turns"):
        ToolEnv(get_domain("tool_calc"), max_turns=0)
    with pytest.raises(ConfigError, match="sandbox"):
        ToolEnv(get_domain("tool_files"))
    env = ToolEnv(get_domain("tool_calc"))
    with pytest.raises(ConfigError, match="reset"):
        env.step("Answer: 1")
    with pytest.raises(ConfigError, match="tool_calc task"):
        env.reset(options={"task": get_domain("tool_sql").make_task(0, 1)})
    env.reset(seed=0)
    for weird in (None, 42, "\ud800" * 10, "<tool_call>" * 1000, "x" * 200_000):
        env.reset(seed=0)
        obs, reward, term, trunc, info = env.step(weird)
        assert 0.0 <= reward <= 1.0 and isinstance(obs, str)


def test_call_records_are_storable_whatever_the_model_wrote():
    """Lone surrogates written as JSON escapes, and huge arguments, are made safe before the
    record reaches the store and the page (pyarrow refuses surrogates)."""
    import json

    import pyarrow as pa

    from backend.views import calls_frame

    env = ToolEnv(get_domain("tool_calc"))
    env.reset(seed=1)
    text = ('<tool_call>{"name": "calc\\ud800", "arguments": {"x": "\\udc00"}}</tool_call>'
            + call_text("calculator", {"expression": "1+" * 20_000 + "1"}))
    _, _, _, _, info = env.step(text)
    stored = json.loads(json.dumps(info["turn"]))  # as the store writes and reads it
    frame = calls_frame({"turns": [stored]})
    pa.Table.from_pandas(frame)  # what st.dataframe does; raised UnicodeEncodeError before
    assert frame["error"].tolist() == ["unknown_tool", "schema_violation"]
    assert stored["calls"][1]["arguments"]["_chars"] > 40_000
