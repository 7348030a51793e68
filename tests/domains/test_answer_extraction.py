"""The one answer rule (domains/answers.py): the last answer a reply commits to is the one
scored, numbers are read alike where the reference is one number, and a list of numbers is
ambiguous. One test per upstream quirk that used to pass through. No model."""

import dataclasses
import shutil

import pytest

from domains import answers
from domains import contract
from domains import registry
def _task_where(name: str, level: int, ok):
    """The first task of `name` at `level` (seeds 0, 1, ...) whose answer satisfies `ok`."""
    d = registry.get_domain(name)
    return d, next(t for t in (d.make_task(s, level) for s in range(1000)) if ok(t.answer))


def test_a_final_answer_line_beats_an_earlier_tag():
    d = registry.get_domain("basic_arithmetic")
    t = d.make_task(3, 1)
    wrong = str(int(t.answer) + 1)
    revised = f"<answer>{wrong}</answer>\nNo, let me check that again.\nAnswer: {t.answer}"
    assert answers.extract_answer(revised) == t.answer
    assert d.score(t, revised) == (1.0, {"format": 1.0, "correct": 1.0, "score": 1.0, "extracted": t.answer})
    # whichever comes last counts: a tag after the line wins
    assert answers.extract_answer(f"Answer: {t.answer}\nor rather <answer>{wrong}</answer>") == wrong
    assert answers.extract_answer(f"<answer>{wrong}</answer> Answer: {t.answer}", tags_only=True) == wrong
    assert answers.extract_answer("Answer: 4\nAnswer:\n") is None  # an empty last answer is no answer


def test_a_code_fence_right_after_answer_is_its_content():
    d = registry.get_domain("chain_sum")
    t = d.make_task(4, 2)
    for reply in (f"Answer:\n```\n{t.answer}\n```", f"**Answer:**\n\n```text\n{t.answer}\n```\n"):
        assert answers.extract_answer(reply) == t.answer
        assert d.score(t, reply)[0] == 1.0
    assert answers.extract_answer("Answer:\n```\n```") is None  # an empty block is no answer


def test_a_unicode_minus_is_a_minus():
    d, neg = _task_where("basic_arithmetic", 2, lambda a: int(a) < 0)
    reward, br = d.score(neg, f"Answer: \u2212{neg.answer[1:]}")
    assert reward == 1.0 and br["extracted"] == neg.answer
    chain = registry.get_domain("chain_sum")
    assert chain.score(chain.make_task(1, 1), "Answer: \u22129")[1]["extracted"] == "-9"  # shown as scored


def test_thousands_separators_are_one_number():
    d, big = _task_where("basic_arithmetic", 3, lambda a: abs(int(a)) >= 1000)
    reward, br = d.score(big, f"Answer: {int(big.answer):,}")
    assert reward == 1.0 and br["extracted"] == big.answer
    # the tool domains' comparison split "1,234" into two parts
    from domains.tools.domain import score_tool_episode

    tool = registry.get_domain("tool_calc")
    task = dataclasses.replace(tool.tool_task(tool.make_task(3, 1)), answer="-1234.5")
    reward, br = score_tool_episode(task, "Answer: \u22121,234.5", [])
    assert br["correct"] == 1.0 and br["extracted"] == "-1234.5"


@pytest.mark.parametrize("listing", ["{a} or {b}", "{a}, {b}", "either {a} or {b}", "{a}; {b}."])
def test_an_answer_listing_two_numbers_gets_no_credit(listing):
    g = registry.get_domain("gsm_symbolic")
    t = g.make_task(5, 1)  # upstream scores the first number of the answer
    reply = "Answer: " + listing.format(a=t.answer, b=int(float(t.answer)) + 1)
    reward, br = g.score(t, reply)
    assert reward == pytest.approx(contract.FORMAT_WEIGHT) and br["correct"] == 0.0
    assert br["rejected"].startswith("ambiguous: lists 2 numbers")
    # the same answer alone, or written out as a sum, is judged by the verifier as before
    assert g.score(t, f"Answer: {t.answer}")[0] == 1.0
    assert "rejected" not in g.score(t, f"Answer: {t.answer} = 12 + 7")[1]


def test_digits_split_by_a_comma_are_a_list_not_a_number():
    d, two_digits = _task_where("chain_sum", 2, lambda a: len(a) == 2 and a.isdigit())
    a = two_digits.answer
    reward, br = d.score(two_digits, f"Answer: {a[0]},{a[1]}")  # upstream strips every comma: "3,4" == 34
    assert br["correct"] == 0.0 and "rejected" in br
    assert d.score(two_digits, f"Answer: {a}")[0] == 1.0


def test_a_list_is_refused_for_a_long_document_number_too():
    fin = registry.get_domain("financial_report")
    t = next(t for t in (fin.make_task(s, 1) for s in range(50)) if t.entry["answer_kind"] == "number")
    reward, br = fin.score(t, f"Answer: {float(t.answer) + 1:g} or {t.answer}")  # the report scorer read the last
    assert br["correct"] == 0.0 and br["rejected"].startswith("ambiguous")
    assert fin.score(t, f"Answer: {t.answer}")[1]["correct"] == 1.0


DRAFT_THEN_FIX = ("First try:\n```python\ndef has_close_elements(numbers, threshold):\n    return True\n```\n"
                  "That ignores the threshold. Fixed:\n```python\ndef has_close_elements(numbers, threshold):\n"
                  "{body}```\n")


def test_humaneval_takes_the_last_code_block():
    from domains.code.humaneval import HUMANEVAL, build_solution, extract_code, problems

    p = problems()[0]
    task = contract.Task("humaneval", 0, p["prompt"], p["canonical_solution"], 1,
                  {k: p[k] for k in ("task_id", "prompt", "test", "entry_point")})
    reply = DRAFT_THEN_FIX.format(body=task.answer)
    assert extract_code(reply) == "def has_close_elements(numbers, threshold):\n" + task.answer.rstrip("\n")
    assert build_solution(task, reply).count("def has_close_elements") == 2  # the prompt's, then the fix
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap not installed: the solution is not run")
    from sandboxes.local_backend import LocalSandbox
    from sandboxes.pool import JobResult, run_job
    from sandboxes.spec import SandboxSpec

    job = HUMANEVAL.verification_job(task, reply)
    with LocalSandbox(SandboxSpec(memory_mb=256, command_timeout_s=20)) as sb:
        result = JobResult(job.id, job.kind, run_job(sb, job))
    reward, br = HUMANEVAL.score_result(task, reply, result)
    assert (reward, br["error"]) == (1.0, None)
