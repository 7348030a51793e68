"""A user's task data: read rows from a file, then turn each row into a task row by the
domain's column mapping.

    rows = read_rows("questions.jsonl")                 # [{"question": ..., "answer": ...}, ...]
    task_rows = build_rows(spec, rows)                  # tuple[TaskRow, ...], checked

Formats, read with libraries (any of the text ones may be gzipped, `.jsonl.gz`): JSON Lines
and JSON (an array of objects, or {"rows": [...]},
the standard `json` module), CSV (the standard `csv` module: every value stays the text it
was, so "007" stays "007"), Parquet (pyarrow) and a Hugging Face `datasets` directory saved
with `save_to_disk` (`datasets.load_from_disk`). Every error names the file, the row (1-based,
as a person counts lines) and the field, and nothing is kept from a file that fails.

Not covered: the definition (`domains.user.spec`), the held-out split and the domain
itself (`domains.user.domain`).
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2
import jinja2.sandbox

from core.errors import ConfigError
from domains.answers import malformed
from domains.user.spec import UserDomainSpec
from domains.user.task_files import check_workspace_files, read_task_files

MAX_DATA_BYTES = 50 * 1024 * 1024  # a data file (or datasets directory) larger than this is refused
MAX_ROWS = 100_000
MAX_FIELD_CHARS = 20_000  # a prompt or answer longer than this is refused (the model's window is ~2k tokens)
MAX_CODE_CHARS = 200_000  # tests, checker and setup commands, a file of a sandbox task
FORMATS = ("jsonl", "json", "csv", "parquet", "datasets")


@dataclass(frozen=True)
class TaskRow:
    """One row as a task: the prompt the model sees, the hidden reference answer, and the rest.

    Attributes:
        id: The row's id (its id column, or "sha256:<first 16 hex of system + prompt>").
        prompt: The user message (the prompt column or the rendered template).
        answer: The reference answer, as text.
        system: The row's system prompt, or "" for the built-in one.
        level: Difficulty level >= 1.
        pattern: The regex verifier's pattern for this row ("" for other verifiers).
        metadata: The metadata columns' values (JSON types).
        test, entry_point, prefix: The code_tests verifier's tests, function name and
            code before the reply ("" for other verifiers).
        files, setup, checker: The checker verifier's workspace files (path -> text),
            setup command and checker command; a tool domain's files.
        calls: A tool domain's reference calls, [{"name": ..., "arguments": {...}}, ...].
    """

    id: str
    prompt: str
    answer: str
    system: str = ""
    level: int = 1
    pattern: str = ""
    metadata: dict = field(default_factory=dict)
    test: str = ""
    entry_point: str = ""
    prefix: str = ""
    files: dict = field(default_factory=dict)
    setup: str = ""
    checker: str = ""
    calls: list = field(default_factory=list)


def detect_format(path: Path) -> str:
    """The format of `path` by its suffix ("datasets" for a directory).

    Raises:
        ConfigError: an unknown suffix (the message lists the known ones).
    """
    if path.is_dir():
        return "datasets"
    if path.suffix.lower() == ".gz":  # HumanEval.jsonl.gz: the format of what is inside
        path = Path(path.stem)
    suffix = path.suffix.lower().lstrip(".")
    known = {"jsonl": "jsonl", "ndjson": "jsonl", "json": "json", "csv": "csv", "parquet": "parquet", "pq": "parquet"}
    if suffix not in known:
        raise ConfigError(f"data file {path.name}: unknown format '.{suffix}'; use .jsonl, .json, .csv, .parquet "
                          "or a datasets directory (save_to_disk)")
    return known[suffix]


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.is_dir() else path.stat().st_size


def _text(data: bytes, name: str) -> str:
    """UTF-8 text of a file (a BOM is dropped), or a ConfigError naming the line that is not UTF-8."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise ConfigError(f"data file {name}: line {line} is not UTF-8 text (byte {e.start}); "
                          "save the file as UTF-8") from None


