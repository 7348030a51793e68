"""The environment tools and the runner: each tool's happy path and failure codes; a tool
that raises or hangs gets its code or a timeout observation and the turn goes on."""

import json
import shutil
import sqlite3
import threading

import pytest

from core.errors import ConfigError
from domains.tools.contract import ToolSpec
from domains.tools.toolbox import TOOLS, ToolContext, ToolRunner


def call(name, **arguments) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


@pytest.fixture
def database(tmp_path):
    path = tmp_path / "shop.db"
    with sqlite3.connect(path) as conn:
        conn.execute("create table sales (region text, amount integer)")
        conn.executemany("insert into sales values (?, ?)", [("north", 10), ("south", 32), ("north", 5)])
    return path


def test_calculator_values_and_math_errors():
    runner = ToolRunner(["calculator"])
    [ok, zero, names, huge] = runner.run_turn(call("calculator", expression="(2+3)*7 - 1/4") +
                                              call("calculator", expression="1/0") +
                                              call("calculator", expression="__import__('os')") +
                                              call("calculator", expression="9**9**9"))
    assert ok.error is None and ok.observation == "34.75"
    assert [r.error for r in (zero, names, huge)] == ["math_error"] * 3
    assert json.loads(zero.observation)["error"]["code"] == "math_error"


def test_sql_is_read_only_and_reports_errors(database):
    runner = ToolRunner(["sql"], ToolContext(database=database))
    [rows] = runner.run_turn(call("sql", query="select region, sum(amount) from sales group by region order by 1"))
    assert rows.error is None
    assert [json.loads(line) for line in rows.observation.splitlines()] == [["region", "sum(amount)"],
                                                                            ["north", 15], ["south", 32]]
    [write] = runner.run_turn(call("sql", query="delete from sales"))
    assert write.error == "read_only"
    [bad] = runner.run_turn(call("sql", query="select nope from sales"))
    assert bad.error == "sql_error" and "nope" in bad.observation
    with sqlite3.connect(database) as conn:
        assert conn.execute("select count(*) from sales").fetchone()[0] == 3
    [missing] = ToolRunner(["sql"]).run_turn(call("sql", query="select 1"))
    assert missing.error == "no_database"


def test_a_slow_query_is_stopped_at_the_limit(database):
    runner = ToolRunner(["sql"], ToolContext(database=database), timeout_s=0.5)
    slow = "with recursive c(x) as (select 1 union all select x + 1 from c) select count(*) from c"
    [r] = runner.run_turn(call("sql", query=slow))
    assert r.error == "timeout"


def test_a_tool_that_raises_or_hangs_gets_its_code_and_the_turn_goes_on():
    spec = lambda name: ToolSpec(name, "test tool", {"type": "object"}, "text")  # noqa: E731
    release = threading.Event()

    def hang(args, ctx, timeout_s):
        release.wait(30)
        return "late"

    def boom(args, ctx, timeout_s):
        raise RuntimeError("disk on fire")

    runner = ToolRunner(["hang", "boom", "calculator"], timeout_s=0.3, implementations={"hang": hang, "boom": boom},
                        specs={"hang": spec("hang"), "boom": spec("boom")})
    results = runner.run_turn(call("hang") + call("boom") + call("calculator", expression="6*7") + call("nope"))
    release.set()
    assert [r.error for r in results] == ["timeout", "tool_error", None, "unknown_tool"]
    assert "disk on fire" in results[1].observation and results[2].observation == "42"
    runner.close()


def test_search_document_returns_located_fragments(tmp_path):
    from retrieval.embeddings import Embedder
    from retrieval.pipeline import Collection, RetrievalConfig, Retriever
    from trainer.tiny import build_tokenizer

    cfg = RetrievalConfig(chunk_tokens=64, overlap_tokens=8)
    text = "# Notes\n\n" + " ".join(f"Line {i} is about the weather." for i in range(40)) + \
        " The vault code is 4321. " + " ".join(f"Line {i} is about the garden." for i in range(40))
    col = Collection.build({"notes": text}, build_tokenizer(), cfg, Embedder.shared())
    runner = ToolRunner(["search_document"], ToolContext(retriever=Retriever(col, cfg)))
    [r] = runner.run_turn(call("search_document", query="What is the vault code?", top_k=2))
    assert r.error is None and "4321" in r.observation and "[notes | Notes | tokens" in r.observation
    [none] = ToolRunner(["search_document"]).run_turn(call("search_document", query="x"))
    assert none.error == "no_documents"


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")
def test_sandbox_tools_on_the_local_backend():
    from sandboxes.local_backend import LocalSandbox
    from sandboxes.spec import SandboxSpec

    with LocalSandbox(SandboxSpec(memory_mb=256, command_timeout_s=5)) as sb:
        runner = ToolRunner(["python", "shell", "read_file", "write_file", "list_dir"], ToolContext(sandbox=sb),
                            timeout_s=2)
        results = runner.run_turn(call("write_file", path="d/a.txt", content="héllo") +
                                  call("read_file", path="d/a.txt") + call("list_dir", path="d") +
                                  call("python", code="import sys; print(6*7); sys.exit(3)"))
        assert [r.error for r in results] == [None] * 4
        assert results[1].observation == "héllo" and results[2].observation.startswith("a.txt\tfile\t6")
        assert results[3].observation.startswith("exit code 3") and "42" in results[3].observation
        [slow, missing] = runner.run_turn(call("shell", command="sleep 10") + call("read_file", path="nope.txt"))
        assert slow.error == "timeout" and "timed out" in slow.observation and missing.error == "not_found"


def test_runner_settings_are_checked():
    with pytest.raises(ConfigError, match="unknown tools"):
        ToolRunner(["teleport"])
    with pytest.raises(ConfigError, match="timeout_s"):
        ToolRunner(["calculator"], timeout_s=0)
    assert set(TOOLS) == {"python", "shell", "read_file", "write_file", "list_dir", "search_document", "sql",
                          "calculator"}


def test_calculator_refuses_results_too_big_to_compute_quickly():
    import time

    runner = ToolRunner(["calculator"], timeout_s=2.0)
    for expr in ("4000000**4000000", "3999999**1999999", "(2**4000)*(2**4000)", "1e308*10"):
        t0 = time.monotonic()
        [r] = runner.run_turn(call("calculator", expression=expr))
        assert r.error == "math_error" and time.monotonic() - t0 < 1.5, (expr, r.observation)
    [r] = runner.run_turn(call("calculator", expression="2**100"))
    assert r.observation == str(2**100)


def test_sql_cannot_create_files_or_return_huge_values(database, tmp_path):
    runner = ToolRunner(["sql"], ToolContext(database=database))
    target = tmp_path / "planted.db"
    for query in (f"attach database '{target}' as m", f"vacuum into '{target}'"):
        [r] = runner.run_turn(call("sql", query=query))
        assert r.error in ("sql_error", "read_only") and not target.exists(), r.observation
    [r] = runner.run_turn(call("sql", query="select randomblob(20000000)"))
    assert r.error == "sql_error"  # over SQLITE_LIMIT_LENGTH
    [r] = runner.run_turn(call("sql", query="select randomblob(5000), printf('%.*c', 5000, 'x')"))
    assert r.error is None and len(r.observation) < 1000
