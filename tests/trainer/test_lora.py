"""LoRA runs (lora_rank > 0): only the adapters train, the reference is the base with the
adapter off, the weight sync sends the merged weights (the engine's logprobs match the
learner's after a step), checkpoints hold merged HF weights and the adapter, and a resumed
learner continues from the adapter."""

import pytest
import torch

from core.errors import ConfigError
from trainer.config import RunConfig
from trainer.types import Completion, LearnerBatch, Sample


def _cfg(tiny_model_dir, **kw) -> RunConfig:
    return RunConfig(**{"domains": ["basic_arithmetic"], "prompts_per_step": 2, "group_size": 2,
                        "micro_batch_size": 2, "learning_rate": 1e-2, "kl_coef": 0.1, "lora_rank": 4,
                        "model": str(tiny_model_dir), **kw})


def _batch(seed: int = 0) -> LearnerBatch:
    g = torch.Generator().manual_seed(seed)
    samples = []
    for group in range(2):
        prompt = torch.randint(3, 1000, (6,), generator=g).tolist()
        for i in range(2):
            ids = torch.randint(3, 1000, (5,), generator=g).tolist()
            samples.append(Sample("basic_arithmetic", group, group, i, "p", prompt,
                                  Completion(ids, (-torch.rand(5, generator=g) - 1).tolist(), "x", "length"),
                                  advantage=1.0 if i == 0 else -1.0))
    return LearnerBatch.from_samples(samples, pad_id=0)


@pytest.fixture
def stepped(tiny_model_dir):
    """A LoRA learner after two optimizer steps, and the base weights it started from (one per
    test: closing the in-process vLLM engine of one test ends the torch.distributed world a
    learner made before it, which DeepSpeed's optimizer checkpoint needs)."""
    from transformers import AutoModelForCausalLM

    from trainer.learner import DeepSpeedLearner

    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).state_dict()
    learner = DeepSpeedLearner(tiny_model_dir, _cfg(tiny_model_dir))
    first = learner.step(_batch(0))
    learner.step(_batch(1))
    yield learner, base, first
    learner.close()


def test_only_the_adapters_train_and_the_reference_is_the_base(stepped):
    learner, base, first = stepped
    assert learner.ref_model is None  # no second copy of the weights
    assert first["kl"] == pytest.approx(0.0, abs=1e-7)  # B starts at 0: the policy is the base at step 1
    trainable = sum(p.numel() for p in learner.module.parameters() if p.requires_grad)
    total = sum(p.numel() for p in learner.module.parameters())
    assert 0 < trainable < 0.2 * total
    merged = dict(learner.named_weights())
    assert set(merged) == set(base)  # plain HF names, no adapter tensors
    frozen = {k: v for k, v in learner.module.get_base_model().state_dict().items() if ".lora_" not in k}
    for k, v in frozen.items():  # the base weights did not move
        assert torch.equal(v.cpu(), base[k.replace(".base_layer.", ".")]), k
    moved = [k for k in base if not torch.equal(merged[k].cpu(), base[k])]
    assert moved and all("proj" in k for k in moved)  # the adapted layers' merged weights changed


def test_merged_weights_are_made_one_at_a_time(stepped, monkeypatch):
    """The sync's memory: a merged weight is made when it is consumed, so a consumer that
    doesn't keep them (vLLM's in-place reload) holds one beside the model, not a copy of it."""
    from peft.tuners.lora import Linear

    learner, _, _ = stepped
    made = []
    real = Linear.get_delta_weight
    monkeypatch.setattr(Linear, "get_delta_weight", lambda self, name: made.append(1) or real(self, name))
    weights = learner.named_weights()
    assert made == []  # nothing made before it is asked for
    seen = 0
    for name, _ in weights:
        seen += 1
        assert len(made) <= seen  # never ahead of the consumer
    adapted = sum(1 for m in learner.module.modules() if isinstance(m, Linear))
    assert len(made) == adapted > 0


def test_the_engine_scores_like_the_learner_after_the_merged_sync(stepped, tiny_model_dir, tmp_path):
    pytest.importorskip("vllm")
    from trainer.rollout import open_engine

    learner, _, _ = stepped
    batch = _batch(2)
    want = learner.logprobs(batch)
    prompt_len = 6
    with open_engine("vllm", tiny_model_dir, seed=0, gpu_memory_utilization=0.05, enforce_eager=True) as engine:
        ids = batch.input_ids[0].tolist()
        before = torch.tensor(engine.score(ids[:prompt_len], ids[prompt_len:11]))
        engine.update_weights(learner.named_weights())
        after = torch.tensor(engine.score(ids[:prompt_len], ids[prompt_len:11]))
    assert (after - want[0, prompt_len:11]).abs().max().item() < 1e-3
    assert (after - before).abs().max().item() > 1e-2  # the sync changed what the engine computes
    # the engine's close ended the torch.distributed world this learner was made in: its optimizer
    # checkpoint says so and writes nothing, its weights alone still save
    with pytest.raises(RuntimeError, match="open the rollout engine before the learner"):
        learner.save_checkpoint(tmp_path / "step-2")
    assert not list(tmp_path.iterdir())
    assert (learner.save_checkpoint(tmp_path / "step-2", with_optimizer=False) / "model.safetensors").exists()


