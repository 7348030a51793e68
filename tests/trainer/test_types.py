"""LearnerBatch packing: padding, alignment of logprobs, length-grouped micro-batches."""

import torch

from trainer.algorithms.grpo import policy_loss
from trainer.types import Completion, LearnerBatch, Sample


def _sample(i: int, p: int, c: int) -> Sample:
    return Sample("chain_sum", i, 0, i, "prompt", list(range(1, p + 1)),
                  Completion(list(range(100, 100 + c)), [-0.1 * (k + 1) for k in range(c)], "x", "stop"),
                  advantage=float(i) - 1.5)


def test_from_samples_pads_and_aligns():
    b = LearnerBatch.from_samples([_sample(0, 3, 2), _sample(1, 2, 4)], pad_id=0)
    assert b.input_ids.shape == (2, 6)
    assert b.input_ids[0].tolist() == [1, 2, 3, 100, 101, 0]
    assert b.completion_mask[0].tolist() == [0, 0, 0, 1, 1, 0]
    assert b.old_logprobs[1, 2:].tolist() == torch.tensor([-0.1, -0.2, -0.3, -0.4]).tolist()
    assert b.num_tokens == 5 + 6


def test_micro_batches_group_by_length_and_keep_the_loss():
    samples = [_sample(0, 2, 1), _sample(1, 5, 6), _sample(2, 3, 2), _sample(3, 4, 5)]
    b = LearnerBatch.from_samples(samples, pad_id=0)
    micro = b.micro_batches(2)
    assert [m.input_ids.shape for m in micro] == [(2, 11), (2, 5)]  # trimmed per micro-batch
    assert sorted(torch.cat([m.advantages for m in micro]).tolist()) == sorted(b.advantages.tolist())
    torch.manual_seed(0)
    full_lp = b.old_logprobs + 0.05 * torch.randn_like(b.old_logprobs)
    full = policy_loss(full_lp, b.old_logprobs, b.advantages, b.completion_mask).loss
    total = float(b.completion_mask.sum())
    # same per-token logprobs, re-gathered through the micro-batch row order
    lengths = b.attention_mask.sum(1)
    order = torch.argsort(lengths, descending=True, stable=True)
    parts, start = 0.0, 0
    for m in micro:
        rows = order[start:start + m.input_ids.shape[0]]
        t = m.input_ids.shape[1]
        parts += policy_loss(full_lp[rows, :t], m.old_logprobs, m.advantages, m.completion_mask,
                             num_tokens_total=total).loss
        start += len(rows)
    assert abs(float(parts) - float(full)) < 1e-6
