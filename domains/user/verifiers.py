"""Verifiers a user picks for their domain, and where a reply's answer is found.

    answer = extract(completion, "answer_line")          # "42", or None: no answer in the reply
    correct, why = verify(spec.verifier, answer, row)    # True/False and a short reason

Extraction (`UserDomainSpec.extraction`): the last `Answer:` line or `<answer>` pair
(`domains.answers.extract_answer`, the rule of every built-in domain), the last
`\\boxed{...}`, the last number, or the whole reply. Verifiers (`VerifierSpec.kind`):

| kind | correct when |
|---|---|
| exact | equal after NFKC, case folding (unless case-sensitive), dropping punctuation, collapsing whitespace |
| numeric | both read as numbers ("1,234", a unicode minus, "45%" = 0.45) and `math.isclose` within the tolerances |
| math | math-verify finds them equivalent (`\\frac{1}{2}` = 0.5, `x+1` = `1+x`) |
| choice | the reply's option letter ("B", "(b)", "B) ...") is the reference's |
| regex | the answer fully matches the row's pattern |
| json | the reply parses as JSON, satisfies `json_schema` (if given) and equals the reference on `fields` (or entirely, if the reference is JSON and no schema-only check is asked) |

`verify` runs in a worker process with a time limit (`USER_VERIFIERS`, `domains.upstream`):
math-verify's own limit uses SIGALRM (main thread only) and a regex can backtrack for ever,
so neither may run on the trainer's rollout threads unguarded.

Not covered: code with unit tests and custom reward functions (they run in the sandbox).
"""

from __future__ import annotations

import json
import logging
import math
import re
import string
import unicodedata

from domains.answers import extract_answer, last_number, normalise_number
from core.errors import ConfigError, GenerationTimeout, UpstreamCrash
from domains.upstream import WorkerPool

# math-verify warns once per process that its own (SIGALRM) timeout is off: ours is the worker's
logging.getLogger("math_verify").setLevel(logging.ERROR)
VERIFY_TIMEOUT_S = 5.0
BUILD_TIMEOUT_S = 120.0  # checking a whole file's rows (templates, reference answers) in a worker
USER_VERIFIERS = WorkerPool(preload=("domains.user.verifiers", "math_verify", "jsonschema"))

_BOXED = "\\boxed{"
_PUNCTUATION = str.maketrans("", "", string.punctuation)
_CHOICE = re.compile(r"^\W*\(?([A-Za-z])\b(?:[).:\]]|\s|$)")


def _last_boxed(text: str) -> str | None:
    """The content of the last `\\boxed{...}` (braces inside it balanced), or None."""
    start = text.rfind(_BOXED)
    if start < 0:
        return None
    depth, i = 1, start + len(_BOXED)
    while i < len(text):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return text[start + len(_BOXED) : i].strip()
        i += 1
    return None


def extract(completion: str, how: str) -> str | None:
    """The answer of a reply by `how` (one of `spec.EXTRACTIONS`), or None if there is none."""
    if how == "answer_line":
        return extract_answer(completion)
    if how == "tags":
        return extract_answer(completion, tags_only=True)
    if how == "boxed":
        return _last_boxed(completion)
    if how == "last_number":
        return last_number(completion)
    text = completion.strip()
    return text or None


def normalise_text(text: str, case_sensitive: bool = False) -> str:
    """Text compared by the exact verifier: NFKC, case folded (unless `case_sensitive`),
    ASCII and unicode punctuation dropped, whitespace collapsed."""
    text = unicodedata.normalize("NFKC", text)
    text = "".join(" " if unicodedata.category(ch).startswith("P") else ch for ch in text.translate(_PUNCTUATION))
    text = " ".join(text.split())
    return text if case_sensitive else text.casefold()


def read_number(text: str) -> float | None:
    """A number from text: thousands separators, unicode minus, a leading "+", a trailing
    "%" (divided by 100). None if the text is not one number."""
    t = normalise_number(text.strip()).replace(" ", "")
    percent = t.endswith("%")
    t = t.rstrip("%")
    try:
        value = float(t)
    except ValueError:
        return None
    if not math.isfinite(value):
        return None
    return value / 100 if percent else value


def _numeric(spec, answer: str, reference: str) -> tuple[bool, str]:
    got, want = read_number(answer), read_number(reference)
    if want is None:
        return False, f"the reference {reference!r} is not a number"
    if got is None:
        return False, "not a number"
    # a percent and its bare number are the same answer ("45%" vs "45" when the reference is "45%")
    candidates = {got} | ({got / 100} if reference.strip().endswith("%") and not answer.strip().endswith("%") else set())
    ok = any(math.isclose(c, want, rel_tol=spec.rel_tol, abs_tol=spec.abs_tol) for c in candidates)
    return ok, "" if ok else f"{got:g} is not {want:g}"


