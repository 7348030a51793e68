"""GRPO-family advantages and policy loss, as pure torch functions.

* Group Relative Policy Optimization (GRPO): Shao et al., 2024, "DeepSeekMath: Pushing the
  Limits of Mathematical Reasoning in Open Language Models", arXiv:2402.03300. The advantage
  of a sample is its reward minus the group mean, divided by the group std.
* Dr. GRPO: Liu et al., 2025, "Understanding R1-Zero-Like Training: A Critical
  Perspective", arXiv:2503.20783 — drops the std division (mean-centred advantages).
* RLOO (REINFORCE Leave-One-Out): Kool et al., 2019, "Buy 4 REINFORCE Samples, Get a
  Baseline for Free!"; Ahmadian et al., 2024, "Back to Basics: Revisiting REINFORCE Style
  Optimization for Learning from Human Feedback in LLMs", arXiv:2402.14740 — each sample's
  baseline is the mean reward of the *other* samples of its group.
* Clipped importance ratio: Schulman et al., 2017, "Proximal Policy Optimization
  Algorithms", arXiv:1707.06347, taken against the *sampling* policy's logprobs (so a
  mismatch between the rollout engine and the learner is corrected and bounded).
* KL to a frozen reference with the k3 estimator exp(q) - q - 1, q = log pi_ref - log pi:
  J. Schulman, 2020, "Approximating KL Divergence" (unbiased, always >= 0), as in GRPO;
  clamped as verl's ``kl_penalty("low_var_kl")`` does, so one far-off token can't make the
  loss infinite (see `k3_kl`).
* Token-level aggregation: every completion token in the step weighs the same (sum over
  tokens / number of tokens), as in DAPO: Yu et al., 2025, arXiv:2503.14476.

Not covered: value functions (PPO with a critic), multi-epoch updates, sequence-level
aggregation variants.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


def _grouped(rewards: torch.Tensor) -> torch.Tensor:
    """`rewards` as float32 (B, G); raises ValueError unless 2-D with G >= 2."""
    if rewards.dim() != 2 or rewards.shape[1] < 2:
        raise ValueError(f"rewards must be (B, G) with G >= 2, got shape {tuple(rewards.shape)}")
    return rewards.to(torch.float32)


def group_advantages(rewards: torch.Tensor, normalize_std: bool = True, eps: float = 1e-6) -> torch.Tensor:
    """Group-relative advantages.

    Args:
        rewards: (B, G) rewards, one row per task, G samples each.
        normalize_std: divide by the group's population std (GRPO); False gives Dr. GRPO.
        eps: added to the std so equal-reward groups get advantage 0, not NaN.

    Returns:
        (B, G) float32 advantages; rows whose rewards are all equal are exactly 0.

    Raises:
        ValueError: if `rewards` is not 2-D or G < 2.
    """
    r = _grouped(rewards)
    centred = r - r.mean(dim=1, keepdim=True)
    if not normalize_std:
        return centred
    return centred / (r.std(dim=1, unbiased=False, keepdim=True) + eps)


def leave_one_out_advantages(rewards: torch.Tensor) -> torch.Tensor:
    """RLOO advantages: r_i - mean_{j != i} r_j = G / (G - 1) * (r_i - mean(r)).

    Args:
        rewards: (B, G) rewards, one row per task, G >= 2 samples each.

    Returns:
        (B, G) float32 advantages; rows whose rewards are all equal are exactly 0.

    Raises:
        ValueError: if `rewards` is not 2-D or G < 2.
    """
    r = _grouped(rewards)
    g = r.shape[1]
    others = (r.sum(dim=1, keepdim=True) - r) / (g - 1)
    return r - others


# k3's clamps, as verl's core_algos.kl_penalty("low_var_kl") (and OpenRLHF's k3) set them
K3_LOG_RATIO_BOUND = 20.0  # nats
K3_MAX = 10.0


def k3_kl(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimate of KL(pi || pi_ref): exp(q) - q - 1 with q = ref - logprobs, clamped.

    Schulman, 2020, "Approximating KL Divergence" (http://joschu.net/blog/kl-approx.html).
    For numerical stability q is clamped to [-20, 20] nats and the estimate to at most 10,
    as verl's ``kl_penalty`` "low_var_kl" does (``verl/trainer/ppo/core_algos.py``; k3 is
    never negative, so its lower bound of -10 never acts). Unclamped, exp(q) overflows
    float32 from q ~ 88.7 nats and the loss and its gradient become inf; clamped, a token
    whose estimate is above 10 adds 10 to the loss and no gradient (it is a bounded
    penalty there, not an unbiased estimate). For q in about [-11, 2.6] nats nothing is clamped.

    Args:
        logprobs: (N, T) log pi(token) under the policy being trained (nats).
        ref_logprobs: (N, T) log pi_ref(token) under the frozen reference (nats).

    Returns:
        (N, T) per-token estimates in [0, 10], finite for finite inputs.
    """
    q = torch.clamp(ref_logprobs - logprobs, min=-K3_LOG_RATIO_BOUND, max=K3_LOG_RATIO_BOUND)
    return torch.clamp(torch.exp(q) - q - 1.0, max=K3_MAX)


