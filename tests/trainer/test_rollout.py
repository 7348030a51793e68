"""Rollout engines (vLLM and HF) on the tiny model: shapes, determinism, logprob parity
with a transformers forward pass, and in-place weight sync.

The vLLM engine is created once per module (start-up takes 10-40 s on CPU); the weight
sync test restores the original weights when it is done.
"""

import pytest
import torch

from core.errors import EngineError
from trainer.rollout import open_engine

TOL = 1e-3  # max abs logprob difference (nats) in float32


@pytest.fixture(scope="module")
def vllm_engine(tiny_model_dir):
    pytest.importorskip("vllm")
    engine = open_engine("vllm", tiny_model_dir, seed=0, gpu_memory_utilization=0.05)
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def hf_engine(tiny_model_dir):
    engine = open_engine("hf", tiny_model_dir, seed=0)
    yield engine
    engine.close()


@pytest.fixture(params=["vllm", "hf"])
def engine(request):
    return request.getfixturevalue(f"{request.param}_engine")


@pytest.fixture(scope="module")
def prompts(tokenizer):
    out = []
    for q in ["What is 12 + 7?", 'How many times does the letter "r" appear in "strawberry"?']:
        text = tokenizer.apply_chat_template(
            [{"role": "user", "content": q}], add_generation_prompt=True, tokenize=False
        )
        out.append(tokenizer(text, add_special_tokens=False)["input_ids"])
    return out


def reference_logprobs(model, prompt, completion, temperature=1.0, top_p=1.0):
    """log p(completion | prompt) from a plain transformers forward pass, (L,) float32: of
    softmax(logits / temperature), renormalised over the top-p nucleus (the smallest set of
    most likely tokens whose mass reaches top_p) when top_p < 1."""
    ids = torch.tensor([prompt + completion])
    with torch.no_grad():
        logits = model(ids).logits[0, :-1].float() / temperature
    if top_p < 1.0:
        probs, order = logits.softmax(-1).sort(-1, descending=True)
        outside = probs.cumsum(-1) - probs >= top_p  # the mass above the token already reaches top_p
        logits = logits.scatter(-1, order, logits.gather(-1, order).masked_fill(outside, float("-inf")))
    logp = logits.log_softmax(-1)
    return logp[len(prompt) - 1 :].gather(-1, torch.tensor(completion)[:, None])[:, 0]


@pytest.fixture()
def ref_model(tiny_model_dir):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).eval()


def test_generate_n_completions_with_logprobs(engine, prompts, tokenizer):
    groups = engine.generate(prompts, n=3, max_new_tokens=8)
    assert len(groups) == len(prompts)
    for group in groups:
        assert len(group) == 3
        for c in group:
            assert 1 <= len(c.token_ids) <= 8
            assert len(c.logprobs) == len(c.token_ids)
            assert all(lp <= 0.0 for lp in c.logprobs)
            assert all(0 <= t < len(tokenizer) for t in c.token_ids)
            assert c.finish_reason in ("stop", "length")
            if c.finish_reason == "length":
                assert len(c.token_ids) == 8
            else:
                assert c.token_ids[-1] == tokenizer.eos_token_id
            assert isinstance(c.text, str)


def test_greedy_is_deterministic(engine, prompts):
    a = engine.generate(prompts, n=2, max_new_tokens=10, temperature=0.0)
    b = engine.generate(prompts, n=1, max_new_tokens=10, temperature=0.0)
    for ga, gb in zip(a, b):
        assert ga[0].token_ids == ga[1].token_ids == gb[0].token_ids


@pytest.mark.parametrize("temperature, top_p", [(0.0, 1.0), (1.0, 1.0), (0.7, 1.0), (1.3, 1.0), (0.7, 0.9)])
def test_sampling_logprobs_are_of_the_distribution_sampled_from(engine, prompts, ref_model, temperature, top_p):
    # Logprobs are of softmax(logits / T), over the top-p nucleus when top_p < 1: what the
    # engine sampled from, and at top_p 1 what the learner computes at the run's T. Greedy
    # (T = 0) gives the raw ones.
    groups = engine.generate(prompts, n=2, max_new_tokens=12, temperature=temperature, top_p=top_p)
    for prompt, group in zip(prompts, groups):
        for c in group:
            ref = reference_logprobs(ref_model, prompt, c.token_ids, temperature or 1.0, top_p)
            assert (torch.tensor(c.logprobs) - ref).abs().max().item() < TOL
            if temperature not in (0.0, 1.0):  # and not the raw ones
                raw = reference_logprobs(ref_model, prompt, c.token_ids)
                assert (torch.tensor(c.logprobs) - raw).abs().max().item() > 10 * TOL


