"""A user domain built from its definition and rows: every row and reference answer checked,
the rows split into training and held-out sides, and the class its verifier (and tools) call
for.

    domain = build_domain(spec, build_rows(spec, read_rows("questions.jsonl")), version=1)

| definition | class | played |
|---|---|---|
| an answer verifier (exact, numeric, math, choice, regex, json) | `UserDomain` | one reply |
| code_tests | `UserCodeDomain` | one reply, judged in a sandbox |
| python (the user's reward function) | `UserRewardDomain` | one reply, judged in a sandbox |
| checker | `UserEpisodeDomain` | shell turns in a sandbox |
| an answer verifier with tools | `UserToolDomain` | tool calls, turn by turn |

Not covered: reading files (`domains.user.data`), storing versions (`domains.user.library`).
"""

from __future__ import annotations

import json
import re

from core.errors import ConfigError
from domains.contract import as_int
from domains.splits import heldout_share
from domains.user.data import MAX_CODE_CHARS, TaskRow, checked_text
from domains.user.domain import UserCodeDomain, UserDomain, UserRewardDomain, UserRows, data_digest
from domains.user.episodes import UserEpisodeDomain, UserToolDomain
from domains.user.spec import UserDomainSpec, parse_spec
from domains.user.task_files import check_workspace_files
from domains.user.verifiers import in_worker, normalise_text, read_number

_LETTER = re.compile(r"^\W*\(?[A-Za-z]\b")

def _check_references(spec: UserDomainSpec, rows: tuple[TaskRow, ...]) -> None:
    """Each row's reference answer is one the verifier can judge (checked without running it)."""
    kind = spec.verifier.kind
    for i, row in enumerate(rows, 1):
        if kind == "numeric" and read_number(row.answer) is None:
            raise ConfigError(f"row {i}: the answer {row.answer[:60]!r} is not a number (numeric verifier); "
                              "pick the exact verifier or fix the row")
        if kind == "choice" and _LETTER.match(row.answer) is None:
            raise ConfigError(f"row {i}: the answer {row.answer[:60]!r} is not an option letter (choice verifier)")
        if kind == "exact" and not normalise_text(row.answer):
            raise ConfigError(f"row {i}: the answer {row.answer[:60]!r} is only punctuation or spaces, which the exact "
                              "verifier ignores (any such reply would match); pick the regex verifier or fix the row")
        if kind == "regex":
            try:
                compiled = re.compile(row.pattern, 0 if spec.verifier.case_sensitive else re.IGNORECASE)
            except (re.error, OverflowError, RecursionError, ValueError) as e:
                raise ConfigError(f"row {i}: the pattern {row.pattern[:60]!r} is not a regular expression ({e})") from None
            if compiled.fullmatch(row.answer) is None:
                raise ConfigError(f"row {i}: the answer {row.answer[:60]!r} does not match its own pattern "
                                  f"{row.pattern[:60]!r}")
        if kind == "json" and spec.verifier.json_schema is None:
            try:
                json.loads(row.answer)
            except json.JSONDecodeError:
                raise ConfigError(f"row {i}: the answer {row.answer[:60]!r} is not JSON (json verifier)") from None


