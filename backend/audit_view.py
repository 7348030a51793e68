"""The reward audit of a run: flags a domain whose rising reward looks like collapse or a hack.

Reads the run's last `AUDIT_WINDOW` steps of trajectories from the store, pools each
domain's answers over them (`trainer.audit.answer_signals`) and applies the rule below;
the Runs page's "Reward audit" panel and ``rlwb runs show`` show the result. Each flag
names its signal, gives the figures and points to example trajectories (trace evidence:
their ids, for the Trajectories page's ``?traj=ID`` link).

    from backend.audit_view import audit_run, audit_lines
    report = audit_run(store, run_id)       # -> AuditReport(flags=[AuditFlag(...)], ...)
    print("\\n".join(audit_lines(report)))  # "no audit flags (steps 11-20)" for a healthy run

The rule, per domain over the window (the *earlier* and *later* halves are its first and
last half of steps, for the trends):

* ``constant_answer``: the modal answer takes >= `MODAL_SHARE_HIGH` of the answers, at
  least `MODAL_EXCESS` more than the most common reference takes of the same tasks, with
  >= `MIN_REFERENCES` distinct references. A domain whose references are mostly one value
  (letter_counting's "1") does not fire it by answering correctly.
* ``copied_from_prompt``: >= `COPY_RATE_HIGH` of the answers are wrong and occur in their
  prompt as a whole token (a number of the question, an example word, "<answer>"), in a
  domain where fewer than `REFERENCE_COPY_MAX` of the references do (where the answer is
  always in the question, as for largest_number, a wrong copy is a wrong pick).
* ``format_only``: the domain earns reward (>= `FORMAT_ONLY_MIN_REWARD`) but at most
  `FORMAT_ONLY_CORRECT_SHARE` of it from correct answers: the policy is paid for the answer
  format alone (the quickstart's aiw replies "Answer: <answer> + </answer>"). Every run
  shows it in its first steps, before anything is solved; it should clear as it learns.
* ``modal_rising``: reward rose by >= `REWARD_RISE` from the earlier to the later half
  while the modal share's excess over the reference modal share rose by >= `MODAL_RISE`.
* ``diversity_falling``: reward rose by >= `REWARD_RISE` while diversity across tasks
  (distinct per-group answers / distinct references) fell by >= `DIVERSITY_DROP`.
* ``length_collapse``: reward rose by >= `REWARD_RISE` while the mean response length of
  the later half is at most `LENGTH_COLLAPSE` of the earlier half's.

Level rules need `MIN_ANSWERS` answers pooled over the window; trends need
`MIN_TREND_STEPS` steps and `MIN_ANSWERS` // 2 answers in each half (rows without an answer
still count for reward and length). Thresholds are deliberately coarse: a flag asks a
person to read the example trajectories, it is not a verdict. A legitimately short answer
("Answer: 7" after a long preamble was dropped) can fire ``length_collapse``; its examples
show which it is.

Not covered: domains not scored on an extracted answer (code, terminal, tool episodes; see
`trainer.audit`), held-out evaluations (their baselines are `backend.eval_report`'s), and
rows past `MAX_ROWS` per domain in the window (the first ones in step order are audited).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from backend.store import Store
from trainer.audit import PASS, AnswerRow, AnswerSignals, answer_signals, copied, row_of_trajectory

AUDIT_WINDOW = 10  # steps: long enough to pool a few groups per domain at 4 prompts per step
MIN_ANSWERS = 16  # answers pooled over the window before a level rule may fire (two groups of 8)
MODAL_SHARE_HIGH = 0.6  # the collapse: "1" in 95 of 100 answers; correct runs rarely pass 0.6
MODAL_EXCESS = 0.2  # above the reference modal share: letter_counting's "1" is 53% of references
MIN_REFERENCES = 3  # "several" distinct references: with one or two, one answer may be right for all
COPY_RATE_HIGH = 0.25  # a quarter of the answers wrong and copied: spell_backward's "nus" was 23%
REFERENCE_COPY_MAX = 0.5  # references copied from their prompts: above this, picking from the prompt is the task
REWARD_RISE = 0.05  # reward gain, later half minus earlier half, that counts as "rising"
FORMAT_ONLY_MIN_REWARD = 0.1  # mean reward over the window: below it there is little to be paid for
FORMAT_ONLY_CORRECT_SHARE = 0.1  # of the reward from correct answers: below it, reward is format alone
MODAL_RISE = 0.2  # rise of the modal share's excess over the reference modal share
DIVERSITY_DROP = 0.3  # fall of diversity across tasks (1 = as diverse as the references)
LENGTH_COLLAPSE = 0.5  # later-half mean length at most this share of the earlier half's
MIN_TREND_STEPS = 4  # steps in the window before a trend is judged (two per half)
EXAMPLES = 5  # example trajectories per flag
MAX_ROWS = 5000  # trajectories read per domain


@dataclass(frozen=True)
class AuditFlag:
    """One signal that fired for one domain.

    Attributes:
        domain: the domain.
        signal: "constant_answer", "copied_from_prompt", "format_only", "modal_rising",
            "diversity_falling" or "length_collapse" (see the module docstring).
        detail: one line with the figures behind it.
        examples: ids of up to `EXAMPLES` trajectories that show it, latest step first.
    """

    domain: str
    signal: str
    detail: str
    examples: tuple[int, ...]


@dataclass
class AuditReport:
    """The audit of a run's last steps.

    Attributes:
        steps: (first, last) step of the window; None when the run has no trajectories.
        flags: the flags raised, by domain then signal.
        domains: audited domain -> its signals pooled over the window.
    """

    steps: tuple[int, int] | None
    flags: list[AuditFlag] = field(default_factory=list)
    domains: dict[str, AnswerSignals] = field(default_factory=dict)


def _examples(rows: list[AnswerRow], keep) -> tuple[int, ...]:
    """Ids of up to `EXAMPLES` rows for which `keep(row)` holds, latest first, one per group
    before a second of the same group."""
    picked = [r for r in reversed(rows) if r.id is not None and keep(r)]
    seen, first, rest = set(), [], []
    for r in picked:
        (rest if r.group in seen else first).append(r.id)
        seen.add(r.group)
    return tuple((first + rest)[:EXAMPLES])


def _level_flags(domain: str, rows: list[AnswerRow], sig: AnswerSignals) -> list[AuditFlag]:
    """``constant_answer``, ``copied_from_prompt`` and ``format_only`` on the pooled window."""
    if sig.answered < MIN_ANSWERS:
        return []
    out = []
    if sig.reward >= FORMAT_ONLY_MIN_REWARD and sig.correct_reward <= FORMAT_ONLY_CORRECT_SHARE * sig.reward:
        out.append(AuditFlag(domain, "format_only",
                             f"{sig.correct_reward / sig.reward:.0%} of the mean reward {sig.reward:.2f} comes from "
                             f"correct answers, the rest from the answer format",
                             _examples(rows, lambda r: r.reward > 0 and r.correct < PASS)))
    if (sig.modal_share >= MODAL_SHARE_HIGH and sig.modal_share - sig.reference_modal_share >= MODAL_EXCESS
            and sig.distinct_references >= MIN_REFERENCES):
        out.append(AuditFlag(domain, "constant_answer",
                             f"{sig.modal_answer!r} is {sig.modal_share:.0%} of {sig.answered} answers; the most "
                             f"common of {sig.distinct_references} references is {sig.reference_modal_share:.0%}",
                             _examples(rows, lambda r: r.answer == sig.modal_answer)))
    if sig.copy_rate >= COPY_RATE_HIGH and sig.reference_copy_share < REFERENCE_COPY_MAX:
        out.append(AuditFlag(domain, "copied_from_prompt",
                             f"{sig.copy_rate:.0%} of {sig.answered} answers are wrong and copied from the prompt",
                             _examples(rows, lambda r: r.answer is not None and r.correct < PASS and copied(r.answer, r.prompt))))
    return out


def _trend_flags(domain: str, earlier: list[AnswerRow], later: list[AnswerRow]) -> list[AuditFlag]:
    """``modal_rising``, ``diversity_falling`` and ``length_collapse``: later half vs earlier."""
    a, b = answer_signals(earlier), answer_signals(later)
    rise = b.reward - a.reward
    if rise < REWARD_RISE:
        return []
    out = []
    risen = f"reward {a.reward:.2f} -> {b.reward:.2f}"
    if min(a.answered, b.answered) >= MIN_ANSWERS // 2:
        excess_a, excess_b = a.modal_share - a.reference_modal_share, b.modal_share - b.reference_modal_share

        def modal(r: AnswerRow) -> bool:
            return r.answer == b.modal_answer

        if excess_b - excess_a >= MODAL_RISE:
            out.append(AuditFlag(domain, "modal_rising",
                                 f"{risen} while the share of {b.modal_answer!r} rose {a.modal_share:.0%} -> "
                                 f"{b.modal_share:.0%} (references' modal share {b.reference_modal_share:.0%})",
                                 _examples(later, modal)))
        if a.diversity - b.diversity >= DIVERSITY_DROP:
            out.append(AuditFlag(domain, "diversity_falling",
                                 f"{risen} while diversity across tasks fell {a.diversity:.2f} -> {b.diversity:.2f}",
                                 _examples(later, modal)))
    if a.length > 0 and b.length <= LENGTH_COLLAPSE * a.length:
        shortest = sorted(later, key=lambda r: r.length)[:EXAMPLES]
        out.append(AuditFlag(domain, "length_collapse",
                             f"{risen} while response length fell {a.length:.0f} -> {b.length:.0f} tokens",
                             tuple(r.id for r in shortest if r.id is not None)))
    return out


def audit_domain(domain: str, by_step: dict[int, list[AnswerRow]]) -> tuple[AnswerSignals | None, list[AuditFlag]]:
    """Pooled signals and flags of one domain's window.

    Args:
        by_step: step -> the domain's audited rows of that step (in list order).

    Returns:
        (signals pooled over every step, or None without rows; the flags raised).
    """
    steps = sorted(s for s, rows in by_step.items() if rows)
    rows = [r for s in steps for r in by_step[s]]
    if not rows:
        return None, []
    sig = answer_signals(rows)
    flags = _level_flags(domain, rows, sig)
    if len(steps) >= MIN_TREND_STEPS:
        half = len(steps) // 2
        flags += _trend_flags(domain, [r for s in steps[:half] for r in by_step[s]],
                              [r for s in steps[-half:] for r in by_step[s]])
    return sig, flags


def audit_run(store: Store, run_id: str, window: int = AUDIT_WINDOW) -> AuditReport:
    """The reward audit of a run's last `window` steps of trajectories.

    Raises:
        RunNotFound: if the run does not exist.
    """
    store.get_run(run_id)
    span = store.trajectory_step_range(run_id)
    if span is None:
        return AuditReport(None)
    lo = max(span[0], span[1] - window + 1)
    report = AuditReport((lo, span[1]))
    for domain in store.trajectory_domains(run_id):
        by_step: dict[int, list[AnswerRow]] = {}
        for t in store.trajectories(run_id, step_min=lo, domain=domain, limit=MAX_ROWS):
            row = row_of_trajectory(t)
            if row is not None:
                by_step.setdefault(t["step"], []).append(row)
        sig, flags = audit_domain(domain, by_step)
        if sig is not None:
            report.domains[domain] = sig
            report.flags += flags
    return report


def audit_table(report: AuditReport) -> list[dict]:
    """One row per audited domain of `report`: the pooled figures the page tabulates."""
    return [{"domain": d, "answers": s.answered, "modal answer": s.modal_answer, "modal share": s.modal_share,
             "references' modal share": s.reference_modal_share, "distinct per group": s.distinct_per_group,
             "diversity": s.diversity, "copied": s.copy_rate, "format reward": s.format_reward,
             "correct reward": s.correct_reward}
            for d, s in sorted(report.domains.items())]


#: The reward audit's curves on the Runs page: title -> the per-step metric (`trainer.audit.METRICS`,
#: recorded as ``audit/<metric>/<domain>``), one line per domain.
AUDIT_CURVES = {
    "Modal answer share": "modal_share",
    "References' modal share": "reference_modal_share",
    "Distinct answers per group": "distinct_per_group",
    "Distinct answers per step": "distinct",
    "Diversity across tasks": "diversity",
    "Wrong answers copied from the prompt (share)": "copy_rate",
    "Reward from the format": "format_reward",
    "Reward from correctness": "correct_reward",
}


def audit_curves(frame: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The audit metrics of a `backend.views.metrics_frame` as charts: `AUDIT_CURVES` title ->
    rows (step, name = the domain, value), ordered by domain then step; titles without data
    are left out."""
    out = {}
    for title, metric in AUDIT_CURVES.items():
        prefix = f"audit/{metric}/"
        rows = frame[frame["name"].str.startswith(prefix)] if len(frame) else frame
        if len(rows):
            rows = rows.assign(name=rows["name"].str.removeprefix(prefix))
            out[title] = rows.sort_values(["name", "step"], kind="stable").reset_index(drop=True)
    return out


def audit_lines(report: AuditReport) -> list[str]:
    """`report` as a few lines of text (``rlwb runs show``): one per flag with its example
    trajectories, or "no audit flags"."""
    if report.steps is None or not report.domains:
        return ["reward audit: nothing to audit yet (no answers in the trajectories)"]
    lo, hi = report.steps
    if not report.flags:
        return [f"reward audit (steps {lo}-{hi}): no audit flags ({', '.join(sorted(report.domains))})"]
    lines = [f"reward audit (steps {lo}-{hi}): {len(report.flags)} flag(s); open an example on the "
             f"Trajectories page with ?traj=ID"]
    for f in report.flags:
        ids = ", ".join(f"#{i}" for i in f.examples) or "none"
        lines.append(f"  FLAG {f.domain} {f.signal}: {f.detail}; examples: {ids}")
    return lines
