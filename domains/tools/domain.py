"""The `tool_use` domains: tasks a model solves by calling tools (`domains.tools.toolbox`) over
several turns of a `domains.tools.env.ToolEnv`.

    d = get_domain("tool_sql")
    task = d.make_task(seed=3, difficulty=2)          # Task; entry has the tools and reference calls
    env = ToolEnv(d, sandbox=None, max_turns=4)       # tool_files needs a sandbox
    d.reference_turns(task)                            # the calls that reach the answer, then "Answer: ..."

- `tool_sql`: a generated SQLite database (customers, orders by region, product and year);
  questions that need a filtered aggregate or a join. Level 1: one table, one filter;
  level 2: a join and two filters; level 3: a grouped top-1 with a join. Tool: sql.
- `tool_calc`: compound growth then a fee, `level` + 1 years, whose exact value needs the
  calculator. Tool: calculator.
- `tool_files` (sandbox): sales CSV files under data/ (1, 3 or 5 files; level 3 adds comment
  lines and a file with another column order); the model writes one total to result.txt.
  Tools: list_dir, read_file, write_file, python, shell.
- `tool_docs`: a question over a generated annual report (`domains.long_docs.financial`, 10 or 30
  pages) the model never sees: it has to use search_document (and may use the calculator).

Reward: 0.1 x format + 0.1 x call validity + 0.8 x correct. Format is an `Answer:` line in
the final turn (for tool_files: result.txt exists); call validity is the episode's valid calls
over its calls (0 without calls; `domains.tools.env.call_stats`), a shaping term in the spirit
of ToolRL (Qian et al., 2025, "ToolRL: Reward is All Tool Learning Needs"), whose format reward
covers the tool-call format; correct is the answer within the task's tolerance (0.005 for
sql/calc/files, the report question's stated tolerance for tool_docs). The breakdown adds the
episode's call statistics (validity, error codes).

Prompt: the system message says how to call tools (and lists them when the chat template
can't), then a one-shot demonstration in chat form: the reference episode of a task from
`DEMO_SEED` (outside the training and held-out seed ranges), played with the real tools (its
tool message is the real output), then the task. SmolLM2-135M-Instruct wrote a call in 8 %
of samples without it and in 47-64 % with it (36 samples per domain, T = 1).
"""

from __future__ import annotations

import math
import random
import sqlite3
import threading
import uuid
from dataclasses import dataclass, field
from typing import ClassVar
from pathlib import Path

from core.errors import ConfigError, SandboxError
from domains.answers import extract_answer, numeric_answer
from domains.contract import check_difficulty, Task, ToolUseDomain
from domains.long_docs.domain import judge_stored_answer
from domains.long_docs.financial import make_report_task
from domains.tools.contract import call_text, scripted_tool_turns
from domains.tools.env import (call_stats, observation_text, score_as_one_turn, tool_prompt, TOOL_SYSTEM_PROMPT,
                              ToolEnv)
from domains.tools.toolbox import ToolContext, ToolRunner, TOOLS
from retrieval.embeddings import Embedder
from retrieval.pipeline import Collection, RetrievalConfig, Retriever

REGIONS = ("north", "south", "east", "west", "central")
PRODUCTS = ("widget", "gadget", "sprocket", "gizmo", "doohickey", "flange")
YEARS = (2022, 2023, 2024)


