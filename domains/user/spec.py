"""A user domain's definition: which columns of the user's data are the prompt and the
answer, how the answer is found in a reply and which verifier judges it.

    spec = UserDomainSpec.model_validate({
        "name": "unit_conversion", "columns": {"prompt": "question", "answer": "answer"},
        "verifier": {"kind": "numeric", "rel_tol": 0.01}, "extraction": "answer_line"})

The definition is plain data (YAML or JSON on the CLI, a form on the page) checked by
pydantic, so a bad field is named in the error (`spec_error`). Built into a domain by
`domains.user.domain.build_domain` with the rows of `domains.user.data.read_rows`.

Not covered: reading data files (`domains.user.data`), scoring (`domains.user.verifiers`).
"""

from __future__ import annotations

import ast
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from core.errors import ConfigError

NAME_PATTERN = r"^[a-z][a-z0-9_]{1,47}$"  # a registry name: lower-case letters, digits, "_"
EXTRACTIONS = ("answer_line", "tags", "boxed", "last_number", "whole")
VERIFIERS = ("exact", "numeric", "math", "choice", "regex", "json", "code_tests", "python", "checker")
MAX_REWARD_SOURCE_CHARS = 100_000


class ColumnMap(BaseModel):
    """Which column of a row is which part of a task.

    Attributes:
        prompt: The column holding the prompt text (or set `template`).
        template: A Jinja2 template over the row's columns, e.g. "Convert {{ value }} {{ unit }}."
        answer: The column holding the reference answer.
        system: Optional column with a per-row system prompt (default: the built-in one).
        level: Optional column with an integer difficulty level >= 1 (default: all level 1).
        id: Optional column with a unique row id; the held-out split hashes it (default:
            a hash of the prompt).
        metadata: Columns kept with the task for display (not shown to the model).
    """

    model_config = ConfigDict(extra="forbid")
    prompt: str | None = None
    template: str | None = None
    answer: str
    system: str | None = None
    level: str | None = None
    id: str | None = None
    metadata: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _one_prompt(self) -> "ColumnMap":
        if (self.prompt is None) == (self.template is None):
            raise ValueError("give exactly one of 'prompt' (a column) and 'template' (a Jinja2 template)")
        return self


