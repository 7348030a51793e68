"""User domains: data files in every format, the verifiers, the split, storing and
versioning, and bad input that is refused with the row and field named and nothing stored."""

import json
import math

import pytest

from backend.store import Store
from core.errors import ConfigError
from domains import registry, splits
from domains.contract import Task
from domains.user import data as D
from domains.user import library as L
from domains.user.build import build_domain
from domains.user.spec import VerifierSpec, parse_spec
from domains.user.verifiers import check, extract

ROWS = [{"question": f"What is {i} + {i + 3}?", "answer": str(2 * i + 3), "id": f"q{i}", "level": 1 + i % 2}
        for i in range(60)]
SPEC = {"name": "my_sums", "columns": {"prompt": "question", "answer": "answer", "id": "id", "level": "level"},
        "verifier": {"kind": "numeric"}}


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "s.db")
    yield s
    for row in s.list_user_domains():
        registry.unregister(row["name"])


def _write(tmp_path, fmt: str):
    if fmt == "jsonl":
        p = tmp_path / "d.jsonl"
        p.write_text("\n".join(json.dumps(r) for r in ROWS) + "\n", encoding="utf-8")
    elif fmt == "json":
        p = tmp_path / "d.json"
        p.write_text(json.dumps(ROWS), encoding="utf-8")
    elif fmt == "csv":
        import csv

        p = tmp_path / "d.csv"
        with p.open("w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=list(ROWS[0]))
            w.writeheader()
            w.writerows(ROWS)
    elif fmt == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        p = tmp_path / "d.parquet"
        pq.write_table(pa.Table.from_pylist(ROWS), p)
    else:
        import datasets

        p = tmp_path / "d_hf"
        datasets.Dataset.from_list(ROWS).save_to_disk(str(p))
    return p


@pytest.mark.parametrize("fmt", ["jsonl", "json", "csv", "parquet", "datasets"])
def test_every_format_gives_the_same_tasks(tmp_path, fmt):
    rows = D.read_rows(_write(tmp_path, fmt))
    spec = parse_spec(SPEC)
    built = D.build_rows(spec, rows)
    assert len(built) == 60 and built[4].prompt == "What is 4 + 7?" and built[4].answer == "11"
    assert [r.level for r in built[:4]] == [1, 2, 1, 2]  # csv's "2" and parquet's 2 are the same level
    d = build_domain(spec, built)
    assert d.data_sha256 == build_domain(spec, D.build_rows(spec, ROWS)).data_sha256  # same content, same address


def test_split_is_stable_disjoint_and_near_the_fraction():
    spec = parse_spec({**SPEC, "columns": {"prompt": "question", "answer": "answer", "id": "id"},
                       "heldout_fraction": 0.25})
    many = [{"question": f"q {i}?", "answer": str(i), "id": f"row-{i}"} for i in range(2000)]
    d = build_domain(spec, D.build_rows(spec, many))
    held = {d.make_task(s, 1).entry["id"] for s in splits.heldout_seeds(3000)}
    trained = {d.make_task(s, 1).entry["id"] for s in range(5000)}
    assert held and trained and not held & trained
    assert 0.2 < len(held) / 2000 < 0.3
    shuffled = build_domain(spec, D.build_rows(spec, list(reversed(many))))  # reordered rows: same sides
    assert {shuffled.rows[i].id for i in shuffled.sides[(1, True)]} == {d.rows[i].id for i in d.sides[(1, True)]}
    assert d.make_task(7, 1) == d.make_task(7, 1)


@pytest.mark.parametrize("how,reply,want", [
    ("answer_line", "thinking...\nAnswer: 42", "42"),
    ("tags", "<answer>x = 3</answer>", "x = 3"),
    ("boxed", "so \\boxed{\\frac{1}{2}} and then \\boxed{7}", "7"),
    ("boxed", "\\boxed{\\frac{1}{2}}", "\\frac{1}{2}"),
    ("last_number", "we get 1,234 then \u22125 apples", "-5"),
    ("whole", "  Paris \n", "Paris"),
    ("answer_line", "no marker here", None),
    ("boxed", "\\boxed{unclosed", None),
])
def test_extraction(how, reply, want):
    assert extract(reply, how) == want


@pytest.mark.parametrize("verifier,answer,reference,ok", [
    ({"kind": "exact"}, "  new   YORK!", "New York", True),
    ({"kind": "exact"}, "Ｎｅｗ York", "new york", True),  # NFKC: fullwidth letters
    ({"kind": "exact", "case_sensitive": True}, "new york", "New York", False),
    ({"kind": "exact"}, "Boston", "New York", False),
    ({"kind": "numeric"}, "1,234", "1234", True),
    ({"kind": "numeric"}, "\u221212.5", "-12.5", True),
    ({"kind": "numeric"}, "45%", "0.45", True),
    ({"kind": "numeric"}, "45", "45%", True),
    ({"kind": "numeric", "rel_tol": 0.01}, "100.5", "100", True),
    ({"kind": "numeric"}, "100.5", "100", False),
    ({"kind": "numeric"}, "about ten", "10", False),
    ({"kind": "math"}, "0.5", "\\frac{1}{2}", True),
    ({"kind": "math"}, "$x+1$", "1+x", True),
    ({"kind": "math"}, "3", "4", False),
    ({"kind": "choice"}, "(b) because", "B", True),
    ({"kind": "choice"}, "C", "B", False),
    ({"kind": "regex", "pattern": r"[0-9]{3}-[0-9]{4}"}, "555-1234", "555-0000", True),
    ({"kind": "regex", "pattern": r"[0-9]{3}-[0-9]{4}"}, "call 555-1234", "555-0000", False),
    ({"kind": "json", "fields": ["a"]}, '{"a": 1, "b": 9}', '{"a": 1, "b": 2}', True),
    ({"kind": "json"}, '{"a": 1, "b": 9}', '{"a": 1, "b": 2}', False),
    ({"kind": "json"}, "not json", '{"a": 1}', False),
    ({"kind": "json", "json_schema": {"type": "object", "required": ["a"]}}, '{"a": 1}', "example", True),
    ({"kind": "json", "json_schema": {"type": "object", "required": ["a"]}}, '{"b": 1}', "example", False),
])
def test_verifiers(verifier, answer, reference, ok):
    spec = VerifierSpec(**verifier)
    assert check(spec, answer, reference, spec.pattern or "")[0] is ok


def test_scoring_runs_in_a_worker_and_survives_a_runaway_regex():
    spec = parse_spec({"name": "phones", "columns": {"prompt": "q", "answer": "a"},
                       "verifier": {"kind": "regex", "pattern_column": "p"}, "heldout_fraction": 0.5})
    rows = [{"q": f"Write {i} as a's", "a": "a" * i, "p": "(a+)+b?" if i == 3 else "a+"} for i in range(1, 9)]
    d = build_domain(spec, D.build_rows(spec, rows))
    task = next(d.make_task(s, 1) for s in range(50) if d.make_task(s, 1).entry["pattern"] == "a+")
    assert d.score(task, "Answer: " + task.answer)[0] == 1.0
    assert d.score(task, "Answer: b")[0] == pytest.approx(0.2)
    slow = Task(d.name, 0, "q", "aaa", 1, {"pattern": "(a+)+$"}, None)
    reward, why = d.score(slow, "Answer: " + "a" * 40 + "!")  # catastrophic backtracking: abandoned, scored 0
    assert reward == pytest.approx(0.2) and why["correct"] == 0.0 and "verifier error" in why["verifier_error"]


def test_add_update_remove_export_import(store, tmp_path):
    (tmp_path / "sums.jsonl").write_text("\n".join(json.dumps(r) for r in ROWS), encoding="utf-8")
    definition = {**SPEC, "data": str(tmp_path / "sums.jsonl")}
    d1 = L.add_domain(store, definition)
    assert d1.version == 1 and registry.get_domain("my_sums").version == 1
    with pytest.raises(ConfigError, match="exists"):
        L.add_domain(store, definition)
    d2 = L.add_domain(store, {**definition, "description": "sums, v2"}, new=False)
    assert d2.version == 2 and registry.get_domain("my_sums").description == "sums, v2"
    assert L.load_user_domain(store, "my_sums", 1).description != "sums, v2"  # versions never change
    out = L.export_domain(store, "my_sums", tmp_path / "x.json")
    copy = L.import_domain(store, out, name="my_copy")
    assert copy.data_sha256 == d2.data_sha256 and [r["name"] for r in store.list_user_domains()] == ["my_copy", "my_sums"]
    assert L.remove_domain(store, "my_copy") == 1
    assert "my_copy" not in registry.registry() and L.load_user_domain(store, "my_copy", 1).version == 1
    registry.unregister("my_sums")
    assert L.register_user_domains(store) == (["my_sums"], {})  # a fresh process: the newest version
    assert registry.get_domain("my_sums").version == 2
    with pytest.raises(ConfigError, match="built-in"):
        L.add_domain(store, {**definition, "name": "chain_sum"})


@pytest.mark.parametrize("content,fix,match", [
    ('{"question": "a", "answer": "1"}\n{"question": "b", "answer": \n', {}, "line 2 is not valid JSON"),
    ("", {}, "no rows"),
    (b'{"question": "caf\xe9", "answer": "1"}\n', {}, "line 1 is not UTF-8"),
    ('{"question": "a", "answer": "1"}\n', {"columns": {"prompt": "q", "answer": "answer"}}, "row 1: no column 'q'"),
    ('{"question": "a", "answer": ""}\n', {}, "row 1: column 'answer' .* is empty"),
    ('{"question": "a", "answer": "1", "id": 5}\n{"question": "b", "answer": "2", "id": 5}\n',
     {"columns": {"prompt": "question", "answer": "answer", "id": "id"}}, "row 2: repeats row 1's id"),
    ('{"question": "a", "answer": "x"}\n', {"verifier": {"kind": "numeric"}}, "row 1: the answer 'x' is not a number"),
    ('{"question": "a", "answer": "1", "lvl": "hard"}\n', {"columns": {"prompt": "question", "answer": "answer",
                                                                       "level": "lvl"}}, "row 1: column 'lvl'"),
    ('{"value": 3}\n', {"columns": {"template": "Convert {{ value }} {{ unit }}", "answer": "value"}},
     "row 1: the template uses 'unit' is undefined"),
    ('{"question": "a", "answer": "1"}\n', {"columns": {"template": "{% if %}", "answer": "answer"}},
     "columns.template"),
    ('{"question": "a", "answer": "1"}\n', {"verifier": {"kind": "regex", "pattern": "("}}, "not a regular expression"),
    ('{"question": "a", "answer": "1"}\n', {"name": "Bad Name"}, "field 'name'"),
    ('{"question": "a", "answer": "1"}\n', {"verifier": {"kind": "fuzzy"}}, "field 'verifier.kind'"),
    ('{"question": "a", "answer": "1"}\n', {"extra": 1}, "field 'extra'"),
])
def test_bad_input_names_the_row_and_field_and_stores_nothing(store, tmp_path, content, fix, match):
    p = tmp_path / "bad.jsonl"
    p.write_bytes(content if isinstance(content, bytes) else content.encode())
    definition = {"name": "bad_domain", "columns": {"prompt": "question", "answer": "answer"}, **fix, "data": str(p)}
    with pytest.raises(ConfigError, match=match):
        L.add_domain(store, definition)
    assert store.list_user_domains() == [] and "bad_domain" not in registry.registry()


def test_a_file_over_the_limit_is_refused(tmp_path, monkeypatch):
    p = _write(tmp_path, "jsonl")
    monkeypatch.setattr(D, "MAX_DATA_BYTES", 100)
    with pytest.raises(ConfigError, match="over the 0 MiB limit"):
        D.read_rows(p)


def test_too_few_rows_for_a_heldout_side_is_refused():
    spec = parse_spec({"name": "tiny", "columns": {"prompt": "q", "answer": "a"}})
    with pytest.raises(ConfigError, match="level 1: none of its 1 rows is held out"):
        build_domain(spec, D.build_rows(spec, [{"q": "2+2?", "a": "4"}]))


def test_validation_runs_on_a_user_domain_across_processes(store, tmp_path):
    from domains.validation import validate

    L.add_domain(store, {**SPEC, "name": "val_sums"}, rows=ROWS)
    [report] = validate(["val_sums"], n_tasks=40, sandbox_backend=None, cross_process=True)
    assert report["passed"], report["reasons"]
    assert report["cross_process_deterministic"] is True  # the child process rebuilt it from its definition


def test_numbers_read_alike():
    from domains.user.verifiers import read_number

    assert read_number("1,234.5") == 1234.5 and read_number("12%") == pytest.approx(0.12)
    assert read_number("inf") is None and read_number("3 apples") is None and math.isclose(read_number("+2"), 2)


@pytest.mark.parametrize("args,match", [
    (["--prompt", "q"], "row 1: no column 'q'"),
    (["--prompt", "question", "--verifier", "numeric", "--answer", "question"], "is not a number"),
    (["--prompt", "question", "--name", "chain_sum"], "built-in domain"),
    (["--prompt", "question", "--heldout-fraction", "0.9"], "heldout_fraction"),
    (["--prompt", "question", "--reward-file", "/no/such/reward.py"], "No such file"),
    (["--prompt", "question", "--verifier", "exact", "--reward-file", __file__], "--reward-file is the python"),
    (["--prompt", "question", "--reward-file", "/bin/true"], "not UTF-8 text"),
])
def test_the_cli_refuses_bad_input_with_one_line_and_stores_nothing(tmp_path, capsys, args, match):
    from backend.cli import main

    data = _write(tmp_path, "jsonl")
    db = tmp_path / "cli.db"
    base = ["--db", str(db), "domains", "add", "--data", str(data), "--name", "cli_sums", "--answer", "answer"]
    code = main(base + args)
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and err.startswith("error: ") and match in err, err
    assert Store(db).list_user_domains() == []
    assert main(base + ["--prompt", "question", "--verifier", "numeric"]) == 0  # the fixed command works
    assert "cli_sums version 1: 60 rows" in capsys.readouterr().out
    registry.unregister("cli_sums")


# ---- what a first try at breaking it found ---------------------------------------------


def test_a_new_version_is_not_validated_by_its_predecessors_report(store):
    from domains.validation import current_validations, validate

    L.add_domain(store, {**SPEC, "name": "vers"}, rows=ROWS)
    [report] = validate(["vers"], n_tasks=20, sandbox_backend=None, cross_process=False)
    store.record_validation(report)
    assert report["domain_version"] == "v1" and current_validations(store)["vers"]["passed"]
    L.add_domain(store, {**SPEC, "name": "vers"}, rows=ROWS[:40], new=False)
    assert "vers" not in current_validations(store)  # version 2: not validated yet
    L.remove_domain(store, "vers")
    L.add_domain(store, {**SPEC, "name": "vers"}, rows=ROWS)  # removed and added again: version 3
    assert "vers" not in current_validations(store)


def test_imported_rows_are_checked_like_added_ones(store, tmp_path):
    L.add_domain(store, {**SPEC, "name": "exp"}, rows=ROWS)
    out = L.export_domain(store, "exp", tmp_path / "e.json")
    clean = json.loads(out.read_text())
    for field, value, match in [("prompt", "a\x00b", "control characters"), ("prompt", "x" * 60_000, "over 20000"),
                                ("metadata", "str", "must be objects"), ("id", ["a"], "non-empty text"),
                                ("system", None, "must be text"), ("files", "x", "must be objects")]:
        edited = json.loads(json.dumps(clean))
        edited["rows"][0][field] = value
        out.write_text(json.dumps(edited))
        with pytest.raises(ConfigError, match=f"row 1: .*{match}"):
            L.import_domain(store, out, name="exp_copy")
    for spec in ([1, 2], "abc"):
        out.write_text(json.dumps({**clean, "spec": spec}))
        with pytest.raises(ConfigError, match='"spec" must be'):
            L.import_domain(store, out, name="exp_copy")
    assert [d["name"] for d in store.list_user_domains()] == ["exp"]


@pytest.mark.parametrize("template,match", [
    ("{{ 1/0 }}{{ v }}", "ZeroDivisionError"),
    ("{{ s + 1 }}", "TypeError"),
    ("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", "RecursionError"),
    ('{{ "\\x00" }}{{ v }}', "control characters"),
    ("{{ 'x' * 30000 }} {{ v }}", "over 20000"),
])
def test_a_template_that_fails_on_a_row_is_named(store, template, match):
    rows = [{"v": i, "s": "t", "self": 1, "a": str(i)} for i in range(30)]  # a column named `self` too
    with pytest.raises(ConfigError, match=f"row 1: .*{match}"):
        L.add_domain(store, {"name": "tpl", "columns": {"template": template, "answer": "a"}}, rows=rows)
    assert store.list_user_domains() == []


def test_templates_and_patterns_that_run_for_ever_are_cut(store, monkeypatch):
    from domains.user import verifiers

    monkeypatch.setattr(verifiers, "BUILD_TIMEOUT_S", 3.0)
    rows = [{"v": i, "a": "a" * 30 + "c"} for i in range(30)]
    loop = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}{{ v }}"
    with pytest.raises(ConfigError, match="took over 3 s"):
        L.add_domain(store, {"name": "slow", "columns": {"template": loop, "answer": "a"}}, rows=rows)
    with pytest.raises(ConfigError, match="took over 3 s"):  # the reference answers are matched in the worker
        L.add_domain(store, {"name": "slow", "columns": {"template": "{{ v }}", "answer": "a"},
                             "verifier": {"kind": "regex", "pattern": "(a+)+b|a*c"}}, rows=rows)
    assert store.list_user_domains() == []


