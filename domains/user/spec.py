"""A user domain's definition: which columns of the user's data are the prompt and the
answer, how the answer is found in a reply and which verifier judges it.

    spec = UserDomainSpec.model_validate({
        "name": "unit_conversion", "columns": {"prompt": "question", "answer": "answer"},
        "verifier": {"kind": "numeric", "rel_tol": 0.01}, "extraction": "answer_line"})

The definition is plain data (YAML or JSON on the CLI, a form on the page) checked by
pydantic, so a bad field is named in the error (`spec_error`). Built into a domain by
`domains.user.build.build_domain` with the rows of `domains.user.data.read_rows`.

Not covered: reading data files (`domains.user.data`), scoring (`domains.user.verifiers`).
"""

from __future__ import annotations

import ast
import ipaddress
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from core.errors import ConfigError
from domains.tools.contract import ERROR_CODES, ToolSpec
from sandboxes.spec import SandboxSpec

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
        reference_calls: Domains with tools: an optional column holding the tool calls that
            reach the row's answer, a JSON list of {"name": ..., "arguments": {...}}; the
            validator plays them before the reference answer, so each tool is tried on
            real rows before anything trains.
    """

    model_config = ConfigDict(extra="forbid")
    prompt: str | None = None
    template: str | None = None
    answer: str
    system: str | None = None
    level: str | None = None
    id: str | None = None
    metadata: list[str] = Field(default_factory=list)
    reference_calls: str | None = None

    @model_validator(mode="after")
    def _one_prompt(self) -> "ColumnMap":
        if (self.prompt is None) == (self.template is None):
            raise ValueError("give exactly one of 'prompt' (a column) and 'template' (a Jinja2 template)")
        return self


_OPTION_KINDS = {"case_sensitive": ("exact", "choice", "regex"), "abs_tol": ("numeric",), "rel_tol": ("numeric",),
                 "pattern": ("regex",), "pattern_column": ("regex",), "fields": ("json",), "json_schema": ("json",),
                 "test_column": ("code_tests",), "entry_point_column": ("code_tests",),
                 "prefix_column": ("code_tests",), "timeout_s": ("code_tests", "python", "checker"),
                 "source": ("python",), "setup_column": ("checker",), "checker": ("checker",),
                 "checker_column": ("checker",), "checker_score": ("checker",)}


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
    def _only_its_own_options(self) -> "VerifierSpec":
        """An option of another verifier kind, set to something other than its default, would
        be silently ignored: refuse it instead."""
        for name, kinds in _OPTION_KINDS.items():
            if self.kind not in kinds and getattr(self, name) != type(self).model_fields[name].default:
                raise ValueError(f"'{name}' is an option of the {' / '.join(kinds)} verifier, not of "
                                 f"{self.kind!r}; remove it or pick that verifier")
        return self

    @model_validator(mode="after")
    def _regex_has_a_pattern(self) -> "VerifierSpec":
        if self.kind == "regex" and (self.pattern is None) == (self.pattern_column is None):
            raise ValueError("a regex verifier needs exactly one of 'pattern' and 'pattern_column'")
        if self.kind == "checker" and (self.checker is None) == (self.checker_column is None):
            raise ValueError("a checker verifier needs exactly one of 'checker' (a command) and 'checker_column'")
        if self.kind == "python":
            if not (self.source or "").strip():
                raise ValueError("a python verifier needs 'source': code defining reward(reply, answer, row)")
            _check_source(self.source, "reward", "the reward function's source", "reward(reply, answer, row)")
        return self


BUILTIN_TOOLS = ("calculator", "python", "shell", "read_file", "write_file", "list_dir")
MAX_TOOLS = 16


class UserToolSpec(BaseModel):
    """A tool the user declares by contract and implements: what the model sees (name,
    description, JSON-Schema input, output format, error codes, an example call) and what
    runs in the sandbox when the model calls it (`domains.user.tools`).

    Attributes:
        name: What the model writes in "name" ([a-z][a-z0-9_]*, not a built-in tool's).
        description: One or two sentences for the model.
        input_schema: JSON Schema (Draft 2020-12) of the arguments; type "object".
        output: What a successful result holds (format, units).
        errors: The tool's own error codes -> meaning, on top of the contract's
            (`domains.tools.contract.ERROR_CODES`).
        example: Example arguments, valid against `input_schema`.
        command: A shell command run in the task's workspace with the arguments as one
            JSON object on stdin: exit 0 and its stdout is the result; another exit is a
            failure, with the code of its last stderr line when that line is
            "CODE: message" for one of `errors` (else "tool_error").
        python: Python source defining `run(arguments)` that returns the result (text, or
            anything JSON can write) and may raise `ToolError(code, message)`; run in the
            sandbox (`domains.user.tool_runner`), never in the trainer.
        timeout_s: Seconds one call may run; past it the call gets "timeout".
    """

    model_config = ConfigDict(extra="forbid")
    name: str = Field(pattern=r"^[a-z][a-z0-9_]{0,63}$")
    description: str = Field(min_length=1, max_length=1000)
    input_schema: dict[str, Any]
    output: str = Field("the tool's result, as text", max_length=500)
    errors: dict[str, str] = Field(default_factory=dict)
    example: dict[str, Any] | None = None
    command: str | None = Field(None, max_length=10_000)
    python: str | None = Field(None, max_length=MAX_REWARD_SOURCE_CHARS)
    timeout_s: float = Field(10.0, gt=0, le=60, allow_inf_nan=False)

    @model_validator(mode="after")
    def _contract_and_one_implementation(self) -> "UserToolSpec":
        if self.name in BUILTIN_TOOLS:
            raise ValueError(f"'{self.name}' is a built-in tool's name; list it in builtin_tools or rename yours")
        if (self.command is None) == (self.python is None):
            raise ValueError(f"tool {self.name}: give exactly one of 'command' (a shell command) and 'python' "
                             "(source defining run(arguments))")
        bad = [c for c in self.errors if not re.fullmatch(r"[a-z][a-z0-9_]{0,63}", c)]
        if bad:
            raise ValueError(f"tool {self.name}: error code {bad[0]!r} must be lower-case letters, digits and '_' "
                             "(a letter first)")
        taken = [c for c in self.errors if c in ERROR_CODES]
        if taken:
            raise ValueError(f"tool {self.name}: error code {taken[0]!r} is one of the contract's own "
                             f"({', '.join(sorted(ERROR_CODES))}); name yours differently")
        if self.command is not None and not self.command.strip():
            raise ValueError(f"tool {self.name}: 'command' is empty")
        if self.python is not None:
            _check_source(self.python, "run", f"tool {self.name}'s source", "run(arguments)")
        try:
            self.contract()
        except ConfigError as e:
            raise ValueError(str(e)) from None
        return self

    def contract(self) -> ToolSpec:
        """The `domains.tools.contract.ToolSpec` the model is shown.

        Raises:
            ConfigError: the schema or example is not valid JSON Schema / does not meet it.
        """
        return ToolSpec(self.name, self.description, self.input_schema, self.output, dict(self.errors), self.example)


def _check_host(host: str) -> None:
    """A host of a network allow-list names somewhere else: not this machine, not "any
    address", not link-local (cloud metadata services live there), not multicast."""
    if host.lower() in ("localhost", "localhost.localdomain"):
        raise ValueError(f"network host {host!r} is this machine; the sandbox reaches its own loopback anyway")
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return  # a host name: resolved when a sandbox starts (an unknown one fails there, named)
    if ip.is_unspecified or ip.is_loopback or ip.is_link_local or ip.is_multicast or ip.is_reserved:
        raise ValueError(f"network host {host!r} is not an address a sandbox may be let through to (unspecified, "
                         "loopback, link-local, multicast or reserved)")


def _check_source(source: str, function: str, what: str, signature: str) -> None:
    """`source` compiles and defines `function` at its top level (ValueError, naming the line)."""
    if not source.strip():
        raise ValueError(f"{what} is empty: give code defining {signature}")
    try:
        tree = ast.parse(source, "source.py")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as e:
        raise ValueError(f"{what} does not compile: {getattr(e, 'msg', e)} (line {getattr(e, 'lineno', '?')})") from None
    if not any(isinstance(n, ast.FunctionDef) and n.name == function for n in tree.body):
        raise ValueError(f"{what} defines no function {signature}")


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
        tools: The user's own tools (`UserToolSpec`); with these or `builtin_tools` the
            domain is multi-turn tool use: the model may call tools turn by turn, and its
            final reply (a turn without a call) is judged by the verifier. The answer
            verifiers only (not code_tests, python or checker).
        builtin_tools: Workbench tools offered too (`BUILTIN_TOOLS`).
        network: Sandbox environments and tools only: host names or IPs the task's sandbox
            may reach (an allow-list, `sandboxes.spec.SandboxSpec.network`); None: no
            network (loopback only).
    """

    model_config = ConfigDict(extra="forbid")
    name: str = Field(pattern=NAME_PATTERN)
    description: str = Field("", max_length=300)
    columns: ColumnMap
    verifier: VerifierSpec = Field(default_factory=VerifierSpec)
    extraction: Literal["answer_line", "tags", "boxed", "last_number", "whole"] = "answer_line"
    heldout_fraction: float = Field(0.2, ge=0.05, le=0.5, allow_inf_nan=False, strict=False)
    license: str = Field("user data", max_length=100)
    tools: list[UserToolSpec] = Field(default_factory=list, max_length=MAX_TOOLS)
    builtin_tools: list[Literal["calculator", "python", "shell", "read_file", "write_file", "list_dir"]] = \
        Field(default_factory=list)
    network: list[str] | None = Field(None, min_length=1, max_length=32)

    @model_validator(mode="after")
    def _tools_fit(self) -> "UserDomainSpec":
        names = [t.name for t in self.tools] + list(self.builtin_tools)
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"tool {repeated[0]!r} is declared twice")
        if self.columns.reference_calls is not None and not names:
            raise ValueError("columns.reference_calls is set but the domain has no tools")
        if names and self.verifier.kind in ("code_tests", "python", "checker"):
            raise ValueError(f"tools go with the answer verifiers (exact, numeric, math, choice, regex, json), "
                             f"not {self.verifier.kind!r}")
        untried = [t.name for t in self.tools if t.example is None]
        if untried and self.columns.reference_calls is None:
            raise ValueError(f"tool {untried[0]!r} has no example and the domain no columns.reference_calls: give "
                             "one or the other, so validation can call the tool before anything trains")
        if self.verifier.files_column and self.verifier.kind != "checker" and not names:
            raise ValueError("verifier.files_column is for sandbox environments (the checker verifier) and domains "
                             "with tools; this domain would ignore it")
        if self.network is not None:
            if self.verifier.kind != "checker" and not self.tools:
                raise ValueError("network is for sandbox environments (the checker verifier) and domains with your "
                                 "own tools; other verifiers run without network")
            for host in self.network:
                _check_host(host)
            try:
                SandboxSpec(network=tuple(self.network))  # a host list the sandboxes accept
            except ValidationError as e:
                raise ValueError(e.errors()[0]["msg"].removeprefix("Value error, ")) from None
        return self

    @property
    def uses_tools(self) -> bool:
        return bool(self.tools or self.builtin_tools)


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
