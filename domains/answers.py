"""The final answer in a model's reply: one rule for every domain, and numbers read alike.

    extract_answer("<answer>3</answer> ... wait, no.\\nAnswer: 4")     # -> "4"
    extract_answer("Answer:\\n```\\n42\\n```")                          # -> "42"
    numeric_answer("\u22121,234", reference="-1234")                # -> ("-1234", None)
    numeric_answer("3 or 4", reference="3")                        # -> ("3 or 4", "ambiguous: ...")

The rule is *the last answer the reply commits to*: of the `<answer>...</answer>` pairs and
the "Answer:" markers, the one that comes last in the text is the answer (a model that
revises itself is judged on its revision). A fenced code block right after "Answer:" is
the answer's content; for code (humaneval) the last code block counts
(`domains.code.humaneval`). Where the reference is a single number, the candidate is
normalised before the verifier sees it (a unicode minus is a minus, "1,234" is 1234), and
an answer that lists several different numbers ("3 or 4", "3, 4") is ambiguous: it gets
the format credit but is not verified. The verifier itself stays the domain's own
(reasoning-gym's `score_answer`, the long-document and tool scorers).

Not covered: units, currency signs and percent signs (left for the verifier), decimal
commas ("3,5" is read as the list 3, 5), numbers written as words.
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from decimal import Decimal, InvalidOperation

from domains.fences import leading_block

MAX_COMPLETION_CHARS = 100_000  # longer completions are malformed (64-token budget)

_ANSWER_RE = re.compile(r"answer:", re.IGNORECASE)
_OPEN_TAG, _CLOSE_TAG = "<answer>", "</answer>"
_EMPHASIS = "*`_ "  # Markdown around an answer line: formatting, not part of the answer

# minus signs that mean '-': U+2212 MINUS SIGN, U+FE63 SMALL HYPHEN-MINUS, U+FF0D FULLWIDTH HYPHEN-MINUS
_MINUS = str.maketrans({"\u2212": "-", "\ufe63": "-", "\uff0d": "-"})
# thousands separators: groups of exactly three digits after the first ("1,234", "12,345,678.5")
_GROUPED = re.compile(r"(?<![\d,.])\d{1,3}(?:,\d{3})+(?!\d|,\d)")
_PLAIN_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?")
_NUMBER = re.compile(r"(?<![\w.])[-+]?\d+(?:\.\d+)?(?!\w|\.\d)")
# what may stand between the numbers of a list: separators, brackets, "or"/"and"
_LIST_FILLER = re.compile(r"(?:[\s,;|()\[\]{}.?!]|\b(?:or|and|either|nor)\b)*", re.IGNORECASE)


def malformed(text: str, allowed: str = "") -> bool:
    """True if text holds control characters (other than those in `allowed`) or lone
    surrogates (not encodable as UTF-8)."""
    return any(unicodedata.category(ch) in ("Cc", "Cs") and ch not in allowed for ch in text)


def _tag_pairs(text: str) -> list[tuple[int, int, str]]:
    """(start, end, stripped content) of each `<answer>...</answer>` pair, paired in order
    as reasoning-gym's `extract_answer` pairs them (an opening tag with the next closing one)."""
    pairs, pos = [], 0
    while (start := text.find(_OPEN_TAG, pos)) >= 0:
        end = text.find(_CLOSE_TAG, start + len(_OPEN_TAG))
        if end < 0:
            break
        pairs.append((start, end + len(_CLOSE_TAG), text[start + len(_OPEN_TAG) : end].strip()))
        pos = end + len(_CLOSE_TAG)
    return pairs


def _last_marker(text: str, pairs: list[tuple[int, int, str]]) -> re.Match | None:
    """The last "Answer:" that is not inside a tag pair (pairs are in order and disjoint)."""
    starts = [start for start, _, _ in pairs]
    last = None
    for m in _ANSWER_RE.finditer(text):
        i = bisect.bisect_right(starts, m.start()) - 1  # the last pair that starts before it
        if i < 0 or m.start() >= pairs[i][1]:
            last = m
    return last


def _line_answer(rest: str, keep_period: bool) -> tuple[str, str]:
    """(answer, control characters allowed in it) for the text after an "Answer:" marker:
    a fenced block that opens right after it (its body; lines allowed), else its first
    non-blank line without Markdown emphasis and (unless `keep_period`) a final period."""
    block = leading_block(rest.lstrip(" \t*_"))  # "**Answer:**\n```\n42\n```" too
    if block is not None:
        return block.strip(), "\n\t"
    text = rest.strip()
    answer = text.splitlines()[0].strip(_EMPHASIS) if text else ""
    if not keep_period:
        answer = answer.removesuffix(".").strip(_EMPHASIS)
    return answer, ""


def extract_answer(completion: str, tags_only: bool = False, keep_period: bool = False) -> str | None:
    """The last answer a completion commits to.

    The candidates are every `<answer>...</answer>` pair (its stripped text; it may span
    lines) and, unless `tags_only`, every "Answer:" (case-insensitive) outside a pair. The
    one that comes last in the text wins: "<answer>3</answer> Hmm, no. Answer: 4" gives "4",
    "Answer: 3 ... <answer>4</answer>" gives "4". After an "Answer:", a fenced code block
    that opens there is the answer ("Answer:\\n```\\n42\\n```" gives "42"); otherwise it is
    the first non-blank line after it, without surrounding Markdown emphasis (``*``, ``_``,
    backticks) and a final period ("**Answer:** 12." gives "12"). An empty last answer is
    no answer, even if an earlier one was not empty.

    Args:
        completion: Model text; anything else (None, bytes) counts as no answer.
        tags_only: Only tags count (domains whose answers span lines).
        keep_period: Keep a final period on an answer line (for sentence answers).

    Returns:
        The answer, or None if there is none, it is empty, the completion is over
        MAX_COMPLETION_CHARS, or the answer has control characters (newlines and tabs
        are allowed inside tags and fenced blocks) or surrogates.
    """
    if not isinstance(completion, str) or len(completion) > MAX_COMPLETION_CHARS:
        return None
    pairs = _tag_pairs(completion) if _CLOSE_TAG in completion else []
    marker = None if tags_only else _last_marker(completion, pairs)
    if marker is not None and (not pairs or marker.start() > pairs[-1][0]):
        answer, allowed = _line_answer(completion[marker.end() :], keep_period)
    elif pairs:
        answer, allowed = pairs[-1][2], "\n\t"
    else:
        return None
    if not answer or malformed(answer, allowed=allowed):
        return None
    return answer