def test_score_matches_forward(engine, prompts, ref_model):
    completion = [300, 301, 302, 303, 2]
    ref = reference_logprobs(ref_model, prompts[0], completion)
    got = torch.tensor(engine.score(prompts[0], completion))
    assert got.shape == ref.shape
    assert (got - ref).abs().max().item() < TOL


def test_update_weights_in_place(engine, prompts, ref_model):
    original = {k: v.clone() for k, v in ref_model.state_dict().items()}
    prompt, completion = prompts[1], [400, 401, 402, 403, 404, 405]
    before = torch.tensor(engine.score(prompt, completion))

    gen = torch.Generator().manual_seed(1)
    perturbed = {k: v.clone() for k, v in original.items()}
    perturbed["model.layers.1.mlp.down_proj.weight"] *= 1.5
    q = perturbed["model.layers.0.self_attn.q_proj.weight"]  # fused into qkv by vLLM
    q += 0.05 * torch.randn(q.shape, generator=gen)
    ref_model.load_state_dict(perturbed)
    expected = reference_logprobs(ref_model, prompt, completion)
    try:
        engine.update_weights(perturbed.items())
        after = torch.tensor(engine.score(prompt, completion))
        assert (after - expected).abs().max().item() < TOL
        assert (after - before).abs().max().item() > 10 * TOL
        # sampling uses the new weights too (prefix cache was reset)
        (group,) = engine.generate([prompt], n=2, max_new_tokens=8)
        for c in group:
            ref = reference_logprobs(ref_model, prompt, c.token_ids)
            assert (torch.tensor(c.logprobs) - ref).abs().max().item() < TOL
    finally:
        engine.update_weights(original.items())
    assert (torch.tensor(engine.score(prompt, completion)) - before).abs().max().item() < TOL


def test_group_samples_reusing_a_cached_prompt_keep_raw_logprobs(vllm_engine, tokenizer, ref_model):
    # A prompt several KV blocks long (default block_size), sampled 8 times in one call and
    # once more in a second call: later samples reuse the prompt's cached blocks (prefix
    # caching shares full blocks only), and their logprobs must still be the learner's.
    from trainer.rollout.vllm_engine import DEFAULT_BLOCK_SIZE

    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": "Add up 3, 14, 15, 92, 65, 35, 89, 79, 32, 38 and 46. " * 3}],
        add_generation_prompt=True, tokenize=False)
    prompt = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert len(prompt) > 2 * DEFAULT_BLOCK_SIZE
    (group,) = vllm_engine.generate([prompt], n=8, max_new_tokens=10)
    (again,) = vllm_engine.generate([prompt], n=1, max_new_tokens=10)
    assert len(group) == 8
    for c in group + again:
        ref = reference_logprobs(ref_model, prompt, c.token_ids)
        assert (torch.tensor(c.logprobs) - ref).abs().max().item() < TOL
    # the score path (prompt logprobs) is not served stale values from the cached prefix
    got = torch.tensor(vllm_engine.score(prompt, group[0].token_ids))
    assert (got - reference_logprobs(ref_model, prompt, group[0].token_ids)).abs().max().item() < TOL


@pytest.mark.parametrize("option", ["block_size", "max_num_seqs", "max_num_batched_tokens"])
def test_vllm_engine_rejects_non_positive_scheduler_options(tiny_model_dir, option):
    pytest.importorskip("vllm")
    from trainer.rollout.vllm_engine import VLLMEngine

    with pytest.raises(EngineError, match=option):
        VLLMEngine(tiny_model_dir, **{option: 0})


def test_vllm_engine_refuses_tensor_parallelism_it_cannot_run(tiny_model_dir):
    pytest.importorskip("vllm")
    from vllm.platforms import current_platform

    from trainer.rollout.vllm_engine import VLLMEngine

    with pytest.raises(EngineError, match="tensor_parallel_size must be a positive integer"):
        VLLMEngine(tiny_model_dir, tensor_parallel_size=0)
    want = "runs on the CPU; set tensor_parallel_size: 1" if current_platform.is_cpu() else "GPUs are visible"
    with pytest.raises(EngineError, match=want):
        VLLMEngine(tiny_model_dir, tensor_parallel_size=64)


def test_hf_engine_rejects_unknown_weight_names(hf_engine):
    with pytest.raises(EngineError, match="lacks"):
        hf_engine.update_weights([("model.no_such.weight", torch.zeros(2))])


def test_open_engine_unknown_kind(tiny_model_dir):
    with pytest.raises(EngineError, match="unknown rollout engine"):
        open_engine("tgi", tiny_model_dir)


