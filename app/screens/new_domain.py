"""The Domains page's "New domain" tab: a user's data file becomes a domain without code.

Upload a file (or give a path on this machine: a datasets directory too), map its columns,
pick the verifier and the answer extraction (and, optionally, tools the model may call: built-in
ones or the user's own, declared by contract), see the prompt as the model will see it, try
the verifier on a typed reply, save (a new domain or a new version), validate. Then the
Mix editor tab puts it in a mix and the Launch page trains on it.

UI only: reading and checking rows is `domains.user.data`, building the domain
`domains.user.library.prepare`, storing `domains.user.library.add_domain`, validation
`domains.validation.validate`. Every error shows inline and nothing is stored until Save.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pandas as pd
import streamlit as st
import yaml

from core.errors import WorkbenchError
from domains.user.data import read_rows
from domains.user.library import add_domain, prepare
from domains.user.spec import BUILTIN_TOOLS, EXTRACTIONS, VERIFIERS
from domains.validation import validate

NONE = "(none)"
VALIDATE_TASKS = 30
VERIFIER_HELP = {"exact": "equal after normalising case, spaces, punctuation and unicode",
                 "numeric": "equal as numbers within a tolerance (1,234; −5; 45%)",
                 "math": "mathematically equivalent (math-verify): 1/2 = 0.5, x+1 = 1+x",
                 "choice": "the same option letter (B, (b), B) ...)",
                 "regex": "the answer fully matches a regular expression",
                 "json": "the reply is JSON equal to the reference (or to some fields, or valid for a schema)",
                 "code_tests": "the reply's Python code passes the row's unit tests in a sandbox",
                 "python": "your own reward(reply, answer, row) function, run in a sandbox",
                 "checker": "a multi-turn shell task in a sandbox; a checker command decides"}
ANSWER_VERIFIERS = ("exact", "numeric", "math", "choice", "regex", "json")
TOOLS_EXAMPLE = """- name: unit_price
  description: The unit price of one item in EUR.
  input_schema: {type: object, properties: {item: {type: string}}, required: [item]}
  output: the price, a number
  errors: {unknown_item: no price for that item}
  python: |
    def run(arguments):
        ...  # return the result, or raise ToolError("unknown_item", "...")
