"""The reward audit's flags over a window of steps (`backend.audit_view`) and `rlwb runs show`."""

from dataclasses import replace

import pytest

from backend.audit_view import MIN_ANSWERS, audit_domain, audit_lines, audit_run
from backend.cli import main
from backend.store import Store
from tests.backend.audit_runs import DOMAIN, audit_store, sample
from trainer.audit import row_of_sample


@pytest.fixture
def runs(tmp_path):
    return audit_store(tmp_path / "audit.db")


def test_a_run_that_collapses_to_one_answer_is_flagged_with_its_trajectories(runs):
    db, ids = runs
    with Store(db) as store:
        report = audit_run(store, ids["collapsing"])
        assert report.steps == (1, 10)
        signals = {f.signal for f in report.flags}
        assert {"constant_answer", "modal_rising", "diversity_falling"} <= signals
        # its "1"s are wrong (no reference is "1"): paid for the format alone; no copies, no length change
        assert signals <= {"constant_answer", "modal_rising", "diversity_falling", "format_only"}
        flag = next(f for f in report.flags if f.signal == "constant_answer")
        assert flag.domain == DOMAIN and flag.detail.startswith("'1' is 90% of 248 answers")  # 7 steps of 32 + 3 of 2 x 4
        assert len(flag.examples) == 5
        examples = [store.trajectory(i) for i in flag.examples]
        assert all(t["run_id"] == ids["collapsing"] and t["breakdown"]["extracted"] == "1" for t in examples)
        assert [t["step"] for t in examples[:4]] == [10] * 4  # latest step first, one per group
        assert len({t["group_idx"] for t in examples[:4]}) == 4


def test_a_healthy_run_has_no_flags(runs):
    db, ids = runs
    with Store(db) as store:
        report = audit_run(store, ids["healthy"])
    assert report.flags == [] and set(report.domains) == {DOMAIN}
    assert report.domains[DOMAIN].reward > 0.5  # it did learn: the audit is not silent for want of reward
    assert audit_lines(report) == [f"reward audit (steps 1-10): no audit flags ({DOMAIN})"]


def test_rlwb_runs_show_prints_the_audit(runs, capsys):
    db, ids = runs
    assert main(["--db", str(db), "runs", "show", ids["collapsing"]]) == 0
    out = capsys.readouterr().out
    assert "reward audit (steps 1-10): 4 flag(s)" in out  # constant, modal rising, diversity, format only
    line = next(ln for ln in out.splitlines() if "FLAG chain_sum constant_answer" in ln)
    with Store(db) as store:
        example = store.trajectories(ids["collapsing"], step_min=10)[-1]["id"]
    assert f"#{example}" in line  # the latest trajectory answering "1" is the first example
    assert main(["--db", str(db), "runs", "show", ids["healthy"]]) == 0
    assert "no audit flags" in capsys.readouterr().out


def test_a_run_without_trajectories_has_nothing_to_audit(tmp_path):
    with Store(tmp_path / "a.db") as store:
        rid = store.create_run("empty", {}, total_steps=1)
        assert audit_lines(audit_run(store, rid)) == ["reward audit: nothing to audit yet (no answers in the trajectories)"]


def _rows(answers_of_groups, refs, questions, length=20, start=0):
    rows, next_id = [], start
    for g, (answers, ref, q) in enumerate(zip(answers_of_groups, refs, questions)):
        for i, a in enumerate(answers):
            rows.append(replace(row_of_sample(sample(g, i, a, ref, q, length=length, seed=start + g)), id=next_id))
            next_id += 1
    return rows


