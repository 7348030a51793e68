"""A user's own tools, declared by contract (JSON-Schema input, output format, error codes) and
implemented by a shell command or a Python function that runs in the sandbox, used by a user
tool domain made from a data file: every row's reference calls reach its answer in real Docker
sandboxes; each failure comes back as its error code (declared by a command, raised by a
function, undeclared, a crash, a timeout, a schema violation); validation passes; built-in
tools alone score in process; bad definitions are refused naming the field."""

import json

import pytest

from core.errors import ConfigError
from domains.contract import ToolUseDomain
from domains.user.domain import data_digest
from domains.user.library import prepare
from tests.domains.user_domains_helpers import validate_unsaved
from domains.validation import play_turns
from sandboxes.pool import SandboxPool
from sandboxes.spec import SandboxSpec

ITEMS = ("bolt", "nut", "gear", "spring", "valve", "pulley")

STOCK_COMMAND = (
    "python3 -c \"import json, sys\n"
    "args = json.load(sys.stdin)\n"
    "stock = json.load(open('inventory.json'))\n"
    "item = args['item']\n"
    "if item not in stock:\n"
    "    sys.exit(print('not_found: no item ' + item, file=sys.stderr) or 3)\n"
    "print(stock[item])\"")

PRICE_SOURCE = '''
PRICES = {"bolt": 0.25, "nut": 0.1, "gear": 4.5, "spring": 1.2, "valve": 12.0, "pulley": 7.75}

def run(arguments):
    print("this goes nowhere")          # a tool's prints never reach the model
    item = arguments["item"]
    if item == "crash":
        raise RuntimeError("boom")
    if item == "slow":
        import time
        time.sleep(30)
    if item == "odd":
        raise ToolError("weird_code", "not declared")
    if item not in PRICES:
        raise ToolError("unknown_item", f"no price for {item}")
    return {"item": item, "price_eur": PRICES[item]}
'''

ITEM_SCHEMA = {"type": "object", "properties": {"item": {"type": "string", "minLength": 1}}, "required": ["item"],
               "additionalProperties": False}

DEFINITION = {
    "name": "stock_value",
    "columns": {"prompt": "question", "answer": "answer", "id": "id", "reference_calls": "calls"},
    "verifier": {"kind": "numeric", "abs_tol": 0.005, "files_column": "files"},
    "heldout_fraction": 0.3,
    "tools": [
        {"name": "stock", "description": "Units in stock of one item.", "input_schema": ITEM_SCHEMA,
         "output": "the number of units", "errors": {"not_found": "no such item in this warehouse"},
         "example": {"item": "bolt"}, "command": STOCK_COMMAND, "timeout_s": 5},
        {"name": "unit_price", "description": "The unit price of one item in EUR.", "input_schema": ITEM_SCHEMA,
         "output": "JSON: item, price_eur", "errors": {"unknown_item": "no price for that item"},
         "python": PRICE_SOURCE, "timeout_s": 2},
    ],
}
PRICES = {"bolt": 0.25, "nut": 0.1, "gear": 4.5, "spring": 1.2, "valve": 12.0, "pulley": 7.75}


def _rows() -> list[dict]:
    """12 warehouses: what the stock of one item is worth (units x price)."""
    rows = []
    for i in range(12):
        stock = {item: (7 * i + 3 * k) % 40 + 1 for k, item in enumerate(ITEMS)}
        item = ITEMS[i % len(ITEMS)]
        rows.append({"id": f"w{i}", "question": f"What is the stock of {item} in this warehouse worth, in EUR?",
                     "answer": f"{stock[item] * PRICES[item]:.2f}", "files": json.dumps({"inventory.json":
                                                                                      json.dumps(stock)}),
                     "calls": json.dumps([{"name": "stock", "arguments": {"item": item}},
                                          {"name": "unit_price", "arguments": {"item": item}}])})
    return rows


@pytest.fixture(scope="module")
def pool(docker_engine):
    with SandboxPool("docker", SandboxSpec(memory_mb=256, episode_timeout_s=120), size=1,
                     labels={"rlwb.test": "user-tool-domain"}, gc_interval_s=0) as p:
        yield p


def _call(name: str, item: str) -> str:
    return f'<tool_call>{{"name": "{name}", "arguments": {{"item": "{item}"}}}}</tool_call>'


