"""The Trajectories page in Chromium on a real tiny run: open a trajectory from the table or
the picker and read it; filter by domain."""

import re
import sqlite3
from collections import Counter


from backend import views
from backend.store import Store
from tests.browser.streamlit_ui import (
    click_table_row, code_texts, expect, fill_text, goto, grid, screenshot, select_option, selectbox, squash,
    table_row_count, table_rows, wait_idle,
)

TRAJ_TABLE = "traj_table"


def domain_counts(db, run_id: str) -> Counter:
    with sqlite3.connect(db) as con:
        return Counter(dict(con.execute(
            "SELECT domain, count(*) FROM trajectories WHERE run_id = ? GROUP BY domain", (run_id,))))


def expect_trajectory(page, db, traj_id: int) -> None:
    """The page shows trajectory `traj_id` as stored: prompt, completion, reward breakdown."""
    with Store(db) as store:
        traj = store.trajectory(traj_id)
    expect(page.get_by_role("heading", name=f"Trajectory #{traj_id}", exact=True)).to_be_visible()
    expect(page.get_by_text(f"{traj['domain']} · step {traj['step']}").first).to_be_visible()
    codes = code_texts(page)
    assert squash(views.readable_prompt(traj["prompt"])) in codes, "the prompt as role-labelled messages"
    assert "[user]" in squash(views.readable_prompt(traj["prompt"])) and "<|im_start|>" not in " ".join(codes)
    assert squash(traj["completion"]) in codes, "the completion should be shown as stored"
    expect(page.get_by_test_id("stMetric").filter(has_text="Reward")).to_contain_text(f"{traj['reward']:.3f}")
    breakdown = page.get_by_test_id("stJson").first
    for key in traj["breakdown"]:
        expect(breakdown).to_contain_text(f'"{key}"')
    expect(page.get_by_role("heading", name="Its group")).to_be_visible()


def test_open_a_trajectory_from_the_table(page, browser_run):
    db, run_id = browser_run
    total = sum(domain_counts(db, run_id).values())
    goto(page, "/trajectories", f"{total} trajectories match", run=run_id)
    assert table_row_count(page, TRAJ_TABLE) == total

    row = 4
    traj_id = int(table_rows(page, TRAJ_TABLE)[row]["id"])
    click_table_row(page, TRAJ_TABLE, row)
    expect_trajectory(page, db, traj_id)
    expect(selectbox(page, "Trajectory")).to_have_value(re.compile(f"^#{traj_id} ·"))
    screenshot(page, "trajectories")


def test_open_a_trajectory_from_the_picker(page, browser_run):
    db, run_id = browser_run
    goto(page, "/trajectories", "Reward breakdown", run=run_id)
    last = int(table_rows(page, TRAJ_TABLE)[-1]["id"])

    select_option(page, "Trajectory", f"#{last} ·", exact=False)
    expect_trajectory(page, db, last)


def test_filter_by_domain_changes_the_table(page, browser_run):
    db, run_id = browser_run
    counts = domain_counts(db, run_id)
    domain, n = min(counts.items(), key=lambda kv: kv[1])
    assert n < sum(counts.values()), "the tiny run should sample more than one domain"
    goto(page, "/trajectories", f"{sum(counts.values())} trajectories match", run=run_id)

    select_option(page, "Domain", domain)
    expect(page.get_by_text(f"{n} trajectories match", exact=True)).to_be_visible()
    assert table_row_count(page, TRAJ_TABLE) == n
    assert {r["domain"] for r in table_rows(page, TRAJ_TABLE)} == {domain}
    expect(selectbox(page, "Trajectory")).to_have_value(re.compile(f"· {domain} ·"))
    screenshot(page, "trajectories-filtered")


def test_filter_after_picking_a_row(page, browser_run):
    db, run_id = browser_run
    counts = domain_counts(db, run_id)
    domain, n = min(counts.items(), key=lambda kv: kv[1])
    goto(page, "/trajectories", "Reward breakdown", run=run_id)
    click_table_row(page, TRAJ_TABLE, n)  # a row the filtered table won't have

    select_option(page, "Domain", domain)
    expect(page.get_by_text(f"{n} trajectories match", exact=True)).to_be_visible()
    assert table_row_count(page, TRAJ_TABLE) == n  # the stale pick did not break the shorter table


def test_full_text_search_and_finish_reason_filter(page, browser_run):
    """Type a word from a stored completion into the search box: the count and the rows are
    the store's full-text matches; then narrow by finish reason."""
    db, run_id = browser_run
    with Store(db) as store:
        rows = store.trajectories(run_id, limit=1000)
        words = Counter(w for r in rows for w in set(re.findall(r"[A-Za-z]{4,}", r["completion"])))
        word = min(words, key=lambda w: (words[w], w))  # a rare word: the search narrows the list
        found = store.trajectories(run_id, query=word, limit=1000)
        reasons = Counter(r["finish_reason"] for r in found)
    assert 0 < len(found) < len(rows)
    goto(page, "/trajectories", "Reward breakdown", run=run_id)

    fill_text(page, "Search text", word)
    n = len(found)
    expect(page.get_by_text(f"{n} {'trajectory matches' if n == 1 else 'trajectories match'}",
                            exact=True)).to_be_visible()
    # the grid redraws a moment after the caption: wait for its row count (the header row counts too)
    expect(grid(page, TRAJ_TABLE)).to_have_attribute("aria-rowcount", str(n + 1))
    assert table_row_count(page, TRAJ_TABLE) == n
    assert {int(r["id"]) for r in table_rows(page, TRAJ_TABLE)} <= {r["id"] for r in found}  # rows on screen
    marked = page.locator("pre.rlwb-search-hit mark")  # the shown completion marks the word
    expect(marked.first).to_be_visible()
    assert {m.lower() for m in marked.all_inner_texts()} == {word.lower()}
    screenshot(page, "trajectories-search")
    with Store(db) as store:
        c = store.count_trajectories(run_id, query=word, search_in="completion")
    page.get_by_text("Completions only", exact=True).click()
    wait_idle(page)
    expect(page.get_by_text(f"{c} {'trajectory matches' if c == 1 else 'trajectories match'}",
                            exact=True)).to_be_visible()
    with Store(db) as store:  # a word of the prompts that no completion holds
        prompt_word = next(w for w in re.findall(r"[A-Za-z]{5,}", rows[0]["prompt"])
                           if not store.count_trajectories(run_id, query=w, search_in="completion"))
        in_prompts = store.count_trajectories(run_id, query=prompt_word)
    fill_text(page, "Search text", prompt_word)
    expect(page.get_by_text("No trajectories match these filters.", exact=False)).to_be_visible()
    page.get_by_text("Completions only", exact=True).click()
    wait_idle(page)
    expect(page.get_by_text(f"{in_prompts:,} {'trajectory matches' if in_prompts == 1 else 'trajectories match'}",
                            exact=False).first).to_be_visible()
    fill_text(page, "Search text", word)

    reason, k = reasons.most_common(1)[0]
    select_option(page, "Finish reason", reason)
    expect(page.get_by_text(f"{k} {'trajectory matches' if k == 1 else 'trajectories match'}",
                            exact=True)).to_be_visible()
    assert {r["finish"] for r in table_rows(page, TRAJ_TABLE)} == {reason}
