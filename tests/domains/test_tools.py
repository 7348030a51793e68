"""The tool-call contract: parsing the one call format and validating calls with jsonschema;
property-based: the parser never raises on arbitrary text."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.errors import ConfigError
from domains.tools.contract import (ERROR_CODES, ToolCall, ToolSpec, chat_tools, check_call, error_observation,
                           parse_tool_calls)

CALC = ToolSpec("calculator", "Evaluate an arithmetic expression.",
                {"type": "object", "properties": {"expression": {"type": "string", "maxLength": 200}},
                 "required": ["expression"], "additionalProperties": False}, output="the value as a decimal string")
READ = ToolSpec("read_file", "Read a file of the sandbox.",
                {"type": "object", "properties": {"path": {"type": "string"}, "max_bytes": {"type": "integer",
                                                                                           "minimum": 1}},
                 "required": ["path"]}, output="the file's text", errors={"not_found": "no such file"})
TOOLS = {t.name: t for t in (CALC, READ)}


def call(name, arguments) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments}, ensure_ascii=False)}</tool_call>"


def test_a_valid_call_with_text_around_it():
    calls, errors = parse_tool_calls("Let me compute.\n" + call("calculator", {"expression": "2+3"}) + "\nDone?")
    assert errors == [] and calls == [ToolCall("calculator", {"expression": "2+3"}, calls[0].raw, 0)]
    assert check_call(calls[0], TOOLS) is None


def test_invalid_json_and_bad_shapes_get_their_codes():
    _, errors = parse_tool_calls('<tool_call>{"name": "calculator", "arguments": {</tool_call>')
    assert [e.code for e in errors] == ["invalid_json"]
    for body in ('["calculator"]', '{"arguments": {}}', '{"name": 3, "arguments": {}}', '{"name": "x", "arguments": 5}'):
        _, errors = parse_tool_calls(f"<tool_call>{body}</tool_call>")
        assert [e.code for e in errors] in (["invalid_json"], ["bad_call_shape"]), body
    _, errors = parse_tool_calls('<tool_call>{"name": "calculator", "arguments": {"expression": "1"}}')
    assert [e.code for e in errors] == ["unclosed_call"]


def test_wrong_types_missing_and_extra_fields_are_schema_violations():
    for arguments, where in (({"expression": 5}, "expression"), ({}, "arguments"),
                             ({"expression": "1", "extra": 1}, "arguments")):
        [c], _ = parse_tool_calls(call("calculator", arguments))
        error = check_call(c, TOOLS)
        assert error.code == "schema_violation" and error.message.startswith(where), error
    [c], _ = parse_tool_calls(call("read_file", {"path": "a.txt", "max_bytes": 0}))
    assert check_call(c, TOOLS).message.startswith("max_bytes:")


def test_unknown_tool_names_the_tools_there_are():
    [c], _ = parse_tool_calls(call("rm_rf", {}))
    error = check_call(c, TOOLS)
    assert error.code == "unknown_tool" and "calculator, read_file" in error.message


def test_several_calls_in_one_turn_and_too_many():
    text = "".join(call("calculator", {"expression": str(i)}) for i in range(6))
    calls, errors = parse_tool_calls(text, max_calls=4)
    assert [c.arguments["expression"] for c in calls] == ["0", "1", "2", "3"] and [c.index for c in calls] == [0, 1, 2, 3]
    assert [(e.code, e.index) for e in errors] == [("too_many_calls", 4), ("too_many_calls", 5)]


def test_calls_inside_code_fences_and_arguments_as_a_json_string():
    text = "```\n" + call("read_file", {"path": "notes.md"}) + "\n```"
    [c], errors = parse_tool_calls(text)
    assert errors == [] and c.arguments == {"path": "notes.md"}
    [c], _ = parse_tool_calls('<tool_call>{"name": "calculator", "arguments": "{\\"expression\\": \\"7*6\\"}"}</tool_call>')
    assert c.arguments == {"expression": "7*6"}


def test_unicode_arguments_survive():
    args = {"path": "données/報告 2025 🙂.txt"}
    [c], errors = parse_tool_calls(call("read_file", args))
    assert errors == [] and c.arguments == args and check_call(c, TOOLS) is None


def test_error_observation_is_one_json_line_with_a_known_code():
    _, [error] = parse_tool_calls("<tool_call>nope</tool_call>")
    obs = json.loads(error_observation(error))
    assert obs["error"]["code"] in ERROR_CODES and obs["error"]["call"] == 0 and "\n" not in error_observation(error)


def test_contracts_are_checked_and_rendered_for_chat_templates():
    with pytest.raises(ConfigError, match="type 'object'"):
        ToolSpec("x", "d", {"type": "string"}, "o")
    with pytest.raises(ConfigError, match="not valid JSON Schema"):
        ToolSpec("x", "d", {"type": "object", "properties": {"a": {"type": "no-such-type"}}}, "o")
    with pytest.raises(ConfigError, match="tool name"):
        ToolSpec("Bad Name", "d", {"type": "object"}, "o")
    [fn] = chat_tools([CALC])
    assert fn["type"] == "function" and fn["function"]["parameters"] == CALC.input_schema


def test_the_tiny_models_chat_template_takes_the_tools(tiny_model_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    text = tok.apply_chat_template([{"role": "user", "content": "2+3?"}], tools=chat_tools([CALC]),
                                   add_generation_prompt=True, tokenize=False)
    assert "2+3?" in text


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_the_parser_never_raises_on_any_text(text):
    calls, errors = parse_tool_calls(text)
    assert all(isinstance(c.arguments, dict) for c in calls)
    assert all(e.code in ERROR_CODES for e in errors)


@settings(max_examples=200, deadline=None)
@given(st.text(), st.text(), st.recursive(st.none() | st.booleans() | st.integers() | st.text(),
                                          lambda children: st.lists(children) | st.dictionaries(st.text(), children),
                                          max_leaves=10))
def test_any_text_around_and_inside_the_tags(before, after, payload):
    text = before + "<tool_call>" + json.dumps({"name": "calculator", "arguments": payload}) + "</tool_call>" + after
    calls, errors = parse_tool_calls(text)
    for c in calls:
        error = check_call(c, TOOLS)
        assert error is None or error.code in ERROR_CODES
    assert len(calls) + len(errors) >= 1 or "<tool_call>" in before


def test_a_flood_of_calls_gets_a_bounded_number_of_errors():
    calls, errors = parse_tool_calls('<tool_call>{"name": "a", "arguments": {}}</tool_call>' * 50_000, max_calls=4)
    assert len(calls) == 4 and len(errors) == 5
    assert [e.code for e in errors] == ["too_many_calls"] * 5 and "49992 more calls" in errors[-1].message
