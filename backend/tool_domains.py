"""Tool-use tasks: questions a model answers by calling tools (`backend.toolbox`).

    from backend.tool_domains import make_sql_task, make_calc_task, score_tool_episode
    task = make_sql_task(seed=3, level=2)          # ToolTask: question, database, answer, reference calls
    runner = ToolRunner(task.tools, ToolContext(database=task.database_path(tmp_dir)))
    results = runner.run_turn(reference_turn(task))
    reward, breakdown = score_tool_episode(task, final_text, all_results)

- `tool_sql`: a generated SQLite database (customers, orders by region, product and year);
  questions that need a filtered aggregate or a join. Level 1: one table, one filter;
  level 2: a join and two filters; level 3: a grouped top-1 with a join.
- `tool_calc`: multi-step arithmetic (compound growth, unit prices with discounts) whose
  exact value needs the calculator. Level sets the number of steps.

The reward is 0.2 x answer format (an `Answer:` line) + 0.8 x correct; the breakdown adds the
episode's call validity (valid calls / calls) and its error codes.

Not covered yet: registration in the domain registry and the multi-turn tool loop in the
trainer (issue 6 continues with them), file-manipulation and long-document tool tasks.
"""

from __future__ import annotations

import random
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from backend.errors import ConfigError

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
    """

    domain: str
    seed: int
    level: int
    question: str
    answer: str
    tools: tuple[str, ...]
    reference_calls: tuple[tuple[str, dict], ...]
    tables: dict = field(default_factory=dict, compare=False)

    def database_path(self, directory: str | Path) -> Path:
        """Write the task's database into `directory` (once) and return its path."""
        path = Path(directory) / f"{self.domain}-{self.seed}-{self.level}.db"
        if not path.exists():
            tmp = path.with_suffix(".tmp")
            tmp.unlink(missing_ok=True)
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
    rng = random.Random(f"tool_sql:{seed}:{level}")
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
            return make_sql_task(seed + 1_000_003, level)  # a tie has no single answer: another draw
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
    """The reference calls written in the call format (`backend.tools`)."""
    import json

    return "".join(f"<tool_call>{json.dumps({'name': n, 'arguments': a})}</tool_call>" for n, a in task.reference_calls)


def score_tool_episode(task: ToolTask, final_text: str, results: list) -> tuple[float, dict]:
    """Reward of an episode: 0.2 x format + 0.8 x correct, plus call statistics.

    Args:
        task: The task.
        final_text: The model's last turn (holding the `Answer:` line).
        results: Every `backend.toolbox.ToolResult` of the episode.

    Returns:
        (reward, breakdown) with format, correct, extracted, calls, valid_calls,
        call_validity (valid / calls, None without calls) and error_codes.
    """
    from backend.domains import CORRECT_WEIGHT, FORMAT_WEIGHT, extract_answer

    extracted = extract_answer(final_text) if isinstance(final_text, str) else None
    correct = extracted is not None and _same(extracted, task.answer)
    valid = sum(r.error is None for r in results)
    breakdown = {"format": float(extracted is not None), "correct": float(correct), "extracted": extracted,
                 "calls": len(results), "valid_calls": valid,
                 "call_validity": valid / len(results) if results else None,
                 "error_codes": sorted({r.error for r in results if r.error})}
    return FORMAT_WEIGHT * breakdown["format"] + CORRECT_WEIGHT * breakdown["correct"], breakdown


def _same(given: str, expected: str) -> bool:
    norm = lambda s: [p.strip().lower().rstrip(".") for p in s.replace(";", ",").split(",")]  # noqa: E731
    a, b = norm(given), norm(expected)
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        try:
            if abs(float(x.replace(" ", "")) - float(y)) > 0.005 + 1e-9:
                return False
        except ValueError:
            if x != y:
                return False
    return True
