"""The Domains page's "New domain" tab with AppTest: a data file's path, the column mapping,
the prompt preview, try-the-verifier, Save (a versioned user domain in the store), Validate
now; bad data and a bad mapping show inline errors and store nothing."""

from __future__ import annotations

import json

from backend.store import Store
from domains import registry
from tests.app.test_domains_page import _db, _ok, _open


def _texts(at) -> str:
    return "\n".join(str(e.value) for kind in ("markdown", "caption", "info", "error", "success", "text")
                     for e in getattr(at, kind))


def _data(tmp_path, rows=None):
    rows = rows or [{"question": f"How many legs do {i} spiders have?", "answer": str(8 * i)} for i in range(1, 41)]
    p = tmp_path / "legs.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    return p


def test_a_data_file_becomes_a_stored_validated_domain(tmp_path, monkeypatch):
    db = _db(tmp_path)
    at = _open(db, monkeypatch)
    try:
        at.text_input(key="nd_path").set_value(str(_data(tmp_path))).run()
        _ok(at)
        assert "40 rows" in _texts(at)
        at.text_input(key="nd_name").set_value("spider_legs").run()
        at.selectbox(key="nd_prompt").set_value("question")
        at.selectbox(key="nd_answer").set_value("answer")
        at.selectbox(key="nd_verifier").set_value("numeric").run()
        _ok(at)
        texts = _texts(at)
        assert "How many legs do" in texts and "Answer: <answer>" in texts  # the prompt as the model sees it
        assert "held out" in texts
        reference = [c.value for c in at.caption if c.value.startswith("Reference answer:")][0].split(": ")[1]
        at.text_input(key="nd_try").set_value(f"Answer: {reference}").run()
        assert "Reward **1.00**" in _texts(at)
        at.text_input(key="nd_try").set_value("Answer: 3").run()
        assert "Reward **0.20**" in _texts(at)
        at.button(key="nd_save").click().run()
        _ok(at)
        assert "Saved spider_legs version 1" in _texts(at)
        with Store(db) as store:
            [row] = store.list_user_domains()
            assert row["name"] == "spider_legs" and row["version"] == 1 and row["n_rows"] == 40
        at.button(key="nd_validate").click().run()
        _ok(at)
        assert "spider_legs passed validation" in _texts(at)
        with Store(db) as store:
            assert store.latest_validations()["spider_legs"]["passed"] is True
    finally:
        registry.unregister("spider_legs")


def test_bad_data_and_a_bad_mapping_show_inline_and_store_nothing(tmp_path, monkeypatch):
    db = _db(tmp_path)
    at = _open(db, monkeypatch)
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"question": "a", "answer": "1"}\n{"question": \n')
    at.text_input(key="nd_path").set_value(str(bad)).run()
    _ok(at)
    assert "line 2 is not valid JSON" in _texts(at)
    at.text_input(key="nd_path").set_value(str(_data(tmp_path, [{"q": f"q{i}", "a": "x"} for i in range(30)]))).run()
    at.text_input(key="nd_name").set_value("words").run()
    at.selectbox(key="nd_verifier").set_value("numeric").run()
    _ok(at)
    assert "row 1: the answer 'x' is not a number" in _texts(at)
    assert [b for b in at.button if b.key == "nd_save"] == []  # no Save button without a valid domain
    with Store(db) as store:
        assert store.list_user_domains() == []


def test_a_domain_with_tools_is_declared_on_the_page(tmp_path, monkeypatch):
    """Built-in and own tools in the Tools expander: the preview lists them to the model, a
    broken contract shows inline, the saved domain keeps them and its reference calls."""
    rows = [{"question": f"What is {a} times {b}?", "answer": str(a * b),
             "calls": json.dumps([{"name": "calculator", "arguments": {"expression": f"{a} * {b}"}}])}
            for a in range(11, 17) for b in range(21, 26)]
    db = _db(tmp_path)
    at = _open(db, monkeypatch)
    try:
        at.text_input(key="nd_path").set_value(str(_data(tmp_path, rows))).run()
        at.text_input(key="nd_name").set_value("times_with_tools").run()
        at.selectbox(key="nd_prompt").set_value("question")
        at.selectbox(key="nd_answer").set_value("answer")
        at.selectbox(key="nd_verifier").set_value("numeric").run()
        at.multiselect(key="nd_builtin_tools").set_value(["calculator"])
        at.selectbox(key="nd_calls_col").set_value("calls")
        at.text_area(key="nd_tools").set_value("- name: lookup\n  description: x\n  input_schema: {type: string}\n"
                                               "  command: cat").run()
        _ok(at)
        assert "type 'object'" in _texts(at)  # a broken contract is named inline
        assert [b for b in at.button if b.key == "nd_save"] == []
        at.text_area(key="nd_tools").set_value("").run()
        _ok(at)
        texts = _texts(at)
        assert '"name": "calculator"' in texts and "reply without a tool call" in texts
        at.button(key="nd_save").click().run()
        _ok(at)
        assert "Saved times_with_tools version 1" in _texts(at)
        d = registry.get_domain("times_with_tools")
        task = d.make_task(0)
        assert d.spec.builtin_tools == ["calculator"] and d.score(task, d.reference_completion(task))[0] == 1.0
    finally:
        registry.unregister("times_with_tools")
