"""The rules of the puzzles family: parsers of answer text, a rule checker per game, and the
searches that make references where the package stores none (sokoban, rush hour) or checks
too slowly (cryptarithmetic). Every checker tests the rules the question states on the
puzzle's plain-JSON facts, never equality with one stored solution
(`domains.puzzles.games` says which game uses which, and why).

    check_sudoku(facts, parse_grid(answer_text, facts))      # -> bool; parse gives None if unreadable
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Callable, Iterable
from itertools import product

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

def board_cells(n: int) -> Iterable[tuple[int, int]]:
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
    for start in board_cells(n):
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
    for r, c in board_cells(n):
        cells.setdefault(grid[r][c], set()).add((r, c))
    return all(connected(cells.get(v, set())) for v in range(1, pairs + 1))  # endpoints: kept givens


def check_nonogram(f: dict, grid: list[list[int]]) -> bool:
    n = f["size"]
    return (binary_grid(grid)
            and all(runs(grid[r]) == [x for x in f["rows"][r] if x] for r in range(n))
            and all(runs([grid[r][c] for r in range(n)]) == [x for x in f["cols"][c] if x] for c in range(n)))


def cage_value_ok(values: list[int], op: str, target: int) -> bool:
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
        cage_value_ok([grid[r][c] for r, c in cage["cells"]], cage["op"], cage["target"]) for cage in f["cages"])


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
    queens = [(r, c) for r, c in board_cells(n) if grid[r][c] == 1]
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
