"""Shared-prefix learner batches (each group's prompt once, its completions after it) against
the padded ones: the same per-token logprobs, loss, gradient and optimizer step, with the
prompt computed once per group."""

import pytest
import torch

from trainer.config import RunConfig
from tests.trainer.test_packing import _loss_grads
from trainer.types import Completion, LearnerBatch, Sample

GROUPS = ((9, (16, 2, 5)), (14, (3, 1, 7)), (5, (12, 4, 6)))  # (prompt tokens, completion tokens per sample)


def _samples(seed: int = 0) -> list[Sample]:
    """Three groups of three samples; each group shares its prompt. One harness-faulted
    sample and one multi-turn mask with two observation tokens."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for group, (p, lengths) in enumerate(GROUPS):
        prompt = torch.randint(3, 1000, (p,), generator=g).tolist()
        for index, c in enumerate(lengths):
            i = len(out)
            ids = torch.randint(3, 1000, (c,), generator=g).tolist()
            lps = (-torch.rand(c, generator=g) * 3 - 0.01).tolist()
            mask = [1, 1, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1][:c] if i == 6 else None
            out.append(Sample("basic_arithmetic", group, group, index, "p", prompt,
                              Completion(ids, lps, "x", "length", mask=mask),
                              advantage=(1.0 if i % 2 == 0 else -1.0) * (1 + i / 8),
                              fault="harness" if i == 4 else None))
    return out


def _batch(seed: int = 0) -> LearnerBatch:
    return LearnerBatch.from_samples(_samples(seed), pad_id=0)


def test_each_prompt_is_computed_once_and_every_completion_token_is_scored():
    batch = _batch()
    micros = batch.shared_prefix_micro_batches(rows=2)
    packed = batch.packed_micro_batches(rows=2)
    saved = sum(p * (len(lengths) - 1) for p, lengths in GROUPS)
    # the faulted sample scores nothing: its whole sequence is its own prefix, not shared
    faulted_prompt = GROUPS[1][0]
    assert sum(m.num_tokens for m in micros) == batch.num_tokens - saved + faulted_prompt
    assert sum(m.num_tokens for m in micros) < sum(m.num_tokens for m in packed)
    assert sum(m.num_sequences for m in micros) == 9
    assert sum(len(m.targets) for m in micros) == int(batch.completion_mask.sum())
    for m in micros:
        flat = m.input_ids.reshape(-1)
        allow = m.attention_mask.reshape(-1, m.attention_mask.shape[-1])
        # each scored token's logit position may attend to itself (a real position)
        rows = m.logit_index // m.input_ids.shape[1]
        cols = m.logit_index % m.input_ids.shape[1]
        assert bool(m.attention_mask[rows, cols, cols].all())
        assert allow.shape[0] == flat.shape[0]
    got = torch.cat([m.old_logprobs for m in micros]).sort().values
    assert torch.equal(got, batch.old_logprobs[batch.completion_mask > 0].sort().values)
    with pytest.raises(ValueError, match="rows must be >= 1"):
        batch.shared_prefix_micro_batches(rows=0)


def test_a_completion_never_sees_another_completion_of_its_group():
    batch = _batch()
    [m] = batch.shared_prefix_micro_batches(rows=9)
    for r in range(m.input_ids.shape[0]):
        pos = m.position_ids[r]
        allow = m.attention_mask[r]
        for q in range(len(pos)):
            keys = allow[q].nonzero().squeeze(1)
            assert (keys <= q).all()  # causal
            # the keys a query sees have positions 0 .. its own, each once: its own sequence
            assert sorted(pos[keys].tolist()) == list(range(int(pos[q]) + 1))


@pytest.fixture(scope="module", params=["sdpa", "eager", "by parts"])
def tiny_lm(tiny_model_dir, request):
    """The tiny model attending with SDPA or eager under the dense mask, or by the groups'
    parts (`trainer.prefix_attention`, what the learner switches an SDPA model to)."""
    from transformers import AutoModelForCausalLM

    from trainer import prefix_attention

    by_parts = request.param == "by parts"
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32,
                                                 attn_implementation="sdpa" if by_parts else request.param).eval()
    assert prefix_attention.enable(model) == (request.param != "eager")
    if not by_parts:
        model.set_attn_implementation(request.param)
    return model


def _shared_logprobs(model, batch: LearnerBatch, rows: int, temperature: float = 1.0,
                     mask: bool = True) -> torch.Tensor:
    from trainer.logprobs import packed_token_logprobs

    out = torch.zeros_like(batch.old_logprobs)
    for m in batch.shared_prefix_micro_batches(rows):
        with torch.no_grad():
            lp, _ = packed_token_logprobs(model, model.get_output_embeddings(), m.input_ids, m.position_ids,
                                          m.logit_index, m.targets, temperature=temperature,
                                          attention_mask=m.attention_mask if mask else None,
                                          segments=m.segments if mask else None)
        for value, old in zip(lp, m.old_logprobs):  # back where its old logprob came from (distinct)
            out[batch.old_logprobs == old] = value
    return out * batch.completion_mask


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_shared_prefix_logprobs_equal_padded_logprobs(tiny_lm, temperature):
    from trainer.logprobs import token_logprobs

    batch = _batch()
    with torch.no_grad():
        padded, _ = token_logprobs(tiny_lm, batch.input_ids, batch.attention_mask, temperature=temperature)
    padded = padded * batch.completion_mask
    for rows in (1, 2, 9):
        assert (_shared_logprobs(tiny_lm, batch, rows, temperature) - padded).abs().max().item() < 1e-4
    # without the block mask the completions of a group see each other: scores change
    assert (_shared_logprobs(tiny_lm, batch, 9, temperature, mask=False) - padded).abs().max().item() > 1e-2


def test_the_start_up_check_passes_here_and_catches_a_model_that_ignores_the_mask(tiny_lm, monkeypatch):
    from trainer import logprobs

    from trainer import prefix_attention

    assert logprobs.shared_prefix_error(tiny_lm) < 1e-4
    if tiny_lm.config._attn_implementation == prefix_attention.ATTENTION:  # attention by parts ignores the layout
        monkeypatch.setattr(prefix_attention, "_row", lambda q, k, v, segments, end, scaling: torch.nn.functional.
                            scaled_dot_product_attention(q, k, v, is_causal=True, scale=scaling))
    else:
        monkeypatch.setattr(logprobs, "model_attention_mask", lambda model, allow: None)  # attention ignores it
    assert logprobs.shared_prefix_error(tiny_lm) > 1e-3


@pytest.mark.parametrize("kv_heads", [4, 2])
def test_attention_by_parts_equals_sdpa_under_the_dense_mask(kv_heads):
    """Rows holding several groups (one with an empty completion, one with a single sample)
    and an unused tail, grouped-query attention: the same output and input gradients."""
    import torch.nn.functional as F

    from trainer.prefix_attention import PrefixLayout, shared_prefix_attention

    g = torch.Generator().manual_seed(0)
    samples = []  # groups of (prompt tokens, completion tokens per sample); 0: a sample with no completion
    for group, (p, lengths) in enumerate(((20, (10, 8, 6)), (4, (3,)), (5, (0,)), (6, (4, 5)))):
        prompt = torch.randint(3, 1000, (p,), generator=g).tolist()
        for index, c in enumerate(lengths):
            samples.append(Sample("basic_arithmetic", group, group, index, "p", prompt,
                                  Completion(torch.randint(3, 1000, (c,), generator=g).tolist(), [-1.0] * c, "x",
                                             "length"), advantage=1.0))
    micros = (LearnerBatch.from_samples(samples, pad_id=0).shared_prefix_micro_batches(4)
              + _batch().shared_prefix_micro_batches(2))
    segments = [row for m in micros for row in m.segments]
    assert any(len(row) > 1 for row in segments) and any(0 in seg[2] for row in segments for seg in row)
    assert any(row[-1][0] + row[-1][1] + sum(row[-1][2]) < m.input_ids.shape[1] for m in micros for row in m.segments)
    for m in micros:
        rows, width = m.input_ids.shape
        q = torch.randn(rows, 4, width, 8, generator=g, requires_grad=True)
        k = torch.randn(rows, kv_heads, width, 8, generator=g, requires_grad=True)
        v = torch.randn(rows, kv_heads, width, 8, generator=g, requires_grad=True)
        rep = 4 // kv_heads
        want = F.scaled_dot_product_attention(q, k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1),
                                              attn_mask=m.attention_mask.unsqueeze(1), scale=0.3).transpose(1, 2)
        layout = PrefixLayout.build(m.segments, width, "cpu")
        got, weights = shared_prefix_attention(torch.nn.Module(), q, k, v, None, scaling=0.3, prefix_layout=layout)
        assert weights is None and got.shape == want.shape == (rows, width, 4, 8)
        assert (got - want).abs().max().item() < 1e-5
        w = torch.randn(want.shape, generator=g)
        grads_want = torch.autograd.grad((want * w).sum(), (q, k, v))
        grads_got = torch.autograd.grad((got * w).sum(), (q, k, v))
        for a, b in zip(grads_got, grads_want):
            assert (a - b).abs().max().item() < 1e-5


def test_shared_prefix_loss_has_the_padded_gradient(tiny_model_dir):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    ref = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).eval()
    with torch.no_grad():  # a reference apart from the policy, so the KL term has a gradient
        for p in ref.parameters():
            p.add_(torch.randn_like(p) * 0.01)
    batch = _batch()
    shared, padded = _loss_grads(model, ref, batch, packed=True, shared=True), _loss_grads(model, ref, batch, packed=False)
    scale = max(g.abs().max().item() for g in padded.values())
    assert scale > 1e-3
    for k in padded:
        assert (shared[k] - padded[k]).abs().max().item() < 1e-4 * scale, k


@pytest.mark.parametrize("kl_coef", [0.0, 0.1])
def test_shared_prefix_step_equals_padded_step(tiny_model_dir, kl_coef):
    from trainer.learner import DeepSpeedLearner

    cfg = RunConfig(domains=["basic_arithmetic"], prompts_per_step=3, group_size=3, micro_batch_size=3,
                    learning_rate=1e-3, kl_coef=kl_coef, model=str(tiny_model_dir))
    shared = DeepSpeedLearner(tiny_model_dir, cfg)  # the default batching
    padded = DeepSpeedLearner(tiny_model_dir, cfg, batching="padded")
    try:
        assert shared.batching == "shared_prefix"
        from trainer.prefix_attention import ATTENTION

        # by parts on the CPU, not under the dense mask (CUDA keeps the mask: it measured faster there)
        assert shared.module.config._attn_implementation == (ATTENTION if shared.device.type == "cpu" else "sdpa")
        assert shared.by_parts == (shared.device.type == "cpu")
        for seed in (0, 1):
            a, b = shared.step(_batch(seed)), padded.step(_batch(seed))
            assert ("kl" in a) == ("kl" in b) == (kl_coef > 0)  # no reference, no KL measured
            for key in ("loss", "pg_loss", "kl", "entropy", "clip_frac", "ratio_mean", "grad_norm"):
                if key in b:
                    assert a[key] == pytest.approx(b[key], rel=1e-4, abs=1e-6), key
            assert a["learner_tokens"] == b["learner_tokens"]  # the logical tokens the loss covers
            assert a["learner_computed_tokens"] < b["learner_computed_tokens"]
            sa, sb = shared.module.state_dict(), padded.module.state_dict()
            assert max((sa[k] - sb[k]).abs().max().item() for k in sa) < 0.05 * cfg.learning_rate
        if kl_coef:
            assert b["kl"] > 0
            # the frozen reference runs where the policy runs (on a GPU it was left on the CPU once)
            assert next(padded.ref_model.parameters()).device == padded.device
    finally:
        shared.close()
        padded.close()


def test_a_model_that_refuses_the_mask_falls_back_to_packed_and_says_so(tiny_model_dir, monkeypatch, capsys):
    from trainer import learner

    monkeypatch.setattr(learner, "shared_prefix_error", lambda model: float("inf"))
    cfg = RunConfig(domains=["basic_arithmetic"], prompts_per_step=3, group_size=3, micro_batch_size=3,
                    model=str(tiny_model_dir))
    ds = learner.DeepSpeedLearner(tiny_model_dir, cfg)
    try:
        assert ds.batching == "packed"
        assert "using batching='packed'" in capsys.readouterr().err
        assert ds.step(_batch())["learner_micro_batches"] >= 1
    finally:
        ds.close()


def _faulted_groups() -> list[Sample]:
    """Two groups of three (6-token prompts, 5-token completions); the last sample of the second
    group a harness fault, so it scores nothing and is laid out alone."""
    g = torch.Generator().manual_seed(0)
    out = []
    for group in range(2):
        prompt = torch.randint(3, 1000, (6,), generator=g).tolist()
        for index in range(3):
            ids = torch.randint(3, 1000, (5,), generator=g).tolist()
            out.append(Sample("basic_arithmetic", group, group, index, "p", prompt,
                              Completion(ids, [-1.0] * 5, "x", "stop"), advantage=(1.0, -1.0, 0.5)[index],
                              fault="harness" if (group, index) == (1, 2) else None))
    return out


def test_a_micro_batch_without_scored_tokens_steps_as_packed_does_under_gspo(tiny_model_dir):
    from trainer.learner import DeepSpeedLearner

    batch = LearnerBatch.from_samples(_faulted_groups(), pad_id=0)
    assert [len(m.targets) for m in batch.shared_prefix_micro_batches(3)][-1] == 0  # the faulted sample alone
    cfg = RunConfig(domains=["basic_arithmetic"], prompts_per_step=2, group_size=3, micro_batch_size=3,
                    learning_rate=1e-3, algorithm="gspo", kl_coef=0.1, model=str(tiny_model_dir))
    shared, packed = DeepSpeedLearner(tiny_model_dir, cfg), DeepSpeedLearner(tiny_model_dir, cfg, batching="packed")
    try:
        assert shared.batching == "shared_prefix"
        a = shared.step(LearnerBatch.from_samples(_faulted_groups(), pad_id=0))
        b = packed.step(LearnerBatch.from_samples(_faulted_groups(), pad_id=0))
        assert b["grad_norm"] > 0
        for key in ("loss", "pg_loss", "kl", "grad_norm"):
            assert a[key] == pytest.approx(b[key], rel=1e-4, abs=1e-6), key
    finally:
        shared.close()
        packed.close()


def test_a_rows_tail_keeps_positions_a_model_with_learned_positions_has():
    """A shared-prefix row can be wider than the longest sequence (a segment of a prompt and G
    completions); a shorter row's unused tail counts positions only up to the longest
    sequence's last, so a position table of exactly that size (GPT-2) or a RoPE scaling that
    reads the largest position id sees what the padded layout shows it."""
    from transformers import GPT2Config, GPT2LMHeadModel

    from trainer.logprobs import token_logprobs

    g = torch.Generator().manual_seed(0)
    samples = []
    for group, (p, lengths) in enumerate(((8, (6, 6, 6)), (4, (2,)))):  # a 26-token segment; a 6-token one
        prompt = torch.randint(3, 1000, (p,), generator=g).tolist()
        for index, c in enumerate(lengths):
            samples.append(Sample("basic_arithmetic", group, group, index, "p", prompt,
                                  Completion(torch.randint(3, 1000, (c,), generator=g).tolist(), [-1.0] * c, "x",
                                             "stop"), advantage=1.0 - index))
    batch = LearnerBatch.from_samples(samples, pad_id=0)
    longest = int(batch.attention_mask.sum(dim=1).max())
    [micro] = batch.shared_prefix_micro_batches(rows=4)
    assert micro.input_ids.shape == (2, 26) and longest == 14  # the second row's tail: 20 tokens
    assert int(micro.position_ids.max()) == longest - 1
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=1000, n_positions=longest, n_embd=64, n_layer=2, n_head=4,
                                       attn_implementation="sdpa")).eval()
    with torch.no_grad():
        padded, _ = token_logprobs(model, batch.input_ids, batch.attention_mask)
    old = batch.old_logprobs.clone()
    batch.old_logprobs = torch.arange(old.numel(), dtype=old.dtype).reshape(old.shape)  # distinct, to place each
    assert (_shared_logprobs(model, batch, 4) - padded * batch.completion_mask).abs().max().item() < 1e-4


def test_attention_window_reads_the_span_a_layer_keeps_to():
    from transformers import (GPTNeoConfig, Gemma3TextConfig, LlamaConfig, Llama4TextConfig, MistralConfig,
                              Phi3Config, Qwen2Config)

    from trainer.prefix_attention import attention_window

    assert attention_window(MistralConfig(sliding_window=8, max_position_embeddings=256)) == 8
    assert attention_window(MistralConfig(sliding_window=None)) is None
    assert attention_window(MistralConfig(sliding_window=4096, max_position_embeddings=4096)) is None  # never binds
    assert attention_window(Phi3Config(sliding_window=2047)) == 2047
    assert attention_window(Qwen2Config()) is None  # use_sliding_window: false
    assert attention_window(Qwen2Config(use_sliding_window=True, max_window_layers=1, num_hidden_layers=3)) == 4096
    assert attention_window(Gemma3TextConfig(sliding_window=512)) == 512
    assert attention_window(Llama4TextConfig(attention_chunk_size=8192, num_hidden_layers=4)) == 0  # column_bound
    assert attention_window(LlamaConfig()) is None
    # GPT-Neo's local layers mask by column, not by position: no sequence is known to be attended whole
    assert attention_window(GPTNeoConfig(num_layers=2, attention_types=[[["global", "local"], 1]])) == 0
    assert attention_window(GPTNeoConfig(num_layers=2, attention_types=[[["global"], 2]])) is None
    assert attention_window(Qwen2Config(num_hidden_layers=2, layer_types=["full_attention", "linear_attention"])) == 0


def _cfg(path) -> RunConfig:
    """3 groups of 3 (the `_batch` shape), micro-batch 3, on the model at `path`."""
    return RunConfig(domains=["basic_arithmetic"], prompts_per_step=3, group_size=3, micro_batch_size=3,
                     learning_rate=1e-3, model=str(path))


def _mistral(path, window: int):
    from transformers import MistralConfig, MistralForCausalLM

    torch.manual_seed(0)
    MistralForCausalLM(MistralConfig(vocab_size=1000, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                     num_attention_heads=4, num_key_value_heads=2, head_dim=16, sliding_window=window,
                                     max_position_embeddings=256, initializer_range=0.1,
                                     attn_implementation="sdpa")).save_pretrained(path)
    return path


def _llama4(path, chunk: int):
    from transformers import Llama4ForCausalLM, Llama4TextConfig

    torch.manual_seed(0)
    Llama4ForCausalLM(Llama4TextConfig(vocab_size=1000, hidden_size=64, intermediate_size=128,
                                       intermediate_size_mlp=128, num_hidden_layers=2, num_attention_heads=4,
                                       num_key_value_heads=2, head_dim=16,
                                       num_local_experts=2, moe_layers=[], interleave_moe_layer_step=0,
                                       attention_chunk_size=chunk, max_position_embeddings=256, initializer_range=0.1,
                                       attn_implementation="sdpa")).save_pretrained(path)
    return path


@pytest.mark.parametrize("window", [25, 23])
def test_a_windowed_model_steps_shared_while_its_window_never_binds(tmp_path, capsys, window):
    """transformers applies no sliding window to the ready block mask: exact while every
    sequence fits the window (the longest here is 25 tokens), so such a step is laid out
    shared-prefix; a step with a longer sequence is packed, with a notice. Either way it steps
    as padded does."""
    from transformers import AutoModelForCausalLM

    from trainer.learner import DeepSpeedLearner
    from trainer.logprobs import token_logprobs

    path = _mistral(tmp_path / f"w{window}", window)
    batch = _batch()
    assert int(batch.attention_mask.sum(dim=1).max()) == 25
    # the boundary is real: under a 23-token window the block mask scores differently from padded (the last
    # scored token comes from position 23, which then no longer sees position 0)
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    with torch.no_grad():
        padded_lp, _ = token_logprobs(model, batch.input_ids, batch.attention_mask)
    batch.old_logprobs = torch.arange(batch.old_logprobs.numel(), dtype=torch.float32).reshape(batch.old_logprobs.shape)
    gap = (_shared_logprobs(model, batch, 3) - padded_lp * batch.completion_mask).abs().max().item()
    assert (gap < 1e-4) if window == 25 else (gap > 1e-3), gap
    cfg = _cfg(path)
    windowed, padded = DeepSpeedLearner(path, cfg), DeepSpeedLearner(path, cfg, batching="padded")
    try:
        assert windowed.batching == "shared_prefix" and windowed.window == window
        a, b = windowed.step(_batch()), padded.step(_batch())
        err = capsys.readouterr().err
        if window == 25:
            assert a["learner_computed_tokens"] < a["learner_tokens"] and "sliding window" not in err
        else:
            assert a["learner_computed_tokens"] == a["learner_tokens"]
            assert "of 25 tokens is longer than this model's sliding window of 23" in err
        for key in ("loss", "pg_loss", "grad_norm"):
            assert a[key] == pytest.approx(b[key], rel=1e-4, abs=1e-6), key
    finally:
        windowed.close()
        padded.close()


def test_a_model_with_local_layers_of_unknown_span_packs_every_step(tmp_path, capsys):
    """GPT-Neo's local layers mask by column distance, which the shared-prefix layout changes:
    such a model trains packed from the start and steps as padded does."""
    from transformers import GPTNeoConfig, GPTNeoForCausalLM

    from trainer.learner import DeepSpeedLearner

    torch.manual_seed(0)
    GPTNeoForCausalLM(GPTNeoConfig(vocab_size=1000, hidden_size=64, num_layers=2, num_heads=4, window_size=8,
                                   attention_types=[[["global", "local"], 1]], max_position_embeddings=256,
                                   intermediate_size=128)).save_pretrained(tmp_path)
    cfg = _cfg(tmp_path)
    local, padded = DeepSpeedLearner(tmp_path, cfg), DeepSpeedLearner(tmp_path, cfg, batching="padded")
    try:
        assert local.batching == "packed" and local.window == 0
        assert "span the shared-prefix block mask can't reproduce" in capsys.readouterr().err
        a, b = local.step(_batch()), padded.step(_batch())
        for key in ("loss", "pg_loss", "grad_norm"):
            assert a[key] == pytest.approx(b[key], rel=1e-4, abs=1e-6), key
    finally:
        local.close()
        padded.close()


def test_a_model_that_attends_by_column_gets_a_row_per_sequence(tmp_path, capsys):
    """Llama 4 counts its attention chunks from the row's first column: a sequence packed after
    another attends differently (shown below on a 16-token chunk), so the learner pads."""
    from transformers import AutoModelForCausalLM, LlamaConfig, Llama4TextConfig, MistralConfig

    from tests.trainer.test_packing import _packed_logprobs
    from trainer.learner import DeepSpeedLearner
    from trainer.logprobs import token_logprobs
    from trainer.prefix_attention import column_bound

    assert "attention chunks" in column_bound(Llama4TextConfig(attention_chunk_size=8192, num_hidden_layers=4))
    assert column_bound(LlamaConfig()) is None and column_bound(MistralConfig(sliding_window=8)) is None
    path = _llama4(tmp_path / "chunked", 16)
    batch = _batch()
    batch.old_logprobs = torch.arange(batch.old_logprobs.numel(), dtype=torch.float32).reshape(batch.old_logprobs.shape)
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    with torch.no_grad():
        padded_lp, _ = token_logprobs(model, batch.input_ids, batch.attention_mask)
    assert (_packed_logprobs(model, batch, 3) - padded_lp * batch.completion_mask).abs().max().item() > 1e-3
    cfg = _cfg(path)
    learner = DeepSpeedLearner(path, cfg)
    try:
        assert learner.batching == "padded"
        assert "counts its attention chunks from the row's first column" in capsys.readouterr().err
        assert learner.step(_batch())["learner_padding_share"] > 0  # a row per sequence
    finally:
        learner.close()
