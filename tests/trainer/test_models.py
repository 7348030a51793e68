"""Model names and paths: `resolve_model` errors, and (slow) the real SmolLM2 fetch."""

import time

import pytest

from core.errors import ModelNotFound
from trainer.models import MODELS, fetch_model, resolve_model
from core.paths import model_cache_dir


def test_cache_dir_follows_env(monkeypatch, tmp_path):
    monkeypatch.setenv("RLWB_CACHE", str(tmp_path))
    assert model_cache_dir() == tmp_path


def test_known_name_not_fetched_says_how_to_fetch(monkeypatch, tmp_path):
    monkeypatch.setenv("RLWB_CACHE", str(tmp_path))
    with pytest.raises(ModelNotFound) as e:
        resolve_model("smollm2-135m")
    assert str(e.value) == (
        "model 'smollm2-135m' is not fetched yet; run `rlwb model fetch smollm2-135m`"
    )


def test_unknown_name_or_missing_path(tmp_path):
    missing = tmp_path / "nope"
    with pytest.raises(ModelNotFound, match="neither a known model name") as e:
        resolve_model(str(missing))
    assert str(missing) in str(e.value) and "smollm2-135m" in str(e.value)


def test_directory_without_config(tmp_path):
    with pytest.raises(ModelNotFound, match="no config.json"):
        resolve_model(str(tmp_path))


def test_checkpoint_directory_resolves_to_itself(tiny_model_dir):
    assert resolve_model(str(tiny_model_dir)) == tiny_model_dir


def test_fetch_unknown_name():
    with pytest.raises(ModelNotFound, match="unknown model"):
        fetch_model("gpt-5")


@pytest.mark.slow
def test_fetch_smollm2_and_answer():
    # Uses the real cache: converts once (~25 s), instant afterwards.
    from trainer.rollout import open_engine

    path = fetch_model("smollm2-135m")
    t0 = time.perf_counter()
    assert fetch_model("smollm2-135m") == path == resolve_model("smollm2-135m")
    assert time.perf_counter() - t0 < 1.0  # idempotent: no second conversion
    assert MODELS["smollm2-135m"].name == path.name
    with open_engine("hf", path) as engine:
        tok = engine.tokenizer
        assert tok.chat_template
        text = tok.apply_chat_template(
            [{"role": "user", "content": "What is 12 + 7?"}],
            add_generation_prompt=True, tokenize=False,
        )
        ids = tok(text, add_special_tokens=False)["input_ids"]
        (group,) = engine.generate([ids], n=1, max_new_tokens=24, temperature=0.0)
    answer = group[0].text
    print("SmolLM2 says:", repr(answer))
    assert any(ch.isdigit() for ch in answer)
