"""End-of-sequence ids beyond the tokenizer's eos: a model's ``generation_config`` may name
more (Llama 3's ``<|eot_id|>`` beside ``<|end_of_text|>``, Qwen's ``<|endoftext|>``). Both
engines stop at each of them with finish reason "stop", the id kept in the tokens and left
out of the text, and a multi-turn episode treats a turn ending in any of them as ended.

The tiny model is random, so the test makes one of the tokens it greedily emits an extra
eos id (in a copy of the checkpoint) and checks that greedy generation stops right there.
"""

import json
import shutil

import pytest

from trainer.rollout import open_engine

MAX_NEW = 12


@pytest.fixture(scope="module")
def prompts(tokenizer):
    out = []
    for q in ["What is 12 + 7?", 'How many times does the letter "r" appear in "strawberry"?']:
        text = tokenizer.apply_chat_template([{"role": "user", "content": q}], add_generation_prompt=True,
                                             tokenize=False)
        out.append(tokenizer(text, add_special_tokens=False)["input_ids"])
    return out


@pytest.fixture(scope="module")
def greedy(tiny_model_dir, prompts):
    """The tiny model's greedy completions of `prompts` (its own generation config)."""
    with open_engine("hf", tiny_model_dir) as engine:
        return [g[0].token_ids for g in engine.generate(prompts, n=1, max_new_tokens=MAX_NEW, temperature=0.0)]


@pytest.fixture(scope="module")
def extra_eos(tiny_model_dir, greedy, tokenizer, tmp_path_factory):
    """(model dir, extra eos id, k): a copy of the tiny model whose generation config adds the
    token the first prompt's greedy completion emits at position k (k >= 2, the token's first
    appearance there, and absent from the second completion) to its eos ids."""
    first, second = greedy
    k = next(i for i in range(2, len(first))
             if first[i] not in first[:i] and first[i] not in second and first[i] != tokenizer.eos_token_id)
    out = tmp_path_factory.mktemp("extra-eos") / "model"
    shutil.copytree(tiny_model_dir, out)
    config = json.loads((out / "generation_config.json").read_text())
    config["eos_token_id"] = [tokenizer.eos_token_id, first[k]]
    (out / "generation_config.json").write_text(json.dumps(config))
    return out, first[k], k


@pytest.mark.parametrize("kind", ["hf", "vllm"])
def test_engine_stops_at_every_eos_id_of_the_generation_config(kind, extra_eos, prompts, greedy, tokenizer):
    # vLLM reads generation_config.json itself (generation_config="auto"): parity with HF.
    model_dir, stop_id, k = extra_eos
    kw = {"seed": 0, "enforce_eager": True, "gpu_memory_utilization": 0.05} if kind == "vllm" else {}
    if kind == "vllm":
        pytest.importorskip("vllm")
    with open_engine(kind, model_dir, **kw) as engine:
        (a, a2), (b, _) = engine.generate(prompts, n=2, max_new_tokens=MAX_NEW, temperature=0.0)
    assert a.token_ids == a2.token_ids == greedy[0][: k + 1] and a.token_ids[-1] == stop_id
    assert a.finish_reason == "stop" and len(a.logprobs) == k + 1
    assert a.text == tokenizer.decode(greedy[0][:k], skip_special_tokens=True)  # the stop token's text left out
    assert b.token_ids == greedy[1]  # the other prompt never emits it: unchanged


def test_eos_token_ids_take_an_int_or_a_list_and_drop_repeats(tokenizer, extra_eos):
    from types import SimpleNamespace

    from transformers import GenerationConfig

    from trainer.rollout.hf_engine import eos_token_ids

    eos = tokenizer.eos_token_id
    model_dir, stop_id, _ = extra_eos
    assert eos_token_ids(tokenizer, GenerationConfig.from_pretrained(model_dir)) == [eos, stop_id]
    assert eos_token_ids(tokenizer, SimpleNamespace(eos_token_id=None)) == [eos]
    assert eos_token_ids(tokenizer, SimpleNamespace(eos_token_id=eos)) == [eos]
    assert eos_token_ids(tokenizer, SimpleNamespace(eos_token_id=[7, eos, 9])) == [eos, 7, 9]
