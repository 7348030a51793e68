"""The Evaluation page in Chromium: a base-vs-checkpoint report from evaluations stored in the
page's database (sample rows built here, stored through the real Store), its tables, charts,
the regression marked, and the HTML download; the tiny run's held-out curves on the Runs page."""

import pytest

from backend.store import Store
from tests.backend.test_eval_report import BASE, CHECKPOINT, add_eval, eval_rows
from tests.browser.streamlit_ui import expect, goto, screenshot, table_rows, wait_idle


@pytest.fixture(scope="module")
def two_evaluations(browser_run):
    db, _ = browser_run
    with Store(db) as store:
        base = add_eval(store, "smollm2-135m", eval_rows(BASE))
        ckpt = add_eval(store, "r-demo:20", eval_rows(CHECKPOINT))
    return base, ckpt


def test_evaluation_page_compares_base_and_checkpoint(page, two_evaluations):
    base, ckpt = two_evaluations
    goto(page, "/evaluation", "Headline")
    expect(page.get_by_role("heading", name="Evaluation", exact=True)).to_be_visible()
    tables = page.get_by_test_id("stDataFrame")  # the list, A and B, the headline, the deltas, ...
    headline = {r["domain"]: r for r in table_rows(page, tables.nth(2))}
    assert {"humaneval", "chain_sum", "basic_arithmetic", "all domains"} <= set(headline), headline
    deltas = table_rows(page, tables.nth(3))
    assert deltas[0]["domain"] == "humaneval" and deltas[0]["verdict"] == "regression", deltas[:2]
    assert any(r["domain"] == "chain_sum" and r["verdict"] == "improvement" for r in deltas)
    charts = page.get_by_test_id("stPlotlyChart")
    expect(charts.first.locator(".main-svg").first).to_be_visible()
    expect(charts.first.locator(".barlayer .trace").first).to_be_attached()  # bars with CI error bars
    with page.expect_download() as download:
        page.get_by_role("button", name="Download the report (one HTML file)").click()
    html = open(download.value.path(), encoding="utf-8").read()
    assert "humaneval" in html and "regression" in html and 'src="http' not in html
    screenshot(page, "evaluation")


def test_runs_page_draws_the_held_out_curves(page, browser_run):
    _, run_id = browser_run
    goto(page, "/runs", "tiny-e2e", run=run_id)
    wait_idle(page, "Held-out accuracy (greedy)")
    title = page.get_by_text("Held-out accuracy (greedy), mean and per domain")
    expect(title.first).to_be_attached()
    assert title.count() >= 1
