"""Streaming verification: the engine hands each prompt's group over as soon as it is
done (`RolloutEngine.generate`'s ``on_group``), and `trainer.scoring.rollout` scores it, or
submits its sandbox jobs, while other groups still generate. Real engines on the tiny
model, real Docker sandboxes running humaneval's tests."""

from __future__ import annotations

import threading

import pytest

from domains.registry import get_domain
from tests.trainer.test_episodes import docker_runtime
from trainer.prompts import render_prompt
from trainer.scoring import rollout
from trainer.rollout import open_engine


def test_vllm_hands_over_each_group_while_the_others_generate(tiny_model_dir, tokenizer):
    pytest.importorskip("vllm")
    # two sequences at a time: the four groups of two finish one after another
    engine = open_engine("vllm", tiny_model_dir, seed=0, gpu_memory_utilization=0.05, max_num_seqs=2)
    try:
        tasks = [get_domain("basic_arithmetic").make_task(s) for s in range(4)]
        prompts = [render_prompt(tokenizer, t)[1] for t in tasks]
        seen: list[tuple[int, list, bool]] = []

        def on_group(i, group):
            seen.append((i, group, engine._llm.llm_engine.has_unfinished_requests()))

        out = engine.generate(prompts, n=2, max_new_tokens=12, temperature=1.0, on_group=on_group)
        assert sorted(i for i, _, _ in seen) == [0, 1, 2, 3]  # each group once
        assert all(group is out[i] for i, group, _ in seen)  # exactly what generate returns
        assert all(len(g) == 2 and all(len(c.logprobs) == len(c.token_ids) > 0 for c in g) for g in out)
        assert seen[0][2], "the first group came only after every request had finished"

        def failing(i, group):
            raise RuntimeError("verifier crashed")

        with pytest.raises(RuntimeError, match="verifier crashed"):
            engine.generate(prompts, n=2, max_new_tokens=12, on_group=failing)
        assert not engine._llm.llm_engine.has_unfinished_requests()  # the rest was aborted
        assert len(engine.generate(prompts[:1], n=2, max_new_tokens=4)[0]) == 2  # and the engine still works
    finally:
        engine.close()


def test_sandbox_verification_starts_before_generation_ends(tiny_model_dir, tokenizer, docker_engine):
    engine = open_engine("hf", tiny_model_dir, seed=0, gen_batch=1)  # one prompt per generate call
    runtime = docker_runtime(pool_size=2)
    events: list[str] = []
    lock = threading.Lock()
    submit, generate = runtime.scheduler.submit, engine.generate

    def logged_submit(job):
        with lock:
            events.append("submit")
        return submit(job)

    def logged_generate(prompts, **kw):
        on_group = kw.pop("on_group")

        def relay(i, group):
            with lock:
                events.append(f"group {i}")
            on_group(i, group)

        out = generate(prompts, on_group=relay, **kw)
        events.append("generated")
        return out

    runtime.scheduler.submit, engine.generate = logged_submit, logged_generate
    try:
        tasks = [get_domain("humaneval").make_task(s) for s in range(3)]
        timings: dict[str, float] = {}
        samples = rollout(engine, tokenizer, tasks, group_size=2, max_new_tokens=16, temperature=1.0, top_p=1.0,
                          runtime=runtime, timings=timings)
    finally:
        runtime.close()
        engine.close()
    assert events.index("submit") < events.index("group 2") < events.index("generated")
    assert events.count("submit") == 6
    assert [(s.group, s.index) for s in samples] == [(g, i) for g in range(3) for i in range(2)]
    for s in samples:  # scored by the tests in a sandbox: the tiny model's code fails them, no harness fault
        assert s.fault is None and s.reward == 0.0 and s.breakdown["error"] is not None, s.breakdown
        assert isinstance(s.breakdown["exit_code"], int)
    assert timings["verify"] >= 0.0


def test_groups_an_engine_never_hands_over_are_scored_after_generation(tiny_model_dir, tokenizer):
    engine = open_engine("hf", tiny_model_dir, seed=0)
    generate = engine.generate
    engine.generate = lambda prompts, on_group=None, **kw: generate(prompts, **kw)  # ignores on_group
    try:
        tasks = [get_domain("basic_arithmetic").make_task(s) for s in range(3)]
        samples = rollout(engine, tokenizer, tasks, group_size=2, max_new_tokens=8, temperature=1.0, top_p=1.0)
    finally:
        engine.close()
    assert [(s.group, s.index) for s in samples] == [(g, i) for g in range(3) for i in range(2)]
    assert all(s.breakdown and "format" in s.breakdown for s in samples)  # every sample scored
