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

Not covered: DAPO's soft overlong punishment (a penalty that grows over a buffer of tokens
before the cap, applied to finished samples too), and rewards below 0.
"""

from __future__ import annotations

from trainer.types import Sample

OVERLONG_MODES = ("keep", "mask", "penalize")
_MARK = {"mask": "masked", "penalize": "penalized"}


def truncated(sample: Sample) -> bool:
    """True if a token or turn budget ended the sample (finish_reason "length")."""
    return sample.completion.finish_reason == "length"


def masked(sample: Sample) -> bool:
    """True if `treat_overlong` masked the sample out of the loss and its group's statistics."""
    return sample.breakdown.get("overlong") == "masked"


def treat_overlong(samples: list[Sample], mode: str) -> None:
    """Mask or penalize the truncated samples in place, as `mode` says (see the module docstring).

    Samples with a harness fault are left alone (they never count), and so are samples
    already treated, so calling it again on the same samples changes nothing.

    Args:
        samples: scored samples (reward and breakdown set), before advantages.
        mode: "keep", "mask" or "penalize" (``RunConfig.overlong``).

    Raises:
        ValueError: an unknown mode.
    """
    if mode not in OVERLONG_MODES:
        raise ValueError(f"overlong mode must be one of {', '.join(OVERLONG_MODES)}, got {mode!r}")
    if mode == "keep":
        return
    for s in samples:
        if s.fault is not None or not truncated(s) or "overlong" in s.breakdown:
            continue
        s.breakdown["overlong"] = _MARK[mode]
        if mode == "penalize":
            s.breakdown["unpenalized_reward"] = s.reward
            s.reward = 0.0


def overlong_metrics(samples: list[Sample], mode: str) -> dict[str, float]:
    """``overlong/masked`` or ``overlong/penalized``: how many of `samples` (a step's
    recorded samples) were treated, a count; empty under "keep"."""
    if mode == "keep":
        return {}
    tag = _MARK[mode]
    return {f"overlong/{tag}": float(sum(s.breakdown.get("overlong") == tag for s in samples))}