def test_a_checkpoint_holds_merged_weights_and_the_adapter_and_resumes(stepped, tiny_model_dir, tmp_path):
    from transformers import AutoModelForCausalLM

    from trainer.learner import DeepSpeedLearner
    from trainer.weights import ADAPTER_DIR
    from trainer.logprobs import token_logprobs

    learner, _, _ = stepped
    path = learner.save_checkpoint(tmp_path / "step-2")
    assert (path / ADAPTER_DIR / "adapter_config.json").exists()
    plain = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    batch = _batch(3)
    with torch.no_grad():
        lp, _ = token_logprobs(plain, batch.input_ids, batch.attention_mask)
    want = learner.logprobs(batch)
    assert ((lp * batch.completion_mask) - want).abs().max().item() < 1e-4
    resumed = DeepSpeedLearner(tiny_model_dir, _cfg(tiny_model_dir), init_from=path, steps_done=2)
    try:
        assert (resumed.logprobs(batch) - want).abs().max().item() < 1e-5
        with torch.no_grad(), resumed.module.disable_adapter():  # its reference is still the base
            base_lp, _ = token_logprobs(resumed.module, batch.input_ids.to(resumed.device),
                                        batch.attention_mask.to(resumed.device))
        assert ((base_lp.cpu() * batch.completion_mask) - want).abs().max().item() > 1e-3
    finally:
        resumed.close()
    with pytest.raises(ConfigError, match="holds no LoRA adapter"):
        DeepSpeedLearner(tiny_model_dir, _cfg(tiny_model_dir), init_from=tiny_model_dir)


def test_target_modules_that_match_nothing_are_refused(tiny_model_dir):
    from trainer.learner import DeepSpeedLearner

    with pytest.raises(ConfigError, match="lora_target_modules"):
        DeepSpeedLearner(tiny_model_dir, _cfg(tiny_model_dir, lora_target_modules=["no_such_layer"]))


def test_gradient_checkpointing_gives_a_lora_learner_the_same_step(tiny_model_dir):
    """Recomputed activations (long-document configs) train the adapters as kept ones do: the
    same loss and gradient norm, and the same merged weights after the step."""
    from trainer.learner import DeepSpeedLearner

    out = {}
    for gc in (False, True):
        learner = DeepSpeedLearner(tiny_model_dir, _cfg(tiny_model_dir, gradient_checkpointing=gc))
        try:
            learner.step(_batch(0))  # B starts at 0: the second step's gradient reaches A too
            metrics = learner.step(_batch(1))
            out[gc] = metrics, dict(learner.named_weights())
        finally:
            learner.close()
    (plain, plain_w), (ckpt, ckpt_w) = out[False], out[True]
    assert plain["grad_norm"] > 0
    assert ckpt["loss"] == pytest.approx(plain["loss"], rel=1e-4, abs=1e-6)
    assert ckpt["grad_norm"] == pytest.approx(plain["grad_norm"], rel=1e-3)
    for k in plain_w:
        torch.testing.assert_close(ckpt_w[k], plain_w[k], rtol=0, atol=1e-5)


@pytest.mark.parametrize("targets, why", [
    (["q_proj", "nope"], "'nope' matches no layer of the model"),  # a typo beside a good name
    (["Q_PROJ"], "'Q_PROJ' matches no layer"),
    (["mlp"], r"'mlp' matches model\.layers\.0\.mlp \(LlamaMLP\), not a linear layer"),
    (["embed_tokens"], r"'embed_tokens' matches model\.embed_tokens \(Embedding\), not a linear layer"),
    # tied: the merged weights would hold two different copies of one tensor
    (["lm_head"], "'lm_head' matches the output head, whose weight the model shares with its input"),
])
def test_lora_targets_are_checked_against_the_model_when_the_config_is_parsed(tiny_model_dir, targets, why):
    """Before any run row exists: each entry must name linear layers of the model's decoder."""
    from trainer.config import parse_config

    base = {"model": str(tiny_model_dir), "domains": ["basic_arithmetic"], "lora_rank": 4}
    with pytest.raises(ConfigError, match=f"field 'lora_target_modules': {why}") as e:
        parse_config({**base, "lora_target_modules": targets})
    assert "q_proj" in str(e.value).split("decoder layers: ")[1]  # the fix names the model's linear layers
    assert parse_config({**base, "lora_target_modules": ["q_proj", "down_proj"]}).lora_target_modules == [
        "q_proj", "down_proj"]
    assert parse_config({**base, "lora_rank": 0, "lora_target_modules": targets}).lora_rank == 0  # unused: unchecked