def is_number(text: str) -> bool:
    """True if text (stripped) is one plain number: "17", "-4", "12.5" (not "3/4", "1e3")."""
    return isinstance(text, str) and _PLAIN_NUMBER.fullmatch(text.strip()) is not None


def normalise_number(answer: str) -> str:
    """`answer` with unicode minus signs as '-' and thousands separators dropped
    ("\u22121,234.5" -> "-1234.5"); everything else is left as it is."""
    answer = answer.translate(_MINUS)
    return _GROUPED.sub(lambda m: m.group().replace(",", ""), answer)


def last_number(text: str) -> str | None:
    """The last plain number in `text` after `normalise_number` ("... so 1,234 apples" ->
    "1234"), or None if there is none."""
    found = _NUMBER.findall(normalise_number(text))
    return found[-1] if found else None


def listed_numbers(answer: str) -> list[str]:
    """The numbers of `answer` if it is a list of two or more different numbers ("3 or 4",
    "3, 4", "(3; 4)"), else []: numbers with nothing else between them but separators,
    brackets and the words or/and/either/nor. "12 + 7 = 19" and "from 11.9 to 12.3" are
    not lists."""
    found = _NUMBER.findall(answer)
    if len(found) < 2 or not _LIST_FILLER.fullmatch(_NUMBER.sub(" ", answer)):
        return []
    try:
        values = {Decimal(n) for n in found}
    except InvalidOperation:  # not reached: the pattern only finds decimal numbers
        return []
    return found if len(values) > 1 else []


def numeric_answer(answer: str, reference: str) -> tuple[str, str | None]:
    """The candidate a verifier should see, and why it must not (None if it may).

    For a reference that is one number (`is_number`), the candidate is `normalise_number`
    of the answer, refused ("ambiguous: lists N numbers for a one-number reference") when
    it is a list of different numbers (`listed_numbers`). Other references: the answer as
    it is, never refused.
    """
    if not is_number(reference):
        return answer, None
    answer = normalise_number(answer)
    listed = listed_numbers(answer)
    if listed:
        return answer, f"ambiguous: lists {len(listed)} numbers ({', '.join(listed[:5])}) for a one-number reference"
    return answer, None


_AMOUNT = re.compile(r"(?:(?<![\w.])[-+\u2212\u2013])?(?<![0-9.,])(?:[0-9]{1,3}(?:,[0-9]{3})+|[0-9]+)(?:\.[0-9]+)?")


def parse_number(text: str) -> float | None:
    """The last ASCII-digit number in text: "EUR 1,234.5 million" -> 1234.5, "−3.2%" -> -3.2, none -> None.

    Commas are thousands separators only when followed by exactly three digits ("1,234");
    a minus (ASCII, U+2212 or en dash) counts only when not glued to a word or number
    ("2024-2025" is 2024 then 2025). Decimal commas ("3,2") and exponents ("1e5") are not
    understood.
    """
    found = _AMOUNT.findall(text)
    if not found:
        return None
    s = found[-1].replace(",", "").replace("\u2212", "-").replace("\u2013", "-")
    return float(s)


# a signed amount: "-$1,234.5", "$-1,234.5", "−3.2e-5", "12%" (the sign may stand before a currency sign)
_SIGNED_AMOUNT = re.compile(
    r"(?<![\w.])(?P<sign>[-+\u2212]?)\s*(?:[$\u20ac\u00a3]\s*)?(?P<sign2>[-+\u2212]?)"
    r"(?P<int>\d{1,3}(?:,\d{3})+|\d+)(?P<frac>\.\d+)?(?:[eE](?P<exp>[-+]?\d{1,3}))?(?![\w.])")


def amounts(text: str) -> list[float]:
    """Every number in text, in order, read as an amount: thousands commas ("1,234"), a
    currency sign after or before a minus ("-$12.50", "$-12.50" are -12.5), a unicode
    minus, an exponent ("3.3e-6"); a whole answer in parentheses after a currency sign
    ("($17,122.00)", accounting's negative) is negative. Numbers glued to letters ("m3",
    "x2") are not numbers here. Never raises; at most 1,000 numbers are read.
    """
    if not isinstance(text, str):
        return []
    out = []
    for m in _SIGNED_AMOUNT.finditer(text[:100_000]):
        sign = -1.0 if "-" in (m["sign"] + m["sign2"]).replace("\u2212", "-") else 1.0
        value = sign * float(m["int"].replace(",", "") + (m["frac"] or "") + (f"e{m['exp']}" if m["exp"] else ""))
        if value != value or value in (float("inf"), float("-inf")):
            continue
        out.append(value)
        if len(out) == 1000:
            break
    if len(out) == 1 and re.fullmatch(r"\(\s*[$\u20ac\u00a3]\s*[\d,]+(?:\.\d+)?\s*\)", text.strip()):
        out = [-abs(out[0])]
    return out