def _object(value: Any, name: str, row: int) -> dict:
    if not isinstance(value, dict):
        raise ConfigError(f"data file {name}: row {row} is a {type(value).__name__}, not an object of columns")
    return value


def _jsonl(text: str, name: str) -> list[dict]:
    rows = []
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append(_object(json.loads(line), name, i))
        except json.JSONDecodeError as e:
            raise ConfigError(f"data file {name}: line {i} is not valid JSON ({e.msg} at column {e.colno})") from None
        except (RecursionError, ValueError) as e:  # nested too deep; an integer of over 4,300 digits
            raise ConfigError(f"data file {name}: line {i} can't be read ({type(e).__name__}: {str(e)[:100]})") from None
    return rows


def _json(text: str, name: str) -> list[dict]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise ConfigError(f"data file {name}: not valid JSON ({e.msg} at line {e.lineno}, column {e.colno})") from None
    except (RecursionError, ValueError) as e:  # nested too deep; an integer of over 4,300 digits
        raise ConfigError(f"data file {name}: can't be read ({type(e).__name__}: {str(e)[:100]})") from None
    if isinstance(value, dict) and isinstance(value.get("rows"), list):
        value = value["rows"]
    if not isinstance(value, list):
        raise ConfigError(f"data file {name}: a JSON file holds a list of row objects (or {{\"rows\": [...]}})")
    return [_object(v, name, i) for i, v in enumerate(value, 1)]


def _csv(text: str, name: str) -> list[dict]:
    reader = csv.DictReader(io.StringIO(text, newline=""))
    rows = []
    try:
        header = reader.fieldnames or []
        if (repeated := [c for c in dict.fromkeys(header) if header.count(c) > 1]):
            raise ConfigError(f"data file {name}: the header names column {repeated[0]!r} twice; rename one")
        for row in reader:
            if None in row:  # more values than header columns
                raise ConfigError(f"data file {name}: line {reader.line_num} has {len(reader.fieldnames or []) + len(row[None])} "
                                  f"values for {len(reader.fieldnames or [])} columns")
            rows.append(dict(row))
    except csv.Error as e:
        raise ConfigError(f"data file {name}: line {reader.line_num}: {e}") from None
    return rows


def _parquet(path: Path) -> list[dict]:
    import pyarrow.parquet as pq  # on first use: it pulls in pyarrow

    try:
        return pq.read_table(path).to_pylist()
    except Exception as e:  # noqa: BLE001 - pyarrow raises several types for a bad file
        raise ConfigError(f"data file {path.name}: not a readable Parquet file ({type(e).__name__}: {e})") from None


def _datasets_dir(path: Path) -> list[dict]:
    import datasets  # on first use: it pulls in datasets, pyarrow, fsspec

    try:
        ds = datasets.load_from_disk(str(path))
    except Exception as e:  # noqa: BLE001 - datasets raises FileNotFoundError and its own errors
        raise ConfigError(f"data directory {path.name}: not a datasets directory saved with save_to_disk "
                          f"({type(e).__name__}: {e})") from None
    if isinstance(ds, datasets.DatasetDict):
        split = "train" if "train" in ds else next(iter(ds))
        ds = ds[split]
    return ds.to_list()


