"""Starting an evaluation from the Evaluation page in Chromium: a bad k is refused under the
button naming its field and starts nothing; a real evaluation of the tiny run's checkpoint
(transformers engine, 2 held-out tasks x 2 samples) runs as a background process, shows
under Running, and its report appears without a reload."""

from __future__ import annotations

import time

import pytest

from backend.store import Store
from tests.browser.conftest import serve_app, watched_page
from tests.browser.streamlit_ui import (
    click_button, expect, fill_number, fill_text, goto, screenshot, select_option, table_rows, wait_idle,
)

EVAL_WAIT_MS = 300_000  # the process imports torch, loads the tiny model, samples 4 completions: ~30-60 s


@pytest.fixture(scope="module")
def eval_db(browser_run, tmp_path_factory):
    """A copy of the tiny run's store of this module's own (evaluations must not appear in
    the store the other page tests read), without the standalone evaluations other modules
    stored there (test_evaluation_page's): the form is open only while none has completed."""
    import sqlite3

    db = tmp_path_factory.mktemp("eval-start") / "wb.db"
    src, dst = sqlite3.connect(browser_run[0]), sqlite3.connect(db)
    try:
        src.backup(dst)
        standalone = "SELECT id FROM eval_runs WHERE phase IS NULL"  # `rlwb eval`'s, not a run's own
        dst.execute(f"DELETE FROM eval_samples WHERE eval_id IN ({standalone})")
        dst.execute(f"DELETE FROM eval_runs WHERE id IN ({standalone})")
        dst.commit()
    finally:
        src.close()
        dst.close()
    with Store(db) as store:
        assert store.list_evals(in_run=False) == []
    return db


@pytest.fixture
def epage(request, browser, eval_db, tmp_path):
    with serve_app(eval_db, tmp_path / "streamlit.log") as url, \
            watched_page(request, browser, url, after=lambda: _stop_all(eval_db)) as page:
        yield page


def _stop_all(db) -> None:
    from backend import eval_jobs
    from backend.runs import process_alive

    with Store(db) as store:
        for ev in store.list_evals(statuses=("running",)):
            eval_jobs.stop(store, ev["id"])
            deadline = time.monotonic() + 60
            while process_alive(ev["pid"]) and time.monotonic() < deadline:
                time.sleep(0.5)


def test_an_evaluation_started_on_the_page_runs_and_reports(epage, browser_run, eval_db):
    page, (_, run_id) = epage, browser_run
    goto(page, "/evaluation", "Start an evaluation", "Model or checkpoint")
    select_option(page, "Model or checkpoint", f"tiny-e2e · {run_id} · step 3")  # its newest
    page.get_by_text("Domains at a level", exact=True).click()
    wait_idle(page, "Domains")
    fill_number(page, "Tasks per domain", 2)
    fill_number(page, "Samples per task", 2)
    fill_number(page, "Max new tokens", 8)
    select_option(page, "Engine", "hf")
    fill_text(page, "k (pass@k)", "1, 3")  # 3 > 2 samples: refused, naming the field
    expect(page.get_by_text("k (pass@k): k 3 must be between 1 and the samples per task")).to_be_visible()
    click_button(page, "Start evaluation")
    expect(page.get_by_text("Not started: k (pass@k)")).to_be_visible()
    with Store(eval_db) as store:
        assert store.list_evals(in_run=False) == []
    fill_text(page, "k (pass@k)", "1, 2")
    expect(page.get_by_text("1 domain × 2 tasks × 2 samples = 4 completions")).to_be_visible()
    click_button(page, "Start evaluation")
    expect(page.get_by_text("Started (pid")).to_be_visible()
    screenshot(page, "evaluation-start")
    # the report replaces "No completed evaluations" once the process has stored it
    expect(page.get_by_text("Headline", exact=True)).to_be_visible(timeout=EVAL_WAIT_MS)
    wait_idle(page, "Headline")
    with Store(eval_db) as store:
        (ev,) = store.list_evals(in_run=False)
    assert ev["status"] == "completed" and ev["run_id"] == run_id, ev
    assert ev["suite"]["domains"] == {"chain_sum": [1, 1]} and ev["suite"]["rollout_engine"] == "hf"
    headline = {r["domain"]: r for r in table_rows(page, page.get_by_test_id("stDataFrame").nth(2))}
    assert "chain_sum" in headline, headline
    expect(page.get_by_text("Start an evaluation", exact=True)).to_be_visible()  # folded: one completed now
    screenshot(page, "evaluation-started-report")
