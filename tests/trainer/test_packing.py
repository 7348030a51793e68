"""Padding-free (packed) learner batches against the padded ones: the same sequences, the
same per-token logprobs, the same loss and the same weights after an optimizer step."""

import pytest
import torch

from trainer.config import RunConfig
from core.errors import ConfigError
from trainer.types import Completion, LearnerBatch, Sample

PROMPTS = (3, 9, 5, 14, 4, 11, 7, 6)  # tokens
COMPLETIONS = (16, 2, 12, 5, 3, 1, 7, 2)


def _samples(seed: int = 0) -> list[Sample]:
    """Eight sequences of varied prompt and completion lengths (ids < 1000, the tiny
    vocabulary); one harness-faulted sample and one multi-turn mask with an observation."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for i, (p, c) in enumerate(zip(PROMPTS, COMPLETIONS)):
        ids = torch.randint(3, 1000, (p + c,), generator=g).tolist()
        lps = (-torch.rand(c, generator=g) * 3).tolist()
        mask = [1, 1, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1][:c] if i == 2 else None  # two observation tokens
        out.append(Sample("basic_arithmetic", i, i // 2, i % 2, "p", ids[:p],
                          Completion(ids[p:], lps, "x", "length", mask=mask),
                          advantage=(1.0 if i % 2 == 0 else -1.0) * (1 + i / 8),
                          fault="harness" if i == 5 else None))
    return out


def _batch(seed: int = 0) -> LearnerBatch:
    return LearnerBatch.from_samples(_samples(seed), pad_id=0)


def test_packing_holds_each_sequence_once_with_restarting_positions():
    batch = _batch()
    lengths = batch.attention_mask.sum(1).tolist()
    micros = batch.packed_micro_batches(rows=2)
    found = []
    for m in micros:
        assert m.input_ids.shape[0] <= 2 and m.input_ids.shape[1] <= max(lengths)
        for r in range(m.input_ids.shape[0]):
            starts = (m.position_ids[r] == 0).nonzero().squeeze(1).tolist() + [m.input_ids.shape[1]]
            for a, b in zip(starts, starts[1:]):
                seq = m.input_ids[r, a:b]
                match = [i for i in range(len(lengths)) if lengths[i] == b - a
                         and torch.equal(batch.input_ids[i, : b - a], seq)]
                if match:
                    found.append(match[0])
                else:  # the tail of a row: padding only
                    assert (seq == 0).all()
                assert torch.equal(m.position_ids[r, a:b], torch.arange(b - a))
    assert sorted(found) == list(range(len(lengths)))
    assert sum(m.num_sequences for m in micros) == len(lengths)
    assert sum(m.num_tokens for m in micros) == batch.num_tokens


def test_packed_scored_tokens_are_the_completion_tokens():
    batch = _batch()
    micros = batch.packed_micro_batches(rows=3)
    assert sum(len(m.targets) for m in micros) == int(batch.completion_mask.sum())
    for m in micros:
        flat = m.input_ids.reshape(-1)
        assert torch.equal(flat[m.logit_index + 1], m.targets)  # each logit scores the next token
    got = torch.cat([m.old_logprobs for m in micros]).sort().values
    want = batch.old_logprobs[batch.completion_mask > 0].sort().values
    assert torch.equal(got, want)
    adv = sorted(set(torch.cat([m.advantages for m in micros]).tolist()))
    trained = [i for i in range(8) if i != 5]  # the harness-faulted sample trains nothing
    assert adv == sorted(set(batch.advantages[trained].tolist()))


def test_packing_computes_fewer_positions_than_padding():
    batch = _batch()
    padded = sum(m.input_ids.numel() for m in batch.micro_batches(2))
    packed = batch.packed_micro_batches(rows=2)
    assert sum(m.input_ids.numel() for m in packed) < padded
    assert len(packed) < len(batch.micro_batches(2))
    assert all(0.0 <= m.padding_share < 1.0 for m in packed)
    with pytest.raises(ValueError, match="rows must be >= 1"):
        batch.packed_micro_batches(rows=0)


@pytest.fixture(scope="module")
def tiny_lm(tiny_model_dir):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).eval()


def _packed_logprobs(model, batch: LearnerBatch, rows: int, restart: bool = True) -> torch.Tensor:
    """(N, T) logprobs of the completion tokens, scored packed, laid out as the padded batch."""
    from trainer.logprobs import packed_token_logprobs

    out = torch.zeros_like(batch.old_logprobs)
    for m in batch.packed_micro_batches(rows):
        pos = m.position_ids if restart else torch.arange(m.input_ids.shape[1]).expand_as(m.input_ids)
        with torch.no_grad():
            lp, _ = packed_token_logprobs(model, model.get_output_embeddings(), m.input_ids, pos,
                                          m.logit_index, m.targets)
        # place each score back where its old logprob came from (old logprobs are distinct)
        for value, old in zip(lp, m.old_logprobs):
            out[batch.old_logprobs == old] = value
    return out * batch.completion_mask


def test_packed_logprobs_equal_padded_logprobs(tiny_lm):
    from trainer.logprobs import token_logprobs

    batch = _batch()
    with torch.no_grad():
        padded, _ = token_logprobs(tiny_lm, batch.input_ids, batch.attention_mask)
    padded = padded * batch.completion_mask
    for rows in (1, 3):
        packed = _packed_logprobs(tiny_lm, batch, rows)
        assert (packed - padded).abs().max().item() < 1e-4
    # positions that run on across sequences let them attend to each other: scores change
    leaky = _packed_logprobs(tiny_lm, batch, 3, restart=False)
    assert (leaky - padded).abs().max().item() > 1e-2


def test_logprobs_are_taken_at_the_sampling_temperature(tiny_lm):
    # log_softmax(logits / T) of the scored tokens, padded and packed alike (as TRL, verl)
    from trainer.logprobs import packed_token_logprobs, token_logprobs

    batch, temp = _batch(), 0.7
    with torch.no_grad():
        logits = tiny_lm(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits[:, :-1].float()
    want = torch.nn.functional.pad((logits / temp).log_softmax(-1).gather(-1, batch.input_ids[:, 1:, None])[..., 0],
                                   (1, 0)) * batch.completion_mask
    raw = torch.nn.functional.pad(logits.log_softmax(-1).gather(-1, batch.input_ids[:, 1:, None])[..., 0],
                                  (1, 0)) * batch.completion_mask
    assert (want - raw).abs().max().item() > 0.1  # the temperature matters on this model
    with torch.no_grad():
        padded, ent = token_logprobs(tiny_lm, batch.input_ids, batch.attention_mask, with_entropy=True,
                                     temperature=temp)
    assert ((padded * batch.completion_mask) - want).abs().max().item() < 1e-4
    logp = (logits / temp).log_softmax(-1)
    assert (ent[:, 1:] + (logp.exp() * logp).sum(-1)).abs().max().item() < 1e-4  # of the tempered distribution
    out = torch.zeros_like(batch.old_logprobs)
    for m in batch.packed_micro_batches(3):
        with torch.no_grad():
            lp, _ = packed_token_logprobs(tiny_lm, tiny_lm.get_output_embeddings(), m.input_ids, m.position_ids,
                                          m.logit_index, m.targets, temperature=temp)
        for value, old in zip(lp, m.old_logprobs):
            out[batch.old_logprobs == old] = value
    assert ((out * batch.completion_mask) - want).abs().max().item() < 1e-4


def _loss_grads(model, ref, batch: LearnerBatch, packed: bool, shared: bool = False) -> dict[str, torch.Tensor]:
    """Gradients of the step's GRPO loss (clip, k3 KL to `ref`) from micro-batches of 3: padded,
    packed, or (`shared`) shared-prefix ones of 2 sequences' worth of tokens."""
    from trainer.algorithms.grpo import policy_loss
    from trainer.logprobs import packed_token_logprobs, token_logprobs

    model.zero_grad(set_to_none=True)
    total = float(batch.completion_mask.sum())
    kw = {"clip_eps": 0.2, "kl_coef": 0.1, "num_tokens_total": total}
    if packed:
        for m in batch.shared_prefix_micro_batches(2) if shared else batch.packed_micro_batches(3):
            args = (m.input_ids, m.position_ids, m.logit_index, m.targets)
            lp, _ = packed_token_logprobs(model, model.get_output_embeddings(), *args, attention_mask=m.attention_mask)
            with torch.no_grad():
                ref_lp, _ = packed_token_logprobs(ref, ref.get_output_embeddings(), *args,
                                                  attention_mask=m.attention_mask)
            policy_loss(lp[:, None], m.old_logprobs[:, None], m.advantages, m.completion_mask[:, None],
                        ref_logprobs=ref_lp[:, None], **kw).loss.backward()
    else:
        for m in batch.micro_batches(3):
            lp, _ = token_logprobs(model, m.input_ids, m.attention_mask)
            with torch.no_grad():
                ref_lp, _ = token_logprobs(ref, m.input_ids, m.attention_mask)
            policy_loss(lp, m.old_logprobs, m.advantages, m.completion_mask, ref_logprobs=ref_lp,
                        **kw).loss.backward()
    return {k: p.grad.clone() for k, p in model.named_parameters()}


