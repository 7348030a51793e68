"""What every `rlwb` command module shares: the store of ``--db``, the sandbox isolation
notice and the argument types of the parser.

The ground floor of the CLI: `backend.cli` (the entry point) imports `backend.cli_runs`,
`backend.cli_eval` and `backend.cli_retrieval`, and they all import this module; nothing here
imports them back. Parsing only; no command runs here.
"""

from __future__ import annotations

import argparse
import sys


def open_store(args):
    """The `backend.store.Store` named by ``--db`` (None: $RLWB_DB or the user data dir),
    with its user domains registered (`backend.user_domains.register_stored`)."""
    # on first use: it pulls in pandas, numpy, sqlite_utils
    from backend.store import Store
    from backend.user_domains import register_stored

    store = Store(args.db)
    register_stored(store)
    return store


def isolation_notice(backend: str) -> None:
    """Say on stderr when a sandbox backend isolates less than Docker (never silently)."""
    if backend != "docker":
        # on first use: it pulls in pydantic
        from sandboxes import sandbox_class

        print(f"note: sandbox backend '{backend}' gives {sandbox_class(backend).isolation}", file=sys.stderr)


def positive(text: str) -> int:
    """argparse type: a whole number >= 1."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive whole number; e.g. 20")
    return int(text)

