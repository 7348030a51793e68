"""Small pieces the store's modules share: timestamps, the connection lock, JSON columns."""

from __future__ import annotations

import functools
import json
import re
import secrets
from datetime import datetime, timezone


def now() -> str:
    """Current time as ISO-8601 UTC with milliseconds (sorts lexicographically)."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def new_id(prefix: str) -> str:
    """Short sortable id: `prefix` + UTC ``yyyymmdd-HHMMSS`` + ``-`` + 4 hex digits."""
    return prefix + datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(2)


def locked(method):
    """Run a `Store` method while holding the store's lock (one connection, many threads)."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        with self._lock:
            return method(self, *args, **kwargs)

    return wrapper


def decode(row: dict, column: str) -> dict:
    """Decode the JSON text in `column` of a row (NULL -> {})."""
    row[column] = json.loads(row[column]) if row.get(column) else {}
    return row


_SURROGATE = re.compile("[\ud800-\udfff]")


def utf8_safe(value):
    """`value`, with any lone surrogate in a str replaced by U+FFFD (SQLite stores UTF-8)."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    return value


#: ASCII characters other than letters and digits: these surely separate words for FTS5's
#: unicode61 tokenizer (it separates on more; erring this way only indexes more).
_SEPARATORS = frozenset(c for c in map(chr, range(128)) if not c.isalnum())


#: Values at least this long (a turn's text, a command's output) move the place
#: `turns_search_text` looks first; short ones ("ok") occur anywhere.
_IN_ORDER_CHARS = 32


def _covered(value: str, text: str, start: int) -> bool:
    """Whether `text` holds `value` (first found at `start`) somewhere with no word
    character glued to either end, so that the search index finds every word of `value`,
    and every phrase of it, in `text` already."""
    seps = _SEPARATORS
    open_left, open_right = value[0] in seps, value[-1] in seps
    if open_left and open_right:  # nothing can glue to it
        return True
    size, limit = len(value), len(text)
    while start != -1:
        end = start + size
        if (open_left or start == 0 or text[start - 1] in seps) and \
                (open_right or end == limit or text[end] in seps):
            return True
        start = text.find(value, start + 1)
    return False


def _strings(node, out: list) -> list:
    """Append the text values (not keys, numbers, booleans or nulls) in a JSON-like value to
    `out`, in order, as ``json.dumps(..., default=str)`` writes them: a str subclass as its
    string value, any other non-JSON value (a Path, a datetime) through ``str``."""
    for v in (node.values() if isinstance(node, dict) else node):
        kind = type(v)
        if kind is str:
            out.append(v)
        elif isinstance(v, (dict, list, tuple)):
            _strings(v, out)
        elif isinstance(v, str):
            out.append(str.__str__(v))
        elif v is not None and not isinstance(v, (bool, int, float)):
            out.append(str(v))
    return out


def turns_search_text(turns, completion: str | None) -> str | None:
    """The text of a trajectory's turns that its completion doesn't already hold: what the
    search index takes from the turns (the `turns_search` column).

    A multi-turn completion is the whole transcript (model text, commands, the observations
    the model saw), so most of the turns' text is in it already; indexing it twice doubled
    the search index's cost (bench/store_ingest.py). What is left is what the model didn't
    see in full: output cut to the observation limit, stderr, error details.

    Args:
        turns: the turns as a list of dicts or as their JSON text (None or empty: no turns).
        completion: the completion text.

    Returns:
        The string values (not keys, numbers or booleans) of the turns, in order, that
        `completion` doesn't hold as whole words, joined by newlines; None when there are
        none.

    Words and prefixes find the same trajectories as when every string was indexed; a
    "quoted phrase" that only spans two separate values of the turns (a command and the
    next value) can differ, since the values left out no longer sit between the others.
    The column is written by `Store.record_trajectories` and the import: a raw SQL UPDATE
    of ``turns`` or ``completion`` must set it too.
    """
    if not turns:
        return None
    if isinstance(turns, str):
        try:
            turns = json.loads(turns)
        except (ValueError, RecursionError):  # not JSON (or nested too deep): the text itself
            return utf8_safe(turns)
        if isinstance(turns, str):  # a JSON string
            return utf8_safe(turns)
    text = completion if isinstance(completion, str) else ""
    find = text.find
    left, seen, pos = [], {}, 0  # seen: value -> covered, for values the turns repeat ("ok", "command")
    for value in _strings([turns], []):
        covered = seen.get(value)
        if covered is None:
            if not value or value.isspace():
                covered = True
            else:  # the turns' text appears in the completion in order: look after the last one first
                start = find(value, pos)
                covered = start != -1 and _covered(value, text, start)
                if covered and len(value) >= _IN_ORDER_CHARS:
                    pos = start
                elif not covered and pos:
                    start = find(value)
                    covered = start != -1 and _covered(value, text, start)
            seen[value] = covered
        if not covered:
            left.append(value)
    # lone surrogates (JSON escapes of undecodable output) can't be stored as UTF-8: U+FFFD
    return utf8_safe("\n".join(left)) or None


def prompt_search_text(seen: set, step, group_idx, prompt):
    """What the search index takes from a trajectory's prompt (the `prompt_search` column):
    the prompt in the first row of its group that holds it, None in the others.

    The G samples of a group share their prompt; indexing it once per group instead of G
    times takes a fifth of the text out of the index (bench/store_ingest.py). A search
    piece found in the indexed prompt matches every row with the same run, step, group
    and prompt (`backend.trajectory_query.trajectory_filter`).

    Args:
        seen: the (step, group_idx, prompt) keys of the rows written so far by this writer
            (one `Store.record_trajectories` call, one import); the key is added to it.
        step, group_idx: the row's step and group.
        prompt: the prompt as stored (a str; None or empty: nothing to index).

    Returns:
        `prompt` if no earlier row in `seen` had this key, else None.

    Rows are deleted by whole steps or runs, so a group never loses its first row alone; a
    raw SQL DELETE of single rows, or UPDATE of ``prompt``, must keep ``prompt_search``
    on one row of the group.
    """
    if not prompt:
        return None
    key = (step, group_idx, prompt)
    if key in seen:
        return None
    seen.add(key)
    return prompt