def _as_latex(text: str) -> str:
    """`text` in math delimiters unless it has some: math-verify reads a bare "1+x" as its
    first number, "$1+x$" as the expression."""
    return text if any(m in text for m in ("$", "\\(", "\\[", "\\boxed")) else f"${text}$"


def _math(answer: str, reference: str) -> tuple[bool, str]:
    from math_verify import parse, verify  # preloaded in the worker

    gold, got = parse(_as_latex(reference), parsing_timeout=None), parse(_as_latex(answer), parsing_timeout=None)
    if not gold:
        return False, f"math-verify can't read the reference {reference!r}"
    if not got:
        return False, "math-verify can't read the answer"
    ok = verify(gold, got, timeout_seconds=None)
    return ok, "" if ok else "not equivalent"


def _choice(spec, answer: str, reference: str) -> tuple[bool, str]:
    got, want = _CHOICE.match(answer), _CHOICE.match(reference)
    if want is None:
        return False, f"the reference {reference!r} is not an option letter"
    if got is None:
        return False, "no option letter"
    a, b = got.group(1), want.group(1)
    ok = a == b if spec.case_sensitive else a.upper() == b.upper()
    return ok, "" if ok else f"option {a} is not {b}"


def _json(spec, answer: str, reference: str) -> tuple[bool, str]:
    import jsonschema  # preloaded in the worker

    try:
        got = json.loads(answer)
    except json.JSONDecodeError as e:
        return False, f"not JSON ({e.msg})"
    if spec.json_schema is not None:
        try:
            jsonschema.validate(got, spec.json_schema)
        except jsonschema.ValidationError as e:
            return False, f"fails the schema: {e.message[:120]}"
    try:
        want = json.loads(reference)
    except json.JSONDecodeError:
        if spec.json_schema is not None and not spec.fields:
            return True, ""  # a schema-only check: the reference is an example, not JSON to compare
        return False, f"the reference {reference[:60]!r} is not JSON"
    if spec.fields:
        if not isinstance(got, dict) or not isinstance(want, dict):
            return False, "fields are compared between JSON objects"
        wrong = [f for f in spec.fields if got.get(f, _MISSING) != want.get(f, _MISSING)]
        return not wrong, "" if not wrong else f"field '{wrong[0]}' differs"
    return got == want, "" if got == want else "a different value"


_MISSING = object()


def check(spec, answer: str, reference: str, pattern: str = "") -> tuple[bool, str]:
    """(correct, why not) for an extracted answer, in this process without a time limit
    (`verify` runs it in a worker). `spec` is a `VerifierSpec`."""
    kind = spec.kind
    if kind == "exact":
        ok = normalise_text(answer, spec.case_sensitive) == normalise_text(reference, spec.case_sensitive)
        return ok, "" if ok else "different text"
    if kind == "numeric":
        return _numeric(spec, answer, reference)
    if kind == "math":
        return _math(answer, reference)
    if kind == "choice":
        return _choice(spec, answer, reference)
    if kind == "regex":
        ok = re.fullmatch(pattern, answer.strip(), flags=0 if spec.case_sensitive else re.IGNORECASE) is not None
        return ok, "" if ok else "does not match the pattern"
    if kind == "json":
        return _json(spec, answer, reference)
    raise ValueError(f"unknown verifier kind {kind!r}")


def verify(spec, answer: str, reference: str, pattern: str = "") -> tuple[bool, str]:
    """`check` in a worker process, at most VERIFY_TIMEOUT_S seconds.

    Returns:
        (correct, reason): a verifier that raised or ran out of time is (False, "verifier
        error: ...") -- a reply never makes scoring raise.
    """
    try:
        return USER_VERIFIERS.call(check, spec, answer, reference, pattern, seconds=VERIFY_TIMEOUT_S,
                                   what=f"a {spec.kind} verifier")
    except Exception as e:  # noqa: BLE001 - timeouts, crashes and verifier bugs all score 0
        return False, f"verifier error: {type(e).__name__}: {str(e)[:160]}"


def in_worker(fn, *args, what: str, seconds: float | None = None):
    """`fn(*args)` in a `USER_VERIFIERS` worker, at most `seconds` (None: BUILD_TIMEOUT_S): the user's templates and
    patterns run there, so one that runs for ever is abandoned instead of hanging the caller.

    Raises:
        ConfigError: what `fn` raised, or "<what> took over N s" (a template or pattern that
            runs for ever?).
    """
    seconds = BUILD_TIMEOUT_S if seconds is None else seconds
    try:
        return USER_VERIFIERS.call(fn, *args, seconds=seconds, what=what)
    except GenerationTimeout:
        raise ConfigError(f"{what} took over {seconds:g} s: a template or pattern that runs for ever? "
                          "simplify it") from None
    except UpstreamCrash as e:
        raise ConfigError(f"{what} crashed its worker process ({e}): a template or pattern too big?") from None

