"""Tool-use episodes through the trainer's episode loop: token layout (tool observations
masked out, rendered as the chat template renders role "tool"), rewards, call statistics,
and the tool_files domain in a real Docker sandbox."""

import json

import pytest

from domains.registry import get_domain
from trainer.episodes import episode_prompt, observation_ids, rollout_episodes
from trainer.groups import assign_advantages
from trainer.metrics import rollout_metrics

from tests.trainer.test_episodes import ScriptedEngine


def _play(tokenizer, task, scripts, runtime=None, max_turns=4):
    engine = ScriptedEngine(tokenizer, scripts)
    samples = rollout_episodes(engine, tokenizer, [task], len(scripts), runtime, max_turns=max_turns,
                               max_new_tokens=300, max_episode_tokens=4096, temperature=1.0, top_p=1.0,
                               command_timeout_s=10.0)
    return engine, samples


def test_sql_reference_episode_scores_1_and_bad_calls_get_codes(tokenizer):
    d = get_domain("tool_sql")
    task = d.make_task(5, 2)
    ref = d.reference_turns(task)
    bad = ['<tool_call>{"name": "sql", "arguments": {"sql": "select 1"}}</tool_call>',
           '<tool_call>{"name": "python", "arguments": {"code": "1"}}</tool_call> and <tool_call>{oops</tool_call>',
           "Answer: 0"]
    engine, (solved, wrong) = _play(tokenizer, task, [ref, bad])
    assert solved.reward == 1.0 and solved.breakdown["call_validity"] == 1.0 and solved.fault is None
    assert [t["action"] for t in solved.turns] == ["tool_call", "answer"]
    call = solved.turns[0]["calls"][0]
    assert call["name"] == "sql" and call["error"] is None and task.answer.split(",")[0] in call["observation"]
    assert wrong.reward == pytest.approx(0.1)  # an answer line, but wrong, and no valid call
    assert wrong.breakdown["error_codes"] == {"schema_violation": 1, "unknown_tool": 1, "invalid_json": 1}
    assert wrong.breakdown["calls"] == 3 and wrong.breakdown["valid_calls"] == 0
    # policy tokens are the scripted replies; the tool observations between them are masked out
    comp = solved.completion
    policy = [t for t, m in zip(comp.token_ids, comp.mask) if m]
    want = [i for r in ref for i in tokenizer(r, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]]
    assert policy == want and 0 in comp.mask
    # what the learner sees equals the chat template's rendering with a "tool" message
    messages, kw, role, where = episode_prompt(tokenizer, task)
    obs = "\n".join(json.dumps({"call": 0, "name": "sql", "result": solved.turns[0]["calls"][0]["observation"]},
                               ensure_ascii=False) for _ in [0])
    full = tokenizer.apply_chat_template([*messages, {"role": "assistant", "content": ref[0]},
                                          {"role": "tool", "content": obs}], add_generation_prompt=True,
                                         tokenize=False, **kw)
    assert role == "tool" and where in ("chat_template", "system_message")
    assert tokenizer.decode(solved.prompt_ids + comp.token_ids[: len(engine.contexts[1][0]) - len(solved.prompt_ids)]) == full
    assign_advantages([solved, wrong], 2, "grpo")
    assert solved.advantage > 0 > wrong.advantage
    m = rollout_metrics([solved, wrong])
    assert m["tools/call_validity/tool_sql"] == pytest.approx(1 / 4)
    assert m["tools/calls_per_episode/tool_sql"] == 2.0
    assert m["tools/errors/unknown_tool"] == 1.0


def test_an_episode_that_never_answers_is_truncated_and_scored(tokenizer):
    d = get_domain("tool_calc")
    task = d.make_task(2, 1)
    call = d.reference_turns(task)[0]
    _, [s] = _play(tokenizer, task, [[call, call, call]], max_turns=3)
    assert s.completion.finish_reason == "length" and s.reward == pytest.approx(0.1)  # valid calls, no answer
    assert s.breakdown["calls"] == 3 and s.breakdown["call_validity"] == 1.0 and len(s.turns) == 3


def test_observation_segment_for_tools_matches_the_template(tokenizer):
    task = get_domain("tool_calc").make_task(0, 1)
    messages, kw, role, _ = episode_prompt(tokenizer, task)
    prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False, **kw)
    turn = "<tool_call>{}</tool_call>"
    ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    ids += tokenizer(turn, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    ids += observation_ids(tokenizer, messages, '{"call": 0}', True, role=role, template_kw=kw)
    full = tokenizer.apply_chat_template([*messages, {"role": "assistant", "content": turn},
                                          {"role": "tool", "content": '{"call": 0}'}], add_generation_prompt=True,
                                         tokenize=False, **kw)
    assert tokenizer.decode(ids) == full


def test_files_task_in_docker_reference_passes_and_a_wrong_file_fails(tokenizer, docker_engine):
    from tests.trainer.test_episodes import docker_runtime

    rt = docker_runtime(command_timeout_s=10.0, max_turns=4)
    try:
        d = get_domain("tool_files")
        task = d.make_task(7, 3)
        wrong = ['<tool_call>{"name": "write_file", "arguments": {"path": "result.txt", "content": "1.00"}}</tool_call>',
                 "DONE"]
        _, (solved, bad) = _play(tokenizer, task, [d.reference_turns(task), wrong], runtime=rt)
    finally:
        rt.close()
    assert solved.reward == 1.0 and solved.breakdown["extracted"] == task.answer, solved.turns
    assert bad.reward == pytest.approx(0.2) and bad.breakdown["correct"] == 0.0  # file written, valid call


def test_a_turn_ending_in_another_eos_id_is_laid_out_as_one_ending_in_the_tokenizers(tokenizer):
    # A model whose tokenizer's eos (<|endoftext|> here) is not the token that ends a chat
    # turn (<|im_end|>, one of its generation config's eos ids, where the engines stop too):
    # the observation that follows must not close the turn a second time.
    import copy

    other = copy.deepcopy(tokenizer)
    other.eos_token = "<|endoftext|>"
    assert other.eos_token_id != tokenizer.eos_token_id
    d = get_domain("tool_calc")
    task = d.make_task(2, 1)
    episodes = []
    for tok in (tokenizer, other):
        engine = ScriptedEngine(tokenizer, [d.reference_turns(task)])  # turns end at <|im_end|>, "stop"
        [s] = rollout_episodes(engine, tok, [task], 1, None, max_turns=4, max_new_tokens=300,
                               max_episode_tokens=4096, temperature=1.0, top_p=1.0, command_timeout_s=10.0)
        episodes.append(s)
    same, other_eos = episodes
    assert same.reward == other_eos.reward == 1.0 and len(same.turns) == 2
    assert other_eos.completion.token_ids == same.completion.token_ids
    assert other_eos.completion.mask == same.completion.mask
