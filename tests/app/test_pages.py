"""The pages render with AppTest on an empty and on a filled store, and show details on pick."""

import json
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from backend.store import Store

MAIN = str(Path(__file__).resolve().parents[2] / "app" / "main.py")
TIMEOUT = 30


def _app(db, monkeypatch, page: str | None = None) -> AppTest:
    monkeypatch.setenv("RLWB_DB", str(db))
    at = AppTest.from_file(MAIN, default_timeout=TIMEOUT).run()
    at.switch_page(page or "screens/runs.py").run()  # Home is the default page
    assert not at.exception, [e.value for e in at.exception]
    return at


def _run_id(db, name: str) -> str:
    with Store(db) as store:
        return next(r["id"] for r in store.list_runs() if r["name"] == name)


def _texts(at: AppTest) -> str:
    parts = [e.value for kind in ("markdown", "caption", "info", "error", "subheader", "title")
             for e in getattr(at, kind)]
    parts += [m.label + " " + str(m.value) for m in at.metric]
    return "\n".join(str(p) for p in parts)


@pytest.mark.parametrize("page", [None, "screens/trajectories.py"])
def test_empty_db_is_friendly(tmp_path, monkeypatch, page):
    at = _app(tmp_path / "empty.db", monkeypatch, page)
    assert "No runs yet" in at.info[0].value
    assert "rlwb run configs/quickstart.yaml" in at.info[0].value


def test_home_says_what_the_product_does_and_that_nothing_was_validated_yet(tmp_path, monkeypatch):
    at = _app(tmp_path / "empty.db", monkeypatch, "screens/home.py")
    texts = _texts(at)
    assert "Post-train a language model with reinforcement learning" in texts
    assert "Passed validation 0" in texts and "not a failure" in texts  # a fresh install, not a red flag
    coverage = next(d.value for d in at.dataframe if "not validated yet" in d.value.columns)
    assert (coverage["not validated yet"] == coverage["domains"]).all() and coverage["failed"].sum() == 0


def test_runs_page_shows_selected_run(filled_db, monkeypatch):
    at = _app(filled_db, monkeypatch)
    assert at.title[0].value == "Runs"
    run_box = at.selectbox(key="runs_run")
    assert len(run_box.options) == 3
    run_box.select(_run_id(filled_db, "demo")).run()
    assert not at.exception
    text = _texts(at)
    assert "completed" in text and "3 / 3" in text
    assert "Held-out evaluation" in text and "Checkpoints" in text
    assert any(e.label.startswith("Other metrics (1)") for e in at.expander)  # loss (entropy has its panel)
    # overall: reward, kl, entropy, length, zero-variance, throughput + other; per domain: reward,
    # pass rate, length, zero-variance, curriculum level and pass rate; held-out accuracy (before, after)
    charts = at.get("plotly_chart")
    assert len(charts) == 7 + 6 + 1
    assert sum(c.key.startswith("eval_curves_") for c in charts) == 1
    assert at.button(key="runs_stop").disabled and at.button(key="runs_resume").disabled  # a completed run

    at.selectbox(key="runs_run").select(_run_id(filled_db, "broken")).run()
    assert not at.exception
    assert "rollout engine died" in at.error[0].value
    assert any(e.label == "Traceback" for e in at.expander)


def _domain_chart_lines(at: AppTest) -> dict[str, set[str]]:
    """Per-domain chart title -> the names of its lines."""
    out = {}
    for chart in at.get("plotly_chart"):
        if chart.proto.id and "runs_domain_chart" in chart.proto.id:
            fig = json.loads(chart.proto.spec)
            out[fig["layout"]["title"]["text"]] = {trace["name"] for trace in fig["data"]}
    return out


def test_runs_page_per_domain_section(filled_db, monkeypatch):
    demo = _run_id(filled_db, "demo")
    at = _app(filled_db, monkeypatch)
    at.selectbox(key="runs_run").select(demo).run()
    assert not at.exception
    assert "Per domain" in [h.value for h in at.subheader]
    key = f"runs_domains_{demo}_basic_arithmetic|chain_sum"  # keyed by the domains seen so far
    picker = at.multiselect(key=key)
    assert picker.options == ["basic_arithmetic", "chain_sum"] and picker.value == picker.options
    lines = _domain_chart_lines(at)
    assert set(lines) == {"Reward", "Pass rate", "Response length (tokens)", "Zero-variance groups (share)",
                          "Curriculum level", "Curriculum pass rate (window)"}
    assert all(names == {"basic_arithmetic", "chain_sum"} for names in lines.values())

    picker.unselect("basic_arithmetic").run()
    assert not at.exception
    assert all(names == {"chain_sum"} for names in _domain_chart_lines(at).values())
    at.multiselect(key=key).unselect("chain_sum").run()
    assert not _domain_chart_lines(at) and "Pick one or more domains" in _texts(at)

    # a run without per-domain metrics (an old or failed run) has no such section
    at.selectbox(key="runs_run").select(_run_id(filled_db, "broken")).run()
    assert not at.exception and "Per domain" not in [h.value for h in at.subheader]