"""
REWARD_TEMPLATE = '''def reward(reply, answer, row):
    """0..1 for one reply; row has "id", "prompt", "metadata" and "extracted" (the answer found)."""
    got = row["extracted"]
    return 1.0 if got is not None and got.strip() == answer.strip() else 0.0
'''


def _read_upload(upload) -> list[dict]:
    """The uploaded file's rows (read from a temporary copy with the file's suffix)."""
    suffix = Path(upload.name).suffix
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"upload{suffix}"
        path.write_bytes(upload.getvalue())
        return read_rows(path)


def load_rows() -> tuple[list[dict] | None, str]:
    """(rows, where they came from) from the uploader or the path box; (None, "") if neither."""
    cols = st.columns(2)
    upload = cols[0].file_uploader("Data file", type=["jsonl", "json", "csv", "parquet"], key="nd_upload",
                                   help="JSON Lines, a JSON list of objects, CSV with a header row, or Parquet")
    path = cols[1].text_input("…or a path on this machine", key="nd_path",
                              help="a file, or a Hugging Face datasets directory saved with save_to_disk")
    source = f"upload:{upload.name}:{upload.size}" if upload is not None else (f"path:{path}" if path else "")
    if not source:
        return None, ""
    cached = st.session_state.get("nd_rows")
    if cached and cached[0] == source:
        return cached[1], source
    try:
        rows = _read_upload(upload) if upload is not None else read_rows(path.strip())
    except WorkbenchError as e:
        st.error(f"Can't use this data: {e}")
        return None, ""
    st.session_state["nd_rows"] = (source, rows)
    return rows, source


def _column(label: str, columns: list[str], key: str, optional: bool, help: str = "") -> str | None:
    options = ([NONE] if optional else []) + columns
    pick = st.selectbox(label, options, key=key, help=help or None)
    return None if pick == NONE else pick


def _verifier_fields(columns: list[str]) -> dict:
    kind = st.selectbox("Verifier", VERIFIERS, key="nd_verifier", format_func=lambda k: f"{k}: {VERIFIER_HELP[k]}")
    verifier: dict = {"kind": kind}
    if kind in ("exact", "choice", "regex"):
        verifier["case_sensitive"] = st.checkbox("Case-sensitive", key="nd_case")
    if kind == "numeric":
        c = st.columns(2)
        verifier["abs_tol"] = c[0].number_input("Absolute tolerance", min_value=0.0, value=0.0, key="nd_abs_tol",
                                                format="%g")
        verifier["rel_tol"] = c[1].number_input("Relative tolerance", min_value=0.0, max_value=1.0, value=1e-6,
                                                key="nd_rel_tol", format="%g")
    if kind == "regex":
        col = _column("Pattern column", columns, "nd_pattern_col", optional=True,
                      help="each row's own pattern; (none): one pattern for every row")
        if col:
            verifier["pattern_column"] = col
        else:
            verifier["pattern"] = st.text_input("Pattern", key="nd_pattern", placeholder=r"e.g. [0-9]{3}-[0-9]{4}")
    if kind == "json":
        fields = st.text_input("Compare only these fields (comma-separated; empty: the whole value)", key="nd_fields")
        if fields.strip():
            verifier["fields"] = [f.strip() for f in fields.split(",") if f.strip()]
        schema = st.text_area("JSON Schema the reply must satisfy (optional)", key="nd_schema", height=100)
        if schema.strip():
            try:
                verifier["json_schema"] = json.loads(schema)
            except json.JSONDecodeError as e:
                st.error(f"The schema is not JSON: {e.msg} (line {e.lineno})")
    if kind == "code_tests":
        c = st.columns(3)
        with c[0]:
            verifier["test_column"] = _column("Tests column", columns, "nd_test_col", optional=False,
                                              help="a `def check(candidate): ...` function, as HumanEval's")
        with c[1]:
            verifier["entry_point_column"] = _column("Entry point column", columns, "nd_entry_col", optional=False,
                                                     help="the name of the function the tests call")
        with c[2]:
            prefix = _column("Code before the reply", columns, "nd_prefix_col", optional=True,
                             help="imports and the signature, when replies are only a function body")
        if prefix:
            verifier["prefix_column"] = prefix
        st.caption("The answer column holds a reference solution; the extraction does not apply (the reply's last "
                   "```python block is its code).")
    if kind == "checker":
        c = st.columns(3)
        with c[0]:
            files = _column("Files column", columns, "nd_files_col", optional=True,
                            help="a JSON object of path -> text written into /workspace")
        with c[1]:
            setup = _column("Setup command column", columns, "nd_setup_col", optional=True)
        with c[2]:
            verifier["checker_column"] = _column("Checker command column", columns, "nd_checker_col", optional=False,
                                                 help="run in /workspace after the episode: exit 0 = solved")
        verifier.update({k: v for k, v in (("files_column", files), ("setup_column", setup)) if v})
        verifier["checker_score"] = st.checkbox("The checker prints a score in [0, 1] on its last line",
                                                key="nd_checker_score")
        st.caption("The answer column holds reference commands, one per line; validation plays them.")
    if kind == "python":
        verifier["source"] = st.text_area("Reward function (Python)", value=REWARD_TEMPLATE, key="nd_source", height=180)
        verifier["timeout_s"] = st.number_input("Time limit per reply (s)", 1.0, 60.0, 10.0, key="nd_timeout")
        st.caption("It runs in a sandbox, never in the trainer. Validation audits it: an empty reply, the answer "
                   "followed by junk, a reply without an answer, another row's answer must not get full marks.")
    return verifier


def _tool_fields(definition: dict, columns: list[str]) -> None:
    """Tools the model may call before it answers: built-in ones, and the user's own declared
    as a YAML (or JSON) list of contracts with a command or a Python `run(arguments)`."""
    with st.expander("Tools (optional): the model may call them before it answers"):
        builtin = st.multiselect("Built-in tools", BUILTIN_TOOLS, key="nd_builtin_tools")
        text = st.text_area("Your tools (YAML or JSON list)", key="nd_tools", height=160, placeholder=TOOLS_EXAMPLE,
                            help="each: name, description, input_schema (JSON Schema), output, errors, and command or "
                                 "python; it runs in the sandbox")
        c = st.columns(2)
        with c[0]:
            calls = _column("Reference calls column", columns, "nd_calls_col", optional=True,
                            help='a JSON list of {"name", "arguments"} that reaches the row\'s answer; validation '
                                 "plays it")
        with c[1]:
            files = _column("Files column", columns, "nd_tool_files_col", optional=True,
                            help="a JSON object of path -> text written into the workspace, for the tools")
    if builtin:
        definition["builtin_tools"] = builtin
    if text.strip():
        try:
            definition["tools"] = yaml.safe_load(text)
        except yaml.YAMLError as e:
            st.error(f"Your tools are not YAML or JSON: {str(e)[:200]}")
    if calls:
        definition["columns"]["reference_calls"] = calls
    if files:
        definition["verifier"]["files_column"] = files


def definition_form(rows: list[dict]) -> dict:
    """The definition the form describes (`domains.user.library.prepare` checks it)."""
    columns = list(dict.fromkeys(str(k) for row in rows[:200] for k in row))
    c = st.columns(2)
    definition: dict = {"name": c[0].text_input("Domain name", key="nd_name", placeholder="lower_case_with_underscores"),
                        "description": c[1].text_input("Description", key="nd_description",
                                                       placeholder="one line for the catalogue")}
    mode = st.radio("Prompt", ["A column", "A template over the columns"], key="nd_prompt_mode", horizontal=True)
    cols: dict = {}
    if mode == "A column":
        cols["prompt"] = _column("Prompt column", columns, "nd_prompt", optional=False)
    else:
        cols["template"] = st.text_area("Prompt template (Jinja2)", key="nd_template", height=80,
                                        placeholder="Convert {{ value }} {{ unit }} to metres.")
    answer_default = columns.index("answer") if "answer" in columns else min(1, len(columns) - 1)
    if "nd_answer" not in st.session_state and columns:
        st.session_state["nd_answer"] = columns[answer_default]
    cols["answer"] = _column("Answer column", columns, "nd_answer", optional=False)
    c = st.columns(3)
    with c[0]:
        cols["id"] = _column("Id column", columns, "nd_id", optional=True, help="the held-out split hashes it")
    with c[1]:
        cols["level"] = _column("Level column", columns, "nd_level", optional=True, help="whole numbers >= 1")
    with c[2]:
        cols["system"] = _column("System prompt column", columns, "nd_system", optional=True)
    definition["columns"] = {k: v for k, v in cols.items() if v is not None}
    definition["verifier"] = _verifier_fields(columns)
    if definition["verifier"]["kind"] in ANSWER_VERIFIERS:
        _tool_fields(definition, columns)
    if definition["verifier"]["kind"] == "checker" or definition.get("tools"):
        hosts = st.text_input("Network allow-list (hosts or IPs, comma-separated; empty: no network)",
                              key="nd_network", help="the only hosts this domain's sandboxes may reach")
        if hosts.strip():
            definition["network"] = [h.strip() for h in hosts.split(",") if h.strip()]
    c = st.columns(2)
    definition["extraction"] = c[0].selectbox("Answer extraction", EXTRACTIONS, key="nd_extraction",
                                              help="where the answer is in the model's reply")
    definition["heldout_fraction"] = c[1].slider("Held out for evaluation", 0.05, 0.5, 0.2, 0.05, key="nd_heldout")
    return definition


def show_preview(domain) -> None:
    task = domain.make_task(0, min(domain.levels))
    st.markdown("**The prompt as the model sees it** (before its chat template)")
    for m in domain.messages(task):
        st.text(f"[{m['role']}] {m['content']}")
    st.caption(f"Reference answer: {task.answer}")
    if domain.needs_sandbox:
        st.caption("Its verifier runs in a sandbox: try it after saving, in the Catalogue tab.")
        return
    reply = st.text_input("Try the verifier: a reply", key="nd_try", placeholder=domain.reference_completion(task))
    if reply:
        reward, breakdown = domain.score(task, reply)
        st.write(f"Reward **{reward:.2f}**: format {breakdown['format']:.0f}, correct {breakdown['correct']:.0f}, "
                 f"extracted {breakdown['extracted']!r}" + (f" ({breakdown['verifier_error']})"
                                                             if breakdown.get("verifier_error") else ""))


def save_and_validate(store, definition: dict, rows: list[dict], on_saved) -> None:
    c = st.columns([2, 2, 5])
    update = c[2].checkbox("Save as a new version of a domain I added before", key="nd_update")
    if c[0].button("Save domain", key="nd_save", type="primary"):
        try:
            with st.spinner("Checking every row, then saving…"):
                d = add_domain(store, definition, rows=rows, new=not update)
        except WorkbenchError as e:
            st.error(f"Not saved: {e}")
        else:
            on_saved()
            st.session_state["nd_saved"] = (d.name, d.version)
    saved = st.session_state.get("nd_saved")
    if not saved:
        return
    name, version = saved
    st.success(f"Saved {name} version {version}. Validate it, then add it to a mix in the Mix editor tab.")
    if c[1].button("Validate now", key="nd_validate"):
        with st.spinner(f"Validating {name} ({VALIDATE_TASKS} tasks, a second process checks determinism)…"):
            [report] = validate([name], n_tasks=VALIDATE_TASKS, cross_process=True)  # sandboxed ones in Docker, as the Catalogue tab
            store.record_validation(report)
        on_saved()
        st.session_state["nd_validation"] = (name, report["passed"], report["reasons"])
    result = st.session_state.get("nd_validation")
    if result and result[0] == name:
        if result[1]:
            st.success(f"{name} passed validation: it can join a mix.")
        else:
            st.error(f"{name} failed validation and can't join a mix: " + "; ".join(result[2]))


def show_new_domain(store, on_saved) -> None:
    """The tab: data in, mapping, verifier, preview, save, validate. `on_saved` clears the
    page's cached store reads after a write."""
    st.caption("Bring your own tasks: a data file with a prompt and a reference answer per row, and a verifier "
               "picked from the list. Held-out rows (by a hash of the row id) are never trained on.")
    rows, source = load_rows()
    if rows is None:
        st.info("Upload a data file or give its path to start.")
        return
    st.write(f"{len(rows)} rows; the first ones:")
    st.dataframe(pd.DataFrame(rows[:8]).astype(str), hide_index=True)
    definition = definition_form(rows)
    if source.startswith("path:"):  # a files column's relative paths start at the data file's folder
        definition["data"] = source[len("path:"):].strip()
    if not definition["name"]:
        st.info("Name the domain to see its prompts.")
        return
    try:
        domain = prepare(definition, rows)
    except WorkbenchError as e:
        st.error(str(e))
        return
    train = sum(len(v) for (_, held), v in domain.sides.items() if not held)
    st.caption(f"{len(domain.rows)} tasks: {train} for training, {len(domain.rows) - train} held out; "
               f"levels {sorted(domain.levels)}.")
    show_preview(domain)
    save_and_validate(store, definition, rows, on_saved)
