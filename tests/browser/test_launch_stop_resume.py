"""Launch, Stop and Resume from the page in Chromium, with real background runs of the tiny
model: bad input shows inline errors and starts nothing; a launched run is watched to the
end on the Runs page; a running run is stopped, then resumed from its checkpoint to the end
with every step recorded once."""

from __future__ import annotations

import re
import time

import pytest

from backend.store import Store
from tests.browser.conftest import serve_app, watched_page
from tests.browser.streamlit_ui import (
    by_label, click_button, expect, fill_number, fill_text, goto, screenshot, select_option, table_rows, wait_idle,
)

RUN_WAIT_MS = 480_000  # a tiny run: ~30-60 s to start vLLM + DeepSpeed, a few s per step; generous


@pytest.fixture(scope="module")
def launch_db(tmp_path_factory):
    return tmp_path_factory.mktemp("launch") / "wb.db"


@pytest.fixture(scope="module")
def launch_url(browser, launch_db, tmp_path_factory):
    """The page over an empty store of its own (launches must not touch the shared copy)."""
    with serve_app(launch_db, tmp_path_factory.mktemp("launch-streamlit") / "streamlit.log") as url:
        yield url


@pytest.fixture
def lpage(request, browser, launch_url, launch_db):
    """A tab on the launch server; afterwards a failed test's screenshot, and no run of the
    test left running (a failed test must not leave a training process behind)."""
    with watched_page(request, browser, launch_url, after=lambda: _stop_all(launch_db)) as page:
        yield page


def _stop_all(db) -> None:
    from backend.runs import process_alive, stop

    with Store(db) as store:
        for run in store.list_runs():
            if run["status"] in ("pending", "running") and process_alive(run["pid"]):
                stop(store, run["id"])
                deadline = time.monotonic() + 60
                while process_alive(run["pid"]) and time.monotonic() < deadline:
                    time.sleep(0.5)


def _runs(db) -> list[dict]:
    with Store(db) as store:
        return store.list_runs()


def _fill_tiny(page, model_dir, out_dir, name: str, steps: int) -> None:
    """The form as a user fills it for a tiny run (Other: the tiny model's directory)."""
    goto(page, "/launch", "Launch a run")
    fill_text(page, "Run name", name)
    select_option(page, "Model", "Other: a checkpoint directory")
    fill_text(page, "Checkpoint directory (with “Other”)", str(model_dir))
    for label, value in (("Steps", steps), ("Prompts per step (batch)", 2), ("Group size (G)", 2),
                         ("Micro-batch (sequences)", 2), ("Max new tokens", 8), ("Learning rate", 0.001),
                         ("Held-out eval tasks per domain", 0), ("Checkpoint every N steps (0: end only)", 1)):
        fill_number(page, label, value)
    select_option(page, "Algorithm", "rloo")
    fill_text(page, "Other settings (YAML)", f"vllm_compile: false\noutput_dir: {out_dir}\n")


def _metric(page, label: str):
    return page.get_by_test_id("stMetric").filter(has=page.get_by_text(label, exact=True))


def test_bad_input_shows_inline_errors_and_launches_nothing(lpage, launch_db, tiny_model_dir, tmp_path):
    _fill_tiny(lpage, tiny_model_dir, tmp_path / "out", "bad", steps=3)
    fill_number(lpage, "Learning rate", -0.001)
    fill_text(lpage, "Checkpoint directory (with “Other”)", "")
    click_button(lpage, "Launch")
    wait_idle(lpage, "pick a model")
    lr_box = by_label(lpage, "stNumberInput", "Learning rate")
    expect(lpage.get_by_test_id("stAlertContentError").first).to_be_visible()
    screenshot(lpage, "launch-errors")
    assert _runs(launch_db) == []  # nothing started
    expect(lr_box).to_be_visible()

    fill_text(lpage, "Checkpoint directory (with “Other”)", str(tiny_model_dir))  # model ok, lr still bad
    click_button(lpage, "Launch")
    wait_idle(lpage, "greater than 0")
    assert _runs(launch_db) == []
    expect(lpage.get_by_role("heading", name="Launch a run")).to_be_visible()


def test_a_stored_mix_shows_its_domains_and_disables_domains_and_level(lpage, launch_db):
    """Picking a stored mix shows what it trains (domains, weights, levels) and disables the
    Domains and Level fields it replaces; going back to no mix enables them again."""
    with Store(launch_db) as store:
        store.save_mix("two-domains", {"domains": {"chain_sum": {"weight": 3.0, "levels": [1, 2]},
                                                   "basic_arithmetic": {"weight": 1.0, "levels": [1, 1]}}})
    goto(lpage, "/launch", "Launch a run")
    level = by_label(lpage, "stNumberInput", "Level").locator("input")
    domains = by_label(lpage, "stMultiSelect", "Domains (equal weights)").locator("input")
    expect(level).to_be_enabled()
    select_option(lpage, "Stored mix", "two-domains")
    wait_idle(lpage, "Mix two-domains version 1")
    rows = {r["domain"]: r for r in table_rows(lpage, lpage.get_by_test_id("stDataFrame").first)}  # above the rest
    assert set(rows) == {"chain_sum", "basic_arithmetic"}, rows
    assert (rows["chain_sum"]["share"], rows["chain_sum"]["levels"]) == ("75%", "1-2"), rows
    expect(level).to_be_disabled()
    expect(domains).to_be_disabled()
    screenshot(lpage, "launch-stored-mix")
    select_option(lpage, "Stored mix", "(none: pick domains)")
    expect(level).to_be_enabled()
    expect(lpage.get_by_text("Mix two-domains version 1")).to_have_count(0)