def test_odd_files_are_refused_or_read_right(tmp_path):
    import os

    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000)
    with pytest.raises(ConfigError, match="can't be read"):
        D.read_rows(deep)
    big = tmp_path / "big.jsonl"
    big.write_text('{"a": ' + "9" * 5000 + "}\n")
    with pytest.raises(ConfigError, match="line 1 can't be read"):
        D.read_rows(big)
    dup = tmp_path / "dup.csv"
    dup.write_text("q,a,a\nx,1,2\n")
    with pytest.raises(ConfigError, match="names column 'a' twice"):
        D.read_rows(dup)
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match="not a regular file"):
        D.read_rows(fifo)
    spec = parse_spec({"name": "lv", "columns": {"prompt": "q", "answer": "a", "level": "l"}})
    built = D.build_rows(spec, [{"q": "x", "a": b"7", "l": "1.0"}, {"q": "y", "a": "8", "l": 2.0}])
    assert [(r.answer, r.level) for r in built] == [("7", 1), ("8", 2)]  # binary text decoded, 1.0 is level 1
    assert D.build_rows(parse_spec({**SPEC, "columns": {"prompt": "question", "answer": "answer",
                                                        "metadata": ["m"]}}),
                        [{"question": "q", "answer": "1", "m": float("nan")}])[0].metadata == {"m": None}