@dataclass(frozen=True)
class ToolTask:
    """One tool-use task.

    Attributes:
        domain: "tool_sql" or "tool_calc".
        seed, level: what generated it.
        question: What the model is asked.
        answer: The reference answer (a number written plainly).
        tools: Names of the tools the environment offers.
        reference_calls: (tool, arguments) pairs that reach the answer.
        tables: tool_sql only: table -> (columns, rows) to write into the task's database.
        files: tool_files only: workspace path -> text written into the sandbox.
        key: tool_docs only: the answer key fields `FinancialReportDomain` scores with.
    """
    domain: str
    seed: int
    level: int
    question: str
    answer: str
    tools: tuple[str, ...]
    reference_calls: tuple[tuple[str, dict], ...]
    tables: dict = field(default_factory=dict, compare=False)
    files: dict = field(default_factory=dict, compare=False)
    key: dict = field(default_factory=dict, compare=False)  # tool_docs: the report question's answer key

    def database_path(self, directory: str | Path) -> Path:
        """Write the task's database into `directory` (once; the name carries a digest of the
        tables, so a changed generator never reuses an old file) and return its path."""
        import hashlib
        import json

        digest = hashlib.sha256(json.dumps(self.tables, sort_keys=True).encode()).hexdigest()[:12]
        path = Path(directory) / f"{self.domain}-{self.seed}-{self.level}-{digest}.db"
        if not path.exists() or path.stat().st_size == 0:
            tmp = path.with_suffix(f".{uuid.uuid4().hex[:8]}.tmp")  # episodes of a group write at once
            with sqlite3.connect(tmp) as conn:
                for table, (columns, rows) in self.tables.items():
                    conn.execute(f"create table {table} ({', '.join(columns)})")
                    conn.executemany(f"insert into {table} values ({', '.join('?' * len(columns))})", rows)
            conn.close()
            tmp.replace(path)
        return path


def _check(seed, level, levels=(1, 2, 3)) -> tuple[int, int]:
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ConfigError(f"seed must be a non-negative int, got {seed!r}")
    if isinstance(level, bool) or level not in levels:
        raise ConfigError(f"level must be one of {levels}, got {level!r}")
    return seed, level


def make_sql_task(seed: int, level: int = 1) -> ToolTask:
    """A `tool_sql` task (see the module docstring).

    Raises:
        ConfigError: bad seed or level.
    """
    seed, level = _check(seed, level)
    for attempt in range(100):  # level 3: a tie has no single answer, so draw again (same seed)
        task = _sql_task(seed, level, random.Random(f"tool_sql:{seed}:{level}" + (f":{attempt}" if attempt else "")))
        if task is not None:
            return task
    raise ConfigError(f"tool_sql level {level} seed {seed}: no task without a tie in 100 draws")


def _sql_task(seed: int, level: int, rng: random.Random) -> ToolTask | None:
    customers = [(i, f"customer_{i}", rng.choice(REGIONS)) for i in range(1, 21 + 10 * level)]
    orders = [(i, rng.choice(customers)[0], rng.choice(PRODUCTS), rng.choice(YEARS), rng.randint(1, 50),
               rng.randint(100, 9_999) / 100) for i in range(1, 60 + 40 * level)]
    tables = {"customers": (["id", "name", "region"], customers),
              "orders": (["id", "customer_id", "product", "year", "quantity", "unit_price"], orders)}
    region_of = {c[0]: c[2] for c in customers}
    product, year, region = rng.choice(PRODUCTS), rng.choice(YEARS), rng.choice(REGIONS)
    if level == 1:
        value = sum(o[4] for o in orders if o[2] == product and o[3] == year)
        question = f"How many units of {product} were ordered in {year} in total?"
        query = f"select sum(quantity) from orders where product = '{product}' and year = {year}"
        answer = str(value)
    elif level == 2:
        value = sum(o[4] * o[5] for o in orders if o[2] == product and region_of[o[1]] == region)
        question = (f"What is the total value (quantity x unit price) of {product} orders by customers in the "
                    f"{region} region? Round to two decimals.")
        query = ("select round(sum(o.quantity * o.unit_price), 2) from orders o join customers c on "
                 f"c.id = o.customer_id where o.product = '{product}' and c.region = '{region}'")
        answer = f"{value:.2f}"
    else:
        totals: dict[str, int] = {}
        for o in orders:
            if o[3] == year:
                totals[region_of[o[1]]] = totals.get(region_of[o[1]], 0) + o[4]
        ranked = sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))
        if len(ranked) > 1 and ranked[0][1] == ranked[1][1]:
            return None
        question = (f"Which region's customers ordered the most units in {year}, and how many? "
                    "Answer as REGION, UNITS.")
        query = ("select c.region, sum(o.quantity) as units from orders o join customers c on c.id = o.customer_id "
                 f"where o.year = {year} group by c.region order by units desc, c.region limit 1")
        answer = f"{ranked[0][0]}, {ranked[0][1]}"
    return ToolTask("tool_sql", seed, level, question + " Use the sql tool on the database (tables customers "
                    "and orders).", answer, ("sql",), (("sql", {"query": query}),), tables)


