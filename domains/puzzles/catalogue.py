"""Every wrapped chuk-puzzles-gym game as a workbench domain, with numbered levels.

chuk-puzzles-gym 0.10.3 has 30 games with three difficulties each ("easy", "medium",
"hard"), which become levels 1..n here (`LEVEL_NOTES` says what each means: board size,
givens). Ten games are not wrapped (`domains.puzzles.games.SKIPPED`: broken or degenerate
generators, interactive games), and two levels are left out (`GameSpec.dropped_levels`:
rush hour's hard level takes 1-2 s per task on this 2-core machine, fillomino's hard level
falls back to one fixed solution).

    from domains.puzzles.catalogue import build_puzzle_domains
    domains = build_puzzle_domains()          # name ("puzzle_sudoku") -> PuzzleDomain
"""

from __future__ import annotations

from domains.puzzles.domain import PuzzleDomain
from domains.puzzles.games import GAMES

PACKAGE_LEVELS = {1: "easy", 2: "medium", 3: "hard"}

# game -> (easy, medium, hard): what the package's level means (its configuration)
LEVEL_NOTES: dict[str, tuple[str, str, str]] = {
    "sudoku": ("9x9, 35 cells blank", "9x9, 45 cells blank", "9x9, 55 cells blank"),
    "binary": ("6x6, 12 cells blank", "8x8, 24 cells blank", "10x10, 40 cells blank"),
    "futoshiki": ("4x4", "5x5", "6x6"),
    "skyscrapers": ("4x4, 45% blank", "5x5, 60% blank", "6x6, 75% blank"),
    "numberlink": ("5x5, 4 pairs", "7x7, 6 pairs", "9x9, 9 pairs"),
    "nonogram": ("5x5", "7x7", "10x10"),
    "kenken": ("4x4", "5x5", "6x6"),
    "killer": ("9x9, about 20 cages", "9x9, about 25 cages", "9x9, about 30 cages"),
    "fillomino": ("6x6, 8 clues", "8x8, 10 clues", "10x10, 12 clues"),
    "lights": ("5x5, 3 presses scrambled", "6x6, 5 presses scrambled", "7x7, 7 presses scrambled"),
    "shikaku": ("6x6", "8x8", "10x10"),
    "tents": ("6x6, 6 trees", "8x8, 10 trees", "10x10, 15 trees"),
    "nqueens": ("6x6, 3 queens given", "8x8, 2 queens given", "12x12, 1 queen given"),
    "graph_coloring": ("6 nodes, 3 colours", "10 nodes, 4 colours", "15 nodes, 4 colours"),
    "knapsack": ("5 items", "8 items", "12 items"),
    "rush_hour": ("6x6, 4 blockers, 3-12 moves", "6x6, 8 blockers, 8-25 moves", "6x6, 12 blockers, 15-50 moves"),
    "sokoban": ("6x6, 2 boxes", "8x8, 3 boxes", "10x10, 4 boxes"),
    "bridges": ("7x7", "9x9", "11x11"),
    "scheduler": ("4 tasks, 2 workers", "6 tasks, 2 workers", "8 tasks, 3 workers"),
    "cryptarithmetic": ("3-digit words, 3 letters given", "4-digit words, 2 letters given",
                        "5-digit words, none given"),
}


def build_puzzle_domains() -> dict[str, PuzzleDomain]:
    """A `PuzzleDomain` for every game of `domains.puzzles.games.GAMES`, in name order,
    with its levels that generate in time; an empty dict when chuk-puzzles-gym is not
    installed. Cheap: nothing is generated or imported from the package here."""
    try:
        import chuk_puzzles_gym  # noqa: F401 - only whether it is installed (~1 ms; games load on first task)
    except ImportError:
        return {}
    out = {}
    for key in sorted(GAMES):
        spec = GAMES[key]
        kept = [name for name in PACKAGE_LEVELS.values() if name not in spec.dropped_levels]
        levels = {i + 1: name for i, name in enumerate(kept)}
        notes = dict(zip(PACKAGE_LEVELS.values(), LEVEL_NOTES[key]))
        level_notes = {i: f"chuk-puzzles-gym {name!r}: {notes[name]}" for i, name in levels.items()}
        domain = PuzzleDomain(game=key, levels=levels, level_notes=level_notes)
        out[domain.name] = domain
    return out
