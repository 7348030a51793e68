"""The Runs page's "Reward audit" panel on scripted runs, and its links into the Trajectories page."""

from urllib.parse import parse_qs

import pytest
from streamlit.testing.v1 import AppTest

from backend.store import Store
from tests.app.test_pages import MAIN, TIMEOUT, _app, _texts
from tests.backend.audit_runs import DOMAIN, audit_store


@pytest.fixture
def audit_db(tmp_path):
    return audit_store(tmp_path / "audit.db")


def _runs_page(db, monkeypatch, run_id: str) -> AppTest:
    """The Runs page showing `run_id`, checked to render with its Reward audit panel."""
    at = _app(db, monkeypatch)
    at.selectbox(key="runs_run").select(run_id).run()
    assert not at.exception, [e.value for e in at.exception]
    assert "Reward audit" in _texts(at)
    return at


def _audit_links(at: AppTest) -> list[dict]:
    links = [e.proto for e in at.get("page_link")]
    return [parse_qs(p.query_string) for p in links if "traj=" in p.query_string]


def test_the_runs_page_flags_a_run_that_collapses_to_one_answer(audit_db, monkeypatch):
    db, ids = audit_db
    at = _runs_page(db, monkeypatch, ids["collapsing"])
    warnings = [w.value for w in at.warning]
    assert any(DOMAIN in w and "constant_answer" in w and "'1' is 90%" in w for w in warnings), warnings
    links = _audit_links(at)
    assert links and all(q["run"] == [ids["collapsing"]] for q in links)
    with Store(db) as store:
        answers = {store.trajectory(int(q["traj"][0]))["breakdown"]["extracted"] for q in links}
    assert answers == {"1"}  # trace evidence: every linked trajectory gives the modal answer
    assert not any(e.label.startswith("Other metrics") for e in at.expander)  # audit/* has its own curves
    assert any(e.label == "Audit curves per domain" for e in at.expander)


def test_the_runs_page_shows_no_flags_for_a_healthy_run(audit_db, monkeypatch):
    db, ids = audit_db
    at = _runs_page(db, monkeypatch, ids["healthy"])
    assert not at.warning and not _audit_links(at)
    assert any("No audit flags over steps 1-10" in s.value for s in at.success)


def test_an_audit_link_opens_its_trajectory(audit_db, monkeypatch):
    db, ids = audit_db
    with Store(db) as store:
        traj = store.trajectories(ids["collapsing"], step_min=7, step_max=7)[5]
    monkeypatch.setenv("RLWB_DB", str(db))
    at = AppTest.from_file(MAIN, default_timeout=TIMEOUT)
    at.query_params.update(run=ids["healthy"], traj=str(traj["id"]))  # the trajectory's run wins
    at.run().switch_page("screens/trajectories.py").run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.selectbox(key="traj_run").value == ids["collapsing"]
    assert at.selectbox(key="traj_selected").value == traj["id"]
    assert at.selectbox(key="traj_domain").value == DOMAIN
    assert "32 trajectories match" in _texts(at)  # its step only
    at.selectbox(key="traj_domain").select("All domains").run()  # the user's next choice stands
    assert at.selectbox(key="traj_domain").value == "All domains"
    assert at.selectbox(key="traj_selected").value == traj["id"]