def test_answers_copied_from_the_prompt_are_flagged():
    # spell_backward-like: the prompt's example word "nus" answered for tasks whose answers differ
    questions = [f'Spell "{w}" backward. For example, "sun" backward is nus.' for w in ("cat", "dog", "pen")]
    rows = _rows([["nus"] * 4 + ["tac"] * 4, ["nus"] * 6 + ["god"] * 2, ["nus"] * 3 + ["nep"] * 5],
                 ["tac", "god", "nep"], questions)
    _, flags = audit_domain("spell_backward", {1: rows})
    copy = next(f for f in flags if f.signal == "copied_from_prompt")
    assert "54% of 24 answers" in copy.detail
    assert {rows[i].answer for i in range(len(rows)) if rows[i].id in copy.examples} == {"nus"}


def test_wrong_picks_where_the_answer_is_always_in_the_question_are_not_copying():
    # largest_number-like: every reference is a number of its question, so every answer is a
    # copy; a wrong one is a wrong pick, not a hack
    questions = ["Which is the largest of these numbers: 13, 81, 80?", "Which is the largest of these numbers: "
                 "75, 64, 73?", "Which is the largest of these numbers: 54, 46, 21?"]
    rows = _rows([["80"] * 4 + ["81"] * 4, ["73"] * 5 + ["75"] * 3, ["21"] * 4 + ["54"] * 4],
                 ["81", "75", "54"], questions)
    sig, flags = audit_domain("largest_number", {1: rows})
    assert sig.copy_rate >= 0.25 and sig.reference_copy_share == 1.0
    assert [f for f in flags if f.signal == "copied_from_prompt"] == []


def test_correct_answers_of_a_skewed_domain_are_not_a_constant_answer():
    # letter_counting-like: most references are "1", and the policy answers every task correctly
    refs = ["1", "1", "1", "2", "3"]
    rows = _rows([[r] * 8 for r in refs], refs, [f"How many in task {chr(97 + g)}?" for g in range(5)])
    sig, flags = audit_domain("letter_counting", {1: rows})
    assert sig.modal_share == 0.6 and sig.reference_modal_share == 0.6
    assert flags == []


def test_too_few_answers_raise_no_level_flag():
    n = MIN_ANSWERS - 1
    rows = _rows([["1"] * n], ["7"], ["What is 3 + 4?"])
    rows += _rows([[None]], ["9"], ["What is 4 + 5?"], start=n)
    assert audit_domain(DOMAIN, {1: rows})[1] == []


def test_reward_rising_while_length_collapses_is_flagged():
    refs = [str(10 + g) for g in range(4)]
    questions = [f"What is {g + 5} + 5?" for g in range(4)]
    by_step = {}
    for step in range(1, 5):
        answers = [[None] * 8] * 4 if step <= 2 else [[r] * 8 for r in refs]  # reward 0 -> 1
        by_step[step] = _rows(answers, refs, questions, length=60 if step <= 2 else 6, start=100 * step)
    _, flags = audit_domain(DOMAIN, by_step)
    assert [f.signal for f in flags] == ["length_collapse"]
    assert "60 -> 6 tokens" in flags[0].detail and len(flags[0].examples) == 5


def test_reward_from_the_format_alone_is_flagged_and_correct_answers_clear_it():
    # the quickstart's aiw: every reply in the format, its answers wrong and all different
    refs = ["3", "4", "5", "2"]
    questions = [f"Alice has {int(r) - 1} sisters. How many sisters does her brother have?" for r in refs]
    wrong = _rows([[f"x{g}{i}" for i in range(8)] for g in range(4)], refs, questions)
    _, flags = audit_domain("aiw", {1: wrong})
    flag = next(f for f in flags if f.signal == "format_only")
    assert flag.detail.startswith("0% of the mean reward 0.20 comes from correct answers")
    assert len(flag.examples) == 5 and all(wrong[i].correct == 0 for i in flag.examples)
    # two correct answers in each group of eight: 0.2 of the mean reward 0.4 is correctness, no flag
    learning = _rows([[refs[g]] * 2 + [f"x{g}{i}" for i in range(6)] for g in range(4)], refs, questions)
    assert "format_only" not in {f.signal for f in audit_domain("aiw", {1: learning})[1]}