def test_a_yaml_typo_names_the_key_beside_the_launch_button(lpage, launch_db, tiny_model_dir, tmp_path):
    _fill_tiny(lpage, tiny_model_dir, tmp_path / "out", "typo", steps=2)
    fill_text(lpage, "Other settings (YAML)", "vllm_compile: false\ntemprature: 0.7\n")
    click_button(lpage, "Launch")
    wait_idle(lpage, "did you mean 'temperature'?")
    expect(lpage.get_by_text("unknown field 'temprature' (did you mean 'temperature'?)").first).to_be_visible()
    expect(lpage.get_by_text("Not launched: 1 problem to fix (Other settings (YAML))")).to_be_visible()
    screenshot(lpage, "launch-yaml-typo")
    assert _runs(launch_db) == []


def test_launch_a_tiny_run_from_the_form_and_watch_it_finish(lpage, launch_db, tiny_model_dir, tmp_path):
    _fill_tiny(lpage, tiny_model_dir, tmp_path / "out", "from-the-browser", steps=3)
    fill_number(lpage, "Held-out eval tasks per domain", 2)
    fill_number(lpage, "Checkpoint every N steps (0: end only)", 0)
    click_button(lpage, "Launch")
    wait_idle(lpage, "from-the-browser")
    assert lpage.url.split("?")[0].endswith("/runs")  # taken to the run
    (run,) = [r for r in _runs(launch_db) if r["name"] == "from-the-browser"]
    assert f"run={run['id']}" in lpage.url
    assert run["config"]["algorithm"] == "rloo" and run["config"]["steps"] == 3
    # the live panel says what the process is doing before its first step (starting vLLM, the learner,
    # the evaluation before training), not "step 0"; which phase its first 10-second refresh catches
    # depends on the machine (CI once missed the engine's start), so any phase: the timeline below
    # checks that every one of them was there, in order
    expect(lpage.get_by_text(re.compile(r"^Now: (?!step 0\b)")).first).to_be_visible(timeout=RUN_WAIT_MS)
    screenshot(lpage, "runs-phase-live")
    # the live panel refreshes itself; no reload
    expect(_metric(lpage, "Status")).to_contain_text("completed", timeout=RUN_WAIT_MS)
    expect(_metric(lpage, "Step")).to_contain_text("3 / 3")
    wait_idle(lpage)
    # where the time went, phase by phase in order: engines, evaluation before, the steps, after
    timeline = lpage.get_by_text("Where the time went:")
    expect(timeline).to_be_visible()
    text = timeline.inner_text()
    order = ["starting the rollout engine", "starting the learner", "held-out evaluation before training",
             "steps 1-3 (1 checkpoint)", "held-out evaluation after training"]
    at = [text.find(words) for words in order]
    assert -1 not in at and at == sorted(at), text
    # the finished run's held-out table has the final evaluation without a reload
    heldout = table_rows(lpage, lpage.get_by_test_id("stDataFrame").filter(has_text="accuracy after").first)
    assert heldout and all(r.get("accuracy after", "") not in ("", "—") for r in heldout), heldout
    # the runs table above the live panel follows it (the panel reruns the page on a change)
    row = next(r for r in table_rows(lpage, "runs_table") if r["id"] == run["id"])
    assert row["status"] == "completed" and row["progress"] == "3/3", row
    screenshot(lpage, "runs-launched-run-completed")
    with Store(launch_db) as store:
        assert len(store.trajectories(run["id"], limit=100)) == 3 * 2 * 2


def test_stop_a_running_run_then_resume_it(lpage, launch_db, tiny_model_dir, tmp_path):
    steps = 40  # enough that the stop lands mid-run
    _fill_tiny(lpage, tiny_model_dir, tmp_path / "out", "stop-and-resume", steps=steps)
    click_button(lpage, "Launch")
    wait_idle(lpage, "stop-and-resume")
    (run,) = [r for r in _runs(launch_db) if r["name"] == "stop-and-resume"]
    deadline = time.monotonic() + RUN_WAIT_MS / 1000
    with Store(launch_db) as store:  # the first checkpoint (after step 1) makes it resumable
        while not store.checkpoints(run["id"]) and time.monotonic() < deadline:
            assert store.get_run(run["id"])["status"] in ("pending", "running"), store.get_run(run["id"])
            time.sleep(1)
    expect(_metric(lpage, "Status")).to_contain_text("running", timeout=RUN_WAIT_MS)
    screenshot(lpage, "runs-live")
    click_button(lpage, "Stop")
    expect(_metric(lpage, "Status")).to_contain_text("stopped", timeout=RUN_WAIT_MS)
    wait_idle(lpage)
    with Store(launch_db) as store:
        stopped = store.get_run(run["id"])
    assert stopped["status"] == "stopped" and 1 <= stopped["step"] < steps
    screenshot(lpage, "runs-stopped")

    click_button(lpage, "Resume")
    wait_idle(lpage, "Resumed after step")
    expect(_metric(lpage, "Status")).to_contain_text("completed", timeout=RUN_WAIT_MS)
    wait_idle(lpage)
    screenshot(lpage, "runs-resumed-completed")
    with Store(launch_db) as store:
        done = store.get_run(run["id"])
        rows = store.trajectories(run["id"], limit=1000)
        ckpts = [c["step"] for c in store.checkpoints(run["id"])]
    assert done["status"] == "completed" and done["step"] == steps
    per_step = {s: sum(r["step"] == s for r in rows) for s in range(1, steps + 1)}
    assert set(per_step.values()) == {2 * 2}, per_step  # every step once: none lost, none twice
    assert ckpts == list(range(1, steps + 1))