def make_calc_task(seed: int, level: int = 1) -> ToolTask:
    """A `tool_calc` task: `level` + 1 dependent steps (see the module docstring).

    Raises:
        ConfigError: bad seed or level.
    """
    seed, level = _check(seed, level)
    rng = random.Random(f"tool_calc:{seed}:{level}")
    principal, rate = rng.randint(1_000, 90_000), rng.choice((1.5, 2.25, 3.1, 4.75, 5.5))
    years = level + 1
    expression = f"{principal} * (1 + {rate}/100) ** {years}"
    value = principal * (1 + rate / 100) ** years
    fee = rng.randint(5, 95)
    expression = f"({expression}) - {fee}"
    value -= fee
    question = (f"An account starts at {principal} EUR and earns {rate}% interest per year, compounded yearly, for "
                f"{years} years; then a fee of {fee} EUR is taken. What is the balance? Round to two decimals. "
                "Use the calculator tool.")
    return ToolTask("tool_calc", seed, level, question, f"{value:.2f}", ("calculator",),
                    (("calculator", {"expression": expression}),))


def reference_turn(task: ToolTask) -> str:
    """The reference calls written in the call format (`domains.tools.contract`)."""
    return "".join(call_text(n, a) for n, a in task.reference_calls)


def score_tool_episode(task: ToolTask, final_text: str, results: list) -> tuple[float, dict]:
    """Reward of an answer episode (sql, calc): 0.2 x format + 0.8 x correct, plus call statistics.

    Args:
        task: The task.
        final_text: The model's last turn (holding the `Answer:` line).
        results: Every `domains.tools.toolbox.ToolResult` of the episode.

    Returns:
        (reward, breakdown) with format, correct, extracted (and "rejected" for an ambiguous
        answer, see `_judge`) and `domains.tools.env.call_stats`.
    """
    extracted = extract_answer(final_text) if isinstance(final_text, str) else None
    ok, extra = _judge(extracted, task.answer)
    return _reward(extracted is not None, ok, extra, results)


ANSWER_FORMAT_WEIGHT, CALL_VALIDITY_WEIGHT, TOOL_CORRECT_WEIGHT = 0.1, 0.1, 0.8


def _reward(formatted: bool, correct: bool, extra: dict, results: list) -> tuple[float, dict]:
    breakdown = {"format": float(formatted), "correct": float(correct), **extra, **call_stats(results)}
    reward = (ANSWER_FORMAT_WEIGHT * breakdown["format"] + CALL_VALIDITY_WEIGHT * (breakdown["call_validity"] or 0.0)
              + TOOL_CORRECT_WEIGHT * breakdown["correct"])
    return min(1.0, reward), breakdown


def _judge(given: str | None, expected: str) -> tuple[bool, dict]:
    """(correct, breakdown fields) of a candidate answer: `_same` on it as
    `domains.answers.numeric_answer` gives it ("\u22125" -> "-5", "1,234" -> "1234"); a list
    of different numbers for a one-number reference is wrong ("rejected": why)."""
    if given is None:
        return False, {"extracted": None}
    given, refused = numeric_answer(given, expected)
    if refused is not None:
        return False, {"extracted": given, "rejected": refused}
    return _same(given, expected), {"extracted": given}


