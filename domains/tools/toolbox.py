"""The environment tools behind the contract of `domains.tools.contract`, and the runner that turns
a model turn's calls into observations.

    from domains.tools.toolbox import ToolRunner, ToolContext
    runner = ToolRunner(["calculator", "sql", "python"], ToolContext(sandbox=sb, database=db_path))
    results = runner.run_turn(model_text)   # one `ToolResult` per call: observation, error code, ms

Tools (each a `ToolSpec` in `TOOLS`, with its JSON-Schema input, output format and codes):
- `python`, `shell`: run code / a command in the task's sandbox (`sandboxes`); the
  observation is the exit code, stdout and stderr.
- `read_file`, `write_file`, `list_dir`: the sandbox's workspace.
- `search_document`: coarse-to-fine retrieval over the task's documents
  (`retrieval.pipeline.Retriever`); the best fragments with their locations.
- `sql`: read-only queries on the task's SQLite database (opened with `mode=ro` and
  `PRAGMA query_only`, stopped at the time limit by a progress handler).
- `calculator`: one arithmetic expression, evaluated by simpleeval (no names, no
  attributes, bounded powers).

A call that is invalid gets its error code (`domains.tools.contract.ERROR_CODES`) without running; a
tool that raises gets `tool_error` with the message; one that runs past `timeout_s` gets
`timeout` and the turn goes on. Sandbox commands are killed at the limit by the sandbox;
host-side tools run in a worker thread, and sql stops itself at the limit; a host tool that
ignores the limit keeps its (daemon) thread until it returns, but the episode does not wait.

Not covered: the multi-turn episode loop and the tool-use domains (they use this runner).
"""

from __future__ import annotations

import concurrent.futures
import json
import math
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from core.errors import ConfigError, SandboxError
from domains.tools.contract import CallError, ToolCall, ToolSpec, check_call, error_observation, parse_tool_calls

MAX_OBSERVATION_CHARS = 4_000  # longer tool output is cut, and says so
_OBJ = "object"


def _schema(properties: dict, required: list[str]) -> dict:
    return {"type": _OBJ, "properties": properties, "required": required, "additionalProperties": False}


_TEXT = {"type": "string", "maxLength": 20_000}
_PATH = {"type": "string", "minLength": 1, "maxLength": 4096}
TOOLS: dict[str, ToolSpec] = {t.name: t for t in (
    ToolSpec("python", "Run a Python 3 program in the sandbox.", _schema({"code": _TEXT}, ["code"]),
             output="exit code, stdout and stderr of `python3 -c code` in the workspace"),
    ToolSpec("shell", "Run a shell command in the sandbox.", _schema({"command": _TEXT}, ["command"]),
             output="exit code, stdout and stderr of `bash -c command` in the workspace"),
    ToolSpec("read_file", "Read a text file of the sandbox's workspace.", _schema({"path": _PATH}, ["path"]),
             output="the file's text (UTF-8, undecodable bytes replaced)", errors={"not_found": "no such file"}),
    ToolSpec("write_file", "Write a text file in the sandbox's workspace (parents are created).",
             _schema({"path": _PATH, "content": _TEXT}, ["path", "content"]), output="the bytes written"),
    ToolSpec("list_dir", "List a directory of the sandbox's workspace.", _schema({"path": _PATH}, []),
             output="one line per entry: name, kind, size in bytes", errors={"not_found": "no such directory"},
             example={"path": "data"}),
    ToolSpec("search_document", "Search the task's documents for passages relevant to a question.",
             _schema({"query": {"type": "string", "minLength": 1, "maxLength": 2000},
                      "top_k": {"type": "integer", "minimum": 1, "maximum": 10}}, ["query"]),
             output="the best fragments, each with its document, section and token position",
             errors={"no_documents": "this task has no documents"},
             example={"query": "total revenue in the fourth quarter"}),
    ToolSpec("sql", "Run one read-only SQL query (SQLite) on the task's database.",
             _schema({"query": {"type": "string", "minLength": 1, "maxLength": 5000}}, ["query"]),
             output="the rows as JSON lists, the column names first, at most 50 rows",
             errors={"sql_error": "SQLite rejected the query", "read_only": "the query tried to write",
                     "no_database": "this task has no database"},
             example={"query": "select region, count(*) from customers group by region"}),
    ToolSpec("calculator", "Evaluate one arithmetic expression (+ - * / // % **, parentheses, numbers).",
             _schema({"expression": {"type": "string", "minLength": 1, "maxLength": 500}}, ["expression"]),
             output="the value", errors={"math_error": "the expression can't be evaluated"},
             example={"expression": "1200 * (1 + 2.5/100) ** 3"}),
)}


