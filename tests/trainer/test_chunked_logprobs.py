"""Logprobs projected a slice of scored tokens at a time (`trainer.logprobs.scored_logprobs`)
against the whole projection: the same logprobs, entropies and gradients, and the LM head
never shown more than a slice, in the forward or in the backward's recompute."""

import pytest
import torch

from trainer import logprobs
from tests.trainer.test_packing import _batch


@pytest.fixture
def tiny_lm(tiny_model_dir):
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    return AutoModelForCausalLM.from_pretrained(tiny_model_dir, torch_dtype=torch.float32).train()


def _head_rows(head: torch.nn.Module) -> tuple[list[int], torch.utils.hooks.RemovableHandle]:
    """Rows of each projection onto the vocabulary (the head's pass-through inside the model's
    forward gives hidden states, not logits, and is not counted)."""
    rows: list[int] = []

    def record(module, args, out):
        if out.shape[-1] == head.weight.shape[0]:
            rows.append(out.reshape(-1, out.shape[-1]).shape[0])
    return rows, head.register_forward_hook(record)


def _loss_and_grads(model, temperature: float) -> tuple[torch.Tensor, torch.Tensor, dict]:
    model.zero_grad(set_to_none=True)
    [m] = _batch().packed_micro_batches(rows=8)
    lp, ent = logprobs.packed_token_logprobs(model, model.get_output_embeddings(), m.input_ids, m.position_ids,
                                             m.logit_index, m.targets, with_entropy=True, temperature=temperature)
    weights = torch.linspace(-1, 1, lp.shape[0])  # a loss that weighs every token differently
    (lp * weights).sum().backward()
    return lp.detach(), ent, {k: p.grad.clone() for k, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_sliced_projection_gives_the_whole_projections_logprobs_entropies_and_gradients(tiny_lm, temperature,
                                                                                        monkeypatch):
    monkeypatch.setattr(logprobs, "LOGIT_CHUNK_TOKENS", 10_000)
    whole_lp, whole_ent, whole_grads = _loss_and_grads(tiny_lm, temperature)
    monkeypatch.setattr(logprobs, "LOGIT_CHUNK_TOKENS", 7)
    rows, handle = _head_rows(tiny_lm.get_output_embeddings())
    try:
        lp, ent, grads = _loss_and_grads(tiny_lm, temperature)
    finally:
        handle.remove()
    assert lp.shape[0] > 7 * 3  # enough tokens for several slices
    assert max(rows) <= 7 and len(rows) > 2 * (lp.shape[0] // 7)  # forward slices, then their recompute
    torch.testing.assert_close(lp, whole_lp, rtol=0, atol=1e-5)
    torch.testing.assert_close(ent, whole_ent, rtol=0, atol=1e-5)
    assert whole_grads.keys() == grads.keys() and len(grads) > 5
    for k in grads:
        scale = float(whole_grads[k].abs().max()) + 1e-12
        assert float((grads[k] - whole_grads[k]).abs().max()) / scale < 1e-4, k


def test_padded_logprobs_are_projected_in_slices_too(tiny_lm, monkeypatch):
    batch = _batch()
    with torch.no_grad():
        whole, _ = logprobs.token_logprobs(tiny_lm, batch.input_ids, batch.attention_mask)
    monkeypatch.setattr(logprobs, "LOGIT_CHUNK_TOKENS", 5)
    rows, handle = _head_rows(tiny_lm.get_output_embeddings())
    try:
        with torch.no_grad():
            sliced, _ = logprobs.token_logprobs(tiny_lm, batch.input_ids, batch.attention_mask)
    finally:
        handle.remove()
    assert max(rows) == 5 and sum(rows) == batch.input_ids.shape[0] * (batch.input_ids.shape[1] - 1)
    torch.testing.assert_close(sliced, whole, rtol=0, atol=1e-5)


def test_the_head_is_itself_again_after_the_forward(tiny_lm):
    head = tiny_lm.get_output_embeddings()
    [m] = _batch().packed_micro_batches(rows=8)
    with torch.no_grad():
        logprobs.packed_token_logprobs(tiny_lm, head, m.input_ids, m.position_ids, m.logit_index, m.targets)
        out = tiny_lm(input_ids=m.input_ids[:, :4]).logits
    assert "forward" not in vars(head) and out.shape[-1] == head.weight.shape[0]


def test_an_empty_slice_still_gives_a_gradient_graph(tiny_lm):
    head = tiny_lm.get_output_embeddings()
    hidden = torch.zeros(0, head.weight.shape[1], requires_grad=True)
    lp, ent = logprobs.scored_logprobs(head, hidden, torch.zeros(0, dtype=torch.long), with_entropy=True)
    assert lp.shape == (0,) and ent.shape == (0,) and lp.requires_grad
