"""The page's access gate: with an access token set (``RLWB_UI_TOKEN``, which `rlwb ui`
requires for any non-loopback --host), nothing is shown until the token is given, in a
password field or once as ``?token=...`` in the URL (then removed from the address bar).

Not covered: TLS and users (see `backend.ui_access`).
"""

from __future__ import annotations

import os

import streamlit as st

from backend.ui_access import TOKEN_ENV, token_matches

_OK = "auth_ok"


def require_access() -> None:
    """Stop the script (`st.stop`) unless no token is set or this session has given it."""
    expected = os.environ.get(TOKEN_ENV)
    if not expected or st.session_state.get(_OK):
        return
    given = st.query_params.get("token")
    if given is not None:
        del st.query_params["token"]  # out of the address bar, history and shared links
        if token_matches(given, expected):
            st.session_state[_OK] = True
            return
        st.error("That access token is not right.")
    st.title("RL Workbench")
    with st.form("auth_form"):
        typed = st.text_input("Access token", type="password", key="auth_token")
        sent = st.form_submit_button("Open")
    if sent:
        if token_matches(typed, expected):
            st.session_state[_OK] = True
            st.session_state.pop("auth_token", None)
            st.rerun()
        st.error("That access token is not right.")
    st.caption(f"This page was started with an access token ({TOKEN_ENV} or `rlwb ui --token`).")
    st.stop()