class VerifierSpec(BaseModel):
    """The verifier and its options.

    Attributes:
        kind: "exact" (after normalising case, whitespace, punctuation and unicode),
            "numeric" (within `abs_tol` or `rel_tol`; "1,234", a unicode minus and "45%"
            read as numbers), "math" (equivalence by math-verify), "choice" (a letter of
            a multiple-choice question), "regex" (the answer must fully match a pattern)
            "json" (a JSON reply: equal fields, or valid against `json_schema`) or
            "code_tests" (the reply's last Python block passes the row's unit tests in a
            sandbox: HumanEval's format, a `check(candidate)` function; the extraction
            does not apply) or "python" (the user's own `reward(reply, answer, row)` in
            `source`, run in a sandbox with a time limit; see `domains.user.reward_runner`)
            or "checker" (a multi-turn sandbox environment: the row's files are written,
            its setup command runs, the model works in the shell turn by turn, then a checker
            command decides: exit 0 passes, or with `checker_score` its last stdout line is a
            score in [0, 1]; the answer column holds reference commands, one per line).
        case_sensitive: exact and choice: compare case too.
        abs_tol, rel_tol: numeric: the tolerances (`math.isclose`).
        pattern: regex: the pattern every answer must fully match (or `pattern_column`).
        pattern_column: regex: the column holding each row's own pattern.
        fields: json: compare only these top-level fields (default: the whole value).
        json_schema: json: a JSON Schema the reply must satisfy (with or without fields).
        test_column: code_tests: the column with the tests (`def check(candidate): ...`).
        entry_point_column: code_tests: the column with the function's name.
        prefix_column: code_tests: a column of code put before the model's when the reply
            is only a function body (HumanEval's "prompt": imports and the signature).
        timeout_s: code_tests and python: seconds the tests or the function may run.
        files_column: checker: a column with the task's files, a JSON object path -> text.
        setup_column: checker: a column with a shell command run before the episode.
        checker, checker_column: checker: the command (for every row, or per row) run after
            the episode in /workspace.
        checker_score: checker: read a score in [0, 1] from the checker's last stdout line
            instead of its exit code.
        source: python: the reward function's source, defining `reward(reply, answer, row)`
            that returns a number in [0, 1] or (number, breakdown dict); `row` holds "id",
            "prompt", "metadata" and "extracted" (the answer found by the extraction).
    """

    model_config = ConfigDict(extra="forbid")
    kind: Literal["exact", "numeric", "math", "choice", "regex", "json", "code_tests", "python", "checker"] = "exact"
    case_sensitive: bool = False
    abs_tol: float = Field(0.0, ge=0, allow_inf_nan=False)
    rel_tol: float = Field(1e-6, ge=0, le=1, allow_inf_nan=False)
    pattern: str | None = None
    pattern_column: str | None = None
    fields: list[str] | None = None
    json_schema: dict[str, Any] | None = None
    test_column: str = "test"
    entry_point_column: str = "entry_point"
    prefix_column: str | None = None
    timeout_s: float = Field(10.0, gt=0, le=60, allow_inf_nan=False)
    source: str | None = Field(None, max_length=MAX_REWARD_SOURCE_CHARS)
    files_column: str | None = None
    setup_column: str | None = None
    checker: str | None = None
    checker_column: str | None = None
    checker_score: bool = False

    @model_validator(mode="after")
    def _regex_has_a_pattern(self) -> "VerifierSpec":
        if self.kind == "regex" and (self.pattern is None) == (self.pattern_column is None):
            raise ValueError("a regex verifier needs exactly one of 'pattern' and 'pattern_column'")
        if self.kind == "checker" and (self.checker is None) == (self.checker_column is None):
            raise ValueError("a checker verifier needs exactly one of 'checker' (a command) and 'checker_column'")
        if self.kind == "python":
            if not (self.source or "").strip():
                raise ValueError("a python verifier needs 'source': code defining reward(reply, answer, row)")
            try:
                tree = ast.parse(self.source, "reward_fn.py")
            except (SyntaxError, ValueError, RecursionError, MemoryError) as e:
                raise ValueError(f"the reward function's source does not compile: {getattr(e, 'msg', e)} "
                                 f"(line {getattr(e, 'lineno', '?')})") from None
            if not any(isinstance(n, ast.FunctionDef) and n.name == "reward" for n in tree.body):
                raise ValueError("the reward function's source defines no function reward(reply, answer, row)")
        return self


class UserDomainSpec(BaseModel):
    """A user domain: name, description, column mapping, verifier, extraction, split.

    Attributes:
        name: Registry name (NAME_PATTERN); must not be a built-in domain's.
        description: One line for the catalogue.
        columns: `ColumnMap`.
        verifier: `VerifierSpec`.
        extraction: Where the answer is in a reply: "answer_line" (the last `Answer:`
            line), "tags" (`<answer>...</answer>`), "boxed" (the last `\\boxed{}`),
            "last_number" or "whole" (the whole reply, stripped).
        heldout_fraction: The share of rows held out for evaluation (by a hash of the row
            id, so the split is stable when rows are added or reordered).
        license: The data's licence, for the catalogue.
    """

    model_config = ConfigDict(extra="forbid")
    name: str = Field(pattern=NAME_PATTERN)
    description: str = Field("", max_length=300)
    columns: ColumnMap
    verifier: VerifierSpec = Field(default_factory=VerifierSpec)
    extraction: Literal["answer_line", "tags", "boxed", "last_number", "whole"] = "answer_line"
    heldout_fraction: float = Field(0.2, ge=0.05, le=0.5, allow_inf_nan=False, strict=False)
    license: str = Field("user data", max_length=100)


def spec_error(e: ValidationError, what: str = "domain") -> ConfigError:
    """A pydantic error as one ConfigError naming each bad field and what is wrong with it."""
    parts = []
    for err in e.errors():
        field = ".".join(str(p) for p in err["loc"]) or what
        parts.append(f"{what} field '{field}': {err['msg']}")
    return ConfigError("; ".join(parts))


def parse_spec(raw: Any) -> UserDomainSpec:
    """A checked `UserDomainSpec` from a mapping (parsed YAML/JSON).

    Raises:
        ConfigError: naming every bad or unknown field.
    """
    if isinstance(raw, UserDomainSpec):
        return raw
    if not isinstance(raw, dict):
        raise ConfigError(f"a domain definition is a mapping of fields, got {type(raw).__name__}")
    try:
        return UserDomainSpec.model_validate(raw)
    except ValidationError as e:
        raise spec_error(e) from None
