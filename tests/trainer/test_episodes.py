"""Multi-turn episodes in real Docker sandboxes: token layout, masks, rewards, faults.

A scripted engine (a real `RolloutEngine` that "samples" given texts through the tiny
model's tokenizer) plays reference solutions, so the test knows what the reward must be.
"""

import pytest

from domains.registry import get_domain
from trainer.episodes import SandboxRuntime, observation_ids, rollout_episodes
from trainer.groups import assign_advantages
from trainer.rollout.base import RolloutEngine
from trainer.types import Completion, LearnerBatch


class ScriptedEngine(RolloutEngine):
    """Answers each context with the next scripted reply of its episode (by call order)."""

    name = "scripted"

    def __init__(self, tokenizer, scripts: list[list[str]]):
        self.tok, self.scripts, self.turn = tokenizer, scripts, 0
        self.contexts: list[list[list[int]]] = []

    def generate(self, prompts, n, max_new_tokens, temperature=1.0, top_p=1.0):
        self.contexts.append([list(p) for p in prompts])
        active = [s for s in self.scripts if len(s) > self.turn]
        out = []
        for script in active[: len(prompts)]:
            ids = self.tok(script[self.turn], add_special_tokens=False)["input_ids"][:max_new_tokens - 1]
            ids.append(self.tok.eos_token_id)  # at most max_new_tokens, EOS included, as engines do
            out.append([Completion(ids, [-0.5] * len(ids), script[self.turn], "stop")])
        self.turn += 1
        return out

    def update_weights(self, named_tensors):
        raise NotImplementedError

    def score(self, prompt, completion):
        raise NotImplementedError


def docker_runtime(pool_size: int = 2, memory_mb: int = 256, command_timeout_s: float = 5.0,
                   max_turns: int = 6) -> SandboxRuntime:
    """A Docker `SandboxRuntime` from just the fields `SandboxRuntime.open` reads."""
    from types import SimpleNamespace

    return SandboxRuntime.open(SimpleNamespace(sandbox_backend="docker", sandbox_pool_size=pool_size,
                                               sandbox_memory_mb=memory_mb, command_timeout_s=command_timeout_s,
                                               max_turns=max_turns))


@pytest.fixture(scope="module")
def runtime(docker_engine):
    rt = docker_runtime()
    yield rt
    rt.close()


