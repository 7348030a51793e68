"""Scoring an answer to a `financial_report` question (`domains.long_docs.financial`).

    from domains.long_docs.report_scoring import score_report_answer
    score_report_answer(task, "12.3%")   # (True, {"parsed": 12.3, "expected": "12.3", ...})

The caller extracts the answer string from the model's reply; this module judges it:
numbers by the last number within the reference's rounding or tolerance, names after
normalising. It shapes no reward beyond the boolean.
"""

from __future__ import annotations

import re

from domains.answers import parse_number
from domains.long_docs.financial import MAX_ANSWER_CHARS, ReportTask

_BAD_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def _norm_name(text: str) -> str:
    words = re.sub(r"[^a-z0-9]+", " ", text.lower()).split()
    if words[:1] == ["the"]:
        words = words[1:]
    if words[-1:] == ["segment"]:
        words = words[:-1]
    return "".join(words)


def score_report_answer(task: ReportTask, extracted: str | None) -> tuple[bool, dict]:
    """Judge an extracted answer against task.answer; never raises for any str or None.

    Numbers: the last number in `extracted` (see `parse_number`) is correct when
    |x - ref| <= task.tolerance * |ref| or |x - ref| <= half a unit of the reference's last
    decimal place (0.05 for "12.3", 0.005 for "1.23", 0.5 for "418"), plus 1e-9 for float
    error. So an unrounded "12.34" passes for "12.3", but a neighbour "12.4" does not.
    Names: equal after lower-casing, dropping punctuation/whitespace, a leading "the" and a
    trailing "segment". Answers with control characters (other than tab/newline) or longer
    than MAX_ANSWER_CHARS are wrong.

    Returns:
        (correct, info) with info = {"parsed": float | str | None, "expected": task.answer,
        "abs_error": float | None, "reason": short text}.
    """
    info = {"parsed": None, "expected": task.answer, "abs_error": None, "reason": ""}
    if not isinstance(extracted, str) or not extracted.strip():
        return False, {**info, "reason": "no answer"}
    if len(extracted) > MAX_ANSWER_CHARS:
        return False, {**info, "reason": f"answer too long ({len(extracted)} > {MAX_ANSWER_CHARS} chars)"}
    if _BAD_CONTROL.search(extracted):
        return False, {**info, "reason": "answer contains control characters"}
    if task.answer_kind == "name":
        got = _norm_name(extracted)
        ok = bool(got) and got == _norm_name(task.answer)
        return ok, {**info, "parsed": got, "reason": "correct" if ok else "name does not match"}
    x = parse_number(extracted)
    if x is None:
        return False, {**info, "reason": "no number found"}
    ref = float(task.answer)
    decimals = len(task.answer.partition(".")[2])
    err = abs(x - ref)
    ok = err <= task.tolerance * abs(ref) + 1e-9 or err <= 0.5 * 10.0 ** -decimals + 1e-9
    return ok, {**info, "parsed": x, "abs_error": err, "reason": "correct" if ok else "number outside tolerance"}

