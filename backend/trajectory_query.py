"""The trajectory list's filters as SQL, and users' search text as a safe FTS5 query.

`trajectory_filter` turns the filters of `Store.trajectories` (steps, domain, reward,
finish reason, full-text search) into a WHERE clause over the trajectories table, written
so that SQLite walks the list index (`LIST_ORDER`) rather than sorting; `fts_query` quotes
whatever a person types into a query FTS5 can't reject. Pure functions: nothing here opens
a database. The search index itself (table, triggers) is created by the store's migration 6.
"""

from __future__ import annotations

import re

#: Order of the trajectory list (the columns of the list index, see `backend.store_schema._migrate_6`).
LIST_ORDER = "step, group_idx, sample_idx, id"

_FTS_PIECE = re.compile(r'"([^"]*)"|(\S+)')


def fts_pieces(text: str | None) -> list[str]:
    """The user's search text as quoted FTS5 pieces (see `fts_query`); [] if it has no
    letters or digits."""
    text = (text or "").replace("\x00", " ").encode("utf-8", "replace").decode("utf-8")  # NULs, lone surrogates
    parts = []
    for m in _FTS_PIECE.finditer(text):
        piece = m.group(1) if m.group(1) is not None else m.group(2)
        prefix = m.group(2) is not None and piece.endswith("*")
        piece = piece.rstrip("*") if prefix else piece
        if not any(ch.isalnum() for ch in piece):
            continue
        parts.append('"' + piece.replace('"', '""') + '"' + ("*" if prefix else ""))
    return list(dict.fromkeys(parts))  # a piece given twice is one condition


def fts_query(text: str | None) -> str | None:
    """The user's search text as a safe FTS5 query, or None if it has no letters or digits.

    Every piece is quoted, so FTS5 syntax in the text (``AND``, ``NEAR``, ``(``, ``:``,
    ``*``, ``^``, stray quotes) is searched for as plain words and can't be a syntax error.
    Pieces: a word (all words must occur), a "quoted phrase" (words in that order), a
    word ending in ``*`` (prefix: ``err*`` finds "error"). Case and accents are ignored.
    """
    return " ".join(fts_pieces(text)) or None


#: The trajectories one search piece (parameters: the piece, ``prompt_search : piece``)
#: matches: rows whose own indexed text holds it, or whose group's prompt, indexed in
#: the group's first row only (`backend.store_common.prompt_search_text`), holds it. A
#: phrase never spans two columns in FTS5, so piece by piece is what one MATCH of all pieces
#: over the columns of each row found. The group is looked up per row (EXISTS) and only for
#: rows whose own text lacks the piece; pieces are ANDed left to right, so a row that misses
#: one piece is not checked for the rest. ``IS`` rather than ``=``: rows without a step or
#: group (written by hand) form one group, as the migration and the import count them.
_PIECE_MATCH = ("(id IN (SELECT rowid FROM trajectories_fts WHERE trajectories_fts MATCH ?) OR EXISTS ("
                "SELECT 1 FROM trajectories h WHERE h.run_id = trajectories.run_id "
                "AND h.step IS trajectories.step AND h.group_idx IS trajectories.group_idx "
                "AND h.prompt IS trajectories.prompt "
                "AND h.id IN (SELECT rowid FROM trajectories_fts WHERE trajectories_fts MATCH ?)))")


#: Where a search looks: "all" (prompt, completion, the turns' text) or "completion" (the
#: model's completion only; for a multi-turn episode its transcript).
SEARCH_SCOPES = ("all", "completion")
_COMPLETION_MATCH = "id IN (SELECT rowid FROM trajectories_fts WHERE trajectories_fts MATCH ?)"


def highlight_pattern(text: str | None) -> re.Pattern | None:
    """A case-insensitive regex finding what the search text's pieces match (`fts_pieces`)
    in a shown text, for highlighting: a word or phrase as whole words (a phrase's words
    separated by anything that is not a letter or digit), a prefix* as the words it starts;
    None without a piece. Approximates FTS5's tokenizer (accents are not folded here)."""
    alternatives = []
    for piece in fts_pieces(text):
        prefix = piece.endswith("*")
        words = re.findall(r"\w+", piece.rstrip("*")[1:-1].replace('""', '"'))
        if not words:
            continue
        alternatives.append(r"(?<!\w)" + r"\W+".join(map(re.escape, words)) + (r"\w*" if prefix else r"(?!\w)"))
    return re.compile("|".join(alternatives), re.IGNORECASE) if alternatives else None


def _all_of(clauses: list[str]) -> str:
    """``clauses`` joined by AND as a balanced tree: a left-deep chain of a thousand
    search pieces exceeds SQLite's expression depth (1000)."""
    if len(clauses) <= 8:
        return " AND ".join(clauses)
    half = len(clauses) // 2
    return f"({_all_of(clauses[:half])}) AND ({_all_of(clauses[half:])})"


def trajectory_filter(
    run_id: str, step_min: int | None = None, step_max: int | None = None, domain: str | None = None,
    reward_min: float | None = None, reward_max: float | None = None, finish_reason: str | None = None,
    query: str | None = None, search_in: str = "all",
) -> tuple[str, list]:
    """WHERE clause and parameters of the trajectory filters (see `Store.trajectories`).

    `search_in` (`SEARCH_SCOPES`): "completion" matches the query in the completion column
    only (the group's prompt is not looked at). Raises ValueError for another scope.

    Domain, reward and finish reason are written ``+column`` so SQLite keeps walking the
    list index in list order (and checks them from the index) rather than seeking the
    (run_id, domain) index and sorting every row of a domain.
    """
    where, params = ["run_id = ?"], [run_id]
    for clause, value in (("step >= ?", step_min), ("step <= ?", step_max), ("+domain = ?", domain),
                          ("+reward >= ?", reward_min), ("+reward <= ?", reward_max),
                          ("+finish_reason = ?", finish_reason)):
        if value is not None:
            where.append(clause)
            params.append(value)
    if search_in not in SEARCH_SCOPES:
        raise ValueError(f"search_in must be one of {SEARCH_SCOPES}, not {search_in!r}")
    if query is not None and query.strip():
        pieces = fts_pieces(query)
        if not pieces:
            where.append("0")
        else:
            where.append(_all_of([_PIECE_MATCH if search_in == "all" else _COMPLETION_MATCH] * len(pieces)))
        for piece in pieces:
            params += [piece, f"prompt_search : {piece}"] if search_in == "all" else [f"completion : {piece}"]
    return " AND ".join(where), params