def test_observation_tokens_match_the_chat_template(tokenizer):
    messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": "task"}]
    prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    turn = "```bash\nls\n```"
    ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    ids += tokenizer(turn, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    ids += observation_ids(tokenizer, messages, "[exit code 0]\na.txt", after_eos=True)
    full = tokenizer.apply_chat_template(
        [*messages, {"role": "assistant", "content": turn}, {"role": "user", "content": "[exit code 0]\na.txt"}],
        add_generation_prompt=True, tokenize=False)
    assert tokenizer.decode(ids) == full


def test_reference_episode_scores_1_with_policy_tokens_masked_in(tokenizer, runtime):
    task = get_domain("terminal_sort_numbers").make_task(4, 1)
    ref = [f"```bash\n{c}\n```" for c in task.entry["reference"]]
    scripts = [ref + ["DONE"], ["I am not sure.", "DONE"]]  # group of 2: solved, and nothing done
    engine = ScriptedEngine(tokenizer, scripts)
    samples = rollout_episodes(engine, tokenizer, [task], 2, runtime, max_turns=6, max_new_tokens=200,
                               max_episode_tokens=2048, temperature=1.0, top_p=1.0, command_timeout_s=5.0)
    solved, idle = samples
    assert solved.reward == 1.0 and solved.fault is None and solved.breakdown["check"].startswith("PASS")
    assert idle.reward == 0.0 and idle.breakdown["invalid_turns"] == 1
    assert [t["action"] for t in solved.turns] == ["command"] * len(ref) + ["done"]
    assert all(t["exit_code"] == 0 for t in solved.turns[:-1])
    # policy tokens: exactly the scripted replies (+ EOS); observations are masked out
    comp = solved.completion
    policy = [t for t, m in zip(comp.token_ids, comp.mask) if m]
    want = [i for r in ref + ["DONE"] for i in tokenizer(r, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]]
    assert policy == want
    assert all(lp == 0.0 for lp, m in zip(comp.logprobs, comp.mask) if not m) and 0 in comp.mask
    # the engine saw prompt + everything so far at every turn
    assert engine.contexts[1][0] == solved.prompt_ids + comp.token_ids[: len(engine.contexts[1][0]) - len(solved.prompt_ids)]
    batch = LearnerBatch.from_samples(samples, tokenizer.pad_token_id)
    assert batch.completion_mask.sum().item() == sum(comp.mask) + sum(idle.completion.mask)
    assign_advantages(samples, 2, "grpo")
    assert solved.advantage > 0 > idle.advantage


def test_a_container_dying_mid_episode_is_a_harness_fault_not_a_zero(tokenizer, runtime, docker_engine):
    task = get_domain("terminal_count_matches").make_task(2, 1)

    class KillingEngine(ScriptedEngine):
        def generate(self, prompts, n, max_new_tokens, temperature=1.0, top_p=1.0):
            if self.turn == 1:  # kill every sandbox of the pool that is in use
                for sb in list(runtime.pool._all):
                    if sb not in list(runtime.pool._idle.queue):
                        docker_engine.containers.get(sb.id).kill()
            return super().generate(prompts, n, max_new_tokens, temperature, top_p)

    engine = KillingEngine(tokenizer, [["```bash\nls\n```", "```bash\nls\n```", "DONE"]] * 2)
    samples = rollout_episodes(engine, tokenizer, [task], 2, runtime, max_turns=4, max_new_tokens=50,
                               max_episode_tokens=1024, temperature=1.0, top_p=1.0, command_timeout_s=5.0)
    assert all(s.fault == "harness" and s.breakdown["fault"] == "harness" for s in samples)
    batch = LearnerBatch.from_samples(samples, tokenizer.pad_token_id)
    assert batch.completion_mask.sum().item() == 0  # nothing of a faulted episode is trained on
    assert assign_advantages(samples, 2, "grpo") == 1 and all(s.advantage == 0.0 for s in samples)
    assert runtime.pool.state()["replaced"] >= 2 and runtime.pool.state()["idle"] == runtime.pool.size


def test_an_episode_whose_opening_prompt_fills_the_window_is_a_context_fault_not_a_zero(tokenizer):
    # As a single-turn prompt over the window (trainer.scoring.rollout): never sent, so never
    # scored as the model's failure (accuracy, curriculum) nor trained on; before, it was
    # "played" with no turn and scored 0.
    from trainer.groups import collect_groups
    from trainer.metrics import rollout_metrics

    task = get_domain("tool_sql").make_task(5, 2)
    engine = ScriptedEngine(tokenizer, [["hello"] * 4] * 2)
    engine.window = 50  # shorter than the opening prompt
    samples = rollout_episodes(engine, tokenizer, [task], 2, None, max_turns=4, max_new_tokens=30,
                               max_episode_tokens=4096, temperature=1.0, top_p=1.0, command_timeout_s=5.0)
    assert engine.contexts == []  # nothing went to the engine
    assert all(len(s.prompt_ids) > 50 and s.fault == "context" and s.breakdown["fault"] == "context"
               for s in samples)
    assert "not sent" in samples[0].breakdown["truncated"]
    m = rollout_metrics(samples)
    assert m["context/over_window"] == 2 and m["sandbox/harness_faults"] == 0 and "accuracy/tool_sql" not in m
    from trainer.config import parse_config

    cfg = parse_config({"name": "w", "domains": ["tool_sql"], "steps": 1, "prompts_per_step": 1, "group_size": 2})
    assert collect_groups(cfg, __import__("random").Random(0), lambda tasks: samples).batch == []
