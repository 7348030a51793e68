"""The chuk-puzzles-gym games this family wraps: per game, the question, the reference
answer, a parser of answer text and a rule checker of the parsed answer.

Each game is one `GameSpec` in `GAMES` (a table; the parsers, checks and searches are in
`domains.puzzles.rules`). A spec turns a generated package game into *facts*: the plain-JSON data
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

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from domains.puzzles.rules import (board_cells, check_binary, check_bridges, check_crypt, check_fillomino,
                                    check_futoshiki, check_graph_coloring, check_kenken, check_killer,
                                    check_knapsack, check_lights, check_nonogram, check_nqueens, check_numberlink,
                                    check_rush_hour, check_scheduler, check_shikaku, check_skyscrapers,
                                    check_sokoban, check_sudoku, check_tents, crypt_solutions, knapsack_optimum,
                                    parse_crypt, parse_grid, parse_numbers, parse_rush_moves, parse_sokoban,
                                    parse_tuples, rush_hour_path, sokoban_path)

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
    cells = list(board_cells(n))
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
        near_miss: (facts, reference answer) -> an answer one step from it that breaks a
            rule, where the generic near miss (the first digit changed) can be another
            valid answer.
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
    near_miss: Callable[[dict, str], str | None] | None = None

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


def _clashing_colour(facts: dict, answer: str) -> str | None:
    """The colouring with one node that isn't given recoloured like a neighbour: an edge
    then joins two equal colours."""
    colors = answer.split()
    given = {node for node, _ in facts["given"]}
    for a, b in facts["edges"]:
        for node, other in ((a, b), (b, a)):
            if node not in given:
                colors[node - 1] = colors[other - 1]
                return " ".join(colors)
    return None


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
          reference=lambda g: _cells_text((r, c) for r, c in board_cells(g.size) if g.presses[r][c] % 2),
          parse=parse_tuples(2), check=check_lights,
          note="the stored 'solution' is the all-off board; the reference is the generator's own presses"),
    _spec("shikaku", "Shikaku: divide the grid into rectangles, each holding one number equal to its area.",
          answer_format=("One rectangle per line: '<top_row> <left_col> <bottom_row> <right_col>' "
                         "(1-indexed, corners included)."),
          facts=lambda g: {"size": g.size, "clues": sorted([r, c, int(a)] for (r, c), a in g.clues.items())},
          reference=_shikaku_reference, parse=parse_tuples(4), check=check_shikaku),
    _spec("tents", "Tents and trees: place one tent by each tree, tents apart, with row and column counts.",
          answer_format="The tents, one per line as '<row> <col>' (1-indexed, row 1 at the top).",
          facts=lambda g: {"size": g.size, "trees": [[r, c] for r, c in board_cells(g.size) if g.trees[r][c]],
                           "rows": list(g.row_counts), "cols": list(g.col_counts)},
          reference=lambda g: _cells_text((r, c) for r, c in board_cells(g.size) if g.solution[r][c] == 2),
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
          parse=parse_numbers, check=check_graph_coloring, near_miss=_clashing_colour),
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
          parse=parse_sokoban, check=check_sokoban, near_miss=lambda f, answer: answer[:-1] or None,
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