def _same(given: str, expected: str) -> bool:
    """Answers match part by part (comma-separated): numbers within 0.005 (finite ones only:
    `nan` never matches), other parts equal ignoring case and a final period."""
    norm = lambda s: [p.strip().lower().rstrip(".") for p in s.replace(";", ",").split(",")]  # noqa: E731
    a, b = norm(given), norm(expected)
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        try:
            want = float(y)
        except ValueError:
            if x != y:
                return False
            continue
        try:
            got = float(x.replace(" ", ""))
        except ValueError:
            return False
        if not math.isfinite(got) or abs(got - want) > 0.005 + 1e-9:
            return False
    return True


# ---- tool_files -----------------------------------------------------------------------------

_FILE_COLUMNS = ("date", "product", "region", "amount")


def make_files_task(seed: int, level: int = 1) -> ToolTask:
    """A `tool_files` task (see the module docstring): 1/3/5 CSV files of sales under data/.

    Raises:
        ConfigError: bad seed or level.
    """
    seed, level = _check(seed, level)
    rng = random.Random(f"tool_files:{seed}:{level}")
    n_files = {1: 1, 2: 3, 3: 5}[level]
    tables = []
    for k in range(n_files):
        columns = list(_FILE_COLUMNS)
        if level == 3 and k == n_files - 1:
            columns = ["amount", "region", "date", "product"]  # another column order
        rows = [{"date": f"{rng.choice(YEARS)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
                 "product": rng.choice(PRODUCTS), "region": rng.choice(REGIONS),
                 "amount": f"{rng.randint(100, 99_999) / 100:.2f}"} for _ in range(rng.randint(12, 30))]
        tables.append((columns, rows))
    target = rng.choice([r for _, rows in tables for r in rows])  # at least one row matches
    product, region = target["product"], target["region"]
    files, total = {}, 0.0
    for k, (columns, rows) in enumerate(tables):
        lines = [",".join(columns)]
        if level == 3 and k % 2 == 0:
            lines.insert(0, f"# exported {rng.choice(YEARS)}-0{rng.randint(1, 9)}-1{rng.randint(0, 9)}")
        for row in rows:
            if row["product"] == product and row["region"] == region:
                total += float(row["amount"])
            lines.append(",".join(row[c] for c in columns))
        files[f"data/sales_{k + 1}.csv"] = "\n".join(lines) + "\n"
    question = (f"The CSV files in data/ hold sales records. Write the total amount of {product} sold in the "
                f"{region} region, over all files, to result.txt: only the number, with two decimals. Lines that "
                "start with # are comments; check each file's header for its column order.")
    code = ("import csv, glob\ntotal = 0.0\nfor path in sorted(glob.glob('data/*.csv')):\n"
            "    with open(path) as f:\n        rows = csv.DictReader(l for l in f if not l.startswith('#'))\n"
            f"        total += sum(float(r['amount']) for r in rows if r['product'] == {product!r} "
            f"and r['region'] == {region!r})\n"
            "open('result.txt', 'w').write(f'{total:.2f}')\nprint(f'{total:.2f}')\n")
    return ToolTask("tool_files", seed, level, question, f"{round(total, 2):.2f}", FILE_TOOLS,
                    (("list_dir", {"path": "data"}), ("python", {"code": code})), files=files)


FILE_TOOLS = ("list_dir", "read_file", "write_file", "python", "shell")
RESULT_FILE = "result.txt"


# ---- the domains ------------------------------------------------------------------------------

ANSWER_TURN = "When you have the answer, reply without a tool call and end with the line: Answer: <answer>"
FILES_TURN = "When result.txt is written, reply DONE without a tool call."


