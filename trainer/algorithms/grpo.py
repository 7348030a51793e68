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
* DAPO (same paper): GRPO's advantages with a decoupled clip range [1 - eps_low,
  1 + eps_high], eps_high 0.28 > eps_low 0.2 ("clip-higher"), token-level aggregation, the
  soft overlong punishment (`trainer.overlong`, ``overlong: soft``) and dynamic sampling
  (``zero_variance: resample``); ``configs/dapo.yaml`` sets the whole recipe.
* GSPO: Zheng et al., 2025, "Group Sequence Policy Optimization", arXiv:2507.18071 — one
  importance ratio per sequence, s_i = (pi(y_i|x) / pi_old(y_i|x))^(1/|y_i|), clipped per
  sequence, each sequence's tokens averaged, then sequences averaged. Computed in the
  paper's GSPO-token form (s_i,t = sg[s_i] * pi(y_t) / sg[pi(y_t)]), whose value and
  gradient equal GSPO's when a sequence's tokens share its advantage, so packed layouts
  (tokens of many sequences flat) need only each token's sequence index.
* CISPO: MiniMax, 2025, "MiniMax-M1: Scaling Test-Time Compute Efficiently with Lightning
  Attention", arXiv:2506.13585, §3.1 — the importance weight is clipped and detached and
  multiplies A * log pi of *every* token (no token's gradient is dropped by a clip);
  clipped from above only (the paper sets no lower bound in practice).
* REINFORCE++: Hu, 2025, "REINFORCE++: A Simple and Efficient Approach for Aligning Large
  Language Models", arXiv:2501.03262 — no per-group baseline: rewards normalised over the
  whole batch (`batch_normalize`); its "-baseline" variant first subtracts each group's
  mean reward (as OpenRLHF's ``reinforce_baseline``), then normalises over the batch. The
  KL stays a k3 term of the loss here (OpenRLHF's ``use_kl_loss``), not a reward shaping.

Not covered: value functions (PPO with a critic), multi-epoch updates, DAPO's and
REINFORCE++'s token-weighted batch statistics (advantages here are per sequence).
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


def batch_normalize(advantages: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """REINFORCE++'s global normalisation (Hu, 2025, arXiv:2501.03262): (a - mean) / (std + eps)
    over the whole batch, population std.

    Args:
        advantages: (N,) one value per sequence: rewards (REINFORCE++) or group-centred
            rewards (REINFORCE++-baseline).

    Returns:
        (N,) float32; all 0 when N < 2 or every value is equal.
    """
    a = advantages.to(torch.float32).flatten()
    if a.numel() < 2:
        return torch.zeros_like(a)
    centred = a - a.mean()
    std = a.std(unbiased=False)
    return torch.zeros_like(a) if float(std) == 0.0 else centred / (std + eps)


#: algorithm -> (advantage estimator, loss objective); see the module docstring for each.
#: Advantage estimators: "group_std" (GRPO), "group_mean" (Dr. GRPO), "leave_one_out" (RLOO),
#: "batch" (REINFORCE++), "group_mean_batch" (REINFORCE++-baseline). Objectives: "ppo"
#: (token ratio, clipped), "gspo" (sequence ratio, clipped, sequence-mean), "cispo"
#: (clipped, detached weight on every token's log-prob).
ALGORITHM_PARTS: dict[str, tuple[str, str]] = {
    "grpo": ("group_std", "ppo"),
    "dr_grpo": ("group_mean", "ppo"),
    "rloo": ("leave_one_out", "ppo"),
    "dapo": ("group_std", "ppo"),
    "gspo": ("group_std", "gspo"),
    "cispo": ("group_std", "cispo"),
    "reinforce_pp": ("batch", "ppo"),
    "reinforce_pp_baseline": ("group_mean_batch", "ppo"),
}
OBJECTIVES = ("ppo", "gspo", "cispo")


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
    clip_eps_high: float | None = None,
    ref_logprobs: torch.Tensor | None = None,
    kl_coef: float = 0.0,
    num_tokens_total: float | None = None,
    objective: str = "ppo",
    sequence_index: torch.Tensor | None = None,
    num_sequences_total: float | None = None,
) -> LossOutput:
    """The policy loss of a GRPO-family algorithm with an optional k3 KL penalty.

    Per token, with rho = exp(logprobs - old_logprobs), A the sequence's advantage and
    clip(x) = clamp(x, 1 - clip_eps, 1 + clip_eps_high):

    * "ppo" (GRPO, Dr. GRPO, RLOO, DAPO, REINFORCE++): -min(rho * A, clip(rho) * A),
      token-level aggregation (sum / `num_tokens_total`).
    * "gspo": the same with rho replaced by the sequence's ratio s_i = exp(mean over its
      scored tokens of (logprobs - old_logprobs)) in the GSPO-token form; each sequence's
      tokens are averaged, then the sequences (sum / `num_sequences_total`).
    * "cispo": -sg[min(rho, 1 + clip_eps_high)] * A * logprobs, token-level aggregation.

    The KL term (kl_coef * k3) is added per token and aggregated like the policy term.

    Args:
        logprobs: (N, T) logprobs of the taken tokens under the current policy (with grad).
        old_logprobs: (N, T) logprobs under the sampling policy.
        advantages: (N,) one advantage per row.
        mask: (N, T) 1.0 on completion tokens, 0 elsewhere.
        clip_eps: lower clip range (and the upper one unless `clip_eps_high` is set).
        clip_eps_high: upper clip range (DAPO's clip-higher); None: `clip_eps`.
        ref_logprobs: (N, T) reference-policy logprobs; required when kl_coef > 0.
        kl_coef: weight of the KL penalty.
        num_tokens_total: token count to divide by (the whole step's, when this is one
            micro-batch of several); defaults to this batch's token count.
        objective: "ppo", "gspo" or "cispo" (`ALGORITHM_PARTS` maps an algorithm to it).
        sequence_index: "gspo": (N, T) int64, the sequence each token belongs to, 0-based
            within this batch (a packed batch's one-token rows name their sequence here).
        num_sequences_total: "gspo": sequences to divide by (the whole step's); defaults
            to the sequences in this batch with a scored token.

    Raises:
        ValueError: on mismatched shapes, kl_coef > 0 without ref_logprobs, an unknown
            objective, or "gspo" without `sequence_index`.
    """
    if logprobs.shape != old_logprobs.shape or logprobs.shape != mask.shape:
        raise ValueError(f"shape mismatch: {tuple(logprobs.shape)}, {tuple(old_logprobs.shape)}, {tuple(mask.shape)}")
    if kl_coef > 0 and ref_logprobs is None:
        raise ValueError("kl_coef > 0 needs ref_logprobs")
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {', '.join(OBJECTIVES)}, got {objective!r}")
    if objective == "gspo" and (sequence_index is None or sequence_index.shape != logprobs.shape):
        raise ValueError("objective gspo needs sequence_index with the shape of logprobs")
    high = clip_eps if clip_eps_high is None else clip_eps_high
    mask = mask.to(logprobs.dtype)
    adv = advantages.to(logprobs.dtype).unsqueeze(1)
    tokens = float(mask.sum().item())
    weights = mask / (num_tokens_total if num_tokens_total is not None else max(tokens, 1.0))
    log_ratio = logprobs - old_logprobs
    if objective == "gspo":
        seq_log_ratio, seq_tokens = _sequence_means(log_ratio.detach(), mask, sequence_index)
        log_ratio = seq_log_ratio[sequence_index] + logprobs - logprobs.detach()  # GSPO-token: value s_i
        n_seq = num_sequences_total if num_sequences_total is not None else max(float((seq_tokens > 0).sum()), 1.0)
        weights = mask / (seq_tokens[sequence_index].clamp(min=1.0) * n_seq)
    ratio = torch.exp(log_ratio)
    if objective == "cispo":
        weight = torch.clamp(ratio, max=1.0 + high).detach()
        per_token = -weight * adv * logprobs
        was_clipped_tok = ratio.detach() > 1.0 + high
    else:
        unclipped = ratio * adv
        clipped = torch.clamp(ratio, 1.0 - clip_eps, 1.0 + high) * adv
        per_token = -torch.minimum(unclipped, clipped)
        was_clipped_tok = clipped.detach() < unclipped.detach()  # the clip bound was active
    pg_sum = (per_token * mask).sum()
    kl_sum = torch.zeros((), dtype=logprobs.dtype)
    total = per_token
    if ref_logprobs is not None:
        kl = k3_kl(logprobs, ref_logprobs)
        kl_sum = (kl * mask).sum()
        if kl_coef > 0:
            total = total + kl_coef * kl
    loss = (total * weights).sum()
    return LossOutput(
        loss=loss,
        pg_loss_sum=float(pg_sum.detach()),
        kl_sum=float(kl_sum.detach()),
        clipped_sum=float((was_clipped_tok.to(mask.dtype) * mask).sum()),
        ratio_sum=float((ratio.detach() * mask).sum()),
        tokens=tokens,
    )


def _sequence_means(values: torch.Tensor, mask: torch.Tensor, sequence_index: torch.Tensor
                    ) -> tuple[torch.Tensor, torch.Tensor]:
    """Per sequence: the mean of `values` over its masked tokens (0 for none) and its token
    count; both (S,) with S = max(sequence_index) + 1 (0 for a micro-batch without scored
    tokens: a group's harness-faulted sample, packed alone)."""
    n = int(sequence_index.max()) + 1 if sequence_index.numel() else 0
    idx = sequence_index.flatten()
    w = mask.flatten()
    sums = torch.zeros(n, dtype=values.dtype, device=values.device).index_add(0, idx, values.flatten() * w)
    counts = torch.zeros(n, dtype=values.dtype, device=values.device).index_add(0, idx, w)
    return sums / counts.clamp(min=1.0), counts
