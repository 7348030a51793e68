"""The Home, Launch, Domains, Sandboxes and Retrieval pages in Chromium over the tiny run's
database: reached from the sidebar and by their URL, drawn without an exception. (What the
Launch form does is not covered here.)"""

import pytest

from tests.browser.streamlit_ui import (
    VIEWPORT, click_sidebar_link, expect, goto, screenshot, table_rows, wait_idle,
)

PAGES = {  # sidebar title: (URL path, heading, text the page shows once drawn)
    "Home": ("/", "RL Workbench", "Recent runs"),
    "Launch": ("/launch", "Launch a run", "Other settings (YAML)"),
    "Domains": ("/domains", "Domains", "Catalogue"),
    "Sandboxes": ("/sandboxes", "Sandboxes", "Recent executions"),
    "Retrieval": ("/retrieval", "Retrieval", "Context-length sweeps"),
}


@pytest.mark.parametrize("title", list(PAGES))
def test_page_renders_from_the_sidebar_and_its_url(page, title):
    path, heading, text = PAGES[title]
    goto(page, "/runs", "Runs")

    click_sidebar_link(page, title)
    wait_idle(page, text)
    assert page.url.split("?")[0].endswith(path)
    expect(page.get_by_test_id("stMain").get_by_role("heading", name=heading, exact=True)).to_be_visible()
    screenshot(page, title.lower())

    page.reload()
    wait_idle(page, text)
    expect(page.get_by_test_id("stMain").get_by_role("heading", name=heading, exact=True)).to_be_visible()


def test_home_lists_the_tiny_run(page, browser_run):
    _, run_id = browser_run
    goto(page, "/", "Recent runs")
    recent = page.get_by_test_id("stDataFrame").first  # a table without selection has no key class
    assert {"id": run_id, "name": "tiny-e2e", "status": "completed"}.items() <= table_rows(page, recent)[0].items()


def test_a_deep_link_on_a_fresh_server_goes_through_the_router(browser, fresh_app_url):
    context = browser.new_context(base_url=fresh_app_url, viewport=VIEWPORT)
    try:
        page = context.new_page()
        goto(page, "/trajectories", "Trajectories")
        expect(page.get_by_test_id("stSidebar")).to_contain_text("RL Workbench", timeout=5_000)
        assert "Store:" in page.get_by_test_id("stSidebar").inner_text()  # the router's sidebar, not file names
    finally:
        context.close()


def test_a_command_runs_in_a_sandbox_from_the_sandboxes_page(page, docker_engine):
    # a real container of the sandbox image: its output, exit code and outcome, no network
    from tests.browser.streamlit_ui import by_label, click_button

    goto(page, "/sandboxes", "Run a command in a sandbox")
    field = by_label(page, "stTextArea", "Command (bash -c, in the workspace, as an unprivileged user)")
    field.locator("textarea").fill("echo made-in-$(pwd); id -u; python3 -c 'import socket; "
                                   "socket.create_connection((\"1.1.1.1\", 53), 2)' 2>/dev/null || echo offline; exit 3")
    field.locator("textarea").press("Tab")
    click_button(page, "Run in a new sandbox")
    wait_idle(page, "error, exit 3 in")
    out = page.get_by_test_id("stCode").first.inner_text()
    assert "made-in-/" in out and "offline" in out, out
    assert out.split()[1] != "0", f"the command ran as root: {out}"  # the unprivileged user
    screenshot(page, "sandboxes-command")