def test_lora_rank_and_alpha_refuse_booleans_and_an_overflowing_alpha(tiny_model_dir, monkeypatch):
    from trainer import precision
    from trainer.config import parse_config

    base = {"model": str(tiny_model_dir), "domains": ["basic_arithmetic"]}
    with pytest.raises(ConfigError, match="field 'lora_rank': lora_rank takes a number, got true"):
        parse_config({**base, "lora_rank": True})
    with pytest.raises(ConfigError, match="field 'lora_alpha': lora_alpha takes a number, got false"):
        parse_config({**base, "lora_rank": 4, "lora_alpha": False})
    with pytest.raises(ConfigError, match="field 'lora_alpha': .*10000"):
        parse_config({**base, "lora_rank": 4, "lora_alpha": 1e40})
    seen = []
    monkeypatch.setattr(precision, "auto_dtype", lambda lora: (seen.append(lora), ("bfloat16", "test"))[1])
    cfg = parse_config({**base, "lora_rank": "16.0", "dtype": "auto"})  # read as the field reads it
    assert (cfg.lora_rank, seen) == (16, [True])


def test_a_lora_checkpoint_resumes_only_with_its_own_lora_settings(stepped, tiny_model_dir, tmp_path):
    """Another rank, alpha or target list, or full fine-tuning, would be ignored or fail
    deep in the loader: each is refused with what the checkpoint holds."""
    from trainer.learner import DeepSpeedLearner

    learner, _, _ = stepped
    path = learner.save_checkpoint(tmp_path / "step-2", with_optimizer=False)
    with pytest.raises(ConfigError, match="adapter was trained with lora_rank: 4; the run's config says lora_rank: 8"):
        DeepSpeedLearner(tiny_model_dir, _cfg(tiny_model_dir, lora_rank=8), init_from=path)
    with pytest.raises(ConfigError, match=r"lora_target_modules: \['down_proj', 'gate_proj'"):
        DeepSpeedLearner(tiny_model_dir, _cfg(tiny_model_dir, lora_target_modules=["q_proj"]), init_from=path)
    with pytest.raises(ConfigError, match="holds a LoRA adapter \\(lora_rank: 4, lora_alpha: 32\\)"):
        DeepSpeedLearner(tiny_model_dir, _cfg(tiny_model_dir, lora_rank=0), init_from=path)


def test_a_resume_compares_the_layers_adapted_not_the_target_strings(tiny_model_dir, tmp_path):
    """peft saves a target list deduplicated (and shortened when long): the same layers
    resume; other layers are refused."""
    from transformers import AutoModelForCausalLM

    from trainer.weights import ADAPTER_DIR, with_adapter

    def base():
        return AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)

    cfg = _cfg(tiny_model_dir, lora_target_modules=["q_proj", "v_proj", "q_proj"])
    with_adapter(base(), cfg, None).save_pretrained(tmp_path / ADAPTER_DIR)
    resumed = with_adapter(base(), cfg, tmp_path)
    assert any(".q_proj.lora_A" in n for n, _ in resumed.named_parameters())
    paths = _cfg(tiny_model_dir, lora_target_modules=["self_attn.q_proj", "self_attn.v_proj"])  # the same layers
    assert with_adapter(base(), paths, tmp_path) is not None
    with pytest.raises(ConfigError, match="lora_target_modules"):
        with_adapter(base(), _cfg(tiny_model_dir, lora_target_modules=["q_proj"]), tmp_path)


def test_gpt2_style_conv1d_layers_count_as_linear_and_a_changed_model_is_checked_again(tmp_path):
    import os

    from transformers import GPT2Config, GPT2LMHeadModel

    from trainer.lora_targets import target_problem

    def save(**kw):
        GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=100, n_positions=64, **kw)
                        ).save_pretrained(tmp_path)

    save()
    assert target_problem(str(tmp_path), ("c_attn",)) is None  # Conv1D: peft adapts it
    assert "c_attn" in target_problem(str(tmp_path), ("ln_1",)).split("decoder layers: ")[1]
    assert "tie_word_embeddings" in target_problem(str(tmp_path), ("lm_head",))
    save(tie_word_embeddings=False)  # the model rewritten in place: not the cached verdict
    stat = (tmp_path / "config.json").stat()
    os.utime(tmp_path / "config.json", ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    assert target_problem(str(tmp_path), ("lm_head",)) is None  # an untied head may be adapted
