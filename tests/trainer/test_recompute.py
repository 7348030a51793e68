"""Selective recomputation (trainer/recompute.py): a checkpointed layer's backward reuses the
attention kernel's output instead of running the kernel again, with the same gradients."""

import collections

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from trainer.recompute import checkpointing_kwargs, saved_kernels


class _Count(TorchDispatchMode):
    """Counts the aten overloads run under it."""

    def __init__(self):
        super().__init__()
        self.calls = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.calls[func] += 1
        return func(*args, **(kwargs or {}))


def _grads(tiny_model_dir, kwargs):
    """(attention kernel calls in the forward, in the backward, the parameters' gradients) of
    one forward and backward of the tiny model, checkpointed with `kwargs` (None: not at all)."""
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32, attn_implementation="sdpa")
    model.train()
    if kwargs is not None:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
    ids = torch.randint(3, 1000, (2, 24), generator=torch.Generator().manual_seed(1))
    kernels = saved_kernels()
    with _Count() as fwd:
        loss = model(input_ids=ids, labels=ids).loss
    with _Count() as bwd:
        loss.backward()
    count = [sum(n for op, n in c.calls.items() if op in kernels) for c in (fwd, bwd)]
    return count, {k: p.grad.clone() for k, p in model.named_parameters() if p.grad is not None}, model


def test_the_backward_reuses_the_attention_output_and_gives_the_same_gradients(tiny_model_dir):
    (fwd, bwd), selective, model = _grads(tiny_model_dir, checkpointing_kwargs())
    layers = model.config.num_hidden_layers
    assert fwd == layers  # the kernel ran once per layer in the forward, and these kernels are the ones it uses
    assert bwd == 0  # the recompute took the saved outputs
    (_, plain_bwd), plain, _ = _grads(tiny_model_dir, {"use_reentrant": False})
    assert plain_bwd == layers  # plain checkpointing runs it again: what the selective one saves
    (_, none_bwd), kept, _ = _grads(tiny_model_dir, None)
    assert none_bwd == 0 and kept.keys() == selective.keys() and len(kept) > 0
    for k in kept:
        torch.testing.assert_close(selective[k], kept[k], rtol=1e-5, atol=1e-7)
        torch.testing.assert_close(plain[k], kept[k], rtol=1e-5, atol=1e-7)


def test_the_policy_names_kernels_this_torch_has():
    kernels = saved_kernels()
    assert torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default in kernels
    assert all(isinstance(k, torch._ops.OpOverload) for k in kernels)
    assert checkpointing_kwargs()["use_reentrant"] is False


def test_a_full_learner_step_is_the_same_with_selective_recomputation(tiny_model_dir):
    """The learner with ``gradient_checkpointing: true`` (now selective) against without:
    the same loss and gradient norm on a shared-prefix step (full fine-tuning, a KL reference)."""
    from trainer.config import RunConfig
    from trainer.learner import DeepSpeedLearner
    from trainer.types import Completion, LearnerBatch, Sample

    g = torch.Generator().manual_seed(0)
    samples = []
    for group in range(2):
        prompt = torch.randint(3, 1000, (20,), generator=g).tolist()
        for i in range(2):
            ids = torch.randint(3, 1000, (6,), generator=g).tolist()
            samples.append(Sample("basic_arithmetic", group, group, i, "p", prompt,
                                  Completion(ids, (-torch.rand(6, generator=g) - 1).tolist(), "x", "length"),
                                  advantage=1.0 if i == 0 else -1.0))
    out = {}
    for gc in (False, True):
        cfg = RunConfig(domains=["basic_arithmetic"], prompts_per_step=2, group_size=2, micro_batch_size=2,
                        learning_rate=1e-3, kl_coef=0.1, model=str(tiny_model_dir), gradient_checkpointing=gc)
        learner = DeepSpeedLearner(tiny_model_dir, cfg)
        try:
            assert learner.batching == "shared_prefix"
            out[gc] = learner.step(LearnerBatch.from_samples(samples, pad_id=0))
        finally:
            learner.close()
    plain, selective = out[False], out[True]
    assert plain["grad_norm"] > 0
    assert selective["loss"] == pytest.approx(plain["loss"], rel=1e-4, abs=1e-6)
    assert selective["grad_norm"] == pytest.approx(plain["grad_norm"], rel=1e-3)
