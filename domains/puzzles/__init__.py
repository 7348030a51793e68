"""The puzzles family: seeded constraint puzzles of the `chuk-puzzles-gym` package (sudoku,
kenken, nonogram, bridges, sokoban, ...) as single-turn `TextDomain`s, one per game, each
scored by its own rule checker (`domains.puzzles.catalogue`, built on
`domains.puzzles.domain` and `domains.puzzles.games`)."""