def test_more_bad_definitions_are_refused(store, tmp_path):
    with pytest.raises(ConfigError, match="only punctuation"):
        L.add_domain(store, {"name": "punct", "columns": {"prompt": "q", "answer": "a"}},
                     rows=[{"q": f"q{i}", "a": "?!" if i == 3 else str(i)} for i in range(30)])
    with pytest.raises(ConfigError, match="field 'data'"):
        L.add_domain(store, {**SPEC, "name": "d5", "data": 5})
    with pytest.raises(ConfigError, match="defines no function reward"):
        L.add_domain(store, {"name": "nofn", "columns": {"prompt": "question", "answer": "answer"},
                             "verifier": {"kind": "python", "source": "def score(r, a, row):\n    return 1.0\n"}},
                     rows=ROWS)
    with pytest.raises(ConfigError, match="not a regular expression"):
        L.add_domain(store, {"name": "re9", "columns": {"prompt": "question", "answer": "answer"},
                             "verifier": {"kind": "regex", "pattern": "a{99999999999}"}}, rows=ROWS)
    L.add_domain(store, {**SPEC, "name": "tox"}, rows=ROWS)
    with pytest.raises(ConfigError, match="is a directory"):
        L.export_domain(store, "tox", tmp_path)
    assert not list(tmp_path.parent.glob("*.part"))
    assert [d["name"] for d in store.list_user_domains()] == ["tox"]


