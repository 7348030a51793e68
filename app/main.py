"""RL Workbench page router: ``streamlit run app/main.py``.

Reads the store at ``$RLWB_DB`` (or the default user data path) and routes between the
Home, Launch, Runs, Trajectories, Evaluation, Sandboxes, Domains and Retrieval pages.
With an access token set (`app.auth`), every page waits for it. Before each page it marks
runs whose process is gone as failed (`backend.runs.refresh_liveness`, at most every few
seconds). Holds no page content itself.
"""

import sqlite3

import streamlit as st

from app.auth import require_access
from app.common import check_liveness, db_path
from core.errors import WorkbenchError

st.set_page_config(page_title="RL Workbench", layout="wide")
require_access()  # with an access token set, nothing below runs until it is given

pages = [
    st.Page("screens/home.py", title="Home", icon=":material/home:", default=True),
    st.Page("screens/launch.py", title="Launch", icon=":material/rocket_launch:"),
    st.Page("screens/runs.py", title="Runs", icon=":material/monitoring:"),
    st.Page("screens/trajectories.py", title="Trajectories", icon=":material/route:"),
    st.Page("screens/evaluation.py", title="Evaluation", icon=":material/analytics:"),
    st.Page("screens/sandboxes.py", title="Sandboxes", icon=":material/deployed_code:"),
    st.Page("screens/domains.py", title="Domains", icon=":material/category:"),
    st.Page("screens/retrieval.py", title="Retrieval", icon=":material/manage_search:"),
]
page = st.navigation(pages)

st.sidebar.markdown("### RL Workbench")
path = db_path()
st.sidebar.caption(f"Store: `{path}`")


try:
    check_liveness(path)
except (WorkbenchError, sqlite3.Error) as e:
    st.error(f"Can't open the store `{path}`: {e}. Start the page with `rlwb --db PATH ui` "
             "pointing at an RL Workbench SQLite file (a new path creates one).")
    st.stop()

page.run()