class ToolFailure(Exception):
    """Raised by a tool for an expected failure; `code` is one of the tool's error codes."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


@dataclass
class ToolContext:
    """What the tools of one episode act on (each optional; a tool without its part fails
    with its code): the task's `sandbox`, its SQLite `database` path, and a `retriever`
    over its documents with the policy `tokenizer`."""

    sandbox: Any = None
    database: str | Path | None = None
    retriever: Any = None
    state: dict = field(default_factory=dict)  # per-episode tool state (e.g. CAD undo snapshots)


@dataclass
class ToolResult:
    """The outcome of one call: the `observation` the model reads, `error` (None or a code),
    the call's `name` and `arguments` (None when it did not parse), `duration_ms`."""

    observation: str
    error: str | None
    name: str | None = None
    arguments: dict | None = None
    duration_ms: float = 0.0
    index: int = 0
    extra: dict = field(default_factory=dict)


def _cut(text: str) -> str:
    if len(text) <= MAX_OBSERVATION_CHARS:
        return text
    return text[:MAX_OBSERVATION_CHARS] + f"\n[... {len(text) - MAX_OBSERVATION_CHARS} more characters cut]"


def _sandbox(ctx: ToolContext):
    if ctx.sandbox is None:
        raise ToolFailure("tool_error", "this task has no sandbox")
    return ctx.sandbox


def _exec_observation(res) -> str:
    parts = [f"exit code {res.exit_code}" + (" (timed out)" if res.timed_out else "")]
    if res.stdout:
        parts.append("stdout:\n" + res.stdout)
    if res.stderr:
        parts.append("stderr:\n" + res.stderr)
    return "\n".join(parts)


def _run(sb, cmd: str, timeout_s: float) -> str:
    res = sb.exec(cmd, timeout_s=timeout_s)
    if res.timed_out:  # the sandbox killed the command's process group at the limit
        raise ToolFailure("timeout", _exec_observation(res)[:MAX_OBSERVATION_CHARS])
    return _exec_observation(res)


def _python(args: dict, ctx: ToolContext, timeout_s: float) -> str:
    sb = _sandbox(ctx)
    sb.write_file(".tool_code.py", args["code"])
    return _run(sb, "python3 .tool_code.py; s=$?; rm -f .tool_code.py; exit $s", timeout_s)


def _shell(args: dict, ctx: ToolContext, timeout_s: float) -> str:
    return _run(_sandbox(ctx), args["command"], timeout_s)


def _read_file(args: dict, ctx: ToolContext, timeout_s: float) -> str:
    try:
        return _sandbox(ctx).read_file(args["path"]).decode("utf-8", "replace")
    except (SandboxError, ConfigError) as e:  # no such file / not a workspace path
        raise ToolFailure("not_found", str(e)[:300]) from None


def _write_file(args: dict, ctx: ToolContext, timeout_s: float) -> str:
    data = args["content"].encode("utf-8", "replace")
    _sandbox(ctx).write_file(args["path"], data)
    return f"wrote {len(data)} bytes to {args['path']}"


def _list_dir(args: dict, ctx: ToolContext, timeout_s: float) -> str:
    try:
        entries = _sandbox(ctx).list_dir(args.get("path", "."))
    except (SandboxError, ConfigError) as e:
        raise ToolFailure("not_found", str(e)[:300]) from None
    return "\n".join(f"{f.name}\t{f.kind}\t{f.size}" for f in entries) or "(empty)"


def _search_document(args: dict, ctx: ToolContext, timeout_s: float) -> str:
    if ctx.retriever is None:
        raise ToolFailure("no_documents", "this task has no documents to search")
    ranked = ctx.retriever.rerank(args["query"], ctx.retriever.search(args["query"]))[: args.get("top_k", 3)]
    return "\n\n".join(f"[{h['doc_id']} | {h['section'] or '-'} | tokens {h['start_token']:,}+{h['n_tokens']}]\n"
                       f"{h['text']}" for h in ranked) or "(nothing found)"


