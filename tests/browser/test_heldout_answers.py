"""In Chromium on the real tiny run: from the Runs page's held-out figure of one domain to the
Evaluation page's held-out answers, where the completions before and after training of the
same task stand side by side."""

import re

from backend.store import Store
from tests.browser.streamlit_ui import (code_texts, expect, goto, grid, screenshot, selectbox, squash, table_rows, wait_idle,
                                       wider_than_page)

DOMAIN = "chain_sum"


def _first_task(db, run_id: str) -> dict[str, dict]:
    """phase -> the stored sample of the first chain_sum task of the run's in-run evaluations."""
    with Store(db) as store:
        evals = {e["phase"]: e for e in store.in_run_evals(run_id)}
        return {phase: next(r for r in store.eval_samples(evals[phase]["id"], with_completions=True)
                            if r["domain"] == DOMAIN) for phase in ("before", "after")}


def test_a_held_out_figure_opens_the_answers_before_and_after(page, browser_run):
    db, run_id = browser_run
    goto(page, "/runs", "Held-out evaluation", run=run_id)
    figure = page.get_by_test_id("stDataFrame").filter(has_text="accuracy before")
    expect(figure).to_contain_text("too few tasks")  # 2 held-out tasks per domain: no interval
    expect(figure).to_contain_text("format rate")
    verdicts = page.get_by_test_id("stDataFrame").filter(has_text="best baseline")
    expect(verdicts).to_contain_text("verdict")
    expect(page.get_by_text("Reward audit")).to_be_visible()
    for table in page.get_by_test_id("stDataFrame").all():
        grid(page, table)  # drawn
    assert wider_than_page(page) == [], "tables cut on the right"
    screenshot(page, "runs-audit-heldout")

    page.get_by_role("link", name=f"{DOMAIN}: held-out answers").click()
    wait_idle(page, "Held-out answers")
    assert page.url.split("?")[0].endswith("/evaluation")
    expect(selectbox(page, "Domain")).to_have_value(DOMAIN)
    rows = table_rows(page, "eval_answers_table")
    assert len(rows) == 2 and {"answer A", "answer B", "reference"} <= set(rows[0]), rows

    want = _first_task(db, run_id)
    seed = want["before"]["task_seed"]
    assert want["after"]["task_seed"] == seed
    expect(page.get_by_text(re.compile(f"{DOMAIN}, level \\d+, seed {seed}")).first).to_be_visible()
    sides = page.get_by_test_id("stMarkdownContainer")
    expect(sides.filter(has_text=re.compile(rf"^A · run {run_id} before .*in-run, greedy"))).to_be_visible()
    expect(sides.filter(has_text=re.compile(rf"^B · run {run_id} after .*in-run, greedy"))).to_be_visible()
    shown = code_texts(page)  # the question, the prompt (a closed expander), A's (before) and B's (after) completion
    assert len(shown) == 4, shown
    assert shown[2:] == [squash(want[p]["completion"]) or "(empty completion)" for p in ("before", "after")], shown
    page.get_by_text("The prompt: the chat messages the model was given").click()
    wait_idle(page)
    prompt = code_texts(page)[1]
    assert prompt.startswith("system: ") and f"user: {shown[0]}" in prompt, prompt
    screenshot(page, "heldout-answers")