@dataclass(frozen=True, eq=False)
class ToolDomain(ToolUseDomain):
    """A tool-use domain (kind multi_turn, family tool_use): tasks from `maker`, played in a
    `domains.tools.env.ToolEnv`.

    Attributes:
        name, description, levels, level_notes, source, license: catalogue facts.
        maker: (seed, level) -> ToolTask.
        needs_sandbox: the tools act on a sandbox (tool_files).
    """
    name: str
    description: str
    maker: object = field(repr=False)
    levels: dict = field(default_factory=lambda: {1: {}, 2: {}, 3: {}})
    level_notes: dict = field(default_factory=dict)
    needs_sandbox: bool = False
    family: str = "tool_use"
    kind: str = "multi_turn"
    source: str = "generated by domains.tools.domain"
    license: str = "Apache-2.0"
    finish_turn: ClassVar[str] = ANSWER_TURN  # how the user turn says to end the episode
    reward_rule: ClassVar[str] = ("0.1 x format (an Answer: line in the last turn) + 0.1 x call validity (valid "
                                  "calls / calls) + 0.8 x correct")
    answer_format: str = "line"
    pooled: bool = False
    multiple_answers: bool = False

    @property
    def environment(self) -> dict:
        """Where tasks run and how they are verified, for the catalogue."""
        where = "sandbox (Docker; local bubblewrap fallback)" if self.needs_sandbox else "in-process tools"
        return {"runtime": where, "gymnasium": "ToolEnv", "call_format": "<tool_call>{json}</tool_call>",
                "verifier": "the final answer (or result file) against the reference, within tolerance"}

    def tool_task(self, task) -> ToolTask:
        """The ToolTask behind a registry `Task` (regenerated from its seed and level)."""
        return self.maker(task.seed, task.difficulty)

    def make_task(self, seed: int, difficulty: int = 1):
        """The registry `Task` for a seed and level (entry: tools, reference calls).

        Raises:
            ConfigError: bad seed or difficulty.
        """
        level = check_difficulty(difficulty, self.levels)
        t = self.maker(seed, level)
        entry = {**t.key, "question": t.question, "answer": t.answer, "tools": list(t.tools),
                 "reference_calls": [[n, a] for n, a in t.reference_calls]}
        return Task(self.name, t.seed, t.question, t.answer, level, entry)

    def tool_specs(self, task) -> list:
        return [TOOLS[n] for n in task.entry["tools"]]

    def opening(self, task) -> list[dict]:
        """[system: how to call tools, the demonstration (`demonstration`), user: the task and
        how to finish], without the tool list."""
        return [{"role": "system", "content": TOOL_SYSTEM_PROMPT}, *self.demonstration(),
                {"role": "user", "content": self._ask(task.question)}]

    def _ask(self, question: str) -> str:
        return f"{question}\n{self.finish_turn}"

    def demonstration(self) -> list[dict]:
        """A one-shot demonstration in chat form: user, assistant (the reference calls), tool
        (their real output), assistant (the answer), for the task of `DEMO_SEED` at level 1.
        Empty for domains whose tools need a sandbox. Built once per domain."""
        if self.needs_sandbox:
            return []
        if self.name not in _DEMOS:
            task = self.make_task(DEMO_SEED, 1)
            turns = self.reference_turns(task)
            runner = self.tool_runner(task, None)
            try:
                results = runner.run_turn(turns[0])
            finally:
                runner.close()
            _DEMOS[self.name] = [{"role": "user", "content": self._ask(task.question)},
                                 {"role": "assistant", "content": turns[0]},
                                 {"role": "tool", "content": observation_text(results)},
                                 {"role": "assistant", "content": turns[-1]}]
        return [dict(m) for m in _DEMOS[self.name]]

    def messages(self, task) -> list[dict]:
        """`opening` with the tool list in the system message; the rollout hands the tools to
        the chat template instead when it takes them (`domains.tools.env.tool_prompt`)."""
        return tool_prompt(None, self.opening(task), self.tool_specs(task))[0]

    def make_env(self, sandbox=None, max_turns: int = 4, timeout_s: float = 10.0):
        """A `ToolEnv` for this domain's tasks."""
        return ToolEnv(self, sandbox, max_turns=max_turns, timeout_s=timeout_s)

    def tool_runner(self, task, sandbox, timeout_s: float = 10.0, max_calls: int = 4):
        """A `ToolRunner` over this task's tools: its database, documents or sandbox files."""
        t = self.tool_task(task)
        ctx = ToolContext(sandbox=sandbox)
        if t.tables:
            ctx.database = t.database_path(_task_dir())
        if t.files:
            for path, text in t.files.items():
                sandbox.write_file(path, text)
        self._extend_context(ctx, task)
        return ToolRunner(list(t.tools), ctx, timeout_s=timeout_s, max_calls=max_calls)

    def _extend_context(self, ctx: ToolContext, task) -> None:
        """What this domain's tools need beyond the task's tables and files (none here)."""
    def score_episode(self, task, final_text: str, results: list, sandbox=None) -> tuple[float, dict]:
        """(reward, breakdown) of a finished episode (see the module docstring).

        Raises:
            SandboxError: tool_files could not read the sandbox (harness fault).
        """
        return score_tool_episode(self.tool_task(task), final_text, results)

    def scripted_turns(self, text: str) -> list[str]:
        return scripted_tool_turns(text)

    def reference_turns(self, task) -> list[str]:
        """The reference episode: one turn with the reference calls, then the final turn."""
        calls = "".join(call_text(n, a) for n, a in task.entry["reference_calls"])
        return [calls, self.wrap_answer(task.answer)]

    def wrong_turns(self, task) -> list[str]:
        """An episode with a wrong result (validation: must not score 1)."""
        return [self.wrap_answer(_wrong_number(task.answer))]

    def reference_completion(self, task) -> str:
        """The reference calls and the answer as one text (`score` plays it as one turn)."""
        return "\n".join(self.reference_turns(task))

    def wrap_answer(self, answer: str) -> str:
        return f"Answer: {answer}"

    def score(self, task, completion: str) -> tuple[float, dict]:
        """Score one text as a whole episode: its calls run, then its answer is judged
        (domains without a sandbox; tool_files is played in a `ToolEnv`). Never raises on
        the text."""
        return score_as_one_turn(self, task, completion)



