"""Small pieces the store's modules share: timestamps, the connection lock, JSON columns."""

from __future__ import annotations

import functools
import json
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