def test_every_reference_episode_calls_the_users_tools_and_scores_1(pool):
    d = prepare(DEFINITION, rows=_rows())
    assert isinstance(d, ToolUseDomain) and d.needs_sandbox and d.kind == "multi_turn"
    assert [s.name for s in d.tool_specs(d.make_task(0))] == ["stock", "unit_price"]
    assert "unit_price" in d.messages(d.make_task(0))[0]["content"]  # the contract is shown to the model
    by_id = {t.entry["task_id"]: t for t in [d.make_task(s) for s in range(100)] +
             [d.make_task(s) for s in range(1_000_000_000, 1_000_000_060)]}
    assert len(by_id) == 12
    with pool.lease() as sb:
        for task in by_id.values():
            reward, b, records = play_turns(d, task, d.reference_turns(task), sb)
            assert reward == 1.0 and b["ok_calls"] == 2, (task.entry["task_id"], b, records)
            observations = [c["observation"] for c in records[0]["calls"]]
            assert "this goes nowhere" not in "".join(observations)
        task = by_id["w1"]
        assert play_turns(d, task, d.wrong_turns(task), sb)[0] < 1.0
        assert play_turns(d, task, ["I don't know."], sb)[0] == 0.0


@pytest.mark.parametrize("turn,code", [
    (_call("stock", "anvil"), "not_found"),            # the command's declared code on its last stderr line
    (_call("unit_price", "anvil"), "unknown_item"),    # ToolError raised by the function
    (_call("unit_price", "odd"), "tool_error"),        # a code the tool did not declare
    (_call("unit_price", "crash"), "tool_error"),      # the function raised
    (_call("unit_price", "slow"), "timeout"),          # past the tool's 2 s
    ('<tool_call>{"name": "stock", "arguments": {"item": 3}}</tool_call>', "schema_violation"),
    ('<tool_call>{"name": "drill", "arguments": {}}</tool_call>', "unknown_tool"),
])
def test_each_failure_reaches_the_model_as_its_error_code(pool, turn, code):
    d = prepare(DEFINITION, rows=_rows())
    task = d.make_task(0)
    with pool.lease() as sb:
        _, b, records = play_turns(d, task, [turn, d.wrap_answer(task.answer)], sb)
    [call] = records[0]["calls"]
    assert call["error"] == code, call
    assert b["error_codes"] == {code: 1} and b["correct"] == 1.0


def test_validation_plays_the_reference_calls_and_passes(docker_engine):
    [report] = validate_unsaved([DEFINITION], _rows(), cross_process=True)
    assert report["passed"], report["reasons"]


def test_a_tool_that_fails_on_every_row_fails_validation(docker_engine):
    broken = json.loads(json.dumps(DEFINITION))
    broken["name"] = "stock_value_broken"
    broken["tools"][0]["command"] = "exit 1"
    [report] = validate_unsaved([broken], _rows(), cross_process=True)
    assert not report["passed"]
    assert any("tool" in r for r in report["reasons"]), report["reasons"]


def test_built_in_tools_alone_score_in_process():
    rows = [{"q": f"What is {a}% of {b}? Use the calculator.", "a": f"{a * b / 100:g}",
             "calls": [{"name": "calculator", "arguments": {"expression": f"{a} * {b} / 100"}}]}
            for a in (5, 12, 17, 35) for b in (80, 240, 1250)]
    d = prepare({"name": "percent_calc", "columns": {"prompt": "q", "answer": "a", "reference_calls": "calls"},
                 "verifier": {"kind": "numeric", "rel_tol": 1e-6}, "builtin_tools": ["calculator"],
                 "heldout_fraction": 0.25}, rows=rows)
    assert not d.needs_sandbox
    task = d.make_task(0)
    reward, b = d.score(task, d.reference_completion(task))
    assert reward == 1.0 and b["calls"] == 1 and b["ok_calls"] == 1
    reward, b = d.score(task, "Answer: 3")
    assert reward < 1.0 and b["calls"] == 0


def test_a_domain_without_tools_keeps_its_data_digest():
    d = prepare({"name": "plain_rows", "columns": {"prompt": "q", "answer": "a"}},
                rows=[{"q": f"q{i}", "a": str(i)} for i in range(20)])
    fields = [{"id": r.id, "prompt": r.prompt, "answer": r.answer, "system": "", "level": 1, "pattern": "",
               "metadata": {}, "test": "", "entry_point": "", "prefix": "", "files": {}, "setup": "", "checker": ""}
              for r in d.rows]
    import hashlib
    expected = hashlib.sha256(json.dumps(fields, sort_keys=True, ensure_ascii=False).encode()).hexdigest()
    assert data_digest(d.rows) == expected == d.data_sha256


