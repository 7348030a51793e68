"""Selective activation recomputation: gradient checkpointing that keeps the attention's output.

With ``gradient_checkpointing: true`` each decoder layer keeps only its input through the
forward pass and runs its forward again inside the backward to get the activations back.
Plain checkpointing runs all of it again, the fused attention kernel included: on the CPU
that kernel is the slowest part of a layer per FLOP (SDPA's flash kernel at ~100 GFLOP/s
against ~270 for the matmuls on a 2-core AVX-512 host), and on a long prompt it is a third of
the layer's time. Its output is small (per token, one hidden-size vector and one float per
head), so keeping it costs 114 MB on a 1.6k-token group of SmolLM2-135M (30 layers) and saves
the recompute one attention pass per layer: `bench/shared_prefix.py --checkpointing` times it.

This is the selective recomputation of Korthikanti et al., 2022, "Reducing Activation
Recomputation in Large Transformer Models" (arXiv:2205.05198), which keeps the attention
core and recomputes the rest, in PyTorch's API for it
(`torch.utils.checkpoint.create_selective_checkpoint_contexts`); torchtitan's op-level
selective checkpointing saves the same kernels. The gradients are the recompute's own (the
saved outputs are the ones the recompute would produce; tests/trainer/test_recompute.py).
"""

from __future__ import annotations

import functools

import torch
from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

# the fused attention kernels SDPA dispatches to (CPU flash; CUDA flash, memory-efficient, cuDNN), by aten name
ATTENTION_KERNELS = ("_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_flash_attention",
                     "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention")


def saved_kernels() -> frozenset:
    """The aten overloads whose outputs the recompute keeps: `ATTENTION_KERNELS` that this torch has."""
    found = set()
    for name in ATTENTION_KERNELS:
        try:
            found.add(getattr(torch.ops.aten, name).default)
        except AttributeError:  # an older torch without that kernel: nothing of it to keep
            continue
    return frozenset(found)


def _policy(kernels: frozenset, ctx, op, *args, **kwargs) -> CheckpointPolicy:
    return CheckpointPolicy.MUST_SAVE if op in kernels else CheckpointPolicy.PREFER_RECOMPUTE


def checkpointing_kwargs() -> dict:
    """Keyword arguments for `torch.utils.checkpoint.checkpoint` (what transformers'
    ``gradient_checkpointing_enable(gradient_checkpointing_kwargs=...)`` passes on):
    non-reentrant (with LoRA the layers' inputs need no grad, and the reentrant form would give
    the adapters inside a checkpointed layer no gradient) and keeping `saved_kernels`' outputs.

    Memory: the attention's outputs of every layer for a micro-batch's tokens, about
    (hidden size + heads) x 4 bytes per token per layer in float32."""
    context = functools.partial(create_selective_checkpoint_contexts, functools.partial(_policy, saved_kernels()))
    return {"use_reentrant": False, "context_fn": context}
