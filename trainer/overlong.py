"""Truncated ("overlong") samples: keep, mask or penalize them before advantages.

A sample is truncated when a budget cut it instead of the model finishing it: its
completion's ``finish_reason`` is "length" (a single-turn completion that hit
``max_new_tokens``; a multi-turn episode that hit ``max_episode_tokens`` or ``max_turns``,
see `trainer.episodes`). Its reward says little about the policy: a completion cut right
after "Answer: 2" scores like a finished one, and one cut before its answer scores like a
wrong one. The run config's ``overlong`` says what to do with them (DAPO: Yu et al., 2025,
"DAPO: An Open-Source LLM Reinforcement Learning System at Scale", arXiv:2503.14476, §3.4):

* keep: scored and trained like finished samples (nothing is recorded).
* mask: DAPO's overlong filtering: the sample keeps its reward (reward metrics count it)
  but takes no part in its group's advantage statistics (advantage 0) and leaves the
  learner batch (`trainer.groups.collect_groups`); ``breakdown["overlong"] = "masked"``.
* penalize: its reward is replaced by 0, the failure reward, before advantages (and in
  the reward metrics); ``breakdown["overlong"] = "penalized"`` and
  ``breakdown["unpenalized_reward"]`` keeps the verifier's reward. The verifier's verdict
  (``breakdown["correct"]``, so the accuracy metrics and the curriculum) is left as it was.

* soft: DAPO's soft overlong punishment (§3.4, eq. 13): with L_max = ``max_new_tokens`` and
  L_cache = ``overlong_buffer``, a single-turn completion of |y| tokens gets
  min(0, ((L_max - L_cache) - |y|) / L_cache) added to its reward: 0 up to L_max - L_cache
  tokens, then down to -1 at the cap, finished completions included. A multi-turn episode
  (its budget is not max_new_tokens) gets -1 when truncated, else 0.
  ``breakdown["overlong"] = "shaped"``, ``breakdown["overlong_penalty"]`` (<= 0) and
  ``breakdown["unpenalized_reward"]`` are recorded where the penalty is not 0; rewards may
  then be below 0 (the advantages are relative, so that is harmless).

Not covered: a soft buffer for multi-turn episodes' token budget.
"""

from __future__ import annotations

from trainer.types import Sample

OVERLONG_MODES = ("keep", "mask", "penalize", "soft")
_MARK = {"mask": "masked", "penalize": "penalized", "soft": "shaped"}


def truncated(sample: Sample) -> bool:
    """True if a token or turn budget ended the sample (finish_reason "length")."""
    return sample.completion.finish_reason == "length"


def masked(sample: Sample) -> bool:
    """True if `treat_overlong` masked the sample out of the loss and its group's statistics."""
    return sample.breakdown.get("overlong") == "masked"


def soft_penalty(tokens: int, max_tokens: int, buffer: int) -> float:
    """DAPO's soft overlong punishment of a `tokens`-long completion: 0 up to `max_tokens` -
    `buffer` tokens, then linearly down to -1 at `max_tokens` (and below it, -1)."""
    return max(-1.0, min(0.0, ((max_tokens - buffer) - tokens) / buffer))


def treat_overlong(samples: list[Sample], mode: str, max_tokens: int | None = None, buffer: int | None = None) -> None:
    """Mask, penalize or shape the overlong samples in place, as `mode` says (see the module docstring).

    Samples with a harness fault are left alone (they never count), and so are samples
    already treated, so calling it again on the same samples changes nothing.

    Args:
        samples: scored samples (reward and breakdown set), before advantages.
        mode: "keep", "mask", "penalize" or "soft" (``RunConfig.overlong``).
        max_tokens: "soft": the completion cap (``max_new_tokens``), tokens.
        buffer: "soft": the buffer before the cap (``overlong_buffer``), 1 .. `max_tokens` tokens.

    Raises:
        ValueError: an unknown mode, or "soft" without a valid `max_tokens` and `buffer`.
    """
    if mode not in OVERLONG_MODES:
        raise ValueError(f"overlong mode must be one of {', '.join(OVERLONG_MODES)}, got {mode!r}")
    if mode == "soft" and not (max_tokens and buffer and 1 <= buffer <= max_tokens):
        raise ValueError(f"overlong: soft needs 1 <= overlong_buffer <= max_new_tokens, got {buffer} and {max_tokens}")
    if mode == "keep":
        return
    for s in samples:
        if s.fault is not None or "overlong" in s.breakdown:
            continue
        if mode == "soft":
            single_turn = s.completion.mask is None
            penalty = (soft_penalty(len(s.completion.token_ids), max_tokens, buffer) if single_turn
                       else -1.0 if truncated(s) else 0.0)
            if penalty < 0:
                s.breakdown.update(overlong="shaped", overlong_penalty=penalty, unpenalized_reward=s.reward)
                s.reward = s.reward + penalty
            continue
        if not truncated(s):
            continue
        s.breakdown["overlong"] = _MARK[mode]
        if mode == "penalize":
            s.breakdown["unpenalized_reward"] = s.reward
            s.reward = 0.0


def overlong_metrics(samples: list[Sample], mode: str) -> dict[str, float]:
    """``overlong/masked``, ``overlong/penalized`` or ``overlong/shaped``: how many of
    `samples` (a step's recorded samples) were treated, a count; empty under "keep"."""
    if mode == "keep":
        return {}
    tag = _MARK[mode]
    return {f"overlong/{tag}": float(sum(s.breakdown.get("overlong") == tag for s in samples))}
