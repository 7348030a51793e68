"""Shared by the pages: where the store is, the cached `Store` handle, pickers.

Not covered here: queries (each page caches its own loaders over `backend.views`) and
anything that writes to the store.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

import pandas as pd

from backend import views
from backend.store import Store, default_db_path
from backend.user_domains import register_stored
from domains.registry import domain_names, get_domain


def db_path() -> str:
    """The store the page reads: ``$RLWB_DB`` if set, else the default user data path."""
    return str(default_db_path())


@st.cache_resource(show_spinner=False)
def get_store(path: str) -> Store:
    """One `Store` per database file, shared by every session (the store locks itself).

    Raises:
        WorkbenchError: if the database was written by a newer rlwb.
    """
    store = Store(path)
    register_stored(store, quiet=True)  # the user domains, beside the built-in ones
    return store


@st.cache_data(ttl=5, show_spinner=False)
def check_liveness(path: str) -> list[str]:
    """`backend.runs.refresh_liveness` at most every 5 s: the ids of the runs it marked failed
    or stopped (their process is gone). Raises WorkbenchError or sqlite3.Error on a store
    that can't be opened."""
    # on first use: it pulls in pydantic, yaml
    from backend.runs import refresh_liveness

    return refresh_liveness(get_store(path))


def follow_table_selection(event: Any, ids: list, target_key: str) -> None:
    """Point the selectbox with key `target_key` at the row picked in a ``st.dataframe``.

    Call after ``st.dataframe(..., on_select="rerun", selection_mode="single-row")`` and
    before the selectbox is drawn. A row pick wins once; the selectbox stays usable after.

    Args:
        event: the dataframe's selection state.
        ids: option values, one per table row in display order.
        target_key: session_state key of the selectbox to move.
    """
    memo = f"{target_key}__picked_row"
    rows = event.selection.rows if event is not None else []
    rows = [r for r in rows if 0 <= r < len(ids)]  # a filter may have shortened the table since the pick
    if not rows:
        st.session_state.pop(memo, None)
        return
    picked = ids[rows[0]]
    if st.session_state.get(memo) != picked:
        st.session_state[memo] = picked
        st.session_state[target_key] = picked


def run_picker(runs: list[tuple[str, str]], key: str) -> str:
    """Selectbox over runs, seeded from and kept in the ``?run=<id>`` query parameter.

    Args:
        runs: (id, name) pairs, newest first; must not be empty.
        key: page-prefixed session_state key of the selectbox.

    Returns:
        The selected run id (the newest run unless the URL or the user chose another).
    """
    ids = [i for i, _ in runs]
    names = dict(runs)
    if st.session_state.get(key) not in ids:
        wanted = st.query_params.get("run")
        st.session_state[key] = wanted if wanted in ids else ids[0]
    run_id = st.selectbox("Run", ids, format_func=lambda i: f"{names[i]} · {i}", key=key)
    st.query_params["run"] = run_id
    return run_id


@st.cache_data(ttl=5, show_spinner=False)
def load_runs(path: str) -> pd.DataFrame:
    """The runs table (newest first), cached for 5 s; shared by every page."""
    return views.runs_table(get_store(path))


def runs_or_notice(path: str) -> pd.DataFrame | None:
    """The runs table, or None after telling the user how to start a first run."""
    table = load_runs(path)
    if table.empty:
        st.info("No runs yet; start one with `rlwb run configs/quickstart.yaml`.")
        return None
    return table


@st.cache_data(ttl=60, show_spinner=False)
def domain_labels() -> dict[str, str]:
    """Every registered domain (user domains included) -> its picker label: name, family,
    "sandbox" where scoring needs one, and the start of its description."""

    out = {}
    for name in domain_names():
        d = get_domain(name)
        text = d.description if len(d.description) <= 70 else d.description[:69] + "…"
        out[name] = f"{name} · {d.family}{' · sandbox' if d.needs_sandbox else ''} — {text}"
    return out


def domain_picker(container, label: str, key: str, default: list[str], disabled: bool = False,
                  help: str | None = None) -> list[str]:
    """A multiselect over the registered domains shown with family and description; no
    "Select all" (Enter picks the best match, not every match), chips wrap onto more rows
    so none hides behind the edge. Returns the chosen names."""
    labels = domain_labels()
    return container.multiselect(label, list(labels), default=[d for d in default if d in labels],
                                 format_func=lambda n: labels.get(n, n), key=key, disabled=disabled, help=help,
                                 select_all=False, wrap=True)
