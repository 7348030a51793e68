"""Seeded task templates for the multi-turn *terminal* domain family: shell goals with checkers.

In a terminal task a language model reaches a goal by running commands in a Linux shell
over several turns: count log lines, fix a bug so a test passes, build a tarball, commit
to git. A task is plain data: an English instruction, the text files written into the
workspace before the episode, a stdlib-only python3 *checker* script that is run in the
workspace afterwards (exit code 0 = solved; it prints one `PASS: ...`/`FAIL: ...` line),
and *reference* shell commands that solve it. The same (template, seed, difficulty) always
gives the same task; difficulty 1..3 scales data size and adds traps (decoys, quoting).

    from domains.terminal.tasks import make_terminal_task, terminal_task_for_seed
    task = make_terminal_task("count_matches", seed=7, difficulty=2)
    task.instruction  # "app.log is a log file ... Write the count to answer.txt ..."
    task.files        # {"app.log": "2024-05-03T10:11:12 ERROR db: ..."}
    # write task.files under /workspace, let the model work, then run task.checker with
    # python3 (cwd=/workspace): exit 0 iff solved. task.reference solves it via `bash -c`.
    terminal_task_for_seed(12)   # template template_names()[12 % len(...)], data from seed 12

Target environment: Debian bookworm minbase with bash, coreutils, grep, sed, mawk,
findutils, tar, gzip, diff, perl, python3 (stdlib only) and git; no network; commands run
as uid 1000 with cwd = HOME = /workspace; only /workspace and /tmp are writable. Git tasks
start from plain files (the model runs `git init`); no git identity is configured.

Not covered here: this module is not the sandbox and runs nothing; it only describes
tasks. Containers, command execution, turn limits, rewards and chat rendering belong to
the sandbox and the domain. Checkers trust the sandbox's isolation: they verify the result
(and, for the bug fix, that the test file is unchanged) but are not hardened against a
model that rewrites their environment (e.g. shadows python3 or git on PATH). Write the
checker outside /workspace (e.g. /tmp) so it is not part of the files it inspects.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import io
import json
import random
import shlex
from typing import Callable

from core.errors import ConfigError
from domains.terminal.checkers import (
    BUGFIX_BODY,
    GIT_BODY,
    LINES_BODY,
    TAR_BODY,
    TEXT_BODY,
    TREE_BODY,
    checker,
    number_checker,
)

DIFFICULTIES = (1, 2, 3)  # 1 easy .. 3 hard

# Lowercase words, none a prefix of another (so glob and `sort` orders agree in any locale).
WORDS = (
    "amber", "anchor", "apple", "arrow", "badge", "basil", "beacon", "birch", "bison", "cable",
    "canyon", "cedar", "cobalt", "comet", "coral", "cotton", "delta", "dune", "ember", "falcon", "fern",
    "fjord", "forge", "garnet", "glacier", "harbor", "hazel", "heron", "indigo", "iris", "jasper",
    "juniper", "kelp", "lantern", "lemon", "lilac", "maple", "marble", "meadow", "mint", "nectar",
    "nickel", "oasis", "olive", "onyx", "orbit", "otter", "pebble", "pepper", "pine", "plume", "quartz",
    "raven", "reef", "saffron", "sage", "sierra", "slate", "spruce", "tango", "thistle", "topaz",
    "tulip", "umber", "velvet", "violet", "walnut", "willow", "yarrow", "zephyr",
)
_GIT_ID = "-c user.name=Workbench -c user.email=workbench@example.com"


@dataclasses.dataclass(frozen=True)
class TerminalTask:
    """One terminal task: what the model is told, the workspace, and how it is judged.

    Attributes:
        template: Template name, e.g. "count_matches".
        seed: Data seed; the same (template, seed, difficulty) always gives the same task.
        difficulty: Level 1..3 (1 easy .. 3 hard).
        instruction: What the model is told: file names, output file and format.
        files: Workspace-relative path -> text content, written before the episode.
        checker: A stdlib-only python3 script run with cwd=/workspace after the episode;
            exit code 0 = solved, non-zero = not; it prints a one-line reason.
        reference: Shell commands (each run with `bash -c` in /workspace, in order) that
            solve the task.
        answer: Short human-readable description of the expected result (for inspection).
    """

    template: str
    seed: int
    difficulty: int
    instruction: str
    files: dict[str, str]
    checker: str
    reference: tuple[str, ...]
    answer: str


# ----------------------------------------------------------------------------- helpers

def _sentence(rng: random.Random, lo: int, hi: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi)))


def _py(code: str) -> str:
    """A `python3 -c` shell command for `code`."""
    return f"python3 -c {shlex.quote(code)}"


# --------------------------------------------------------------------------- templates

def _count_matches(rng: random.Random, d: int) -> TerminalTask:
    """Count log lines with a given level (and component at d >= 2) into answer.txt."""
    levels = ("DEBUG", "INFO", "WARN", "ERROR")
    comps = rng.sample(("db", "api", "auth", "cache", "queue", "web", "mail", "cron"), 2 + d)
    level, comp = rng.choice(levels[1:]), rng.choice(comps)
    names = ["app.log"] if d < 3 else [f"logs/{w}.log" for w in rng.sample(WORDS, 3)]
    files, total = {}, 0
    for name in names:
        rows = []
        for _ in range({1: 40, 2: 150, 3: 90}[d]):
            lv, c = rng.choice(levels), rng.choice(comps)
            msg = _sentence(rng, 3, 6)
            if rng.random() < 0.2:  # decoy: the level word inside the message text
                msg += f" (after {rng.choice(levels)} in {rng.choice(comps)})"
            stamp = f"2024-05-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}"
            rows.append(f"{stamp}:{rng.randint(0, 59):02d} {lv} {c}: {msg}")
            total += lv == level and (d == 1 or c == comp)
        files[name] = "\n".join(rows) + "\n"
    if d == 3:
        files["logs/README.txt"] = f"Old logs; {level} {comp}: not a log file.\n"
    where = "app.log is a log file" if d < 3 else "The logs/ directory holds log files (*.log)"
    cond = f"whose level (the second whitespace-separated field) is {level}"
    awk = f"$2 == \"{level}\""
    if d >= 2:
        cond += f" and whose third field (the component) is exactly `{comp}:`"
        awk += f" && $3 == \"{comp}:\""
    src = "app.log" if d < 3 else "logs/*.log"
    scope = "" if d < 3 else ", over all *.log files in logs/ together"
    return TerminalTask(
        "count_matches", 0, d,
        f"{where} with lines like `2024-05-03T10:11:12 ERROR db: message`. Count the lines "
        f"{cond}{scope}. Write just the count (a plain integer) to answer.txt.",
        files, number_checker("answer.txt", total),
        (f"cat {src} | awk {shlex.quote(awk)} | wc -l > answer.txt",), f"answer.txt = {total}")


# (name, correct source, correct snippet, buggy snippet, random args, witness args exposing the bug)
_FUNCS: tuple[tuple[str, str, str, str, Callable[[random.Random], tuple], tuple], ...] = (
    ("mean", "def mean(xs):\n    return sum(xs) / len(xs)\n", "sum(xs) / len", "sum(xs) // len",
     lambda r: ([r.randint(1, 60) for _ in range(r.randint(2, 7))],), ([1, 2],)),
    ("is_leap", "def is_leap(year):\n    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)\n",
     "year % 100 != 0", "year % 100 == 0", lambda r: (r.randint(1800, 2400),), (2024,)),
    ("count_vowels", 'def count_vowels(text):\n    return sum(1 for ch in text.lower() if ch in "aeiou")\n',
     '"aeiou"', '"aeio"', lambda r: (" ".join(r.sample(WORDS, 3)),), ("you",)),
    ("factorial", "def factorial(n):\n    result = 1\n    for i in range(2, n + 1):\n"
     "        result *= i\n    return result\n", "range(2, n + 1)", "range(2, n)",
     lambda r: (r.randint(3, 12),), (5,)),
    ("clamp", "def clamp(x, lo, hi):\n    if x < lo:\n        return lo\n    if x > hi:\n"
     "        return hi\n    return x\n", "if x < lo:", "if x > lo:",
     lambda r: (r.randint(-20, 40), r.randint(-10, 0), r.randint(10, 30)), (5, 0, 10)),
    ("last_n", "def last_n(xs, n):\n    return xs[-n:]\n", "xs[-n:]", "xs[n:]",
     lambda r: ([r.randint(0, 99) for _ in range(r.randint(4, 9))], r.randint(1, 3)), ([1, 2, 3, 4, 5], 2)),
    ("word_count", "def word_count(text):\n    return len(text.split())\n", "text.split()", 'text.split(" ")',
     lambda r: ("  ".join(r.sample(WORDS, r.randint(2, 5))),), ("a  b",)),
    ("to_fahrenheit", "def to_fahrenheit(celsius):\n    return celsius * 9 / 5 + 32\n", "* 9 / 5", "* 5 / 9",
     lambda r: (r.randint(-40, 100),), (100,)),
    ("argmax", "def argmax(xs):\n    best = 0\n    for i in range(1, len(xs)):\n"
     "        if xs[i] > xs[best]:\n            best = i\n    return best\n",
     "xs[i] > xs[best]", "xs[i] < xs[best]", lambda r: (r.sample(range(100), r.randint(3, 8)),), ([1, 3, 2],)),
    ("running_total", "def running_total(xs):\n    out = []\n    total = 0\n    for x in xs:\n"
     "        total += x\n        out.append(total)\n    return out\n", "total += x", "total = x",
     lambda r: ([r.randint(1, 20) for _ in range(r.randint(3, 7))],), ([1, 2],)),
    ("is_palindrome", 'def is_palindrome(text):\n    t = "".join(ch.lower() for ch in text if ch.isalnum())\n'
     "    return t == t[::-1]\n", "t[::-1]", "t[::1]",
     lambda r: (r.choice(("level", "Never odd or even", "rotor", r.choice(WORDS), r.choice(WORDS))),), ("abc",)),
    ("gcd", "def gcd(a, b):\n    while b:\n        a, b = b, a % b\n    return a\n", "a % b", "a // b",
     lambda r: (r.randint(1, 200), r.randint(1, 200)), (12, 18)),
)


def _fix_bug(rng: random.Random, d: int) -> TerminalTask:
    """A small python project with one buggy line; `python3 test_<project>.py` must pass."""
    funcs = rng.sample(_FUNCS, {1: 2, 2: 4, 3: 7}[d])
    modules = rng.sample(("calc", "textkit", "seqtools", "numkit", "helpers", "toolbox"), d)
    split = {1: [2], 2: [2, 2], 3: [3, 2, 2]}[d]
    project = rng.choice(("ledger", "atlas", "beacon", "orchard", "quill", "harbor"))
    buggy = rng.randrange(len(funcs))
    namespace: dict = {}
    exec("\n".join(f[1] for f in funcs), namespace)  # our own constant sources -> expected values
    files, owner, start = {}, {}, 0
    for module, count in zip(modules, split):
        sources = []
        for i in range(start, start + count):
            name, source, good, bad = funcs[i][:4]
            sources.append(source.replace(good, bad) if i == buggy else source)
            owner[name] = module
        files[f"src/{module}.py"] = f'"""Helpers of the {project} project."""\n\n\n' + "\n\n".join(sources)
        start += count
    cases, hidden = [], []
    for name, _, _, _, gen, witness in funcs:
        cases += [(name, witness)] + [(name, gen(rng)) for _ in range(1 + d)]
        hidden += [(owner[name], name, witness)] + [(owner[name], name, gen(rng)) for _ in range(3)]
    imports = "".join(f"from {m} import {', '.join(n for n in owner if owner[n] == m)}\n" for m in modules)
    checks = "".join(f"check({n!r}, {n}(*{a!r}), {namespace[n](*a)!r})\n" for n, a in cases)
    test = (f'"""Tests for the {project} project. Run: python3 test_{project}.py"""\nimport os\nimport sys\n\n'
            'sys.dont_write_bytecode = True  # no stale src/__pycache__ after quick edits\n'
            'sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "src"))\n\n'
            f"{imports}\nFAILURES = []\n\n\ndef check(label, got, want):\n    if got != want:\n"
            '        FAILURES.append(f"{label}: got {got!r}, want {want!r}")\n\n\n'
            f"{checks}\nif FAILURES:\n    print(\"\\n\".join(FAILURES))\n    sys.exit(1)\n"
            f'print("all {len(cases)} checks passed")\n')
    test_name = f"test_{project}.py"
    files[test_name] = test
    probe = ("import importlib, json, sys\nsys.path.insert(0, 'src')\n"
             f"CASES = {[(m, n, list(a)) for m, n, a in hidden]!r}\n"
             "print(json.dumps([getattr(importlib.import_module(m), n)(*a) for m, n, a in CASES]))\n")
    expected = json.loads(json.dumps([namespace[n](*a) for _, n, a in hidden]))
    name, _, good, bad = funcs[buggy][:4]
    path = f"src/{owner[name]}.py"
    assert files[path].count(bad) == 1, (name, bad)  # internal invariant: the fix is unambiguous
    fix = ("import pathlib, sys; p = pathlib.Path(sys.argv[1]); "
           "p.write_text(p.read_text().replace(sys.argv[2], sys.argv[3], 1))")
    return TerminalTask(
        "fix_bug", 0, d,
        f"/workspace holds a small Python project: modules under src/ and a test script "
        f"{test_name}. Running `python3 {test_name}` currently fails because of a bug on one "
        f"line of the code under src/. Fix the bug so that `python3 {test_name}` passes. "
        f"Do not modify {test_name}.",
        files,
        checker(BUGFIX_BODY, TEST=test_name, TEST_SHA256=hashlib.sha256(test.encode()).hexdigest(),
                 PROBE=probe, HIDDEN_EXPECTED=expected),
        (f"{_py(fix)} {path} {shlex.quote(bad)} {shlex.quote(good)}",),
        f"in {path}, function {name}: change {bad!r} back to {good!r}")


def _sort_numbers(rng: random.Random, d: int) -> TerminalTask:
    """Sort numbers numerically into sorted.txt (descending at d2; decimals + unique at d3)."""
    if d == 1:
        values = [str(rng.randint(1, 999)) for _ in range(rng.randint(20, 40))]
        raw, want = list(values), sorted(values, key=int)
        how, cmd = "in ascending numeric order", "sort -n numbers.txt > sorted.txt"
    elif d == 2:
        values = [str(rng.randint(-5000, 5000)) for _ in range(rng.randint(60, 100))]
        raw, want = list(values), sorted(values, key=int, reverse=True)
        how, cmd = "in descending numeric order", "sort -rn numbers.txt > sorted.txt"
    else:
        values = [f"{rng.randint(-100000, 100000) / 100:.2f}" for _ in range(rng.randint(90, 130))]
        values += rng.sample(values, 15)  # exact duplicates
        rng.shuffle(values)
        want = sorted(set(values), key=float)
        raw = []
        for v in values:
            if rng.random() < 0.08:
                raw.append(rng.choice(("", f"# batch {rng.randint(1, 9)}")))
            raw.append(v)
        how = ("in ascending numeric order, each distinct number only once (skip the blank lines "
               "and the comment lines that start with #)")
        cmd = "grep -v -e '^#' -e '^$' numbers.txt | LC_ALL=C sort -n -u > sorted.txt"
    return TerminalTask(
        "sort_numbers", 0, d,
        f"numbers.txt has one number per line. Write the numbers to sorted.txt, one per line, "
        f"{how}. Write each number exactly as it appears in numbers.txt.",
        {"numbers.txt": "\n".join(raw) + "\n"}, checker(LINES_BODY, PATH="sorted.txt", EXPECTED=want),
        (cmd,), f"sorted.txt = {len(want)} lines: {' '.join(want[:3])} ... {want[-1]}")


def _find_token(rng: random.Random, d: int) -> TerminalTask:
    """Find the one file under data/ that holds a token; write its path (d3 adds near-miss decoys)."""
    n_files, depth = {1: (6, 2), 2: (20, 3), 3: (40, 4)}[d]
    token = "KEY-" + "".join(rng.choice("0123456789abcdef") for _ in range(6))
    paths: list[str] = []
    while len(paths) < n_files:
        parts = rng.sample(WORDS, rng.randint(0, depth - 1) + 1)
        path = "data/" + "/".join(parts) + rng.choice((".txt", ".md", ".log", ".cfg"))
        if path not in paths:  # file names have an extension, directory names never do
            paths.append(path)
    target = rng.choice(paths)
    decoys = [token[:-1] + ("x" if token[-1] != "x" else "y"), token + rng.choice("0123456789"),
              "X" + token, token.lower().replace("key", "kEY")] if d == 3 else []
    files = {}
    for path in paths:
        rows = [_sentence(rng, 5, 9) for _ in range(rng.randint(3, 7))]
        if path == target:
            i = rng.randrange(len(rows))
            rows[i] = f"{rows[i]} {token} {_sentence(rng, 1, 3)}"
        elif decoys and rng.random() < 0.3:
            rows[0] += f" {rng.choice(decoys)}"
        files[path] = "\n".join(rows) + "\n"
    flag = "-rlw" if d == 3 else "-rl"
    exact = " as a whole word (exactly, case-sensitive; similar-looking strings do not count)" if d == 3 else ""
    return TerminalTask(
        "find_token", 0, d,
        f"Exactly one file somewhere under data/ contains the token {token}{exact}. Write the "
        "path of that file, relative to /workspace (for example data/a/b.txt), to answer.txt.",
        files, checker(TEXT_BODY, PATH="answer.txt", EXPECTED=target, NORMALISE_PATH=True),
        (f"grep {flag} -- {token} data > answer.txt",), f"answer.txt = {target}")


def _csv_sum(rng: random.Random, d: int) -> TerminalTask:
    """Sum a CSV column for one region (revenue at d2; quoted fields + shuffled header at d3)."""
    regions = rng.sample(("north", "south", "east", "west", "central", "coast"), 4)
    region = rng.choice(regions)
    products = ["bolt", "gear", "valve", "spring", "Bolt, large", "Gear, small \"pro\""]
    cols = ["region", "product", "units"] + (["unit_price"] if d == 2 else [])
    if d == 3:
        cols = rng.sample(["date", "region", "product", "units", "unit_price", "channel"], 6)
    month = f"2024-{rng.randint(1, 6):02d}"
    rows, total = [], 0
    for i in range({1: 25, 2: 80, 3: 120}[d]):
        when = month if i == 0 else f"2024-{rng.randint(1, 6):02d}"  # row 0 always counts
        row = {"region": region if i == 0 else rng.choice(regions),
               "product": rng.choice(products[:4] if d < 3 else products),
               "units": rng.randint(1, 50), "unit_price": rng.randint(99, 9999),
               "date": f"{when}-{rng.randint(1, 28):02d}", "channel": rng.choice(("web", "store", "phone"))}
        if row["region"] == region and (d < 3 or row["date"].startswith(month)):
            total += row["units"] * (row["unit_price"] if d == 2 else 1)
        row["unit_price"] = f"{row['unit_price'] / 100:.2f}"
        rows.append([row[c] for c in cols])
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows([cols, *rows])
    if d == 1:
        what = f"the sum of the units column over the rows whose region is {region}"
        cmd = f"awk -F, 'NR > 1 && $1 == \"{region}\" {{s += $3}} END {{print s + 0}}' sales.csv > answer.txt"
        expected, fmt, tol = float(total), "a plain integer", 0.0
    elif d == 2:
        what = f"the total revenue (units * unit_price summed over rows) of region {region}"
        cmd = (f"awk -F, 'NR > 1 && $1 == \"{region}\" {{s += $3 * $4}} END {{printf \"%.2f\\n\", s}}' "
               "sales.csv > answer.txt")
        expected, fmt, tol = total / 100, "a number with two decimals, e.g. 1234.50", 0.005
    else:
        what = (f"the sum of the units column over the rows whose region is {region} and whose "
                f"date falls in {month} (dates are YYYY-MM-DD). The columns are in an unusual "
                "order and some product names are quoted and contain commas")
        code = (f'import csv; print(sum(int(r["units"]) for r in csv.DictReader(open("sales.csv")) '
                f'if r["region"] == "{region}" and r["date"].startswith("{month}-")))')
        cmd, expected, fmt, tol = f"{_py(code)} > answer.txt", float(total), "a plain integer", 0.0
    shown = f"{expected:.2f}" if d == 2 else str(total)
    return TerminalTask(
        "csv_sum", 0, d,
        f"sales.csv is a CSV file with a header row. Compute {what}. Write the result to "
        f"answer.txt as {fmt}.",
        {"sales.csv": buf.getvalue()}, number_checker("answer.txt", expected, tol),
        (cmd,), f"answer.txt = {shown}")


def _rename_ext(rng: random.Random, d: int) -> TerminalTask:
    """Rename every *.txt file under notes/ to *.md (d3: spaces, a directory named *.txt)."""
    dirs = [""] if d == 1 else ["", *(f"{w}/" for w in rng.sample(WORDS, 2)), "/".join(rng.sample(WORDS, 2)) + "/"]
    exts = (".txt", ".txt", ".txt", ".csv", ".log") + ((".txt.bak", ".text") if d == 3 else ())
    files: dict[str, str] = {}
    while len(files) < {1: 5, 2: 10, 3: 14}[d]:
        base = rng.choice(WORDS) + (f" {rng.choice(WORDS)}" if d == 3 and rng.random() < 0.3 else "")
        ext = ".txt" if not files else rng.choice(exts)
        files.setdefault(f"notes/{rng.choice(dirs)}{base}{ext}", _sentence(rng, 4, 10) + "\n")
    if d == 3:
        files[f"notes/archive.txt/{rng.choice(WORDS)}.txt"] = _sentence(rng, 4, 10) + "\n"
    expected = {(p[:-4] + ".md" if p.endswith(".txt") else p): text for p, text in files.items()}
    return TerminalTask(
        "rename_ext", 0, d,
        "Rename every regular file under notes/ (at any depth) whose name ends in .txt so that "
        "its name ends in .md instead (for example notes/a.txt -> notes/a.md), keeping its "
        "content and its directory. Leave all other files, and all directory names, unchanged.",
        files, checker(TREE_BODY, ROOT="notes", EXPECTED=expected),
        ("find notes -type f -name '*.txt' -exec sh -c "
         "'for f do mv -- \"$f\" \"${f%.txt}.md\"; done' sh {} +",),
        f"{sum(p.endswith('.txt') for p in files)} files renamed to .md")


def _json_extract(rng: random.Random, d: int) -> TerminalTask:
    """Extract a value from config.json (by path, by service name, or a filtered sum)."""
    if d == 1:
        data = {a: {b: {c: rng.choice((rng.randint(1, 65535), rng.choice(WORDS))) for c in rng.sample(WORDS, 3)}
                    for b in rng.sample(WORDS, 3)} for a in rng.sample(WORDS, 3)}
        a = rng.choice(list(data))
        b = rng.choice(list(data[a]))
        c = rng.choice(list(data[a][b]))
        value = str(data[a][b][c])
        what = f"the value at the key path {a}.{b}.{c} (i.e. data[\"{a}\"][\"{b}\"][\"{c}\"])"
        expr = f'd["{a}"]["{b}"]["{c}"]'
    else:
        services = [{"name": name, "image": f"{rng.choice(WORDS)}:{rng.randint(1, 9)}.{rng.randint(0, 20)}",
                     "env": rng.choice(("prod", "staging", "dev")), "replicas": rng.randint(1, 12),
                     "ports": {"http": rng.randint(8000, 8999), "admin": rng.randint(9000, 9999)},
                     "tags": rng.sample(("critical", "batch", "web", "internal", "edge"), rng.randint(1, 3))}
                    for name in rng.sample(WORDS, rng.randint(6, 10) if d == 2 else rng.randint(15, 25))]
        data = {"cluster": {"name": rng.choice(WORDS), "services": services}}
        if d == 2:
            svc = rng.choice(services)
            value, name = str(svc["ports"]["http"]), svc["name"]
            what = f"the ports.http value of the service named {name} (in cluster.services)"
            expr = f'next(s["ports"]["http"] for s in d["cluster"]["services"] if s["name"] == "{name}")'
        else:
            services[rng.randrange(len(services))].update(env="prod", tags=["critical", "web"])
            value = str(sum(s["replicas"] for s in services if s["env"] == "prod" and "critical" in s["tags"]))
            what = ("the sum of replicas over all services in cluster.services whose env is \"prod\" "
                    "and whose tags list contains \"critical\"")
            expr = ('sum(s["replicas"] for s in d["cluster"]["services"] '
                    'if s["env"] == "prod" and "critical" in s["tags"])')
    code = f'import json; d = json.load(open("config.json")); print({expr})'
    return TerminalTask(
        "json_extract", 0, d,
        f"config.json is a JSON document. Write {what} to answer.txt, as plain text (no quotes).",
        {"config.json": json.dumps(data, indent=2) + "\n"},
        checker(TEXT_BODY, PATH="answer.txt", EXPECTED=value, NORMALISE_PATH=False),
        (f"{_py(code)} > answer.txt",), f"answer.txt = {value}")


def _dedupe_lines(rng: random.Random, d: int) -> TerminalTask:
    """Remove duplicate lines keeping first-occurrence order (d3: prefix each with its count)."""
    pool = list(dict.fromkeys(_sentence(rng, 1, 3) for _ in range({1: 10, 2: 30, 3: 30}[d])))
    if d >= 2:  # case variants are distinct lines
        pool += [p.capitalize() for p in rng.sample(pool, 5)]
    weights = [rng.random() + 0.1 for _ in pool]
    raw = rng.choices(pool, weights, k={1: 25, 2: 120, 3: 150}[d])
    order = list(dict.fromkeys(raw))
    if d < 3:
        want, how = order, "each distinct line once, in the order of its first occurrence"
        cmd = "awk '!seen[$0]++' input.txt > unique.txt"
    else:
        want = [f"{raw.count(line)} {line}" for line in order]
        how = ("each distinct line once, in the order of its first occurrence, prefixed by the "
               "number of times it occurs in input.txt and one space (e.g. `3 red fox`)")
        cmd = ("awk '!($0 in c) {o[n++] = $0} {c[$0]++} END {for (i = 0; i < n; i++) "
               "print c[o[i]] \" \" o[i]}' input.txt > unique.txt")
    return TerminalTask(
        "dedupe_lines", 0, d,
        f"input.txt contains repeated lines. Write to unique.txt {how}. Lines are compared "
        "exactly (case-sensitive).",
        {"input.txt": "\n".join(raw) + "\n"}, checker(LINES_BODY, PATH="unique.txt", EXPECTED=want),
        (cmd,), f"unique.txt = {len(want)} lines")


def _word_report(rng: random.Random, d: int) -> TerminalTask:
    """Write per-file word counts of docs/*.txt into report.txt in a given order and format."""
    names = rng.sample(WORDS, {1: 4, 2: 8, 3: 10}[d])
    subdirs = [""] + ([f"{w}/" for w in rng.sample([w for w in WORDS if w not in names], 2)] if d == 3 else [])
    files, counts = {}, {}
    for name in names:
        path = f"{rng.choice(subdirs)}{name}.txt"
        text = "\n".join(_sentence(rng, 2, 9) for _ in range(rng.randint(1, 6))) + "\n"
        files[f"docs/{path}"], counts[path] = text, len(text.split())
    if d == 3:
        files["docs/readme.md"] = _sentence(rng, 5, 9) + "\n"
        files[f"docs/{subdirs[1]}data.csv"] = "a,b\n1,2\n"
    if d == 1:
        want = [f"{p} {counts[p]}" for p in sorted(counts)]
        how = "sorted by file name"
    elif d == 2:
        want = [f"{p} {c}" for p, c in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
        how = "sorted by word count, largest first, ties broken by file name (ascending)"
    else:
        want = [f"{p} {counts[p]}" for p in sorted(counts)] + [f"total {sum(counts.values())}"]
        how = "sorted by path (byte order), followed by a last line `total <N>` with the sum of all counts"
    scope = "docs/*.txt" if d < 3 else "every *.txt file under docs/ (at any depth)"
    name_is = "its file name (e.g. notes.txt)" if d < 3 else "its path relative to docs/ (e.g. sub/notes.txt)"
    loop = "for f in *.txt" if d < 3 else "find . -type f -name '*.txt' | sed 's|^\\./||' | LC_ALL=C sort | while read -r f"
    cmds = [f"export LC_ALL=C; cd docs && {loop}; do echo \"$f $(wc -w < \"$f\")\"; done > ../report.txt"]
    if d == 2:
        cmds.append("LC_ALL=C sort -k2,2nr -k1,1 report.txt > r.tmp && mv r.tmp report.txt")
    if d == 3:
        cmds.append("awk '{s += $2} END {print \"total \" s}' report.txt >> report.txt")
    return TerminalTask(
        "word_report", 0, d,
        f"For {scope}, count its words (whitespace-separated tokens, as `wc -w` counts them). "
        f"Write report.txt with one line per file, `<name> <count>` where <name> is {name_is}, "
        f"{how}.",
        files, checker(LINES_BODY, PATH="report.txt", EXPECTED=want), tuple(cmds),
        f"report.txt = {len(want)} lines, first {want[0]!r}")


def _make_tarball(rng: random.Random, d: int) -> TerminalTask:
    """Pack site/ into a .tar.gz (d2: without *.tmp; d3: only *.html/*.css, into dist/)."""
    dirs = ["", "css/", "pages/", f"assets/{rng.choice(WORDS)}/"]
    files = {"site/index.html": f"<h1>{_sentence(rng, 2, 4)}</h1>\n", f"site/{rng.choice(WORDS)}.tmp": "scratch\n",
             f"site/js/{rng.choice(WORDS)}.js": f"console.log('{rng.choice(WORDS)}');\n"}
    while len(files) < {1: 5, 2: 9, 3: 13}[d]:
        ext = rng.choice((".html", ".html", ".css", ".js", ".tmp", ".txt"))
        files.setdefault(f"site/{rng.choice(dirs)}{rng.choice(WORDS)}{ext}", f"{ext[1:]}: {_sentence(rng, 3, 8)}\n")
    if d == 1:
        keep, path, rule = files, "archive.tar.gz", "all files of site/"
        cmd = "tar -czf archive.tar.gz site"
    elif d == 2:
        keep = {p: t for p, t in files.items() if not p.endswith(".tmp")}
        path, rule, cmd = "archive.tar.gz", "all files of site/ except *.tmp files", \
            "tar -czf archive.tar.gz --exclude='*.tmp' site"
    else:
        keep = {p: t for p, t in files.items() if p.endswith((".html", ".css"))}
        path = f"dist/site-{rng.randint(1, 4)}.{rng.randint(0, 9)}.{rng.randint(0, 9)}.tar.gz"
        rule = "only the *.html and *.css files of site/ (at any depth), nothing else"
        cmd = (f"mkdir -p dist && find site -type f \\( -name '*.html' -o -name '*.css' \\) "
               f"| tar -czf {path} -T -")
    return TerminalTask(
        "make_tarball", 0, d,
        f"Create the gzip-compressed tar archive {path} containing {rule}. Member paths must "
        "start with site/ (e.g. site/index.html), keeping the directory structure.",
        files, checker(TAR_BODY, PATH=path, EXPECTED=keep), (cmd,),
        f"{path} with {len(keep)} files")


def _git_commit(rng: random.Random, d: int) -> TerminalTask:
    """Make project/ a git repo with one commit (d2: .gitignore *.log; d3: a second commit)."""
    mod, doc = rng.sample(WORDS, 2)
    files = {"project/README.md": f"# {mod.title()}\n\n{_sentence(rng, 6, 12)}\n",
             f"project/src/{mod}.py": f"def {mod}():\n    return {rng.randint(1, 999)!r}\n",
             f"project/docs/{doc}.txt": _sentence(rng, 5, 10) + "\n",
             "project/config.ini": f"[main]\nname = {mod}\nlevel = {rng.randint(1, 9)}\n"}
    tracked = {p[len("project/"):]: t for p, t in files.items()}
    if d >= 2:
        files.update({f"project/{rng.choice(WORDS)}.log": "debug output\n",
                      f"project/logs/{rng.choice(WORDS)}.log": "more output\n"})
        tracked[".gitignore"] = None  # any content that ignores *.log
    first = f"{rng.choice(('Add', 'Import', 'Start'))} the {mod} project"
    commit = f"cd project && git add -A && git {_GIT_ID} commit -q -m {shlex.quote(first)}"
    cmds = ["git -c init.defaultBranch=main init -q project"]
    cmds += ["printf '*.log\\n' > project/.gitignore"] if d >= 2 else []
    cmds.append(commit)
    how = (f"Make project/ a git repository (run git init in project/) and commit all of its "
           f"files in one commit with the message \"{first}\"")
    if d >= 2:
        how += (". The *.log files (at any depth) must not be committed: add a project/.gitignore "
                "that ignores them and commit the .gitignore too")
    messages, snapshots = [first], [("HEAD", tracked)]
    if d == 3:
        line, second = f"Maintainer: {rng.choice(WORDS)}", f"Name the {mod} maintainer"
        messages.insert(0, second)
        snapshots = [("HEAD~1", tracked), ("HEAD", {**tracked, "README.md": tracked["README.md"] + line + "\n"})]
        how += (f". Then append the line \"{line}\" to the end of project/README.md and commit that "
                f"change as a second commit with the message \"{second}\"")
        cmds.append(f"cd project && echo {shlex.quote(line)} >> README.md && git add README.md && "
                    f"git {_GIT_ID} commit -q -m {shlex.quote(second)}")
    return TerminalTask(
        "git_commit", 0, d,
        f"{how}. Afterwards the working tree must be clean (git status shows nothing). No git "
        "identity is configured; any author name and email will do.",
        files, checker(GIT_BODY, REPO="project", MESSAGES=messages, SNAPSHOTS=snapshots),
        tuple(cmds), f"project/ with {len(messages)} commit(s): {messages}")


TEMPLATES: dict[str, Callable[[random.Random, int], TerminalTask]] = {
    "count_matches": _count_matches,
    "fix_bug": _fix_bug,
    "sort_numbers": _sort_numbers,
    "find_token": _find_token,
    "csv_sum": _csv_sum,
    "rename_ext": _rename_ext,
    "json_extract": _json_extract,
    "dedupe_lines": _dedupe_lines,
    "word_report": _word_report,
    "make_tarball": _make_tarball,
    "git_commit": _git_commit,
}


def template_names() -> list[str]:
    """The template names, in registry order (the order `terminal_task_for_seed` cycles through)."""
    return list(TEMPLATES)


def _check_seed_and_difficulty(seed: object, difficulty: object) -> None:
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ConfigError(f"seed must be a non-negative integer, got {seed!r}; use e.g. seed=0")
    if isinstance(difficulty, bool) or not isinstance(difficulty, int) or difficulty not in DIFFICULTIES:
        raise ConfigError(f"difficulty must be one of {list(DIFFICULTIES)} (1 easy .. 3 hard), got {difficulty!r}")


def make_terminal_task(template: str, seed: int, difficulty: int = 1) -> TerminalTask:
    """Build one terminal task; the data comes from `random.Random(seed)`.

    Args:
        template: A name from `template_names()`.
        seed: Non-negative integer; the same (template, seed, difficulty) gives an equal task.
        difficulty: 1..3 (1 easy .. 3 hard); scales data size and adds traps.

    Returns:
        The task, with `template`, `seed` and `difficulty` filled in.

    Raises:
        ConfigError: Unknown template (the message lists the valid names), a seed that is
            not a non-negative int, or a difficulty outside 1..3.
    """
    if template not in TEMPLATES:
        raise ConfigError(f"unknown terminal template {template!r}; choose one of: {', '.join(TEMPLATES)}")
    _check_seed_and_difficulty(seed, difficulty)
    task = TEMPLATES[template](random.Random(seed), difficulty)
    return dataclasses.replace(task, template=template, seed=seed, difficulty=difficulty)


def terminal_task_for_seed(seed: int, difficulty: int = 1) -> TerminalTask:
    """The task for `seed`: template `template_names()[seed % n]`, data from the same seed.

    Raises:
        ConfigError: A seed that is not a non-negative int, or a difficulty outside 1..3.
    """
    _check_seed_and_difficulty(seed, difficulty)
    names = template_names()
    return make_terminal_task(names[seed % len(names)], seed, difficulty)
