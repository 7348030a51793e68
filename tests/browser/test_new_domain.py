"""Issue 24's path in Chromium, no code written: upload a JSONL file of question/answer rows
on the Domains page, map its columns, save and validate it as a domain, put it in a mix,
launch a tiny run on the mix and see the run's trajectories of that domain."""

from __future__ import annotations

import json
import re

from backend.store import Store
from tests.browser.streamlit_ui import (
    by_label, click_button, expect, fill_text, goto, screenshot, select_option, selectbox, wait_idle,
)
from tests.browser.test_launch_stop_resume import (  # noqa: F401 - launch_db, launch_url, lpage: fixtures
    RUN_WAIT_MS, _fill_tiny, _metric, _runs, launch_db, launch_url, lpage,
)


def _open_tab(page, name: str) -> None:
    page.get_by_role("tab", name=name).click()
    wait_idle(page)


def _pick(page, label: str, option: str) -> None:
    """Add `option` to the visible multiselect labelled `label`."""
    box = by_label(page, "stMultiSelect", label).filter(visible=True).get_by_role("combobox")
    box.click()
    box.fill(option)
    page.get_by_role("option").filter(has_text=re.compile(rf"^\s*{re.escape(option)}\s*$")).click()
    page.keyboard.press("Escape")
    wait_idle(page)


def test_a_jsonl_file_becomes_a_domain_a_mix_and_a_run(lpage, launch_db, tiny_model_dir, tmp_path):
    page = lpage
    data = tmp_path / "capitals.jsonl"
    rows = [{"question": f"What is {i} plus {i}?", "answer": str(2 * i)} for i in range(1, 61)]
    data.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")

    goto(page, "/domains", "Domains")
    _open_tab(page, "New domain")
    page.locator("input[type=file]").set_input_files(str(data))
    wait_idle(page, "60 rows")
    fill_text(page, "Domain name", "doubling")
    # the first column is offered as the prompt and a column named "answer" as the answer
    expect(selectbox(page, "Prompt column")).to_have_value("question")
    expect(selectbox(page, "Answer column")).to_have_value("answer")
    wait_idle(page, "The prompt as the model sees it")
    expect(page.get_by_text("Give your final answer on the last line as: Answer: <answer>").filter(visible=True).first
           ).to_be_visible()
    click_button(page, "Save domain")
    wait_idle(page, "Saved doubling version 1")
    click_button(page, "Validate now")
    wait_idle(page, "doubling passed validation")
    screenshot(page, "new-domain-saved-validated")
    with Store(launch_db) as store:
        assert [d["name"] for d in store.list_user_domains()] == ["doubling"]
        assert store.latest_validations()["doubling"]["passed"] is True

    _open_tab(page, "Mix editor")
    _pick(page, "Domains", "doubling")
    fill_text(page, "Mix name", "my-first-mix")
    click_button(page, "Save as new version")
    wait_idle(page, "Saved my-first-mix version 1")

    _fill_tiny(page, tiny_model_dir, tmp_path / "out", "on-my-domain", steps=2)
    select_option(page, "Stored mix", "my-first-mix")
    click_button(page, "Launch")
    wait_idle(page, "on-my-domain")
    (run,) = [r for r in _runs(launch_db) if r["name"] == "on-my-domain"]
    assert run["config"]["mix"] == "my-first-mix" and run["config"]["user_domains"] == {"doubling": 1}
    expect(_metric(page, "Status")).to_contain_text("completed", timeout=RUN_WAIT_MS)
    wait_idle(page)

    goto(page, "/trajectories", run=run["id"])
    wait_idle(page, "doubling")
    expect(page.get_by_text(re.compile(r"What is \d+ plus \d+\?")).first).to_be_visible()
    screenshot(page, "new-domain-trajectories")
    with Store(launch_db) as store:
        trajs = store.trajectories(run["id"], limit=100)
    assert trajs and {t["domain"] for t in trajs} == {"doubling"}
