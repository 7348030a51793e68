"""Contract-first tool calling: tool contracts, the one call format, parsing and validation.

    from domains.tools.contract import ToolSpec, parse_tool_calls, check_call, error_observation
    calc = ToolSpec("calculator", "Evaluate an arithmetic expression.",
                    {"type": "object", "properties": {"expression": {"type": "string"}},
                     "required": ["expression"], "additionalProperties": False},
                    output="the value as a decimal string")
    calls, errors = parse_tool_calls(model_text)        # never raises
    for call in calls:
        error = check_call(call, {"calculator": calc})   # None, or a CallError with its code
    tokenizer.apply_chat_template(messages, tools=chat_tools([calc]), ...)

The call format (documented to the model by the chat template's tool support and by
`CALL_FORMAT`): one JSON object per call between tags,
`<tool_call>{"name": "calculator", "arguments": {"expression": "2+3"}}</tool_call>`.
Several calls in one turn are allowed up to `max_calls`; tags inside Markdown code fences
count like any other. Everything outside the tags is the model's free text.

Every invalid call gets a structured error observation (`error_observation`) with one of
`ERROR_CODES`; schema checks use jsonschema (Draft 2020-12), not hand-written checks.

Not covered yet: the tools themselves (python, shell, files, search_document, sql,
calculator), tool-use domains and the multi-turn loop (issue 6 builds them on this).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from core.errors import ConfigError

CALL_OPEN, CALL_CLOSE = "<tool_call>", "</tool_call>"
CALL_FORMAT = (f'Call a tool by writing {CALL_OPEN}{{"name": TOOL, "arguments": {{...}}}}{CALL_CLOSE}; '
               "the result comes back as the next message.")
MAX_CALL_CHARS = 100_000  # a call's JSON longer than this is refused unparsed
ERROR_CODES = {
    "invalid_json": "the text between the tags is not one JSON object",
    "bad_call_shape": "the object lacks a string 'name' or an object 'arguments'",
    "unknown_tool": "no tool of that name in this environment",
    "schema_violation": "the arguments do not satisfy the tool's input schema",
    "too_many_calls": "more calls in one turn than the environment allows; the extra ones were not run",
    "unclosed_call": "an opening tag without its closing tag",
    "tool_error": "the tool ran and failed (its message says why)",
    "timeout": "the tool ran past its time limit and was stopped",
}
_CALL = re.compile(re.escape(CALL_OPEN) + r"(.*?)(?:" + re.escape(CALL_CLOSE) + r"|\Z)", re.DOTALL)


@dataclass(frozen=True)
class ToolSpec:
    """A tool's contract.

    Attributes:
        name: What the model writes in "name" ([a-z][a-z0-9_]*).
        description: One or two sentences for the model.
        input_schema: JSON Schema (Draft 2020-12) of "arguments"; must be an object schema.
        output: What a successful observation holds (format and units).
        errors: Tool-specific error codes -> meaning (on top of `ERROR_CODES`).
        example: Example arguments (valid against `input_schema`), shown to models whose
            chat template has no tool support.
    """

    name: str
    description: str
    input_schema: dict
    output: str
    errors: dict[str, str] = field(default_factory=dict)
    example: dict | None = None

    def __post_init__(self) -> None:
        from jsonschema import Draft202012Validator
        from jsonschema.exceptions import SchemaError

        if not isinstance(self.name, str) or not re.fullmatch(r"[a-z][a-z0-9_]{0,63}", self.name):
            raise ConfigError(f"tool name must be lowercase letters, digits and '_', got {self.name!r}")
        if not isinstance(self.input_schema, dict) or self.input_schema.get("type") != "object":
            raise ConfigError(f"tool {self.name}: input_schema must be a JSON Schema with type 'object'")
        try:
            Draft202012Validator.check_schema(self.input_schema)
        except SchemaError as e:
            raise ConfigError(f"tool {self.name}: input_schema is not valid JSON Schema: {e.message}") from None
        _check_refs(self.input_schema, self.name)
        if self.example is not None:
            from jsonschema import ValidationError

            try:
                Draft202012Validator(self.input_schema).validate(self.example)
            except ValidationError as e:
                raise ConfigError(f"tool {self.name}: example does not meet the input schema: {e.message}") from None


def _refs(value: Any) -> list[str]:
    """Every "$ref" and "$dynamicRef" value in a schema."""
    if isinstance(value, dict):
        own = [v for k, v in value.items() if k in ("$ref", "$dynamicRef") and isinstance(v, str)]
        return own + [r for v in value.values() for r in _refs(v)]
    if isinstance(value, list):
        return [r for v in value for r in _refs(v)]
    return []


def _check_refs(schema: dict, name: str) -> None:
    """Every reference of an input schema resolves inside the schema: remote ones are never
    fetched, so one would fail (or hang) when a call is checked, not when the tool is declared.

    Raises:
        ConfigError: naming the reference.
    """
    from referencing import Registry  # on first use: jsonschema's reference resolver
    from referencing.jsonschema import DRAFT202012

    resolver = Registry().with_resource("urn:rlwb:tool", DRAFT202012.create_resource(schema)).resolver("urn:rlwb:tool")
    for ref in _refs(schema):
        try:
            resolver.lookup(ref)
        except Exception:  # noqa: BLE001 - referencing raises Unresolvable, NoSuchResource (a KeyError), ...
            raise ConfigError(f"tool {name}: input_schema's reference {ref[:120]!r} does not resolve inside the "
                              "schema (references to other documents are not fetched; put the part under $defs)") \
                from None


@dataclass(frozen=True)
class ToolCall:
    """A parsed call: `name`, `arguments` (a dict), `raw` (the text between the tags) and
    `index` (its position among the turn's calls, 0-based)."""

    name: str
    arguments: dict
    raw: str
    index: int


@dataclass(frozen=True)
class CallError:
    """An invalid call: `code` (a key of `ERROR_CODES` or of the tool's `errors`), a
    `message` for the model, the `raw` text, and its `index` in the turn."""

    code: str
    message: str
    raw: str = ""
    index: int = -1


def call_text(name: str, arguments: dict) -> str:
    """One call written in the call format: the inverse of `parse_tool_calls` for one call."""
    return f"{CALL_OPEN}{json.dumps({'name': name, 'arguments': arguments}, ensure_ascii=False)}{CALL_CLOSE}"


def scripted_tool_turns(text: Any) -> list[str]:
    """A reply written one turn per line (as the tool domains' `reference_completion` writes
    it) as its turns; DONE is added when the last line holds calls."""
    turns = [line for line in str(text).splitlines() if line.strip()] or [""]
    if any(parse_tool_calls(turns[-1])):
        turns.append("DONE")
    return turns


def parse_tool_calls(text: Any, max_calls: int = 4) -> tuple[list[ToolCall], list[CallError]]:
    """Find the calls in a model turn. Never raises, whatever `text` is.

    Args:
        text: The model's turn (anything that is not a str has no calls).
        max_calls: Calls allowed per turn; later ones get `too_many_calls` (one error each
            for the next `max_calls` of them, then one error that counts the rest).

    Returns:
        (calls in order, errors in order): well-formed calls (not yet checked against a
        tool, see `check_call`) and the malformed ones with their codes.
    """
    calls: list[ToolCall] = []
    errors: list[CallError] = []
    if not isinstance(text, str):
        return calls, errors
    matches = _CALL.finditer(text)
    for index, m in enumerate(matches):
        raw = m.group(1)
        if index >= 2 * max_calls:
            rest = 1 + sum(1 for _ in matches)
            errors.append(CallError("too_many_calls", f"only {max_calls} calls per turn; these {rest} more calls "
                                    "were not run", raw[:200], index))
            break
        if index >= max_calls:
            errors.append(CallError("too_many_calls", f"only {max_calls} calls per turn; this one was not run",
                                    raw[:200], index))
            continue
        if not m.group(0).endswith(CALL_CLOSE):
            errors.append(CallError("unclosed_call", f"{CALL_OPEN} without {CALL_CLOSE}", raw[:200], index))
            continue
        call, error = _parse_one(raw, index)
        if call is not None:
            calls.append(call)
        else:
            errors.append(error)
    return calls, errors


def _parse_one(raw: str, index: int) -> tuple[ToolCall | None, CallError | None]:
    if len(raw) > MAX_CALL_CHARS:
        return None, CallError("invalid_json", f"the call is over {MAX_CALL_CHARS} characters", raw[:200], index)
    try:
        obj = json.loads(raw.strip())
    except (ValueError, RecursionError) as e:
        return None, CallError("invalid_json", f"not valid JSON: {str(e)[:120]}", raw[:200], index)
    if not isinstance(obj, dict):
        return None, CallError("invalid_json", f"expected a JSON object, got {type(obj).__name__}", raw[:200], index)
    name, arguments = obj.get("name"), obj.get("arguments", {})
    if isinstance(arguments, str):  # some templates write arguments as a JSON string
        try:
            arguments = json.loads(arguments)
        except (ValueError, RecursionError):
            pass
    if not isinstance(name, str) or not isinstance(arguments, dict):
        return None, CallError("bad_call_shape", "write {\"name\": \"<tool>\", \"arguments\": {...}}", raw[:200],
                               index)
    return ToolCall(name, arguments, raw, index), None


def check_call(call: ToolCall, tools: dict[str, ToolSpec]) -> CallError | None:
    """Check a parsed call against the environment's tools (jsonschema, Draft 2020-12).

    Returns:
        None for a valid call, else `unknown_tool` or `schema_violation` with the first
        problem's path and message.
    """
    from jsonschema import Draft202012Validator

    spec = tools.get(call.name)
    if spec is None:
        known = ", ".join(sorted(tools)) or "none"
        return CallError("unknown_tool", f"no tool {call.name[:80]!r}; tools here: {known}", call.raw[:200], call.index)
    try:
        problems = sorted(Draft202012Validator(spec.input_schema).iter_errors(call.arguments),
                          key=lambda e: [str(p) for p in e.path])
    except Exception as e:  # noqa: BLE001 - a schema that can't be applied is the tool's fault, never a crash
        return CallError("tool_error", f"the arguments can't be checked against {call.name}'s input schema "
                                       f"({type(e).__name__}: {str(e)[:160]})", call.raw[:200], call.index)
    if problems:
        first = problems[0]
        where = "/".join(str(p) for p in first.path) or "arguments"
        return CallError("schema_violation", f"{where}: {first.message[:200]}", call.raw[:200], call.index)
    return None


def error_observation(error: CallError) -> str:
    """The observation the model gets for an invalid or failed call (one JSON line)."""
    return json.dumps({"error": {"code": error.code, "message": error.message, "call": error.index}},
                      ensure_ascii=False)


def chat_tools(tools: list[ToolSpec]) -> list[dict]:
    """The tools in the function format chat templates take (`apply_chat_template(tools=...)`)."""
    return [{"type": "function", "function": {"name": t.name, "description": f"{t.description} Returns: {t.output}",
                                              "parameters": t.input_schema}} for t in tools]