def test_one_broken_stored_domain_does_not_break_the_others(store):
    L.add_domain(store, {**SPEC, "name": "fine"}, rows=ROWS)
    L.add_domain(store, {**SPEC, "name": "broken"}, rows=ROWS)
    store.db.execute("UPDATE user_domains SET spec = '{\"name\": 5}' WHERE name = 'broken'")
    store.db.conn.commit()
    registry.unregister("fine")
    registry.unregister("broken")
    done, broken = L.register_user_domains(store)
    assert done == ["fine"] and "broken" in broken and "name" in broken["broken"]


def test_show_prints_the_definition_and_versions_and_bad_yaml_names_its_line(tmp_path, capsys):
    from backend.cli import main

    data = _write(tmp_path, "jsonl")
    db = ["--db", str(tmp_path / "show.db")]
    add = ["domains", "add", "--data", str(data), "--name", "shown", "--prompt", "question", "--answer", "answer"]
    assert main(db + add) == 0 and main(db + ["domains", "update"] + add[2:] + ["--verifier", "numeric"]) == 0
    capsys.readouterr()
    assert main(db + ["domains", "show", "shown", "--examples", "0"]) == 0
    out = capsys.readouterr().out
    assert '"verifier": {"kind": "numeric"}' in out and "versions: 1, 2 (this is version 2)" in out
    assert main(db + add[:-4] + ["--name", "nan_split", "--heldout-fraction", "nan"]) == 2
    assert "finite number" in capsys.readouterr().err
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\ncolumns: {prompt: q\n")
    assert main(db + ["domains", "add", str(bad)]) == 2
    assert "not YAML at line 3" in capsys.readouterr().err
    registry.unregister("shown")