def test_packed_loss_has_the_padded_gradient(tiny_model_dir):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    ref = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).eval()
    with torch.no_grad():  # a reference apart from the policy, so the KL term has a gradient
        for p in ref.parameters():
            p.add_(torch.randn_like(p) * 0.01)
    batch = _batch()
    packed, padded = _loss_grads(model, ref, batch, True), _loss_grads(model, ref, batch, False)
    scale = max(g.abs().max().item() for g in padded.values())
    assert scale > 1e-3
    for k in padded:
        assert (packed[k] - padded[k]).abs().max().item() < 1e-4 * scale, k


def _config(tiny_model_dir, kl_coef: float) -> RunConfig:
    return RunConfig(domains=["basic_arithmetic"], prompts_per_step=4, group_size=2, micro_batch_size=2,
                     learning_rate=1e-3, kl_coef=kl_coef, model=str(tiny_model_dir))


@pytest.mark.parametrize("kl_coef", [0.0, 0.1])
def test_packed_step_equals_padded_step(tiny_model_dir, kl_coef):
    from trainer.learner import DeepSpeedLearner

    cfg = _config(tiny_model_dir, kl_coef)
    packed = DeepSpeedLearner(tiny_model_dir, cfg, batching="packed")
    padded = DeepSpeedLearner(tiny_model_dir, cfg, batching="padded")
    try:
        before = {k: v.clone() for k, v in padded.module.state_dict().items()}
        for seed in (0, 1):  # two steps: the second starts from the updated weights
            a, b = packed.step(_batch(seed)), padded.step(_batch(seed))
            assert ("kl" in a) == ("kl" in b) == (kl_coef > 0)  # no reference, no KL measured
            for key in ("loss", "pg_loss", "kl", "entropy", "clip_frac", "ratio_mean", "grad_norm"):
                if key in b:
                    assert a[key] == pytest.approx(b[key], rel=1e-4, abs=1e-6), key
            assert a["learner_tokens"] == b["learner_tokens"]
            assert a["learner_padding_share"] < b["learner_padding_share"]
            assert a["learner_micro_batches"] < b["learner_micro_batches"]
            # AdamW's early updates are ~ lr * g / |g| per entry, so float rounding in entries
            # whose gradient is ~0 (the KL term at step 1, where policy == reference) shows
            # as up to a few % of lr; the gradients themselves agree to 1e-4 relative (below)
            sa, sb = packed.module.state_dict(), padded.module.state_dict()
            assert max((sa[k] - sb[k]).abs().max().item() for k in sa) < 0.05 * cfg.learning_rate
        if kl_coef:
            assert b["kl"] > 0  # the reference path was exercised
        moved = max((v - before[k]).abs().max().item() for k, v in padded.module.state_dict().items())
        assert moved > 1e-4, "two optimizer steps should move the weights"
    finally:
        packed.close()
        padded.close()


def test_unknown_batching_is_rejected(tiny_model_dir):
    from trainer.learner import DeepSpeedLearner

    with pytest.raises(ConfigError, match="batching must be one of"):
        DeepSpeedLearner(tiny_model_dir, _config(tiny_model_dir, 0.0), batching="sorted")


def test_a_model_without_packed_attention_is_refused(tiny_lm, monkeypatch):
    """Where transformers does not read packing from position ids (older versions), the
    attention runs across the sequences of a row: the learner says so at start-up."""
    from transformers import masking_utils

    from trainer.logprobs import check_packing

    check_packing(tiny_lm)  # this transformers supports it
    monkeypatch.setattr(masking_utils, "find_packed_sequence_indices", lambda position_ids: None)
    with pytest.raises(ConfigError, match="batching='padded'"):
        check_packing(tiny_lm)