def _sql(args: dict, ctx: ToolContext, timeout_s: float) -> str:
    if ctx.database is None or not Path(ctx.database).is_file():
        raise ToolFailure("no_database", "this task has no database")
    conn = sqlite3.connect(f"file:{Path(ctx.database).resolve()}?mode=ro", uri=True, check_same_thread=False)
    # ATTACH and VACUUM INTO would open (and create) files anywhere on the host: no attachments
    conn.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
    conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_SQL_VALUE_BYTES)  # randomblob(1e9) etc.
    deadline = time.monotonic() + timeout_s
    conn.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
    try:
        conn.execute("PRAGMA query_only = ON")
        cur = conn.execute(args["query"])
        rows = cur.fetchmany(50)
        cols = [d[0] for d in cur.description or []]
    except sqlite3.OperationalError as e:
        if "interrupted" in str(e):
            raise TimeoutError(f"ran past {timeout_s:g} s (the query was interrupted)") from None
        code = "read_only" if "readonly" in str(e).replace(" ", "") or "query_only" in str(e) else "sql_error"
        raise ToolFailure(code, str(e)[:300]) from None
    except (sqlite3.Error, ValueError) as e:  # Warning for several statements, bad parameters
        raise ToolFailure("sql_error", str(e)[:300]) from None
    finally:
        conn.close()
    return "\n".join(json.dumps([_cell(v) for v in r], ensure_ascii=False) for r in [cols, *map(list, rows)])


def _cell(value):
    """A result cell as JSON can hold it, long text and blobs cut to 200 characters."""
    if isinstance(value, bytes):
        value = f"<{len(value)} bytes: {value[:32].hex()}...>" if len(value) > 32 else value.hex()
    if isinstance(value, str) and len(value) > 200:
        return value[:200] + f"... [{len(value) - 200} more characters]"
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


MAX_SQL_VALUE_BYTES = 1_000_000  # SQLITE_LIMIT_LENGTH for the sql tool
MAX_RESULT_BITS = 4096  # the calculator refuses powers whose result would be larger


def _bounded_pow(a, b):
    """`a ** b`, refused (ValueError) when the result would exceed `MAX_RESULT_BITS` bits: big
    integer powers run holding the GIL and can't be interrupted by a timeout."""
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and abs(a) > 1 and b > 0:
        if b * math.log2(abs(a)) > MAX_RESULT_BITS:
            raise ValueError(f"the power's result would be over {MAX_RESULT_BITS} bits")
    return a ** b


def _bounded_mul(a, b):
    """`a * b`, refused when big integers would make a product over `MAX_RESULT_BITS` bits."""
    if isinstance(a, int) and isinstance(b, int) and a.bit_length() + b.bit_length() > MAX_RESULT_BITS:
        raise ValueError(f"the product would be over {MAX_RESULT_BITS} bits")
    return a * b


def _calculator(args: dict, ctx: ToolContext, timeout_s: float) -> str:
    import ast

    from simpleeval import DEFAULT_OPERATORS, SimpleEval

    operators = {**DEFAULT_OPERATORS, ast.Pow: _bounded_pow, ast.Mult: _bounded_mul}
    evaluator = SimpleEval(operators=operators, functions={}, names={})
    try:
        value = evaluator.eval(args["expression"])
    except Exception as e:  # noqa: BLE001 - simpleeval raises many kinds (syntax, zero division, limits)
        raise ToolFailure("math_error", f"{type(e).__name__}: {str(e)[:200]}") from None
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise ToolFailure("math_error", "the expression must give a number")
    if isinstance(value, float) and not math.isfinite(value):
        raise ToolFailure("math_error", f"the result is not a finite number ({value!r})")
    return repr(value)


IMPLEMENTATIONS: dict[str, Callable[[dict, ToolContext, float], str]] = {
    "python": _python, "shell": _shell, "read_file": _read_file, "write_file": _write_file, "list_dir": _list_dir,
    "search_document": _search_document, "sql": _sql, "calculator": _calculator}