def read_rows(path: str | Path, fmt: str | None = None) -> list[dict]:
    """The rows (column -> value) of a data file or datasets directory.

    Args:
        path: The file (or directory).
        fmt: One of FORMATS; None: from the suffix (`detect_format`).

    Returns:
        The rows in file order (at least one, at most MAX_ROWS).

    Raises:
        ConfigError: a missing or empty file, one over MAX_DATA_BYTES, text that is not
            UTF-8, a row that does not parse (its line named) or is not an object.
    """
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"data file {path}: not found")
    if not path.is_dir() and not path.is_file():
        raise ConfigError(f"data file {path}: not a regular file or directory")
    fmt = fmt or detect_format(path)
    if fmt not in FORMATS:
        raise ConfigError(f"data format {fmt!r}: use one of {', '.join(FORMATS)}")
    size = _size(path)
    if size > MAX_DATA_BYTES:
        raise ConfigError(f"data file {path.name}: {size / 2**20:.1f} MiB is over the {MAX_DATA_BYTES // 2**20} MiB limit; "
                          "split it or keep the columns you need")
    if fmt == "parquet":
        rows = _parquet(path)
    elif fmt == "datasets":
        rows = _datasets_dir(path)
    else:
        if path.suffix.lower() == ".gz":
            try:
                with gzip.open(path) as f:
                    raw = f.read(MAX_DATA_BYTES + 1)  # never more than the limit in memory
            except (OSError, EOFError) as e:
                raise ConfigError(f"data file {path.name}: not a gzip file ({e})") from None
            if len(raw) > MAX_DATA_BYTES:
                raise ConfigError(f"data file {path.name}: unpacked it is over the "
                                  f"{MAX_DATA_BYTES // 2**20} MiB limit")
        else:
            raw = path.read_bytes()
        text = _text(raw, path.name)
        rows = {"jsonl": _jsonl, "json": _json, "csv": _csv}[fmt](text, path.name)
    if not rows:
        raise ConfigError(f"data file {path.name}: no rows")
    if len(rows) > MAX_ROWS:
        raise ConfigError(f"data file {path.name}: {len(rows)} rows is over the {MAX_ROWS} limit")
    return rows


_JINJA = jinja2.sandbox.ImmutableSandboxedEnvironment(undefined=jinja2.StrictUndefined, autoescape=False)


def _template(source: str) -> jinja2.Template:
    try:
        return _JINJA.from_string(source)
    except jinja2.TemplateSyntaxError as e:
        raise ConfigError(f"domain field 'columns.template': {e.message} (line {e.lineno})") from None


def _field_text(row: dict, column: str, i: int, role: str, required: bool = True) -> str:
    """Row i's `column` as text, checked: present (if required), not malformed, not too long."""
    if column not in row:
        if not required:
            return ""
        raise ConfigError(f"row {i}: no column '{column}' (the {role}); its columns are "
                          f"{', '.join(map(str, row)) or 'none'}; map the {role} to one of them")
    value = row[column]
    if isinstance(value, (bytes, bytearray)):  # a Parquet binary column
        try:
            value = bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            raise ConfigError(f"row {i}: column '{column}' (the {role}) is binary data, not UTF-8 text") from None
    text = "" if value is None else value if isinstance(value, str) else json.dumps(value) if isinstance(value, (list, dict)) else str(value)
    if required and not text.strip():
        raise ConfigError(f"row {i}: column '{column}' (the {role}) is empty")
    return checked_text(text, f"row {i}: column '{column}' (the {role})")


def checked_text(text: str, where: str, limit: int = MAX_FIELD_CHARS) -> str:
    """`text` if it is UTF-8-encodable text without control characters (but newlines and
    tabs) and at most `limit` characters.

    Raises:
        ConfigError: "<where> holds control characters" and the like.
    """
    if not isinstance(text, str):
        raise ConfigError(f"{where} must be text, got {type(text).__name__}")
    if malformed(text, allowed="\n\t\r"):
        raise ConfigError(f"{where} holds control characters or lone surrogates")
    if len(text) > limit:
        raise ConfigError(f"{where} is {len(text)} characters, over {limit}")
    return text


def _level(row: dict, column: str | None, i: int) -> int:
    if column is None:
        return 1
    value = row.get(column)
    try:
        number = float(str(value).strip()) if not isinstance(value, bool) else 0.0
    except ValueError:
        number = 0.0
    if not (number >= 1 and number.is_integer() and number <= 1000):
        raise ConfigError(f"row {i}: column '{column}' (the level) is {value!r}; a level is a whole number >= 1")
    return int(number)