@dataclass(frozen=True, eq=False)
class ToolFilesDomain(ToolDomain):
    """tool_files: the episode ends with DONE once result.txt is written in the sandbox, and
    the reward is the file's content against the reference."""
    finish_turn: ClassVar[str] = FILES_TURN
    reward_rule: ClassVar[str] = ("0.1 x format (result.txt written) + 0.1 x call validity (valid calls / calls) + "
                                  "0.8 x correct (result.txt holds the answer)")

    def score_episode(self, task, final_text: str, results: list, sandbox=None) -> tuple[float, dict]:
        """(reward, breakdown) from result.txt in the sandbox (the last turn's text is not read).

        Raises:
            SandboxError: the sandbox could not be read (harness fault).
        """
        try:
            written = sandbox.read_file(RESULT_FILE).decode("utf-8", "replace").strip()[:200]
        except ConfigError:  # no such file (or not a regular file): nothing was written
            written = None
        except SandboxError as e:
            if "no such" not in str(e).lower():
                raise
            written = None
        ok, extra = _judge(written, task.answer)
        return _reward(written is not None, ok, extra, results)

    def reference_turns(self, task) -> list[str]:
        """The reference calls (they write result.txt), then DONE."""
        return [super().reference_turns(task)[0], "DONE"]

    def wrong_turns(self, task) -> list[str]:
        """A wrong number written to result.txt, then DONE."""
        return [call_text("write_file", {"path": RESULT_FILE, "content": _wrong_number(task.answer)}), "DONE"]


@dataclass(frozen=True, eq=False)
class ToolDocsDomain(ToolDomain):
    """tool_docs: questions over an unseen annual report, found through search_document and
    judged as financial_report judges them (`domains.long_docs.domain.judge_stored_answer`)."""
    def _extend_context(self, ctx: ToolContext, task) -> None:
        """The report's retriever behind search_document."""
        ctx.retriever = _doc_retriever(task.seed, task.difficulty)

    def score_episode(self, task, final_text: str, results: list, sandbox=None) -> tuple[float, dict]:
        """(reward, breakdown) of the final answer against the report's answer key."""
        extracted = extract_answer(final_text) if isinstance(final_text, str) else None
        ok, detail = False, {}
        if extracted is not None:
            extracted, refused = numeric_answer(extracted, task.answer)
            # the answer key is in the task entry: no report is regenerated per sample
            ok, detail = judge_stored_answer(task, extracted) if refused is None else (False, {"rejected": refused})
        return _reward(extracted is not None, ok, {"extracted": extracted, **detail}, results)