SANDBOX_TOOLS = {"python", "shell", "read_file", "write_file", "list_dir"}


class ToolRunner:
    """Runs the calls of model turns against one episode's tools.

    Args:
        names: The tools this environment offers (keys of `TOOLS`).
        context: What they act on.
        timeout_s: Per-call time limit in seconds.
        max_calls: Calls allowed per turn.
        implementations: name -> function(arguments, context, timeout_s) -> str; default
            `IMPLEMENTATIONS` (tests add a tool that raises or hangs).
        specs: name -> ToolSpec for names not in `TOOLS`.
        in_caller: names of tools that run in the caller's thread because they enforce the
            limit themselves (sandbox commands); default the sandbox tools of `TOOLS`.
        check: (call, specs) -> CallError | None, how a call is checked against its tool's
            schema; default `check_call` (user tools check in a worker with a time limit:
            a schema's regular expression may backtrack for ever).

    Raises:
        ConfigError: an unknown tool name, or a bad timeout.
    """

    def __init__(self, names: list[str], context: ToolContext | None = None, timeout_s: float = 10.0,
                 max_calls: int = 4, implementations: dict | None = None, specs: dict[str, ToolSpec] | None = None,
                 in_caller: set[str] | None = None, check: Callable | None = None):
        impls = {**IMPLEMENTATIONS, **(implementations or {})}
        all_specs = {**TOOLS, **(specs or {})}
        unknown = [n for n in names if n not in impls or n not in all_specs]
        if unknown:
            raise ConfigError(f"unknown tools {unknown}; available: {', '.join(sorted(TOOLS))}")
        if not (isinstance(timeout_s, (int, float)) and 0 < timeout_s <= 600):
            raise ConfigError(f"tool timeout_s must be in (0, 600] seconds, got {timeout_s!r}")
        self.specs = {n: all_specs[n] for n in names}
        self.impls = {n: impls[n] for n in names}
        self.context = context or ToolContext()
        self.timeout_s, self.max_calls = float(timeout_s), max_calls
        self.in_caller = SANDBOX_TOOLS if in_caller is None else set(in_caller)
        self.check = check or check_call
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="tool")

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def run_turn(self, text: str) -> list[ToolResult]:
        """Parse a model turn and run its valid calls in order.

        Returns:
            One `ToolResult` per call found (valid or not), in the order they were written.
        """
        calls, errors = parse_tool_calls(text, self.max_calls)
        results = [self._error(e) for e in errors] + [self.run_call(c) for c in calls]
        return sorted(results, key=lambda r: r.index)

    def run_call(self, call: ToolCall) -> ToolResult:
        """Check and run one call; never raises on the call's account."""
        error = self.check(call, self.specs)
        if error is not None:
            return self._error(error, call)
        t0 = time.monotonic()
        impl = self.impls[call.name]
        try:
            if call.name in self.in_caller:  # the sandbox enforces the limit itself (kills the group)
                text = impl(call.arguments, self.context, self.timeout_s)
            else:
                text = self._pool.submit(impl, call.arguments, self.context, self.timeout_s).result(self.timeout_s)
        except (concurrent.futures.TimeoutError, TimeoutError) as e:  # a tool's own limit says so in its message
            said = str(e) if isinstance(e, TimeoutError) and str(e) else f"ran past {self.timeout_s:g} s"
            return self._error(CallError("timeout", f"{call.name} {said} and was stopped", call.raw[:200], call.index),
                               call, t0)
        except ToolFailure as e:
            return self._error(CallError(e.code, str(e), call.raw[:200], call.index), call, t0)
        except Exception as e:  # noqa: BLE001 - a tool's own failure is the model's observation, not a crash
            return self._error(CallError("tool_error", f"{type(e).__name__}: {str(e)[:300]}", call.raw[:200],
                                         call.index), call, t0)
        return ToolResult(_cut(text), None, call.name, call.arguments, (time.monotonic() - t0) * 1000, call.index)

    @staticmethod
    def _error(error: CallError, call: ToolCall | None = None, t0: float | None = None) -> ToolResult:
        ms = (time.monotonic() - t0) * 1000 if t0 is not None else 0.0
        return ToolResult(error_observation(error), error.code, call.name if call else None,
                          call.arguments if call else None, ms, error.index)
