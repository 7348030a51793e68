"""A user's own multi-turn sandbox environment (files + setup + checker per row), made from a
data file and played through the episode loop in real Docker sandboxes: 12 tasks, each
with a reference solution its checker accepts; a wrong episode scores 0; a checker that
never exits scores 0 with the reason; validation passes; a scored checker gives partial
credit; files that leave the workspace are refused."""

import json

import pytest

from core.errors import ConfigError
from domains.contract import EpisodeDomain
from domains.user.library import prepare
from tests.domains.user_domains_helpers import validate_unsaved
from domains.validation import play_turns
from sandboxes.pool import SandboxPool
from sandboxes.spec import SandboxSpec


def _rows() -> list[dict]:
    """12 tasks of three kinds, each with its data, a reference solution and a checker."""
    rows = []
    for i in range(4):
        words = [f"w{j}" for j in range(i + 3)]
        rows.append({"id": f"count-{i}", "instruction": "Count the lines of data.txt; write the number to count.txt.",
                     "files": {"data.txt": "\n".join(words) + "\n"}, "setup": "",
                     "reference": "wc -l < data.txt > count.txt",
                     "checker": f"test \"$(tr -d ' \\n' < count.txt)\" = {len(words)}"})
        nums = [str((7 * j + i) % 23) for j in range(5 + i)]
        rows.append({"id": f"sort-{i}", "instruction": "Sort the numbers of nums.txt ascending, one per line, "
                                                        "into sorted.txt.",
                     "files": {"nums.txt": "\n".join(nums) + "\n"}, "setup": "",
                     "reference": "sort -n nums.txt > sorted.txt",
                     "checker": "sort -n nums.txt | cmp -s - sorted.txt"})
        rows.append({"id": f"fix-{i}", "instruction": f"The script in app/run.sh must print {i + 40}; fix it.",
                     "files": {}, "setup": f"mkdir -p app && printf 'echo {i}\\n' > app/run.sh",
                     "reference": f"printf 'echo {i + 40}\\n' > app/run.sh",
                     "checker": f"test \"$(bash app/run.sh)\" = {i + 40}"})
    return rows


DEFINITION = {"name": "my_shell_tasks",
              "columns": {"prompt": "instruction", "answer": "reference", "id": "id"},
              "verifier": {"kind": "checker", "files_column": "files", "setup_column": "setup",
                           "checker_column": "checker", "timeout_s": 5},
              "heldout_fraction": 0.3}


@pytest.fixture(scope="module")
def pool(docker_engine):
    with SandboxPool("docker", SandboxSpec(memory_mb=256, episode_timeout_s=120), size=1,
                     labels={"rlwb.test": "user-sandbox-env"}, gc_interval_s=0) as p:
        yield p


def test_every_reference_episode_scores_1_and_a_wrong_one_0(pool):
    d = prepare(DEFINITION, rows=_rows())
    assert isinstance(d, EpisodeDomain) and d.needs_sandbox and len(d.rows) == 12
    tasks = [d.make_task(s, 1) for s in range(200)]
    by_id = {t.entry["task_id"]: t for t in tasks}
    held = [d.make_task(s, 1) for s in range(1_000_000_000, 1_000_000_040)]
    by_id.update({t.entry["task_id"]: t for t in held})
    assert len(by_id) == 12  # every row is reachable from one side of the split
    with pool.lease() as sb:
        for task in by_id.values():
            reward, b, records = play_turns(d, task, d.reference_turns(task), sb)
            assert reward == 1.0, (task.entry["task_id"], b, records)
        task = by_id["sort-1"]
        assert play_turns(d, task, d.wrong_turns(task), sb)[0] == 0.0
        assert play_turns(d, task, ["DONE"], sb)[0] == 0.0  # doing nothing does not pass


def test_a_checker_that_never_exits_scores_0_with_the_reason(pool):
    rows = [{**r, "checker": "sleep 600"} for r in _rows()]
    d = prepare(DEFINITION, rows=rows)
    task = d.make_task(0, 1)
    with pool.lease() as sb:
        reward, b, _ = play_turns(d, task, d.reference_turns(task), sb)
    assert reward == 0.0 and "ran past 5 s" in b["check"], b


def test_a_scored_checker_gives_partial_credit(pool):
    rows = [{**r, "checker": "echo 0.5"} for r in _rows()]
    d = prepare({**DEFINITION, "verifier": {**DEFINITION["verifier"], "checker_score": True}}, rows=rows)
    task = d.make_task(0, 1)
    with pool.lease() as sb:
        assert play_turns(d, task, d.reference_turns(task), sb)[0] == 0.5


def test_validation_plays_the_environment_and_passes_it(docker_engine):
    [report] = validate_unsaved([DEFINITION], _rows(), cross_process=True)
    assert report["passed"], report["reasons"]


@pytest.mark.parametrize("files,match", [
    ({"../escape.txt": "x"}, "must stay inside the workspace"),
    ({"/etc/passwd": "x"}, "must stay inside the workspace"),
    ("{not json", "is not JSON"),
    ("not json", "is not a JSON object of files, nor a directory or archive that exists"),
    ({"a.txt": 3}, "object of path -> text"),
])
def test_files_outside_the_workspace_or_malformed_are_refused(files, match):
    rows = _rows()
    rows[0] = {**rows[0], "files": files if not isinstance(files, dict) else json.dumps(files)}
    with pytest.raises(ConfigError, match=f"row 1: .*{match}"):
        prepare(DEFINITION, rows=rows)