def _wrong_number(answer: str) -> str:
    """A different answer of the same shape: every number in it plus 7."""
    import re

    return re.sub(r"\d+(?:\.\d+)?", lambda m: f"{float(m.group()) + 7:.2f}" if "." in m.group() else
                  str(int(m.group()) + 7), answer) if re.search(r"\d", answer) else answer + " not"


DEMO_SEED = 2**40 + 17  # outside TRAIN_SEED_RANGE and HELDOUT_SEED_RANGE
_DEMOS: dict[str, list[dict]] = {}




def _task_dir() -> Path:
    """Where task databases are written (a per-user cache directory)."""
    from platformdirs import user_cache_dir

    path = Path(user_cache_dir("rlwb")) / "tool_tasks"
    path.mkdir(parents=True, exist_ok=True)
    return path


_RETRIEVERS: dict = {}
_RETRIEVERS_LOCK = threading.Lock()


def _doc_retriever(seed: int, level: int):
    """A `Retriever` over the task's report (chunked in the embedding model's tokens); the
    last 16 are kept, since every sample of a group searches the same report."""
    key = (seed, level)
    with _RETRIEVERS_LOCK:  # the episodes of a group reset in parallel: build each report's index once
        if key not in _RETRIEVERS:
            cfg = RetrievalConfig()
            col = Collection.build({"report": make_report_task(seed, level).document}, Embedder.shared().tokenizer,
                                   cfg)
            _RETRIEVERS[key] = Retriever(col, cfg)
            while len(_RETRIEVERS) > 16:
                _RETRIEVERS.pop(next(iter(_RETRIEVERS)))
        return _RETRIEVERS[key]


def make_docs_task(seed: int, level: int = 1) -> ToolTask:
    """A `tool_docs` task: a financial_report question (level 1: 10 pages, 2: 30 pages).

    Raises:
        ConfigError: bad seed or level.
    """
    seed, level = _check(seed, level, (1, 2))
    r = make_report_task(seed, level)
    question = (f"{r.question} The annual report is not shown to you: search it with the search_document tool.")
    key = {"answer_kind": r.answer_kind, "unit": r.unit, "tolerance": r.tolerance, "question_type": r.question_type,
           "evidence": list(r.evidence), "pages": r.pages, "title": r.title}
    return ToolTask("tool_docs", seed, level, question, r.answer, ("search_document", "calculator"),
                    (("search_document", {"query": r.question, "top_k": 3}),), key=key)


def tool_domains() -> dict[str, ToolDomain]:
    """The tool_use domains by name."""
    made = [
        ToolDomain("tool_sql", "Answer questions over a generated SQLite sales database with the sql tool.",
                   make_sql_task, level_notes={1: "one table, one filter", 2: "a join, two filters",
                                               3: "grouped top-1 with a join"}),
        ToolDomain("tool_calc", "Multi-step interest calculations that need the calculator tool.", make_calc_task,
                   level_notes={1: "2 years", 2: "3 years", 3: "4 years"}),
        ToolFilesDomain("tool_files", "Sum sales across CSV files in a sandbox with file and python tools; write "
                   "the result to a file.", make_files_task, needs_sandbox=True,
                   level_notes={1: "one file", 2: "three files", 3: "five files, comments, column orders"}),
        ToolDocsDomain("tool_docs", "Questions over an unseen annual report, answered through search_document.",
                   make_docs_task, levels={1: {}, 2: {}}, level_notes={1: "10-page report", 2: "30-page report"}),
    ]
    return {d.name: d for d in made}
