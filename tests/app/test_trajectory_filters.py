"""The Trajectories page keeps the user's filters while a live run records steps, and
across a visit to another page (session state, not the widgets' own state)."""

from pathlib import Path

import streamlit as st
from streamlit.testing.v1 import AppTest

from backend.store import Store
from tests.app.conftest import _samples

MAIN = str(Path(__file__).resolve().parents[2] / "app" / "main.py")


def _page(db, monkeypatch) -> tuple[AppTest, str]:
    monkeypatch.setenv("RLWB_DB", str(db))
    with Store(db) as store:
        demo = next(r["id"] for r in store.list_runs() if r["name"] == "demo")
    at = AppTest.from_file(MAIN, default_timeout=30).run()
    at.switch_page("screens/trajectories.py").run()
    at.selectbox(key="traj_run").select(demo).run()
    assert not at.exception, [e.value for e in at.exception]
    return at, demo


def _record_step(db, run_id: str, step: int) -> None:
    """The live run records `step`, with a domain and a finish reason not seen before."""
    samples = _samples(step)
    samples[0].domain, samples[1].completion.finish_reason = "leg_counting", "abort"
    with Store(db) as store:
        store.record_trajectories(run_id, step, samples)
    st.cache_data.clear()  # the page's loaders cache for seconds; the test doesn't wait


def _filters(at: AppTest) -> tuple:
    return (at.slider(key="traj_steps").value, at.selectbox(key="traj_domain").value,
            at.slider(key="traj_reward").value, at.selectbox(key="traj_finish").value,
            at.text_input(key="traj_search").value)


def _matches(at: AppTest) -> str:
    return next(c.value for c in at.caption if "match" in c.value)


def test_filters_survive_a_new_step_of_a_live_run(filled_db, monkeypatch):
    at, demo = _page(filled_db, monkeypatch)
    at.slider(key="traj_steps").set_value((1, 2))
    at.selectbox(key="traj_domain").select("chain_sum")
    at.slider(key="traj_reward").set_value((0.5, 1.0))
    at.selectbox(key="traj_finish").select("stop")
    at.text_input(key="traj_search").input("Answer").run()
    chosen, matches = _filters(at), _matches(at)
    assert chosen == ((1, 2), "chain_sum", (0.5, 1.0), "stop", "Answer") and "3 trajectories match" in matches

    _record_step(filled_db, demo, 4)
    at.run()  # any rerun: a click elsewhere on the page, a refresh
    assert not at.exception, [e.value for e in at.exception]
    assert at.slider(key="traj_steps").max == 4 and "leg_counting" in at.selectbox(key="traj_domain").options
    assert _filters(at) == chosen and _matches(at) == matches


def test_a_step_range_ending_at_the_last_step_follows_new_steps(filled_db, monkeypatch):
    """A range that ended at the run's last step extends to each new last step (like the
    default range, every step); its lower end stays where the user put it."""
    at, demo = _page(filled_db, monkeypatch)
    at.slider(key="traj_steps").set_value((2, 3)).run()
    _record_step(filled_db, demo, 4)
    at.run()
    assert at.slider(key="traj_steps").value == (2, 4)
    _record_step(filled_db, demo, 5)
    at.run()
    assert at.slider(key="traj_steps").value == (2, 5)


def test_filters_survive_a_visit_to_another_page(filled_db, monkeypatch):
    at, _ = _page(filled_db, monkeypatch)
    at.slider(key="traj_steps").set_value((2, 3))
    at.selectbox(key="traj_domain").select("basic_arithmetic")
    at.text_input(key="traj_search").input("Answer").run()
    chosen = _filters(at)
    at.switch_page("screens/runs.py").run()
    at.switch_page("screens/trajectories.py").run()
    assert not at.exception, [e.value for e in at.exception]
    assert _filters(at) == chosen


def test_each_run_keeps_its_own_step_range_when_the_run_is_switched(filled_db, monkeypatch):
    """Two runs with the same steps (1-3): the range drawn on one is not the other's."""
    with Store(filled_db) as store:
        other = store.create_run("demo-2", {"model": "tiny"}, total_steps=3)
        for step in (1, 2, 3):
            store.record_trajectories(other, step, _samples(step))
    at, demo = _page(filled_db, monkeypatch)
    at.slider(key="traj_steps").set_value((2, 3)).run()
    at.selectbox(key="traj_run").select(other).run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.slider(key="traj_steps").value == (1, 3)  # nothing chosen on this run yet: every step
    at.slider(key="traj_steps").set_value((1, 1)).run()
    at.selectbox(key="traj_run").select(demo).run()
    assert at.slider(key="traj_steps").value == (2, 3)


def test_a_reward_filter_that_matches_nothing_says_the_runs_reward_range(filled_db, monkeypatch):
    at, _ = _page(filled_db, monkeypatch)
    at.slider(key="traj_reward").set_value((0.3, 0.7)).run()  # the demo's rewards are 0 or 1
    assert not at.exception, [e.value for e in at.exception]
    [info] = [i.value for i in at.info if "No trajectories match" in i.value]
    assert "rewards run from 0.00 to 1.00" in info
