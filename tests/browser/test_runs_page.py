"""The Runs page in Chromium on a real tiny run: the table, status, curves, the link onward."""

import re

from tests.browser.streamlit_ui import expect, goto, screenshot, selectbox, table_rows, wait_idle

MIN_CHARTS = 4  # reward, KL, response length, throughput at least


def test_runs_page_shows_the_tiny_run_with_its_curves(page, browser_run):
    _, run_id = browser_run
    goto(page, "/runs", "tiny-e2e", run=run_id)

    rows = table_rows(page, "runs_table")
    assert {"id": run_id, "name": "tiny-e2e", "status": "completed"}.items() <= rows[0].items(), rows
    expect(selectbox(page, "Run")).to_have_value(re.compile(run_id))
    status = page.get_by_test_id("stMetric").filter(has_text="Status")
    expect(status).to_contain_text("completed")
    expect(page.get_by_test_id("stMetric").filter(has_text="Step")).to_contain_text("3 / 3")

    charts = page.get_by_test_id("stPlotlyChart")
    expect(charts.nth(MIN_CHARTS - 1)).to_be_visible()
    for chart in charts.all()[:MIN_CHARTS]:  # drawn by plotly, with at least one line
        expect(chart.locator(".main-svg").first).to_be_visible()
        expect(chart.locator(".scatterlayer .trace").first).to_be_attached()
    expect(page.get_by_text("Reward and pass rate (mean)").first).to_be_attached()
    expect(page.get_by_role("heading", name="Checkpoints")).to_be_visible()
    screenshot(page, "runs")


def test_runs_page_links_to_the_runs_trajectories(page, browser_run):
    _, run_id = browser_run
    goto(page, "/runs", "tiny-e2e", run=run_id)

    page.get_by_role("link", name="Inspect this run's trajectories").click()
    wait_idle(page, "Reward breakdown")
    assert page.url.split("?")[0].endswith("/trajectories")
    expect(page.get_by_role("heading", name="Trajectories", exact=True)).to_be_visible()
    expect(selectbox(page, "Run")).to_have_value(re.compile(run_id))
