"""Collapse and reward-hacking signals of the answers a policy gives, per domain.

A rising reward can hide a policy that learned the answer format plus one constant guess
(always "1" on letter_counting beats most trained models there) or that copies a word
from its prompt. These figures, taken from the scored samples of a step, say which:

* how many distinct answers the policy gives, per group (mean over groups) and per step;
* the share of its most common (modal) answer, beside the share the most common
  *reference* has among the same samples (what answering correctly would give);
* diversity across tasks: distinct per-group modal answers / distinct references (1 when
  the policy answers different tasks differently, as their references differ; 1/k when
  one answer covers k tasks with k different references);
* the rate of wrong answers copied from the prompt (the answer occurs in the prompt as a
  whole token: a number or word of the question, or "<answer>" from the instruction);
* the reward from correctness, ``CORRECT_WEIGHT * correct`` (`domains.contract`), vs the rest
  of the verifier's reward: ``FORMAT_WEIGHT * format`` for reasoning-gym and long-document
  domains, the answer format plus the call-validity credit for tool domains.

    from trainer.audit import audit_metrics
    audit_metrics(samples)  # -> {"audit/modal_share/chain_sum": 0.75, ...}

`trainer.metrics.rollout_metrics` adds them to every step's metrics; `backend.audit_view`
pools them over a window of steps (from the stored trajectories) and raises the flags.

Not covered: domains whose reward does not come from one extracted answer string (code,
terminal and tool episodes: their breakdown has no "extracted"), and any judgement of
whether a constant answer is *right* -- that is the flags' job, against the references.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from domains.contract import CORRECT_WEIGHT

if TYPE_CHECKING:  # trainer.types imports torch; `rlwb runs show` reads the audit without it
    from trainer.types import Sample

PASS = 0.999  # a "correct" part at or above this is a pass (as `trainer.curriculum.passed`)


@dataclass(frozen=True)
class AnswerRow:
    """One audited sample: what the policy answered to one task, and how it was scored.

    Attributes:
        group: the task's group key (the G samples of one task in one step share it).
        answer: the extracted answer, whitespace-normalised; None when the reply gave none.
        reference: the task's reference answer, whitespace-normalised.
        prompt: the prompt text the policy saw.
        correct: the breakdown's correct part (0 .. 1).
        reward: the verifier's reward (0 .. 1; before an overlong penalty, `trainer.overlong`).
        length: completion length (tokens; a multi-turn episode's observations included).
        id: the trajectory's id when the row was read from the store, else None.
    """

    group: Hashable
    answer: str | None
    reference: str
    prompt: str
    correct: float
    reward: float
    length: int
    id: int | None = None


@dataclass(frozen=True)
class AnswerSignals:
    """The signals of a set of `AnswerRow` (one step, or a window pooled).

    Attributes:
        samples: rows (audited samples).
        answered: rows with an answer.
        distinct: distinct answers.
        distinct_per_group: distinct answers per group, mean over groups with an answer.
        modal_answer: the most common answer (None without answers).
        modal_share: its share of the answered rows (0 .. 1).
        reference_modal_share: the share the most common reference has among the answered
            rows (what a policy that answers every task correctly would show as modal_share).
        distinct_references: distinct references among the answered rows.
        diversity: distinct per-group modal answers / distinct references of those groups,
            at most 1 (1: no sign of one answer standing for many tasks).
        copy_rate: wrong answers that occur in their prompt as a whole token / answered.
        reference_copy_share: references that occur in their prompt as a whole token /
            answered: near 1 where the task is to pick from the prompt (the largest of a few
            numbers, a multiple-choice letter), where a wrong copy is a wrong pick, not a hack.
        format_reward: mean reward not from correctness (reward - CORRECT_WEIGHT * correct,
            at least 0) over the rows: the format part.
        correct_reward: mean CORRECT_WEIGHT * correct over the rows.
        reward: mean reward.
        length: mean completion length (tokens).
    """

    samples: int
    answered: int
    distinct: int
    distinct_per_group: float
    modal_answer: str | None
    modal_share: float
    reference_modal_share: float
    distinct_references: int
    diversity: float
    copy_rate: float
    reference_copy_share: float
    format_reward: float
    correct_reward: float
    reward: float
    length: float


def normalised(text) -> str | None:
    """`text` with runs of whitespace as one space and no ends; None for None or blank."""
    if text is None:
        return None
    return " ".join(str(text).split()) or None


def copied(answer: str, prompt: str) -> bool:
    """True if `answer` occurs in `prompt` as a whole token: not inside a longer word or
    number ("1" is in "add 1 and 2" but not in "12" or "1.5")."""
    pattern = r"(?<!\w)(?<!\d\.)" + re.escape(answer) + r"(?!\w)(?!\.\d)"
    return re.search(pattern, prompt) is not None


def row_of_sample(s: Sample) -> AnswerRow | None:
    """The `AnswerRow` of a scored sample; None for a faulted sample or a domain that is
    not scored on an extracted answer (its breakdown has no "extracted")."""
    b = s.breakdown
    if s.fault is not None or "extracted" not in b:
        return None
    return AnswerRow((s.group, s.task_seed), normalised(b["extracted"]), normalised(s.answer) or "",
                     s.prompt, float(b.get("correct") or 0.0),
                     float(b.get("unpenalized_reward", s.reward)), len(s.completion.token_ids))


def row_of_trajectory(t: dict) -> AnswerRow | None:
    """The `AnswerRow` of a stored trajectory (`Store.trajectories` row, breakdown
    decoded); None as for `row_of_sample`."""
    b = t.get("breakdown") or {}
    if t.get("fault") is not None or not isinstance(b, dict) or "extracted" not in b:
        return None
    return AnswerRow((t["step"], t["group_idx"], t["task_seed"]), normalised(b["extracted"]),
                     normalised(t["answer"]) or "", t["prompt"] or "", float(b.get("correct") or 0.0),
                     float(b.get("unpenalized_reward", t["reward"]) or 0.0),
                     int(t["completion_tokens"] or 0), t["id"])


def answer_signals(rows: Iterable[AnswerRow]) -> AnswerSignals:
    """The signals of `rows` (see `AnswerSignals`).

    Raises:
        ValueError: if `rows` is empty.
    """
    rows = list(rows)
    if not rows:
        raise ValueError("answer_signals needs at least one row")
    answered = [r for r in rows if r.answer is not None]
    answers = Counter(r.answer for r in answered)
    refs = Counter(r.reference for r in answered)
    groups: dict[Hashable, list[AnswerRow]] = defaultdict(list)
    for r in answered:
        groups[r.group].append(r)
    modal_per_group = {g: Counter(r.answer for r in rs).most_common(1)[0][0] for g, rs in groups.items()}
    group_refs = {rs[0].reference for rs in groups.values()}
    n, k = len(rows), len(answered)
    modal, top = answers.most_common(1)[0] if answers else (None, 0)
    return AnswerSignals(
        samples=n, answered=k, distinct=len(answers),
        distinct_per_group=sum(len({r.answer for r in rs}) for rs in groups.values()) / max(len(groups), 1),
        modal_answer=modal, modal_share=top / k if k else 0.0,
        reference_modal_share=refs.most_common(1)[0][1] / k if k else 0.0,
        distinct_references=len(refs),
        diversity=min(1.0, len(set(modal_per_group.values())) / len(group_refs)) if groups else 1.0,
        copy_rate=sum(r.correct < PASS and copied(r.answer, r.prompt) for r in answered) / k if k else 0.0,
        reference_copy_share=sum(bool(r.reference) and copied(r.reference, r.prompt) for r in answered) / k
        if k else 0.0,
        format_reward=sum(max(0.0, r.reward - CORRECT_WEIGHT * r.correct) for r in rows) / n,
        correct_reward=CORRECT_WEIGHT * sum(r.correct for r in rows) / n,
        reward=sum(r.reward for r in rows) / n, length=sum(r.length for r in rows) / n,
    )


#: The per-step metrics `audit_metrics` records (`AnswerSignals` fields).
METRICS = ("distinct", "distinct_per_group", "modal_share", "reference_modal_share", "diversity", "copy_rate",
           "format_reward", "correct_reward")
ANSWER_METRICS = METRICS[:6]  # recorded only where some sample answered


def audit_metrics(samples: list[Sample]) -> dict[str, float]:
    """One step's audit metrics, per audited domain: ``audit/<metric>/<domain>`` for each
    `METRICS` name (the answer metrics only where some sample answered).

    Args:
        samples: the step's samples; faulted ones and domains without an extracted answer
            are left out.
    """
    by_domain: dict[str, list[AnswerRow]] = defaultdict(list)
    for s in samples:
        row = row_of_sample(s)
        if row is not None:
            by_domain[s.domain].append(row)
    out: dict[str, float] = {}
    for domain, rows in sorted(by_domain.items()):
        sig = answer_signals(rows)
        for name in METRICS:
            if sig.answered or name not in ANSWER_METRICS:
                out[f"audit/{name}/{domain}"] = float(getattr(sig, name))
    return out
