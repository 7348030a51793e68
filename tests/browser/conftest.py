"""Fixtures for the browser tests: the real page (`streamlit run`) over a copy of the tiny
run's database, driven by Playwright in Debian's headless Chromium.

`page` is a fresh browser context (one Streamlit session) per test; `browser` and `app_url`
are shared by the tests of this folder and stopped after them; `fresh_app_url` is a new
server per test (for what only a first visit shows).
Without Chromium or Playwright the tests skip with the reason; with RLWB_REQUIRE_BROWSER=1
(as in CI) they fail instead. Screenshots of failed tests go next to the others as
``FAILED-<test>.png`` (see `streamlit_ui.artifacts_dir`).

Not covered: other browsers, and any browser download (`playwright install` is never run;
`make setup` installs Debian's chromium, see setup_chromium.sh).
"""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest

from tests.browser.streamlit_ui import TIMEOUT_MS, VIEWPORT, goto, screenshot

CHROMIUM = os.environ.get("RLWB_CHROMIUM", "/usr/bin/chromium")
APT_LOG = Path(os.environ.get("RLWB_CHROMIUM_LOG", "/tmp/rlwb-apt-chromium.log"))
# The test machines refuse outbound connections: keep Chromium from trying any.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic",
                 "--no-first-run", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]
SERVER_START_S = 120
FAILED = pytest.StashKey[bool]()


def _browser_problem() -> str | None:
    if not os.access(CHROMIUM, os.X_OK):
        problem = f"no Chromium at {CHROMIUM}; `make setup` as root installs Debian's chromium"
        if APT_LOG.exists():
            problem += f"; the end of {APT_LOG}:\n" + "\n".join(APT_LOG.read_text().splitlines()[-15:])
        return problem
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError as e:
        return f"Playwright for Python is not installed ({e}); run `make setup`"
    return None


@pytest.fixture(scope="session", autouse=True)
def chromium() -> str:
    """The Chromium executable; skips (fails under RLWB_REQUIRE_BROWSER=1) without it.

    Autouse, so a missing browser is found before the tiny run is built."""
    problem = _browser_problem()
    if problem:
        if os.environ.get("RLWB_REQUIRE_BROWSER") == "1":
            pytest.fail(f"RLWB_REQUIRE_BROWSER=1 but the browser tests can't run: {problem}")
        pytest.skip(f"browser tests need Chromium and Playwright: {problem}")
    return CHROMIUM


@pytest.fixture(scope="package")
def browser(chromium):
    """One headless Chromium for these tests (closed after the last of them)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, headless=True, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture(scope="package")
def browser_run(tiny_run, tmp_path_factory) -> tuple[Path, str]:
    """(database, run id): a copy of the tiny run's store, so the page can't change the
    database other tests read."""
    db, run_id = tiny_run
    copy = tmp_path_factory.mktemp("browser-db") / "run.db"
    src, dst = sqlite3.connect(db), sqlite3.connect(copy)
    try:
        src.backup(dst)
    finally:
        src.close()
        dst.close()
    return copy, run_id


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def serve_app(db: Path, log: Path):
    """`streamlit run app/main.py` on a free localhost port over `db`; yields its URL.

    The server runs in its own process group, killed whole on exit."""
    repo = Path(__file__).resolve().parents[2]
    port = _free_port()
    cmd = [sys.executable, "-m", "streamlit", "run", "app/main.py",
           "--server.address", "127.0.0.1", "--server.port", str(port),
           "--server.headless", "true", "--browser.gatherUsageStats", "false",
           "--server.fileWatcherType", "none", "--client.toolbarMode", "viewer"]  # as `rlwb ui`
    env = {**os.environ, "RLWB_DB": str(db), "PYTHONPATH": str(repo)}
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, cwd=repo, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + SERVER_START_S
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"streamlit exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"streamlit did not answer in {SERVER_START_S} s:\n{log.read_text()[-3000:]}")
            time.sleep(0.5)
        yield url
    finally:
        _stop(proc)


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM to the server's process group, SIGKILL to whatever is left after 15 s."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        pass
    except ProcessLookupError:
        return
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def _new_page(browser, url: str):
    context = browser.new_context(base_url=url, viewport=VIEWPORT)
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    return context, page


@pytest.fixture(scope="package")
def app_url(browser, browser_run, tmp_path_factory) -> str:
    """The page over the tiny run's database, one server for these tests (stopped after the
    last of them).

    Opened once at ``/`` before any test: until the router (app/main.py) has run once, the
    server resolves deep links from the app/screens/ folder instead of the router (see
    test_other_pages.py::test_a_deep_link_on_a_fresh_server_goes_through_the_router)."""
    db, _ = browser_run
    with serve_app(db, tmp_path_factory.mktemp("streamlit") / "streamlit.log") as url:
        context, page = _new_page(browser, url)
        goto(page, "/", "RL Workbench")
        context.close()
        yield url


@pytest.fixture
def fresh_app_url(browser_run, tmp_path) -> str:
    """A newly started page over the tiny run's database that no one has opened yet."""
    with serve_app(browser_run[0], tmp_path / "streamlit.log") as url:
        yield url


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.when == "call":
        item.stash[FAILED] = report.failed
    return report


@contextmanager
def watched_page(request, browser, url: str, after=None):
    """A new tab in a new browser context (one Streamlit session) on `url`. Afterwards: a
    screenshot when the test failed, the context closed, `after()` (e.g. stopping what the
    test started), then a failure if the page raised a JavaScript error."""
    from playwright.sync_api import Error as PlaywrightError

    context, page = _new_page(browser, url)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    yield page
    if request.node.stash.get(FAILED, False):
        with suppress(PlaywrightError):  # a crashed page has nothing to show
            screenshot(page, f"FAILED-{request.node.name}")
    context.close()
    if after is not None:
        after()
    assert not errors, f"JavaScript errors on the page: {errors}"


@pytest.fixture
def page(request, browser, app_url):
    """A tab on `app_url` (`watched_page`); paths such as ``page.goto("/trajectories")`` are
    relative to it."""
    with watched_page(request, browser, app_url) as page:
        yield page
