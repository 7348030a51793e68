"""Answers that upstream verifiers would `eval` can't run code or hang the scorer."""

import os

import pytest

from domains.answer_guard import EVALUATING_DOMAINS, unsafe_reason
from domains.registry import get_domain

ATTACKS = [
    "__import__('os').system('touch {marker}')",
    "open('{marker}', 'w').write('x')",
    "exec(\"open('{marker}', 'w')\")",
    "[c for c in ().__class__.__base__.__subclasses__()]",
    "(lambda: open('{marker}', 'w'))()",
    "getattr(__builtins__, 'open')('{marker}', 'w')",
    "x.func.__globals__",
    "9**9**9**9",
    "2**99999999",
    "99999999!",
    "1" * 500,
]


@pytest.mark.parametrize("name", sorted(EVALUATING_DOMAINS))
def test_code_in_answers_never_runs_and_references_still_pass(name, tmp_path):
    d = get_domain(name)
    task = d.make_task(0, min(d.levels))
    marker = tmp_path / "pwned"
    for attack in ATTACKS:
        reward, br = d.score(task, d.wrap_answer(attack.format(marker=marker)))
        assert br["correct"] == 0.0 and reward <= 0.2, (attack, br)
    assert not marker.exists()
    assert d.score(task, d.reference_completion(task))[0] == 1.0  # the guard lets real answers through


@pytest.mark.parametrize("answer", ["x**2/2 + C", "-cos(x) + C", "2*x**3 + 3*x - 1", "(3 + 5) * 3", "8/(3-8/3)",
                                    "[[1, 2], [3, 4]]", "['ab', 'cd']", "x^2*sin(x)", "exp(2*x)/2", "1 2 3"])
def test_ordinary_answers_are_not_refused(answer):
    assert unsafe_reason(answer) is None


def test_no_marker_file_left_in_the_working_directory():
    assert not os.path.exists("pwned")
