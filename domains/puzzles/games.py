"""The chuk-puzzles-gym games this family wraps: per game, the question, the reference
answer, a parser of answer text and a rule checker of the parsed answer.

Each game is one `GameSpec` in `GAMES` (a table; the parsers and checks they share are the
helpers above it). A spec turns a generated package game into *facts*: the plain-JSON data
of the puzzle (givens, cages, clues, islands...) that the question shows and the checker
needs. The checker sees only those facts and the parsed answer, so a task rebuilt from the
store is scored without regenerating it, and without the package.

The checkers are this module's own: they test every rule the question states, never
equality with the package's stored solution. The package has no text verifier, and its
`is_complete()` compares with one stored solution although many puzzles have several (a
sudoku with few givens, an easy nonogram whose rows are all "1"); any valid answer must
pass. Where the package's stored solution breaks the rules it states (binary rows that
repeat, fillomino regions of the wrong size), `domain.PuzzleDomain`
moves on to the next candidate seed; it never serves a puzzle whose reference fails.

Traps (each handled here; see the spec's `note`):

- **slow helpers**: cryptarithmetic's generator checks uniqueness by trying every digit
  permutation (5-20 s per easy puzzle on this machine, minutes for hard), and rush hour's
  BFS builds a pydantic object per state (~1 s per medium puzzle). Both helpers are pure
  functions of the candidate puzzle, so `prepare` swaps them, on the game instance only,
  for equivalent fast ones (`crypt_solutions`, `rush_hour_path`): same results, same RNG
  draws, so the same puzzles (compared with the package's own helpers when written, and
  in tests/domains/test_puzzles.py).
- **fallbacks**: several generators give up after a number of tries and return a fixed
  puzzle (cryptarithmetic's AB + CD = EF for ~15% of easy seeds; `fallback` skips it) or
  a fixed solution (fillomino hard: `dropped_levels`). Games where that is the rule rather
  than the exception are not wrapped (`SKIPPED`: slither, hidato, star battle, hitori).
- **lossy boards**: killer's board shows cage targets where digits go and truncates its
  cage list, nonogram's misaligns its column clues, futoshiki's leaves the meaning of ^ and
  v unstated; the question replaces or adds that data (`board`, `extra`).
- **rules the package doesn't keep**: numberlink's stored solutions are blobs, not
  one-cell-wide paths, so the question states the rule that is checked (each number's
  cells form one connected region through both of its endpoints). Scheduler's "optimal"
  makespan is a greedy heuristic's; a schedule at least that short passes.
- **no stored solution**: sokoban stores none and rush hour only a move count; references
  come from this module's own searches (`sokoban_path`, `rush_hour_path`).

    spec = GAMES["sudoku"]
    facts = spec.facts(game)                  # game: a generated chuk-puzzles-gym game
    spec.check(facts, spec.parse(answer_text, facts))   # -> bool (parse gives None if unreadable)

Not covered: generation, seeds and scoring (`domains.puzzles.domain`); the games not
wrapped and why (`SKIPPED`).
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from itertools import product
from typing import Any

# The games of chuk-puzzles-gym 0.10.3 not wrapped, and why.
SKIPPED = {
    "kakuro": "generator bug: the stored solution breaks its own sum clues and no-repeat rule",
    "logic": "generator bug: clues such as 'drinks <a colour>'; the answer is under-determined",
    "einstein": "at most 12 random clues: the answer is massively under-determined",
    "nurikabe": "generator bug: the stored solution leaves white islands without a clue",
    "mastermind": "interactive (guess, feedback, guess...): nothing to deduce in one turn",
    "minesweeper": "interactive hidden-information game (reveal, flag): not single-turn",
    "slither": "degenerate: the stored loop is always the board's perimeter, so one answer fits every puzzle",
    "hidato": "degenerate: the path generator nearly always fails and falls back to the same serpentine path",
    "star_battle": "degenerate: the regions are fixed blocks, so every seed of a level poses the same puzzle",
    "hitori": "degenerate: the generator falls back to one fixed grid (1-3 distinct puzzles per level)",
}

MAX_INT_DIGITS = 6  # a number in an answer with more digits is unreadable (no int() of huge strings)

_INT = re.compile(r"-?\d+")
_LETTER = re.compile(r"[A-Za-z]")
KING = [(dr, dc) for dr in (-1, 0, 1) for dc in (-1, 0, 1) if dr or dc]
ORTH = [(-1, 0), (1, 0), (0, -1), (0, 1)]


# ---------------------------------------------------------------------------------------
# parsing: answer text -> plain Python values, or None if unreadable
# ---------------------------------------------------------------------------------------

def _content_lines(text: str) -> list[str]:
    """The non-blank lines of an answer, without Markdown fence lines (```...)."""
    return [ln for ln in text.splitlines() if ln.strip() and not ln.strip().startswith("```")]


def int_rows(text: str, digits_width: int = 0) -> list[list[int]] | None:
    """The numbers of each line that holds any (lines of separators such as '-----' are
    skipped), or None if a line holds a letter or a number over MAX_INT_DIGITS digits.
    With `digits_width`, a line that is one run of exactly that many digits is read digit
    by digit ("0110" -> 0 1 1 0: grids of one-digit values written without spaces)."""
    rows = []
    for line in _content_lines(text):
        if _LETTER.search(line):
            return None
        tokens = _INT.findall(line)
        if not tokens:
            continue
        if digits_width and len(tokens) == 1 and tokens[0].isdigit() and len(tokens[0]) == digits_width:
            tokens = list(tokens[0])
        if any(len(t.lstrip("-")) > MAX_INT_DIGITS for t in tokens):
            return None
        rows.append([int(t) for t in tokens])
    return rows


def parse_grid(text: str, facts: dict) -> list[list[int]] | None:
    """An n x n grid of numbers (n = facts["size"]), one row per line, or None."""
    n = facts["size"]
    rows = int_rows(text, digits_width=n if facts.get("single_digits") else 0)
    if rows is None or len(rows) != n or any(len(r) != n for r in rows):
        return None
    return rows


def parse_tuples(width: int) -> Callable[[str, dict], list[tuple[int, ...]] | None]:
    """A parser of answers that are lines of exactly `width` numbers each (at least one)."""

    def parse(text: str, facts: dict) -> list[tuple[int, ...]] | None:
        rows = int_rows(text)
        if not rows or any(len(r) != width for r in rows):
            return None
        return [tuple(r) for r in rows]

    return parse


def parse_numbers(text: str, facts: dict) -> list[int] | None:
    """Every number of the answer in order (one line or several), or None if none or a
    line holds a letter."""
    rows = int_rows(text)
    if not rows:
        return None
    return [x for row in rows for x in row]


# ---------------------------------------------------------------------------------------
# shared rule checks
# ---------------------------------------------------------------------------------------

def _cells(n: int) -> Iterable[tuple[int, int]]:
    return product(range(n), range(n))


def keeps_givens(grid: list[list[int]], givens: list[list[int]], empty: int = 0) -> bool:
    """Every given cell (value != empty) keeps its value."""
    return all(g == empty or v == g for grow, vrow in zip(givens, grid) for g, v in zip(grow, vrow))


def is_latin(grid: list[list[int]]) -> bool:
    """Every row and column of the n x n grid holds 1..n once each."""
    n, want = len(grid), set(range(1, len(grid) + 1))
    return all(set(row) == want for row in grid) and all({grid[r][c] for r in range(n)} == want for c in range(n))


def sudoku_ok(grid: list[list[int]]) -> bool:
    """A full 9x9 sudoku: rows, columns and 3x3 boxes hold 1..9 once each."""
    return is_latin(grid) and all(
        {grid[br + i][bc + j] for i in range(3) for j in range(3)} == set(range(1, 10))
        for br in (0, 3, 6) for bc in (0, 3, 6))


def connected(cells: set[tuple[int, int]], steps: list[tuple[int, int]] = ORTH) -> bool:
    """The cells form one connected group (an empty set is not)."""
    if not cells:
        return False
    start = next(iter(cells))
    seen, stack = {start}, [start]
    while stack:
        r, c = stack.pop()
        for dr, dc in steps:
            nxt = (r + dr, c + dc)
            if nxt in cells and nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return len(seen) == len(cells)


def components(grid: list[list[int]]) -> list[tuple[int, set[tuple[int, int]]]]:
    """(value, cells) of every orthogonally connected group of equal values."""
    n, seen, out = len(grid), set(), []
    for start in _cells(n):
        if start in seen:
            continue
        value, group, stack = grid[start[0]][start[1]], {start}, [start]
        while stack:
            r, c = stack.pop()
            for dr, dc in ORTH:
                x, y = r + dr, c + dc
                if 0 <= x < n and 0 <= y < n and (x, y) not in group and grid[x][y] == value:
                    group.add((x, y))
                    stack.append((x, y))
        seen |= group
        out.append((value, group))
    return out


def visible(line: list[int]) -> int:
    """How many buildings of `line` are seen from its start (taller hides shorter)."""
    count, top = 0, 0
    for h in line:
        if h > top:
            count, top = count + 1, h
    return count


def runs(line: list[int]) -> list[int]:
    """Lengths of the runs of 1s in a 0/1 line."""
    return [len(m) for m in "".join(map(str, line)).split("0") if m]


def cell_set(cells: list[tuple[int, ...]], n: int) -> set[tuple[int, int]] | None:
    """1-indexed (row, col) pairs as a set of 0-indexed cells; None if one is off the
    board or repeats."""
    out = {(r - 1, c - 1) for r, c in cells}
    if len(out) != len(cells) or not all(0 <= r < n and 0 <= c < n for r, c in out):
        return None
    return out


def none_touch(cells: set[tuple[int, int]]) -> bool:
    """No two cells touch, not even diagonally."""
    return not any((r + dr, c + dc) in cells for r, c in cells for dr, dc in KING)


def binary_grid(grid: list[list[int]]) -> bool:
    return all(v in (0, 1) for row in grid for v in row)


# ---------------------------------------------------------------------------------------
# per-game checks: check(facts, parsed) -> bool; parsed is never None here
# ---------------------------------------------------------------------------------------

def check_sudoku(f: dict, grid: list[list[int]]) -> bool:
    return keeps_givens(grid, f["givens"]) and sudoku_ok(grid)


def check_binary(f: dict, grid: list[list[int]]) -> bool:
    n = f["size"]
    if not binary_grid(grid) or not keeps_givens(grid, f["givens"], empty=-1):
        return False
    lines = [list(row) for row in grid] + [[grid[r][c] for r in range(n)] for c in range(n)]
    return (all(line.count(1) == n // 2 for line in lines)
            and not any(line[i] == line[i + 1] == line[i + 2] for line in lines for i in range(n - 2))
            and len({tuple(line) for line in lines[:n]}) == n and len({tuple(line) for line in lines[n:]}) == n)


def check_futoshiki(f: dict, grid: list[list[int]]) -> bool:
    return (keeps_givens(grid, f["givens"]) and is_latin(grid)
            and all(grid[a][b] > grid[c][d] for a, b, c, d in f["greater"]))


def check_skyscrapers(f: dict, grid: list[list[int]]) -> bool:
    if not (keeps_givens(grid, f["givens"]) and is_latin(grid)):
        return False
    n, clues = f["size"], f["clues"]
    cols = [[grid[r][c] for r in range(n)] for c in range(n)]
    views = {"left": grid, "right": [row[::-1] for row in grid], "top": cols, "bottom": [col[::-1] for col in cols]}
    return all(not clue or visible(line) == clue
               for side, lines in views.items() for clue, line in zip(clues[side], lines))


def check_numberlink(f: dict, grid: list[list[int]]) -> bool:
    n, pairs = f["size"], f["pairs"]
    if not keeps_givens(grid, f["givens"]) or not all(1 <= v <= pairs for row in grid for v in row):
        return False
    cells: dict[int, set] = {}
    for r, c in _cells(n):
        cells.setdefault(grid[r][c], set()).add((r, c))
    return all(connected(cells.get(v, set())) for v in range(1, pairs + 1))  # endpoints: kept givens


def check_nonogram(f: dict, grid: list[list[int]]) -> bool:
    n = f["size"]
    return (binary_grid(grid)
            and all(runs(grid[r]) == [x for x in f["rows"][r] if x] for r in range(n))
            and all(runs([grid[r][c] for r in range(n)]) == [x for x in f["cols"][c] if x] for c in range(n)))


def _cage_value_ok(values: list[int], op: str, target: int) -> bool:
    if op == "+":
        return sum(values) == target
    if op == "*":
        prod = 1
        for v in values:
            prod *= v
        return prod == target
    if op == "-":
        return len(values) == 2 and abs(values[0] - values[1]) == target
    if op == "/":
        lo, hi = sorted(values) if len(values) == 2 else (0, 0)
        return lo > 0 and hi == lo * target
    return len(values) == 1 and values[0] == target  # "": a one-cell cage


def check_kenken(f: dict, grid: list[list[int]]) -> bool:
    return is_latin(grid) and all(
        _cage_value_ok([grid[r][c] for r, c in cage["cells"]], cage["op"], cage["target"]) for cage in f["cages"])


def check_killer(f: dict, grid: list[list[int]]) -> bool:
    if not (keeps_givens(grid, f["givens"]) and sudoku_ok(grid)):
        return False
    for cage in f["cages"]:
        values = [grid[r][c] for r, c in cage["cells"]]
        if sum(values) != cage["target"] or len(set(values)) != len(values):
            return False
    return True


def check_fillomino(f: dict, grid: list[list[int]]) -> bool:
    return (keeps_givens(grid, f["givens"]) and all(v >= 1 for row in grid for v in row)
            and all(len(group) == value for value, group in components(grid)))


def check_lights(f: dict, presses: list[tuple[int, ...]]) -> bool:
    n, lights = f["size"], [row[:] for row in f["lights"]]
    for r, c in presses:
        if not (1 <= r <= n and 1 <= c <= n):
            return False
        for dr, dc in [(0, 0)] + ORTH:
            x, y = r - 1 + dr, c - 1 + dc
            if 0 <= x < n and 0 <= y < n:
                lights[x][y] ^= 1
    return not any(v for row in lights for v in row)


def check_shikaku(f: dict, rects: list[tuple[int, ...]]) -> bool:
    n, clues = f["size"], {(r, c): area for r, c, area in f["clues"]}
    covered: set[tuple[int, int]] = set()
    for r1, c1, r2, c2 in rects:
        if not (1 <= r1 <= r2 <= n and 1 <= c1 <= c2 <= n):
            return False
        cells = {(r, c) for r in range(r1 - 1, r2) for c in range(c1 - 1, c2)}
        inside = [clues[p] for p in cells if p in clues]
        if covered & cells or len(inside) != 1 or inside[0] != len(cells):
            return False
        covered |= cells
    return len(covered) == n * n


def check_tents(f: dict, cells: list[tuple[int, ...]]) -> bool:
    n, trees = f["size"], {tuple(t) for t in f["trees"]}
    tents = cell_set(cells, n)
    if tents is None or tents & trees or not none_touch(tents):
        return False
    if [sum(1 for r, _ in tents if r == i) for i in range(n)] != f["rows"]:
        return False
    if [sum(1 for _, c in tents if c == i) for i in range(n)] != f["cols"]:
        return False

    def adjacent(cell, others):
        return sum((cell[0] + dr, cell[1] + dc) in others for dr, dc in ORTH)

    return all(adjacent(t, tents) == 1 for t in trees) and all(adjacent(t, trees) == 1 for t in tents)


def check_nqueens(f: dict, grid: list[list[int]]) -> bool:
    n = f["size"]
    queens = [(r, c) for r, c in _cells(n) if grid[r][c] == 1]
    return (binary_grid(grid) and keeps_givens(grid, f["givens"]) and len(queens) == n
            and all(len({key(r, c) for r, c in queens}) == n
                    for key in (lambda r, c: r, lambda r, c: c, lambda r, c: r - c, lambda r, c: r + c)))


def check_graph_coloring(f: dict, colors: list[int]) -> bool:
    if len(colors) != f["nodes"] or not all(1 <= x <= f["colors"] for x in colors):
        return False
    return (all(colors[node - 1] == color for node, color in f["given"])
            and all(colors[a - 1] != colors[b - 1] for a, b in f["edges"]))


def check_knapsack(f: dict, chosen: list[int]) -> bool:
    items = f["items"]
    if len(set(chosen)) != len(chosen) or not all(1 <= i <= len(items) for i in chosen):
        return False
    weight = sum(items[i - 1][0] for i in chosen)
    value = sum(items[i - 1][1] for i in chosen)
    return weight <= f["capacity"] and value == f["optimum"]


def knapsack_optimum(items: list[list[int]], capacity: int) -> int:
    """The best total value of items (weight, value) within capacity (0/1 knapsack DP)."""
    best = [0] * (capacity + 1)
    for weight, value in items:
        for cap in range(capacity, weight - 1, -1):
            best[cap] = max(best[cap], best[cap - weight] + value)
    return best[capacity]


def check_bridges(f: dict, lines: list[tuple[int, ...]]) -> bool:
    need = {(r, c): k for r, c, k in f["islands"]}
    have = dict.fromkeys(need, 0)
    pairs, links = set(), {p: set() for p in need}
    horizontal, vertical = set(), set()  # cells under bridges
    for r1, c1, r2, c2, count in lines:
        a, b = (r1 - 1, c1 - 1), (r2 - 1, c2 - 1)
        if a not in need or b not in need or a == b or count not in (1, 2) or (a[0] != b[0] and a[1] != b[1]):
            return False
        key = (min(a, b), max(a, b))
        if key in pairs:
            return False
        pairs.add(key)
        (r1, c1), (r2, c2) = key
        between = ({(r1, c) for c in range(c1 + 1, c2)} if r1 == r2 else {(r, c1) for r in range(r1 + 1, r2)})
        if between & need.keys():
            return False
        (horizontal if r1 == r2 else vertical).update(between)
        have[a], have[b] = have[a] + count, have[b] + count
        links[a].add(b)
        links[b].add(a)
    if horizontal & vertical or have != need:
        return False
    start = next(iter(need))
    seen, stack = {start}, [start]
    while stack:
        for nxt in links[stack.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return len(seen) == len(need)


def check_scheduler(f: dict, lines: list[tuple[int, ...]]) -> bool:
    durations, workers = f["durations"], f["workers"]
    start: dict[int, tuple[int, int]] = {}
    for task, worker, at in lines:
        if not (1 <= task <= len(durations)) or task - 1 in start or not (1 <= worker <= workers) or at < 0:
            return False
        start[task - 1] = (worker, at)
    if len(start) != len(durations):
        return False
    if any(start[b][1] < start[a][1] + durations[a] for a, b in f["deps"]):
        return False
    for w in range(1, workers + 1):
        spans = sorted((at, at + durations[t]) for t, (worker, at) in start.items() if worker == w)
        if any(spans[i][1] > spans[i + 1][0] for i in range(len(spans) - 1)):
            return False
    return max(at + durations[t] for t, (_, at) in start.items()) <= f["makespan"]


_ASSIGNMENT = re.compile(r"([A-Za-z])\s*(?:=|:|->|\u2192)\s*(-?\d+)")
_CRYPT_FILLER = re.compile(r"[\s,;]*")


def parse_crypt(text: str, facts: dict) -> dict[str, int] | None:
    """'A=1 B=2' (or 'A: 1', one a line, separated by commas) as {letter: digit}; None if
    anything else is written between the pairs or a letter is given twice."""
    body = "\n".join(_content_lines(text))
    if not body or _CRYPT_FILLER.fullmatch(_ASSIGNMENT.sub("", body)) is None:
        return None
    out: dict[str, int] = {}
    for letter, digit in _ASSIGNMENT.findall(body):
        if letter.upper() in out or len(digit.lstrip("-")) > 2:
            return None
        out[letter.upper()] = int(digit)
    return out


def check_crypt(f: dict, mapping: dict[str, int]) -> bool:
    if set(mapping) != set(f["letters"]) or len(set(mapping.values())) != len(mapping):
        return False
    if not all(0 <= d <= 9 for d in mapping.values()) or any(mapping[w[0]] == 0 for w in f["operands"] + [f["result"]]):
        return False
    if any(mapping[letter] != digit for letter, digit in f["given"]):
        return False

    def value(word: str) -> int:
        return int("".join(str(mapping[ch]) for ch in word))

    return sum(value(w) for w in f["operands"]) == value(f["result"])


_MOVE_WORD = re.compile(r"([A-Za-z])\s+(up|down|left|right)", re.IGNORECASE)
_MOVE_SPLIT = re.compile(r"[\n,;]+")


def parse_rush_moves(text: str, facts: dict) -> list[tuple[str, str]] | None:
    """'<vehicle> <direction>' moves, one a line (or separated by commas), or None if a
    piece is anything else."""
    out = []
    for piece in _MOVE_SPLIT.split("\n".join(_content_lines(text))):
        piece = piece.strip().strip(".")
        if not piece:
            continue
        m = _MOVE_WORD.fullmatch(piece)
        if m is None:
            return None
        out.append((m.group(1), m.group(2).lower()))
    return out or None


_STEP = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}


def check_rush_hour(f: dict, moves: list[tuple[str, str]]) -> bool:
    n = f["size"]
    vehicles = {vid: [row, col, length, orient] for vid, row, col, length, orient in f["vehicles"]}
    occupied = {}
    for vid, (row, col, length, orient) in vehicles.items():
        for i in range(length):
            occupied[(row, col + i) if orient == "h" else (row + i, col)] = vid
    for vid, direction in moves:
        vid = vid if vid in vehicles else vid.upper()
        if vid not in vehicles:
            return False
        row, col, length, orient = vehicles[vid]
        if (orient == "h") != (direction in ("left", "right")):
            return False
        dr, dc = _STEP[direction]
        cells = [(row + dr, col + dc + i) if orient == "h" else (row + dr + i, col + dc) for i in range(length)]
        if not all(0 <= r < n and 0 <= c < n and occupied.get((r, c), vid) == vid for r, c in cells):
            return False
        for i in range(length):
            del occupied[(row, col + i) if orient == "h" else (row + i, col)]
        for cell in cells:
            occupied[cell] = vid
        vehicles[vid] = [row + dr, col + dc, length, orient]
    row, col, length, _ = vehicles["X"]
    return col + length - 1 == n - 1


def rush_hour_path(size: int, vehicles: list[tuple[str, int, int, int, str]], max_moves: int = 60
                   ) -> list[tuple[str, str]] | None:
    """A shortest list of one-cell moves that brings X to the right edge, found by BFS
    over positions; None if none within `max_moves` (the package's own BFS limit)."""
    # a state is the tuple of each vehicle's moving coordinate (column if horizontal, row if
    # vertical); cells are bits of an int (bit r * size + c)
    ids = [v[0] for v in vehicles]
    lengths = [v[3] for v in vehicles]
    bit = [[(1 << (v[1] * size + k)) if v[4] == "h" else (1 << (k * size + v[2])) for k in range(size)]
           for v in vehicles]  # bit[i][k]: the cell at coordinate k of vehicle i's line
    body = [[sum(bit[i][p + k] for k in range(lengths[i])) for p in range(size - lengths[i] + 1)]
            for i in range(len(vehicles))]
    names = [("left", "right") if v[4] == "h" else ("up", "down") for v in vehicles]
    start = tuple(v[2] if v[4] == "h" else v[1] for v in vehicles)
    xi = ids.index("X")
    goal = size - lengths[xi]
    parent: dict[tuple, tuple | None] = {start: None}
    frontier, depth = [start], 0
    while frontier:
        nxt_frontier = []
        for state in frontier:
            if state[xi] == goal:
                path = []
                while parent[state] is not None:
                    state, move = parent[state]
                    path.append(move)
                return path[::-1]
            if depth >= max_moves:
                continue
            occupied = 0
            for i, pos in enumerate(state):
                occupied |= body[i][pos]
            for i, pos in enumerate(state):
                if pos > 0 and not occupied & bit[i][pos - 1]:
                    new = state[:i] + (pos - 1,) + state[i + 1:]
                    if new not in parent:
                        parent[new] = (state, (ids[i], names[i][0]))
                        nxt_frontier.append(new)
                end = pos + lengths[i]
                if end < size and not occupied & bit[i][end]:
                    new = state[:i] + (pos + 1,) + state[i + 1:]
                    if new not in parent:
                        parent[new] = (state, (ids[i], names[i][1]))
                        nxt_frontier.append(new)
        frontier, depth = nxt_frontier, depth + 1
    return None


_SOKOBAN_MOVES = {"U": (-1, 0), "D": (1, 0), "L": (0, -1), "R": (0, 1)}
_SOKOBAN_TEXT = re.compile(r"[UDLRudlr\s,]+")


def parse_sokoban(text: str, facts: dict) -> list[str] | None:
    """The letters U, D, L, R (either case; spaces and commas between them are ignored),
    or None if anything else is written."""
    body = "".join(_content_lines(text))
    if not body or not _SOKOBAN_TEXT.fullmatch(body):
        return None
    moves = [ch.upper() for ch in body if ch.upper() in _SOKOBAN_MOVES]
    return moves or None


def check_sokoban(f: dict, moves: list[str]) -> bool:
    walls = {tuple(w) for w in f["walls"]}
    boxes = {tuple(b) for b in f["boxes"]}
    player = tuple(f["player"])
    for move in moves:
        dr, dc = _SOKOBAN_MOVES[move]
        nxt = (player[0] + dr, player[1] + dc)
        if nxt in walls:
            return False
        if nxt in boxes:
            beyond = (nxt[0] + dr, nxt[1] + dc)
            if beyond in walls or beyond in boxes:
                return False
            boxes.remove(nxt)
            boxes.add(beyond)
        player = nxt
    return boxes == {tuple(g) for g in f["goals"]}


def sokoban_path(f: dict, limit: int = 200_000) -> str | None:
    """Moves (U/D/L/R) that put every box on a goal, by best-first search over (player,
    boxes) states with a box-to-goal distance heuristic; None if not found in `limit`
    states. Not always the shortest."""
    walls = {tuple(w) for w in f["walls"]}
    goals = frozenset(tuple(g) for g in f["goals"])
    boxes = frozenset(tuple(b) for b in f["boxes"])

    def h(bx):
        return sum(min(abs(a - x) + abs(b - y) for x, y in goals) for a, b in bx)

    start = (tuple(f["player"]), boxes)
    queue, seen, count = [(h(boxes), 0, start, "")], {start}, 0
    while queue and count < limit:
        _, _, (player, bx), path = heapq.heappop(queue)
        if bx == goals:
            return path
        for name, (dr, dc) in _SOKOBAN_MOVES.items():
            nxt = (player[0] + dr, player[1] + dc)
            if nxt in walls:
                continue
            new_boxes = bx
            if nxt in bx:
                beyond = (nxt[0] + dr, nxt[1] + dc)
                if beyond in walls or beyond in bx:
                    continue
                new_boxes = (bx - {nxt}) | {beyond}
            state = (nxt, new_boxes)
            if state not in seen:
                seen.add(state)
                count += 1
                heapq.heappush(queue, (h(new_boxes) + len(path) // 4, count, state, path + name))
    return None


def crypt_solutions(letters: list[str], leading: Iterable[str], operands: list[str], result: str,
                    cap: int = 2) -> list[dict[str, int]]:
    """Up to `cap` assignments of distinct digits to `letters` (no leading zeros) with
    sum(operands) == result, found column by column from the right."""
    width = len(result)
    if any(len(w) > width for w in operands) or len(letters) > 10:
        return []
    leading = set(leading)
    columns = [([w[-1 - i] for w in operands if i < len(w)], result[-1 - i]) for i in range(width)]
    assign: dict[str, int] = {}
    used = [False] * 10
    found: list[dict[str, int]] = []

    def allowed(letter: str, digit: int) -> bool:
        return not used[digit] and not (digit == 0 and letter in leading)

    def column(i: int, carry: int, pending: list[str]) -> None:
        if len(found) >= cap:
            return
        if i == width:
            if carry == 0:
                found.append({ch: assign[ch] for ch in letters})
            return
        adds, res = columns[i]
        if pending:  # assign this column's addend letters first
            letter, rest = pending[0], pending[1:]
            if letter in assign:
                column(i, carry, rest)
                return
            for digit in range(10):
                if allowed(letter, digit):
                    assign[letter], used[digit] = digit, True
                    column(i, carry, rest)
                    del assign[letter]
                    used[digit] = False
            return
        total = carry + sum(assign[ch] for ch in adds)
        digit = total % 10
        if res in assign:
            if assign[res] == digit:
                column(i + 1, total // 10, list(dict.fromkeys(columns[i + 1][0])) if i + 1 < width else [])
        elif allowed(res, digit):
            assign[res], used[digit] = digit, True
            column(i + 1, total // 10, list(dict.fromkeys(columns[i + 1][0])) if i + 1 < width else [])
            del assign[res]
            used[digit] = False

    column(0, 0, list(dict.fromkeys(columns[0][0])) if width else [])
    return found


# ---------------------------------------------------------------------------------------
# facts: a generated game -> the plain-JSON data of its puzzle
# ---------------------------------------------------------------------------------------

def _grid(rows) -> list[list[int]]:
    return [[int(v) for v in row] for row in rows]


def _rows_text(rows) -> str:
    return "\n".join(" ".join(str(v) for v in row) for row in rows)


def _cells_text(cells) -> str:
    return "\n".join(f"{r + 1} {c + 1}" for r, c in sorted(cells))


def _vehicle_rows(g) -> list[list]:
    return [[vid, v.row, v.col, v.length, v.orientation] for vid, v in sorted(g.vehicles.items())]


def _shikaku_reference(g) -> str:
    boxes: dict[int, list[int]] = {}
    for r, row in enumerate(g.solution):
        for c, i in enumerate(row):
            box = boxes.setdefault(i, [r, c, r, c])
            box[:] = [min(box[0], r), min(box[1], c), max(box[2], r), max(box[3], c)]
    return "\n".join(" ".join(str(x + 1) for x in box) for box in sorted(boxes.values()))


def _sokoban_facts(g) -> dict:
    n, grid = g.size, g.grid
    cells = list(_cells(n))
    return {"size": n, "walls": [[r, c] for r, c in cells if grid[r][c] == 1],
            "boxes": [[r, c] for r, c in cells if grid[r][c] in (2, 5)],
            "goals": sorted([int(r), int(c)] for r, c in g.goals), "player": list(g.player_pos)}


def _crypt_facts(g) -> dict:
    return {"operands": list(g.operands), "result": g.result_word, "letters": sorted(g.letters),
            "given": sorted([k, int(v)] for k, v in g.initial_mapping.items())}


def _killer_board(g) -> str:
    cages = "\n".join(f"  sum {cage.target}: " + ", ".join(f"({r + 1},{c + 1})" for r, c in cage.cells)
                      for cage in g.cages)
    return ("The 9x9 grid starts empty. The cages (cells as (row,col), 1-indexed; the digits of a cage sum "
            f"to its target):\n{cages}")


def _nonogram_rules(g) -> str:  # without the package's "-1 = unknown" cell marks (not an answer value)
    return "\n".join(ln for ln in g.get_rules().splitlines() if not ln.lstrip("- ").startswith("Mark cells as"))


def _nonogram_board(g) -> str:
    def clue(c):
        return " ".join(map(str, c))
    return ("Row clues, top to bottom:\n" + "\n".join(f"  row {i + 1}: {clue(c)}" for i, c in enumerate(g.row_clues))
            + "\nColumn clues, left to right:\n"
            + "\n".join(f"  column {i + 1}: {clue(c)}" for i, c in enumerate(g.col_clues)))


def _futoshiki_extra(g) -> str:
    return "The inequalities (row,col 1-indexed):\n" + "\n".join(
        f"  ({a + 1},{b + 1}) > ({c + 1},{d + 1})" for (a, b), (c, d) in sorted(g.inequalities))


NUMBERLINK_RULES = (
    "NUMBERLINK RULES:\n"
    "- Fill every cell of the grid with one of the pair numbers\n"
    "- The two given cells of each number are its endpoints and keep their number\n"
    "- The cells of each number must form one connected region (cells joined horizontally or\n"
    "  vertically) that contains both of its endpoints; a region may be wider than one cell")


# ---------------------------------------------------------------------------------------
# the table
# ---------------------------------------------------------------------------------------

GRID_FORMAT = "The completely filled grid: one row per line, the values separated by spaces."
CELLS_FORMAT = "One cell per line as '<row> <col>' (1-indexed, row 1 at the top)."


@dataclass(frozen=True)
class GameSpec:
    """How one chuk-puzzles-gym game becomes a single-turn task.

    Attributes:
        key: The game's key in the package's `AVAILABLE_GAMES` ("sudoku").
        description: One line for the catalogue.
        answer_format: The ANSWER FORMAT block of the question.
        facts: game -> the puzzle's plain-JSON data; always holds "size" where the
            puzzle is a square board.
        reference: game -> the reference answer text, or None where none was found (the
            domain then moves on to the next candidate seed).
        parse: (answer text, facts) -> the parsed answer, or None if unreadable.
        check: (facts, parsed answer) -> True if every rule of the puzzle holds.
        board: game -> the board text, where the package's `render_grid` is replaced.
        extra: game -> data the board leaves out, added after it.
        rules: game -> the rules text, where the package's `get_rules` is replaced.
        prepare: game -> None, run before `generate_puzzle` (swaps in fast helpers).
        fallback: game -> True where the generator gave up and returned its fixed
            fallback puzzle (the domain moves on to the next candidate seed).
        dropped_levels: The package's levels left out -> why (generation over 1 s per
            task, or a level whose answer is all but constant).
        note: What the checker tests beyond the obvious, and traps of the package.
    """

    key: str
    description: str
    answer_format: str
    facts: Callable[[Any], dict]
    reference: Callable[[Any], str | None]
    parse: Callable[[str, dict], Any]
    check: Callable[[dict, Any], bool]
    board: Callable[[Any], str] | None = None
    extra: Callable[[Any], str] | None = None
    rules: Callable[[Any], str] | None = None
    prepare: Callable[[Any], None] | None = None
    fallback: Callable[[Any], bool] | None = None
    dropped_levels: dict[str, str] = field(default_factory=dict)
    note: str = ""

    def question(self, g: Any) -> str:
        """The question: the package's name, description, rules and board, the data the
        board leaves out, then the answer format."""
        parts = [f"{g.name}: {g.description}", self.rules(g) if self.rules else g.get_rules(),
                 self.board(g) if self.board else g.render_grid()]
        if self.extra:
            parts.append(self.extra(g))
        parts.append("ANSWER FORMAT:\n" + self.answer_format)
        return "\n\n".join(p.strip("\n") for p in parts)


def _rush_prepare(g) -> None:
    def solve_bfs():
        path = rush_hour_path(g.size, [tuple(v) for v in _vehicle_rows(g)])
        return None if path is None else len(path)
    g._solve_bfs = solve_bfs  # the instance only; same result as the package's BFS, faster


def _crypt_prepare(g) -> None:
    def verify(letters, leading, operands, result_word):
        found = crypt_solutions(letters, leading, operands, result_word, cap=2)
        return found[0] if len(found) == 1 else None
    g._verify_unique_solution = verify  # the instance only; same result as the brute force, faster


def _grid_facts(givens_attr: str = "initial_grid", single_digits: bool = True) -> Callable[[Any], dict]:
    def facts(g) -> dict:
        givens = _grid(getattr(g, givens_attr))
        return {"size": len(givens), "givens": givens, "single_digits": single_digits}
    return facts


def _spec(key: str, description: str, **kw: Any) -> GameSpec:
    return GameSpec(key=key, description=description, **kw)


_SPECS = [
    _spec("sudoku", "Classic 9x9 sudoku; any grid that keeps the givens and the rules passes.",
          answer_format=GRID_FORMAT, facts=_grid_facts(), reference=lambda g: _rows_text(g.solution),
          parse=parse_grid, check=check_sudoku,
          note="the package removes cells without a uniqueness check: every valid completion passes"),
    _spec("binary", "Binary puzzle (takuzu): 0/1 grid, no three in a line, balanced, unique rows and columns.",
          answer_format=GRID_FORMAT,
          facts=lambda g: {"size": g.size, "givens": _grid(g.initial_grid), "single_digits": True},
          reference=lambda g: _rows_text(g.solution), parse=parse_grid, check=check_binary,
          note="the stored solution may repeat a row or column (the stated rules forbid it): such seeds are skipped"),
    _spec("futoshiki", "Futoshiki: a Latin square with inequality signs between cells.",
          answer_format=GRID_FORMAT,
          facts=lambda g: {"size": g.size, "givens": _grid(g.initial_grid), "single_digits": True,
                           "greater": sorted([a, b, c, d] for (a, b), (c, d) in g.inequalities)},
          reference=lambda g: _rows_text(g.solution), parse=parse_grid, check=check_futoshiki,
          extra=_futoshiki_extra, note="the question lists every inequality (the board's ^ and v are unexplained)"),
    _spec("skyscrapers", "Skyscrapers: a Latin square of heights with visibility clues on the border.",
          answer_format=GRID_FORMAT,
          facts=lambda g: {"size": g.size, "givens": _grid(g.initial_grid), "single_digits": True,
                           "clues": {k: [int(x) for x in v] for k, v in sorted(g.clues.items())}},
          reference=lambda g: _rows_text(g.solution), parse=parse_grid, check=check_skyscrapers),
    _spec("numberlink", "Numberlink (region form): connect each pair of numbers with a connected region.",
          answer_format=GRID_FORMAT,
          facts=lambda g: {"size": g.size, "givens": _grid(g.initial_grid), "pairs": g.num_pairs,
                           "single_digits": g.num_pairs < 10},
          reference=lambda g: _rows_text(g.solution), parse=parse_grid, check=check_numberlink,
          rules=lambda g: NUMBERLINK_RULES,
          note="the stored solutions are blobs, not one-cell-wide paths: the question states the region rule checked"),
    _spec("nonogram", "Nonogram: fill cells so the runs of each row and column match the clues.",
          answer_format="The completed grid: one row per line, 1 = filled and 0 = empty, separated by spaces.",
          facts=lambda g: {"size": g.size, "rows": [list(c) for c in g.row_clues],
                           "cols": [list(c) for c in g.col_clues], "single_digits": True},
          reference=lambda g: _rows_text(g.solution), parse=parse_grid, check=check_nonogram,
          board=_nonogram_board, rules=_nonogram_rules,
          note="the board's column clues are misaligned: the question lists the clues instead"),
    _spec("kenken", "KenKen: a Latin square whose cages meet arithmetic targets.",
          answer_format=GRID_FORMAT,
          facts=lambda g: {"size": g.size, "single_digits": True, "cages": [
              {"cells": [list(cell) for cell in cage.cells], "op": cage.operation.value if cage.operation else "",
               "target": cage.target} for cage in g.cages]},
          reference=lambda g: _rows_text(g.solution), parse=parse_grid, check=check_kenken),
    _spec("killer", "Killer sudoku: sudoku with cages whose digits sum to targets, no repeats in a cage.",
          answer_format=GRID_FORMAT,
          facts=lambda g: {"size": 9, "givens": _grid(g.initial_grid), "single_digits": True,
                           "cages": [{"cells": [list(cell) for cell in cage.cells], "target": cage.target}
                                     for cage in g.cages]},
          reference=lambda g: _rows_text(g.solution), parse=parse_grid, check=check_killer, board=_killer_board,
          note="the board shows cage targets where digits go and truncates its cage list: the question lists "
               "the cages instead"),
    _spec("fillomino", "Fillomino: divide the grid into regions whose number is their size.",
          answer_format=GRID_FORMAT, facts=_grid_facts(single_digits=False),
          reference=lambda g: _rows_text(g.solution), parse=parse_grid, check=check_fillomino,
          dropped_levels={"hard": "the generator nearly always falls back to one fixed fill: the answer is all but "
                                  "constant (2 distinct answers in 15 seeds)"},
          note="at medium the stored solution is often an invalid fallback fill: such seeds are skipped"),
    _spec("lights", "Lights Out: press cells (each toggles itself and its neighbours) until every light is off.",
          answer_format="The cells to press, one per line as '<row> <col>' (1-indexed). Order does not matter.",
          facts=lambda g: {"size": g.size, "lights": _grid(g.initial_grid)},
          reference=lambda g: _cells_text((r, c) for r, c in _cells(g.size) if g.presses[r][c] % 2),
          parse=parse_tuples(2), check=check_lights,
          note="the stored 'solution' is the all-off board; the reference is the generator's own presses"),
    _spec("shikaku", "Shikaku: divide the grid into rectangles, each holding one number equal to its area.",
          answer_format=("One rectangle per line: '<top_row> <left_col> <bottom_row> <right_col>' "
                         "(1-indexed, corners included)."),
          facts=lambda g: {"size": g.size, "clues": sorted([r, c, int(a)] for (r, c), a in g.clues.items())},
          reference=_shikaku_reference, parse=parse_tuples(4), check=check_shikaku),
    _spec("tents", "Tents and trees: place one tent by each tree, tents apart, with row and column counts.",
          answer_format="The tents, one per line as '<row> <col>' (1-indexed, row 1 at the top).",
          facts=lambda g: {"size": g.size, "trees": [[r, c] for r, c in _cells(g.size) if g.trees[r][c]],
                           "rows": list(g.row_counts), "cols": list(g.col_counts)},
          reference=lambda g: _cells_text((r, c) for r, c in _cells(g.size) if g.solution[r][c] == 2),
          parse=parse_tuples(2), check=check_tents,
          note="checked as the package states it: each tree has exactly one tent beside it and each tent one tree"),
    _spec("nqueens", "N-queens: complete a board of n non-attacking queens around pre-placed ones.",
          answer_format="The full board: one row per line, 1 = queen and 0 = empty, separated by spaces.",
          facts=lambda g: {"size": g.size, "givens": _grid(g.initial_grid), "single_digits": True},
          reference=lambda g: _rows_text(g.solution), parse=parse_grid, check=check_nqueens),
    _spec("graph_coloring", "Graph colouring: colour the nodes so that no edge joins two equal colours.",
          answer_format="The colour number of every node in node order 1..N, separated by spaces, on one line.",
          facts=lambda g: {"nodes": g.num_nodes, "colors": g.num_colors,
                           "edges": sorted([min(a, b), max(a, b)] for a, b in g.edges),
                           "given": sorted([int(k), int(v)] for k, v in g.initial_coloring.items())},
          reference=lambda g: " ".join(str(g.solution[i]) for i in range(1, g.num_nodes + 1)),
          parse=parse_numbers, check=check_graph_coloring),
    _spec("knapsack", "0/1 knapsack: choose items of the best total value within the weight limit.",
          answer_format="The numbers of the selected items, separated by spaces, on one line.",
          facts=lambda g: {"items": [[it.weight, it.value] for it in g.items], "capacity": g.capacity,
                           "optimum": knapsack_optimum([[it.weight, it.value] for it in g.items], g.capacity)},
          reference=lambda g: (" ".join(str(i + 1) for i, s in enumerate(g.optimal_selection) if s)
                               if g.optimal_value == knapsack_optimum([[it.weight, it.value] for it in g.items],
                                                                      g.capacity) else None),
          parse=parse_numbers, check=check_knapsack,
          note="the optimum is this module's own DP (seeds where the package's stated optimum differs are skipped)"),
    _spec("rush_hour", "Rush hour: slide the vehicles one cell at a time until car X reaches the right edge.",
          answer_format=("One move per line: '<vehicle> <direction>' with direction up, down, left or right; "
                         "each move slides that vehicle one cell."),
          facts=lambda g: {"size": g.size, "exit_row": g.exit_row, "vehicles": _vehicle_rows(g)},
          reference=lambda g: (None if (p := rush_hour_path(g.size, [tuple(v) for v in _vehicle_rows(g)])) is None
                               else "\n".join(f"{v} {d}" for v, d in p)),
          parse=parse_rush_moves, check=check_rush_hour, prepare=_rush_prepare,
          dropped_levels={"hard": "generation takes 1-2 s per task (a BFS per candidate layout, 100 layouts)"},
          note="any legal sequence that ends with X at the right edge passes; reference: own BFS (shortest)"),
    _spec("sokoban", "Sokoban: walk the player to push every box onto a goal.",
          answer_format=("The player's moves as letters U (up), D (down), L (left), R (right) on one line, "
                         "e.g. RRUL; walking into a wall or pushing a box into a wall or box is not allowed."),
          facts=_sokoban_facts, reference=lambda g: sokoban_path(_sokoban_facts(g)),
          parse=parse_sokoban, check=check_sokoban,
          note="the package stores no solution: reference by own best-first search"),
    _spec("bridges", "Bridges (hashiwokakero): join the islands with bridges to meet their counts, all connected.",
          answer_format=("One bridge per line: '<r1> <c1> <r2> <c2> <count>' (1-indexed coordinates of the two "
                         "islands, count 1 or 2). A bridge runs straight along a row or column between two islands "
                         "with no island between them; list each pair of islands once."),
          facts=lambda g: {"size": g.size, "islands": sorted([r, c, int(g.grid[r][c])] for r, c in g.islands)},
          reference=lambda g: "\n".join(f"{a + 1} {b + 1} {c + 1} {d + 1} {k}"
                                        for (a, b, c, d), k in sorted(g.solution.items())),
          parse=parse_tuples(5), check=check_bridges,
          note="checked in full (no crossings, no bridge over an island, all islands connected)"),
    _spec("scheduler", "Task scheduling: assign tasks to workers and start times, dependencies kept, makespan met.",
          answer_format=("One task per line: '<task> <worker> <start_time>' (task and worker numbers as shown, "
                         "start times in whole hours from 0). Every task exactly once; the makespan must not "
                         "exceed the optimal makespan stated."),
          facts=lambda g: {"durations": [t.duration for t in g.tasks], "workers": g.num_workers,
                           "deps": [list(d) for d in g.dependencies], "makespan": g.optimal_makespan},
          reference=lambda g: "\n".join(f"{t + 1} {w} {s}" for t, (w, s) in sorted(g.optimal_schedule.items())),
          parse=parse_tuples(3), check=check_scheduler,
          note="the package's 'optimal' makespan is a greedy schedule's: any schedule at least as short passes"),
    _spec("cryptarithmetic", "Cryptarithmetic: give each letter a distinct digit so the addition holds.",
          answer_format=("Every letter's digit as 'A=1' pairs separated by spaces or commas (all letters, "
                         "given ones too)."),
          facts=_crypt_facts,
          reference=lambda g: " ".join(f"{k}={v}" for k, v in sorted(g.letter_mapping.items())),
          parse=parse_crypt, check=check_crypt, prepare=_crypt_prepare,
          fallback=lambda g: list(g.operands) == ["AB", "CD"] and g.result_word == "EF",
          note="generation's brute-force uniqueness check is swapped for an equivalent column search"),
]

GAMES: dict[str, GameSpec] = {spec.key: spec for spec in _SPECS}