@dataclass
class LossOutput:
    """The policy loss of a (micro-)batch and its diagnostics.

    Attributes:
        loss: scalar to backpropagate: sum over tokens / `num_tokens_total`.
        pg_loss_sum, kl_sum, clipped_sum, ratio_sum: sums over this batch's completion tokens
            (divide by the step's token count for the step means).
        tokens: completion tokens in this batch.
    """

    loss: torch.Tensor
    pg_loss_sum: float
    kl_sum: float
    clipped_sum: float
    ratio_sum: float
    tokens: float


def policy_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    clip_eps: float = 0.2,
    ref_logprobs: torch.Tensor | None = None,
    kl_coef: float = 0.0,
    num_tokens_total: float | None = None,
) -> LossOutput:
    """Clipped policy-gradient loss with an optional k3 KL penalty, token-level aggregation.

    Per token: -min(rho * A, clip(rho, 1 - eps, 1 + eps) * A) + kl_coef * k3, with
    rho = exp(logprobs - old_logprobs) and A the sequence's advantage.

    Args:
        logprobs: (N, T) logprobs of the taken tokens under the current policy (with grad).
        old_logprobs: (N, T) logprobs under the sampling policy.
        advantages: (N,) one advantage per sequence.
        mask: (N, T) 1.0 on completion tokens, 0 elsewhere.
        clip_eps: PPO clip range.
        ref_logprobs: (N, T) reference-policy logprobs; required when kl_coef > 0.
        kl_coef: weight of the KL penalty.
        num_tokens_total: token count to divide by (the whole step's, when this is one
            micro-batch of several); defaults to this batch's token count.

    Raises:
        ValueError: on mismatched shapes or kl_coef > 0 without ref_logprobs.
    """
    if logprobs.shape != old_logprobs.shape or logprobs.shape != mask.shape:
        raise ValueError(f"shape mismatch: {tuple(logprobs.shape)}, {tuple(old_logprobs.shape)}, {tuple(mask.shape)}")
    if kl_coef > 0 and ref_logprobs is None:
        raise ValueError("kl_coef > 0 needs ref_logprobs")
    mask = mask.to(logprobs.dtype)
    adv = advantages.to(logprobs.dtype).unsqueeze(1)
    ratio = torch.exp(logprobs - old_logprobs)
    unclipped = ratio * adv
    clipped = torch.clamp(ratio, 1.0 - clip_eps, 1.0 + clip_eps) * adv
    per_token = -torch.minimum(unclipped, clipped)
    pg_sum = (per_token * mask).sum()
    kl_sum = torch.zeros((), dtype=logprobs.dtype)
    total = per_token * mask
    if ref_logprobs is not None:
        kl = k3_kl(logprobs, ref_logprobs)
        kl_sum = (kl * mask).sum()
        if kl_coef > 0:
            total = total + kl_coef * kl * mask
    tokens = float(mask.sum().item())
    denom = num_tokens_total if num_tokens_total is not None else max(tokens, 1.0)
    loss = total.sum() / denom
    with torch.no_grad():
        was_clipped = ((clipped < unclipped).to(mask.dtype) * mask).sum()  # the clip bound was active
    return LossOutput(
        loss=loss,
        pg_loss_sum=float(pg_sum.detach()),
        kl_sum=float(kl_sum.detach()),
        clipped_sum=float(was_clipped),
        ratio_sum=float((ratio.detach() * mask).sum()),
        tokens=tokens,
    )