def test_runs_page_pending_run_without_data(filled_db, monkeypatch):
    at = _app(filled_db, monkeypatch)
    at.selectbox(key="runs_run").select(_run_id(filled_db, "queued")).run()
    assert not at.exception
    assert "No metrics recorded yet" in _texts(at)


def test_trajectories_page_shows_selected_trajectory(filled_db, monkeypatch):
    demo = _run_id(filled_db, "demo")
    with Store(filled_db) as store:
        picked = store.trajectories(demo, step_min=2, domain="chain_sum")[2]
    at = _app(filled_db, monkeypatch, "screens/trajectories.py")
    at.selectbox(key="traj_run").select(demo).run()
    assert not at.exception
    assert at.slider(key="traj_steps").value == (1, 3)
    assert "24 trajectories" in _texts(at)

    at.selectbox(key="traj_domain").select("chain_sum").run()
    at.slider(key="traj_steps").set_value((2, 3)).run()
    assert "8 trajectories" in _texts(at)
    at.selectbox(key="traj_selected").select(picked["id"]).run()
    assert not at.exception
    text = _texts(at)
    assert f"Trajectory #{picked['id']}" in text
    assert any(c.value == picked["completion"] for c in at.code)
    assert any(c.value == picked["prompt"] for c in at.code)  # not ChatML: shown as it is
    assert "reward = 0.2 x format" in text  # the domain's reward rule beside the breakdown
    assert "Its group (4 samples)" in text
    assert len([e for e in at.expander if e.label.startswith("sample ")]) == 3


def test_trajectories_page_run_without_trajectories(filled_db, monkeypatch):
    at = _app(filled_db, monkeypatch, "screens/trajectories.py")
    at.selectbox(key="traj_run").select(_run_id(filled_db, "broken")).run()
    assert not at.exception
    assert "No trajectories recorded for this run yet" in _texts(at)


def test_run_query_parameter_selects_the_run(filled_db, monkeypatch):
    monkeypatch.setenv("RLWB_DB", str(filled_db))
    demo = _run_id(filled_db, "demo")
    at = AppTest.from_file(MAIN, default_timeout=TIMEOUT)
    at.query_params["run"] = demo
    at.run().switch_page("screens/trajectories.py").run()
    assert not at.exception
    assert at.selectbox(key="traj_run").value == demo
    assert "24 trajectories" in _texts(at)


@pytest.mark.parametrize("page", [None, "screens/trajectories.py"])
def test_pages_render_a_real_tiny_run(tiny_run, monkeypatch, page):
    """Both pages on a database written by a real 3-step vLLM + DeepSpeed run."""
    db, run_id = tiny_run
    at = _app(db, monkeypatch, page)
    if page is None:
        at.selectbox(key="runs_run").select(run_id).run()
        assert not at.exception, [e.value for e in at.exception]
        assert "completed" in _texts(at)
        assert len(at.get("plotly_chart")) >= 4
    else:
        at.selectbox(key="traj_run").select(run_id).run()
        assert not at.exception, [e.value for e in at.exception]
        assert at.dataframe, "the trajectory table should list the run's samples"
        assert len(at.selectbox(key="traj_selected").options) == 3 * 2 * 4  # steps x tasks x group


def test_runs_page_with_many_metrics(tmp_path, monkeypatch):
    """A run with dozens of metrics (five domains x four kinds, phase timings) renders."""
    db = tmp_path / "many.db"
    with Store(db) as store:
        rid = store.create_run("many", {}, total_steps=2)
        for step in (1, 2):
            store.record_metrics(rid, step, {f"m{i}/{d}": float(i * step) for i in range(12) for d in "abcde"})
    at = _app(db, monkeypatch)
    at.selectbox(key="runs_run").select(rid).run()
    assert not at.exception, [e.value for e in at.exception]
    assert any(e.label.startswith("Other metrics (60)") for e in at.expander)


