"""Driving the Streamlit page in Chromium the way a user does: open a URL, click, pick, type,
then wait until Streamlit has finished running the script.

Every action helper waits with `wait_idle` before it returns, and `wait_idle` fails at once
when the page shows an exception, so a test reads as a list of user steps and assertions.
Widgets are found by their label, as a user sees them, or by their key (Streamlit gives the
element of a keyed widget the CSS class ``st-key-<key>``; see `by_key`).

Not covered: Streamlit's data grid is a canvas; `table_rows` reads its accessibility table,
which holds only the rows on screen (`table_row_count` gives the full count), and
`click_table_row` clicks by pixel position, so rows below the visible area need scrolling
first.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import urlencode

try:
    from playwright.sync_api import Locator, Page, expect
except ImportError:  # collected anyway: the `chromium` fixture skips or fails with the reason
    Locator = Page = expect = None

REPO = Path(__file__).resolve().parents[2]
TIMEOUT_MS = 90_000  # a script run or chart draw on a busy 2-core machine; generous on purpose
if expect is not None:  # assertions wait as long as actions do (Playwright's own default is 5 s: a cold
    expect.set_options(timeout=TIMEOUT_MS)  # page computing held-out baselines on a busy machine takes longer)
SETTLE_MS = 300  # a widget change reaches the server and starts a run a moment after the event
ROW_PX = 35  # Streamlit's data grid: header and row height in pixels
MARKER_PX = 15  # x offset of the row-selection checkbox inside the grid
VIEWPORT = {"width": 1400, "height": 1000}  # a laptop window; screenshots grow to the page
MAX_SHOT_PX = 16_000  # the tallest screenshot taken (Chromium limits texture size)
IDLE = ('[data-testid="stApp"][data-test-connection-state="CONNECTED"]'
        '[data-test-script-state="notRunning"]')


def goto(page: Page, path: str = "/", *texts: str, **query: str) -> None:
    """Open `path` (relative to the app, e.g. ``/trajectories``) with `query` as URL
    parameters, then `wait_idle` for `texts`."""
    page.goto(path + (f"?{urlencode(query)}" if query else ""))
    wait_idle(page, *texts)


def wait_idle(page: Page, *texts: str, timeout_ms: int = TIMEOUT_MS,
              exception_ok: bool = False) -> None:
    """Wait until the app is connected, no script run is running or pending (twice in a row,
    `SETTLE_MS` apart), no "Running" status shows, and each of `texts` is visible.

    Raises:
        AssertionError: the page shows an exception (unless `exception_ok`), with its text.
        playwright TimeoutError: the app did not settle within `timeout_ms`.
    """
    page.wait_for_timeout(SETTLE_MS)
    while True:
        page.wait_for_selector(IDLE, state="attached", timeout=timeout_ms)
        page.wait_for_timeout(SETTLE_MS)
        if page.locator(IDLE).count():
            break
    expect(page.get_by_test_id("stStatusWidget").get_by_text("Running")).to_have_count(0, timeout=timeout_ms)
    if not exception_ok:
        assert_no_exception(page)
    for text in texts:
        expect(page.get_by_text(text).filter(visible=True).first).to_be_visible(timeout=timeout_ms)


def assert_no_exception(page: Page) -> None:
    """Fail with the text of every exception box on the page, if any."""
    boxes = page.get_by_test_id("stException")
    if boxes.count():
        shown = "\n---\n".join(box.inner_text() for box in boxes.all())
        raise AssertionError(f"the page shows {boxes.count()} exception(s):\n{shown}")


def by_key(page: Page, key: str) -> Locator:
    """The element of the widget (or keyed element) with session_state key `key`."""
    return page.locator(f".st-key-{key}")


def by_label(page: Page, test_id: str, label: str) -> Locator:
    """The widget of kind `test_id` (e.g. ``stSelectbox``, ``stNumberInput``) whose label
    is exactly `label`."""
    return page.get_by_test_id(test_id).filter(
        has=page.get_by_test_id("stWidgetLabel").get_by_text(label, exact=True))


def click_sidebar_link(page: Page, title: str) -> None:
    """Follow the sidebar navigation link of the page titled `title`."""
    page.get_by_test_id("stSidebarNavLink").filter(has=page.get_by_text(title, exact=True)).click()
    wait_idle(page)


def click_button(page: Page, label: str) -> None:
    """Click the button (form submit buttons included) labelled exactly `label`.

    Streamlit's own header shows a "Stop" button while a script reruns (the live pages
    rerun every few seconds), so header buttons are left out."""
    own = page.locator('button:not([data-testid="stBaseButton-header"])')
    page.get_by_role("button", name=label, exact=True).and_(own).click()
    wait_idle(page)


def selectbox(page: Page, label: str) -> Locator:
    """The input of the selectbox labelled `label`; its value is the shown option, e.g.
    ``expect(selectbox(page, "Run")).to_have_value(re.compile(run_id))``."""
    return page.get_by_role("combobox", name=label, exact=True)


def select_option(page: Page, label: str, option: str, *, exact: bool = True) -> None:
    """Pick `option` in the selectbox labelled `label`. Types the option first, so options
    beyond the visible part of a long list are found. With ``exact=False`` the one option
    containing `option` is picked (e.g. ``"#7 ·"``)."""
    box = selectbox(page, label)
    box.click()
    box.fill(option)
    wanted = re.compile(rf"^\s*{re.escape(option)}\s*$") if exact else option
    page.get_by_role("option").filter(has_text=wanted).click()
    wait_idle(page)


def fill_number(page: Page, label: str, value: float | int) -> None:
    """Type `value` into the number input labelled `label` and move the focus on (which
    commits it; inside a form the form's submit button then sends it)."""
    field = by_label(page, "stNumberInput", label).locator("input")
    field.fill(str(value))
    field.press("Tab")
    wait_idle(page)


def fill_text(page: Page, label: str, value: str) -> None:
    """Type `value` into the text input or text area labelled `label` and move the focus on."""
    widget = by_label(page, "stTextInput", label).or_(by_label(page, "stTextArea", label))
    field = widget.locator("input, textarea")
    field.fill(value)
    field.press("Tab")
    wait_idle(page)


def grid(page: Page, table: str | Locator) -> Locator:
    """The accessibility table of a data grid, once drawn (a moment after the script run
    that sent it). `table` is the key of a selectable ``st.dataframe`` (only those get the
    ``st-key-`` class) or a locator of the element, e.g. ``page.get_by_test_id("stDataFrame").first``."""
    element = by_key(page, table) if isinstance(table, str) else table
    found = element.locator('table[role="grid"]')
    expect(found.locator("thead th").first).to_be_attached(timeout=TIMEOUT_MS)
    return found


def table_row_count(page: Page, table: str | Locator) -> int:
    """Rows of a data grid (all of them, not only those on screen); `table` as in `grid`."""
    return int(grid(page, table).get_attribute("aria-rowcount")) - 1  # the header row counts too


def table_rows(page: Page, table: str | Locator) -> list[dict[str, str]]:
    """The on-screen rows of a data grid, as {column: cell text}; `table` as in `grid`."""
    found = grid(page, table)
    if table_row_count(page, table):
        expect(found.locator("tbody tr").first).to_be_attached(timeout=TIMEOUT_MS)
    header = [th.inner_text() for th in found.locator("thead th").all()]
    return [dict(zip(header, (td.inner_text() for td in row.locator("td").all())))
            for row in found.locator("tbody tr").all()]


def wider_than_page(page: Page) -> list[str]:
    """The data grids on the page that scroll sideways (their columns are wider than the
    page gives them), each named by its first column headers; [] when every grid fits."""
    return page.evaluate("""() => [...document.querySelectorAll('[data-testid="stDataFrame"]')]
        .filter(t => { const s = t.querySelector('.dvn-scroller'); return s && s.scrollWidth > s.clientWidth + 1; })
        .map(t => [...t.querySelectorAll('thead th')].slice(0, 3).map(h => h.innerText).join(' | '))""")


def click_table_row(page: Page, key: str, row: int) -> None:
    """Select on-screen row `row` (0-based) of the data grid with key `key` by clicking its
    selection checkbox, as a user does (the grid needs ``on_select``)."""
    grid(page, key)
    canvas = by_key(page, key).locator("canvas").first
    canvas.scroll_into_view_if_needed()
    box = canvas.bounding_box()
    page.mouse.click(box["x"] + MARKER_PX, box["y"] + ROW_PX * (row + 1) + ROW_PX // 2)
    wait_idle(page)


def code_texts(page: Page) -> list[str]:
    """The text of every code block on the page, whitespace collapsed (see `squash`)."""
    return [squash(c.inner_text()) for c in page.get_by_test_id("stCode").all()]


def squash(text: str) -> str:
    """`text` with each run of whitespace as one space, trimmed (how the page wraps text)."""
    return re.sub(r"\s+", " ", text).strip()


def artifacts_dir() -> Path:
    """Where screenshots go: $RLWB_ARTIFACTS, else ``test-artifacts/screenshots/`` in the repo."""
    path = Path(os.environ.get("RLWB_ARTIFACTS") or REPO / "test-artifacts" / "screenshots")
    path.mkdir(parents=True, exist_ok=True)
    return path


def screenshot(page: Page, name: str) -> Path:
    """Save the whole page (not only the viewport) as ``<artifacts_dir>/<name>.png``.

    Streamlit scrolls its main area inside the window, so the window is stretched to the
    area's height for the shot and put back afterwards.

    Returns:
        The PNG's path.
    """
    path = artifacts_dir() / f"{name}.png"
    size = page.viewport_size
    height = page.evaluate("() => document.querySelector('[data-testid=stMain]')?.scrollHeight ?? 0")
    if height > size["height"]:
        page.set_viewport_size({"width": size["width"], "height": min(height, MAX_SHOT_PX)})
        page.wait_for_timeout(2 * SETTLE_MS)  # charts redraw for the new size
    try:
        page.screenshot(path=path, full_page=True, animations="disabled")
    finally:
        page.set_viewport_size(size)
    return path