def _json_safe(value: Any, where: str) -> Any:
    """`value` as JSON types (NaN and infinities as None; others by `str`).

    Raises:
        ConfigError: text that is not UTF-8 (a lone surrogate), or nesting too deep.
    """
    def finite(v):
        if isinstance(v, float) and (v != v or v in (float("inf"), float("-inf"))):
            return None
        if isinstance(v, dict):
            return {str(k): finite(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [finite(x) for x in v]
        return v

    try:
        text = json.dumps(finite(value), default=str, ensure_ascii=False, allow_nan=False)
        text.encode("utf-8")
    except (UnicodeEncodeError, RecursionError, ValueError, TypeError) as e:
        raise ConfigError(f"{where} can't be kept ({type(e).__name__}: {str(e)[:80]})") from None
    return json.loads(text)


def _json_cell(value: Any, empty: Any, where: str) -> Any:
    """A cell that holds JSON as text (CSV, a JSONL string) parsed, `empty` for blank text;
    anything else (a JSON file's own object or list) as it is."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value) if value.strip() else empty
    except json.JSONDecodeError as e:
        raise ConfigError(f"{where} is not JSON ({e.msg})") from None


def _row_files(spec: UserDomainSpec, row: dict, i: int, base_dir: Path | None) -> dict:
    """Row i's workspace files from the `files_column`: a JSON object of path -> text, or the
    path of a directory or archive (`domains.user.task_files`, relative to `base_dir`)."""
    column = spec.verifier.files_column
    if not column:
        return {}
    files = row.get(column)
    if isinstance(files, str) and files.strip() and not files.lstrip().startswith("{"):
        files = read_task_files(files, base_dir, f"row {i}: column '{column}'")
    else:
        files = _json_cell(files, {}, f"row {i}: column '{column}' (the files)")
    if not isinstance(files, dict) or not all(isinstance(k, str) and isinstance(t, str) for k, t in files.items()):
        raise ConfigError(f"row {i}: column '{column}' (the files) must be an object of path -> text")
    return check_workspace_files(files, f"row {i}: column '{column}'")


def _episode_fields(spec: UserDomainSpec, row: dict, i: int, base_dir: Path | None) -> dict:
    """Row i's sandbox environment: files, setup, checker."""
    v = spec.verifier
    checker = v.checker if v.checker is not None else _field_text(row, v.checker_column, i, "checker")
    setup = _field_text(row, v.setup_column, i, "setup command", required=False) if v.setup_column else ""
    return {"files": _row_files(spec, row, i, base_dir), "setup": setup, "checker": checker}


def _tool_fields(spec: UserDomainSpec, row: dict, i: int, base_dir: Path | None) -> dict:
    """Row i's tool-use fields: workspace files and reference calls (a JSON list of
    {"name", "arguments"} naming the domain's tools; arguments are checked against each
    tool's schema when the validator plays them)."""
    column = spec.columns.reference_calls
    calls: Any = []
    if column:
        if column not in row:
            raise ConfigError(f"row {i}: no column '{column}' (the reference calls); its columns are "
                              f"{', '.join(map(str, row))}")
        calls = _json_cell(row.get(column), [], f"row {i}: column '{column}' (the reference calls)")
        names = {*spec.builtin_tools, *(t.name for t in spec.tools)}
        if not isinstance(calls, list) or not all(isinstance(c, dict) and isinstance(c.get("name"), str)
                                                  and isinstance(c.get("arguments", {}), dict) for c in calls):
            raise ConfigError(f"row {i}: column '{column}' (the reference calls) must be a JSON list of "
                              '{"name": TOOL, "arguments": {...}}')
        unknown = [c["name"] for c in calls if c["name"] not in names]
        if unknown:
            raise ConfigError(f"row {i}: column '{column}' calls {unknown[0][:40]!r}, not a tool of this domain "
                              f"({', '.join(sorted(names))})")
        calls = [{"name": c["name"], "arguments": _json_safe(c.get("arguments", {}), f"row {i}: column '{column}'")}
                 for c in calls]
    return {"files": _row_files(spec, row, i, base_dir), "calls": calls}


def build_rows(spec: UserDomainSpec, rows: list[dict], base_dir: Path | None = None) -> tuple[TaskRow, ...]:
    """The rows as `TaskRow`s by the spec's column mapping, every one checked.

    Args:
        base_dir: Where relative paths in a files column start (the data file's folder).

    Raises:
        ConfigError: naming the row (1-based) and the field: a missing or empty column, a
            template that fails on a row, a level that is not a whole number >= 1, a
            repeated id, a metadata column that is missing.
    """
    cols = spec.columns
    template = _template(cols.template) if cols.template is not None else None
    out, seen = [], {}
    for i, row in enumerate(rows, 1):
        if template is not None:
            try:
                prompt = template.render({str(k): v for k, v in row.items()})
            except jinja2.UndefinedError as e:
                raise ConfigError(f"row {i}: the template uses {e.message}; the row's columns are "
                                  f"{', '.join(map(str, row))}") from None
            except Exception as e:  # noqa: BLE001 - a template may fail any way Python can (1/0, recursion)
                raise ConfigError(f"row {i}: the template failed: {type(e).__name__}: {str(e)[:160]}") from None
            if not prompt.strip():
                raise ConfigError(f"row {i}: the template renders an empty prompt")
            checked_text(prompt, f"row {i}: the prompt the template renders")
        else:
            prompt = _field_text(row, cols.prompt, i, "prompt")
        answer = _field_text(row, cols.answer, i, "answer")
        system = _field_text(row, cols.system, i, "system prompt", required=False) if cols.system else ""
        pattern = ""
        if spec.verifier.kind == "regex":
            pattern = spec.verifier.pattern if spec.verifier.pattern is not None else \
                _field_text(row, spec.verifier.pattern_column, i, "pattern")
        extra: dict = {}  # the verifier's own fields of the row
        if spec.verifier.kind == "code_tests":
            v = spec.verifier
            extra = {"test": _field_text(row, v.test_column, i, "tests"),
                    "entry_point": _field_text(row, v.entry_point_column, i, "entry point").strip(),
                    "prefix": _field_text(row, v.prefix_column, i, "code prefix", required=False) if v.prefix_column else ""}
            if not extra["entry_point"].isidentifier():
                raise ConfigError(f"row {i}: column '{v.entry_point_column}' (the entry point) is "
                                  f"{extra['entry_point'][:60]!r}, not a Python function name")
        if spec.verifier.kind == "checker":
            extra = _episode_fields(spec, row, i, base_dir)
        elif spec.uses_tools:
            extra = _tool_fields(spec, row, i, base_dir)
        if cols.id is not None:
            row_id = _field_text(row, cols.id, i, "id")
        else:
            row_id = "sha256:" + hashlib.sha256(f"{system}\x00{prompt}".encode()).hexdigest()[:16]
        if row_id in seen:
            what = f"id {row_id!r}" if cols.id else "prompt (and system prompt)"
            fix = "make the ids unique" if cols.id else "remove the repeat or map an id column"
            raise ConfigError(f"row {i}: repeats row {seen[row_id]}'s {what}; {fix}")
        seen[row_id] = i
        missing = [c for c in cols.metadata if c not in row]
        if missing:
            raise ConfigError(f"row {i}: no column '{missing[0]}' (listed in columns.metadata)")
        answer = answer if spec.verifier.kind in ("code_tests", "checker") else answer.strip()  # code keeps its indentation
        out.append(TaskRow(row_id, prompt, answer, system, _level(row, cols.level, i), pattern,
                           {c: _json_safe(row[c], f"row {i}: column '{c}' (metadata)") for c in cols.metadata}, **extra))
    return tuple(out)