def _trajectories_page(db, monkeypatch) -> AppTest:
    at = _app(db, monkeypatch, "screens/trajectories.py")
    at.selectbox(key="traj_run").select(_run_id(db, "demo")).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_trajectories_page_search_finish_reason_and_export(filled_db, monkeypatch):
    at = _trajectories_page(filled_db, monkeypatch)
    export = at.get("download_button")
    assert [b.proto.label for b in export] == ["Export selection (JSONL)"]
    assert "Exports all 24 matching trajectories" in _texts(at)

    at.text_input(key="traj_search").input('"What is 2"').run()  # a phrase of the step-2 prompts
    assert not at.exception and "8 trajectories match" in _texts(at)
    assert {o.split(" · ")[1] for o in at.selectbox(key="traj_selected").options} == {"step 2"}
    at.selectbox(key="traj_finish").select("length").run()  # sample 0 of each of the 2 groups
    assert not at.exception and "2 trajectories match" in _texts(at)
    assert "Exports all 2 matching trajectories" in _texts(at)

    at.selectbox(key="traj_finish").select("All finish reasons")
    at.text_input(key="traj_search").input("zebra").run()
    assert not at.exception and "No trajectories match these filters" in _texts(at)


@pytest.mark.parametrize("text", ['AND( "NEAR *', '"', "prompt:x OR", "^*", "'; DROP TABLE runs; --", "a\x00b"])
def test_trajectories_page_survives_odd_search_text(filled_db, monkeypatch, text):
    at = _trajectories_page(filled_db, monkeypatch)
    at.text_input(key="traj_search").input(text).run()
    assert not at.exception, [e.value for e in at.exception]
    assert "trajectories match" in _texts(at) or "No trajectories match" in _texts(at)


def test_trajectories_page_ignores_search_text_without_words(filled_db, monkeypatch):
    at = _trajectories_page(filled_db, monkeypatch)
    at.text_input(key="traj_search").input("*** ((").run()
    assert not at.exception
    assert "no letters or digits" in _texts(at) and "24 trajectories match" in _texts(at)


def test_trajectories_page_compares_two_samples(filled_db, monkeypatch):
    demo = _run_id(filled_db, "demo")
    with Store(filled_db) as store:
        group = store.group(demo, 1, 0)  # rewards 1, 0, 1, 0 (step 1)
    at = _trajectories_page(filled_db, monkeypatch)
    at.selectbox(key="traj_selected").select(group[0]["id"]).run()
    assert not at.exception and "Compare with" in [h.value for h in at.subheader]
    compare = at.selectbox(key=f"traj_compare_{group[0]['id']}")
    assert compare.value == group[1]["id"]  # default: the group's sample whose reward differs most
    assert len(compare.options) == 24 - 1  # the group first, then every listed row
    diff = next(c.value for c in at.code if c.language == "diff")
    assert diff.startswith(f"--- #{group[0]['id']} (sample 0)\n+++ #{group[1]['id']} (sample 1)")
    assert "-Answer: 1" in diff and "+Answer: 2" in diff and " Let me add." in diff

    compare.select(group[2]["id"]).run()
    assert not at.exception
    assert any(c.value.startswith(f"--- #{group[0]['id']} (sample 0)\n+++ #{group[2]['id']} (sample 2)")
               for c in at.code if c.language == "diff")


def test_runs_page_live_phase_counts_this_step_not_the_steps_merged(filled_db, monkeypatch):
    """"Now: step 2 / N · …" is the time in step 2; the caption's merged "steps 1-2" is the
    time of both, so the counter does not fall back when the next phase starts."""
    run_id = _run_id(filled_db, "queued")
    now = datetime.now(timezone.utc)
    with Store(filled_db) as store:
        store.set_status(run_id, "running")
        for phase, step, ago in (("step", 1, 70), ("step", 2, 5)):
            store.db["run_phases"].insert({"run_id": run_id, "phase": phase, "at_step": step,
                                           "started_at": (now - timedelta(seconds=ago)).isoformat()})
    at = _app(filled_db, monkeypatch)
    at.selectbox(key="runs_run").select(run_id).run()
    text = _texts(at)
    now_line = next(line for line in text.splitlines() if "Now: step 2" in line)
    assert re.search(r"· \d+s$", now_line), now_line  # seconds in step 2, not the 1m+ of steps 1-2
    assert re.search(r"steps 1-2 1m \d\ds \(now\)", text), text