def test_the_kv_cache_is_sized_to_the_work_not_to_the_machine(vllm_engine, tiny_model_dir):
    import json

    import psutil

    from trainer.rollout.vllm_engine import DEFAULT_KV_SEQUENCES, kv_bytes_per_token

    c = json.loads((tiny_model_dir / "config.json").read_text())
    head_dim = c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]
    want = 2 * c["num_hidden_layers"] * c["num_key_value_heads"] * head_dim * 4
    assert kv_bytes_per_token(tiny_model_dir, "float32") == want
    assert kv_bytes_per_token(tiny_model_dir, "bfloat16") == want // 2
    cache = vllm_engine._llm.llm_engine.vllm_config.cache_config
    sized = DEFAULT_KV_SEQUENCES * vllm_engine.max_model_len * want
    assert cache.kv_cache_memory_bytes == min(sized, int(0.05 * psutil.virtual_memory().total))
    with pytest.raises(EngineError, match="at least one sequence"):
        open_engine("vllm", tiny_model_dir, max_model_len=256, kv_cache_tokens=100)
    with pytest.raises(EngineError, match="config.json"):
        kv_bytes_per_token(tiny_model_dir / "missing", "float32")
    with pytest.raises(EngineError, match="set vllm_memory_fraction to at least"):  # before vLLM is asked
        open_engine("vllm", tiny_model_dir, max_model_len=256, gpu_memory_utilization=1e-6)


def test_a_memory_fraction_too_small_for_one_sequence_is_refused_with_the_fraction_that_fits(tiny_model_dir,
                                                                                            tmp_path):
    from backend.runs import run_foreground
    from backend.store import Store
    from core.errors import ConfigError
    from trainer.config import parse_config
    from trainer.rollout.base import kv_bytes_per_token, kv_memory_problem

    per_token = kv_bytes_per_token(tiny_model_dir, "float32")
    ram = 1 << 30
    assert kv_memory_problem(0.5, 1000, tiny_model_dir, "float32", ram) is None
    need = 1024 * per_token  # 1,000 tokens in whole 32-token blocks
    problem = kv_memory_problem(need / ram / 2, 1000, tiny_model_dir, "float32", ram)
    least = float(problem.rsplit("at least ", 1)[1])
    assert need / ram <= least < need / ram + 0.001
    assert kv_memory_problem(least, 1000, tiny_model_dir, "float32", ram) is None
    # a window whose cache can't fit at the largest fraction the config allows: no fraction is named
    from trainer.config import RunConfig
    from trainer.rollout.base import MAX_MEMORY_FRACTION

    bound = next(m.le for m in RunConfig.model_fields["vllm_memory_fraction"].metadata if hasattr(m, "le"))
    assert MAX_MEMORY_FRACTION == bound
    tiny_ram = need  # one window's cache is the whole RAM
    problem = kv_memory_problem(0.9, 1000, tiny_model_dir, "float32", tiny_ram)
    assert "can't fit this machine's RAM" in problem and "at least" not in problem
    cfg = parse_config({"model": str(tiny_model_dir), "steps": 1, "domains": ["basic_arithmetic"],
                        "prompts_per_step": 1, "group_size": 2, "vllm_memory_fraction": 1e-6,
                        "output_dir": str(tmp_path / "out")})
    with Store(tmp_path / "r.db") as store:
        with pytest.raises(ConfigError, match="vllm_memory_fraction 1e-06 .* set vllm_memory_fraction to at least"):
            run_foreground(cfg, store)
        assert store.list_runs() == []  # refused before any run row was written
    # engines on a Ray cluster's nodes: their RAM, not this machine's (each engine checks its own)
    from trainer.loop import check_model_fits

    remote = cfg.model_copy(update={"scheduler": "ray", "ray_address": "auto"})
    assert check_model_fits(remote) >= 1


def test_vllm_engine_can_restart_after_close(vllm_engine, tiny_model_dir, prompts):
    # Runs last in this module: close the shared engine, then start a fresh one (eager:
    # skips a second torch.compile; the shared engine covers the compiled path).
    vllm_engine.close()
    with open_engine("vllm", tiny_model_dir, seed=0, enforce_eager=True,
                     gpu_memory_utilization=0.05) as fresh:
        (group,) = fresh.generate(prompts[:1], n=1, max_new_tokens=4)
        assert len(group[0].token_ids) == 4 or group[0].finish_reason == "stop"


def test_the_rotary_reload_warning_is_dropped_and_nothing_else():
    import logging

    pytest.importorskip("vllm")
    from trainer.rollout.vllm_engine import RELOAD_LOGGER

    logger = logging.getLogger(RELOAD_LOGGER)

    def passes(msg, args):
        return all(f.filter(logger.makeRecord(RELOAD_LOGGER, logging.WARNING, "f", 1, msg, args, None))
                   for f in logger.filters)

    assert not passes("%s: Failed to load weights", ("RotaryEmbedding",))
    assert passes("%s: Failed to load weights", ("QKVParallelLinear",))  # a real failure still shows
    assert passes("something else", ())