def _tool(**changes) -> dict:
    return {**DEFINITION["tools"][0], **changes}


@pytest.mark.parametrize("change,match", [
    ({"tools": [_tool(python="def run(a): return 1")]}, "exactly one of 'command'"),
    ({"tools": [{k: v for k, v in _tool().items() if k != "command"}]}, "exactly one of 'command'"),
    ({"tools": [_tool(name="calculator")]}, "built-in tool's name"),
    ({"tools": [_tool(input_schema={"type": "string"})]}, "type 'object'"),
    ({"tools": [_tool(input_schema={"type": "object", "properties": {"item": {"type": "nonsense"}}})]},
     "not valid JSON Schema"),
    ({"tools": [_tool(example={"item": 5})]}, "example does not meet the input schema"),
    ({"tools": [_tool(command=None, python="def other(a): pass")]}, "defines no function run"),
    ({"tools": [_tool(command=None, python="def run(a):\n  return (")]}, "does not compile"),
    ({"tools": [_tool(errors={"Not Found": "x"})]}, "error code"),
    ({"tools": [_tool(), _tool()]}, "declared twice"),
    ({"tools": [], "builtin_tools": []}, "reference_calls is set but the domain has no tools"),
    ({"builtin_tools": ["sql"]}, "builtin_tools"),
    ({"verifier": {"kind": "python", "source": "def reward(r, a, row): return 1.0"}}, "tools go with the answer"),
])
def test_bad_tool_definitions_are_refused_naming_the_field(change, match):
    with pytest.raises(ConfigError, match=match):
        prepare({**DEFINITION, **change}, rows=_rows())


@pytest.mark.parametrize("calls,match", [
    ("not json", "is not JSON"),
    (json.dumps([{"name": "drill", "arguments": {}}]), "calls 'drill', not a tool of this domain"),
    (json.dumps({"name": "stock"}), "must be a JSON list"),
])
def test_bad_reference_calls_name_the_row(calls, match):
    rows = _rows()
    rows[2] = {**rows[2], "calls": calls}
    with pytest.raises(ConfigError, match=f"row 3: .*{match}"):
        prepare(DEFINITION, rows=rows)


def test_the_validators_broken_codes_are_the_contracts_plus_crashes_and_timeouts():
    from domains.tools.env import CONTRACT_ERRORS
    from domains.validation import BROKEN_TOOL_CODES

    assert BROKEN_TOOL_CODES == CONTRACT_ERRORS | {"tool_error", "timeout"}


@pytest.mark.parametrize("schema,match", [
    ({"type": "object", "$ref": "https://example.invalid/s.json"}, "does not resolve inside the schema"),
    ({"type": "object", "properties": {"unit": {"$ref": "#/$defs/nope"}}}, "'#/\\$defs/nope' does not resolve"),
])
def test_a_reference_outside_the_schema_is_refused_when_the_tool_is_declared(schema, match):
    with pytest.raises(ConfigError, match=match):
        prepare({**DEFINITION, "tools": [_tool(input_schema=schema, example=None)]}, rows=_rows())


def test_a_local_reference_works():
    schema = {"type": "object", "$defs": {"item": {"type": "string", "minLength": 1}},
              "properties": {"item": {"$ref": "#/$defs/item"}}, "required": ["item"]}
    d = prepare({**DEFINITION, "tools": [_tool(input_schema=schema), DEFINITION["tools"][1]]}, rows=_rows())
    assert d.user_contracts["stock"].input_schema == schema


@pytest.mark.parametrize("change,match", [
    ({"tools": [_tool(errors={"timeout": "x"})]}, "one of the contract's own"),
    ({"tools": [_tool(errors={"nötfound": "x"})]}, "error code 'nötfound'"),
    ({"tools": [_tool(command="   ")]}, "'command' is empty"),
    ({"tools": [_tool(example=None)], "columns": {k: v for k, v in DEFINITION["columns"].items()
                                                  if k != "reference_calls"}}, "has no example"),
    ({"verifier": {**DEFINITION["verifier"], "setup_column": "setup"}}, "'setup_column' is an option of the checker"),
    ({"verifier": {**DEFINITION["verifier"], "checker": "true"}}, "'checker' is an option of the checker"),
])
def test_more_bad_tool_definitions(change, match):
    with pytest.raises(ConfigError, match=match):
        prepare({**DEFINITION, **change}, rows=_rows())