def _check_rows(rows: tuple[TaskRow, ...], spec: UserDomainSpec) -> None:
    """Every task row's fields have their types and are clean text (rows that did not come
    through `build_rows`: an imported export file).

    Raises:
        ConfigError: naming the row and the field.
    """
    seen: set[str] = set()
    tools = {*spec.builtin_tools, *(t.name for t in spec.tools)}
    for i, row in enumerate(rows, 1):
        if not isinstance(row, TaskRow):
            raise ConfigError(f"row {i}: not a task row")
        for name in ("id", "prompt", "answer"):
            value = getattr(row, name)
            if not isinstance(value, str) or not value.strip():
                raise ConfigError(f"row {i}: field '{name}' must be non-empty text")
        for name in ("id", "prompt", "answer", "system", "pattern"):
            checked_text(getattr(row, name), f"row {i}: field '{name}'")
        for name in ("test", "entry_point", "prefix", "setup", "checker"):
            checked_text(getattr(row, name), f"row {i}: field '{name}'", limit=MAX_CODE_CHARS)
        if not isinstance(row.metadata, dict) or not isinstance(row.files, dict):
            raise ConfigError(f"row {i}: fields 'metadata' and 'files' must be objects")
        if not isinstance(row.calls, list) or not all(isinstance(c, dict) and isinstance(c.get("name"), str)
                                                      and isinstance(c.get("arguments"), dict) for c in row.calls):
            raise ConfigError(f"row {i}: field 'calls' must be a list of {{\"name\", \"arguments\"}} objects")
        unknown = [c["name"] for c in row.calls if c["name"] not in tools]
        if unknown:
            raise ConfigError(f"row {i}: field 'calls' calls {unknown[0][:40]!r}, not a tool of this domain")
        for path, text in row.files.items():
            checked_text(path, f"row {i}: a file path", limit=300)
            checked_text(text, f"row {i}: file {path[:60]!r}", limit=MAX_CODE_CHARS)
        if check_workspace_files(row.files, f"row {i}: field 'files'") != row.files:
            raise ConfigError(f"row {i}: field 'files' has paths that are not clean (write 'a/b', not './a//b')")
        if as_int(row.level) is None or row.level < 1:
            raise ConfigError(f"row {i}: level {row.level!r} is not a whole number >= 1")
        if row.id in seen:
            raise ConfigError(f"row {i}: repeats the id {row.id!r} of an earlier row; make the ids unique")
        seen.add(row.id)


def build_domain(spec: UserDomainSpec | dict, rows: tuple[TaskRow, ...], version: int = 0,
                 trusted: bool = False) -> UserRows:
    """The domain of a definition and its task rows (`domains.user.data.build_rows`): a
    `UserDomain`, or by verifier and tools one of the classes in the module docstring.

    Args:
        trusted: the rows were checked when the domain was stored (loading a stored
            version): skip the row and reference checks.

    Raises:
        ConfigError: a bad definition, a bad row or a reference answer the verifier can't
            judge (its row named), checks that ran past REFERENCE_CHECK_TIMEOUT_S (a
            pattern that backtracks for ever), or a level without rows on both sides of the
            split (add rows or raise `heldout_fraction`).
    """
    spec = parse_spec(spec)
    if not trusted:
        _check_rows(rows, spec)
    if spec.verifier.json_schema is not None:
        import jsonschema  # on first use: it pulls in jsonschema

        try:
            jsonschema.Draft202012Validator.check_schema(spec.verifier.json_schema)
        except jsonschema.SchemaError as e:
            raise ConfigError(f"domain field 'verifier.json_schema': not a JSON Schema ({e.message})") from None
    if not trusted:
        in_worker(_check_references, spec, rows, what=f"checking the reference answers of {spec.name}")
    sides: dict[tuple[int, bool], list[int]] = {}
    for i, row in enumerate(rows):
        sides.setdefault((row.level, False), [])
        sides.setdefault((row.level, True), [])
        sides[(row.level, heldout_share(row.id, spec.heldout_fraction))].append(i)
    for (level, held), idx in sorted(sides.items()):
        if not idx:
            n = len(sides[(level, not held)])
            side = "held out" if held else "left for training"
            raise ConfigError(f"level {level}: none of its {n} rows is {side} (heldout_fraction "
                              f"{spec.heldout_fraction}); add rows at level {level} or change heldout_fraction")
    cls = UserToolDomain if spec.uses_tools else {"code_tests": UserCodeDomain, "python": UserRewardDomain,
                                                  "checker": UserEpisodeDomain}.get(spec.verifier.kind, UserDomain)
    return cls(spec, tuple(rows), version, data_digest(tuple(rows)), {k: tuple(v) for k, v in sides.items()})


def from_json(data: dict) -> UserRows:
    """The domain `UserDomain.to_json` wrote.

    Raises:
        ConfigError: a malformed definition or rows.
    """
    try:
        rows = tuple(TaskRow(**r) for r in data["rows"])
    except (KeyError, TypeError) as e:
        raise ConfigError(f"a stored user domain's rows are malformed ({e})") from None
    return build_domain(data.get("spec"), rows, int(data.get("version", 0)), trusted=True)