def test_files_column_without_tools_or_checker_is_refused():
    with pytest.raises(ConfigError, match="files_column is for sandbox environments"):
        prepare({"name": "plain_files", "columns": {"prompt": "q", "answer": "a"}, "verifier": {"files_column": "f"}},
                rows=[{"q": f"q{i}", "a": str(i), "f": "{}"} for i in range(20)])


def test_a_schema_pattern_that_backtracks_costs_the_call_not_the_trainer(pool):
    schema = {"type": "object", "properties": {"item": {"type": "string", "pattern": "^([a-z]+)+$"}},
              "required": ["item"]}
    d = prepare({**DEFINITION, "tools": [_tool(input_schema=schema), DEFINITION["tools"][1]]}, rows=_rows())
    task = d.make_task(0)
    with pool.lease() as sb:
        _, b, records = play_turns(d, task, [_call("stock", "a" * 40 + "!"), d.wrap_answer(task.answer)], sb)
    [call] = records[0]["calls"]
    assert call["error"] == "schema_violation" and "took over 2 s" in call["observation"], call


def test_many_reference_calls_are_played_four_a_turn_and_long_results_are_cut_not_lost(pool):
    source = PRICE_SOURCE.replace('if item not in PRICES:', 'if item == "long":\n        return "z" * 70000\n'
                                                            '    if item not in PRICES:')
    tools = [DEFINITION["tools"][0], {**DEFINITION["tools"][1], "python": source},
        {**DEFINITION["tools"][1], "name": "tool_runner", "example": {"item": "gear"}}]  # a name the runner once had
    rows = [{**r, "calls": json.dumps(json.loads(r["calls"]) * 3)} for r in _rows()]  # 6 calls a row
    d = prepare({**DEFINITION, "tools": tools}, rows=rows)
    task = d.make_task(0)
    turns = d.reference_turns(task)
    assert len(turns) == 3 and turns[0].count("<tool_call>") == 4 and turns[1].count("<tool_call>") == 2
    with pool.lease() as sb:
        reward, b, _ = play_turns(d, task, turns, sb)
        assert reward == 1.0 and b["ok_calls"] == 6, b
        _, _, records = play_turns(d, task, [_call("unit_price", "long") + _call("tool_runner", "nut"), "Answer: 1"],
                                   sb)
    long, runner = records[0]["calls"]
    assert long["error"] is None and "z" * 3000 in str(long["observation"])  # cut for the model, not lost
    assert runner["error"] is None and "price_eur" in runner["observation"]


def test_without_reference_calls_validation_calls_each_tools_example(docker_engine):
    definition = {**DEFINITION, "name": "stock_examples",
                  "columns": {k: v for k, v in DEFINITION["columns"].items() if k != "reference_calls"},
                  "tools": [DEFINITION["tools"][0], {**DEFINITION["tools"][1], "example": {"item": "nut"}}]}
    d = prepare(definition, rows=_rows())
    assert d.reference_turns(d.make_task(0))[0].count("<tool_call>") == 2
    broken = {**definition, "name": "stock_examples_broken",
              "tools": [definition["tools"][0], {**definition["tools"][1], "python": "def run(a):\n    1 / 0\n"}]}
    good, bad = validate_unsaved([definition, broken], _rows(), n_verify=2)
    assert good["passed"], good["reasons"]
    assert not bad["passed"] and any("unit_price gave tool_error" in r for r in bad["reasons"]), bad["reasons"]


def test_imported_rows_may_only_call_the_domains_tools():
    from domains.user.build import build_domain
    from domains.user.data import TaskRow

    d = prepare(DEFINITION, rows=_rows())
    rows = list(d.rows)
    rows[1] = TaskRow(**{**rows[1].__dict__, "calls": [{"name": "drill", "arguments": {}}]})
    with pytest.raises(ConfigError, match="row 2: field 'calls' calls 'drill'"):
        build_domain(d.spec, tuple(rows))
