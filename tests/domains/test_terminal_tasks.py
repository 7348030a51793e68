"""Tests for the terminal task templates (domains/terminal/tasks.py). No Docker.

Every template x seeds 0..4 x difficulty 1..3 is materialised in a tmp dir; its checker must
fail on the untouched workspace and pass after the reference commands, which run there with
`bash -c` and the host's python3 (3.11, like the sandbox image). The checker script is kept
outside the workspace, as the sandbox keeps it outside /workspace.
"""

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from domains.terminal import tasks as T
from core.errors import ConfigError

NAMES = T.template_names()
SEEDS = range(5)
LEVELS = (1, 2, 3)
TIMEOUT_S = 10


@pytest.fixture(scope="module", autouse=True)
def _python3_on_path(tmp_path_factory):
    """Put `python3` -> this interpreter's real binary first on PATH: no venv, no pyenv shim
    (a shim costs ~150 ms a start, which would triple the runtime)."""
    global _PATH
    bin_dir = tmp_path_factory.mktemp("bin")
    (bin_dir / "python3").symlink_to(os.path.realpath(sys.executable))
    _PATH = f"{bin_dir}{os.pathsep}{os.environ['PATH']}"


_PATH = os.environ["PATH"]


def _run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {"PATH": _PATH, "HOME": str(cwd)}  # like the sandbox: no locale, no git identity
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)


def _materialise(task: T.TerminalTask, root: Path) -> tuple[Path, Path]:
    """Write the task's files under root/ws and its checker to root/checker.py."""
    ws = root / "ws"
    for rel, text in task.files.items():
        path = ws / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    checker = root / "checker.py"
    checker.write_text(task.checker)
    return ws, checker


def _check(checker: Path, ws: Path) -> subprocess.CompletedProcess:
    return _run(["python3", str(checker)], ws)


def _verify(name: str, level: int, seed: int, root: Path) -> None:
    task = T.make_terminal_task(name, seed, level)
    ws, checker = _materialise(task, root)
    before = _check(checker, ws)
    assert before.returncode != 0, f"untouched workspace passes: {before.stdout}"
    assert before.stdout.startswith("FAIL: ") and before.stdout.count("\n") == 1, before.stdout + before.stderr
    for cmd in task.reference:
        done = _run(["bash", "-c", cmd], ws)
        assert done.returncode == 0, f"reference {cmd!r} failed: {done.stderr}"
    after = _check(checker, ws)
    assert after.returncode == 0, f"reference solution fails: {after.stdout}{after.stderr}"
    assert after.stdout.startswith("PASS: ") and after.stdout.count("\n") == 1, after.stdout


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("name", NAMES)
def test_checker_fails_untouched_and_passes_after_reference(name, level, tmp_path):
    with ThreadPoolExecutor(max_workers=4) as pool:  # subprocess-bound: threads overlap the waits
        futures = [pool.submit(_verify, name, level, seed, tmp_path / f"seed{seed}") for seed in SEEDS]
    failures = [f"{name} seed={seed} difficulty={level}: {future.exception()}"
                for seed, future in zip(SEEDS, futures) if future.exception() is not None]
    assert failures == []


def test_at_least_eight_templates_in_registry_order():
    assert len(NAMES) >= 8 and len(set(NAMES)) == len(NAMES)
    assert NAMES == list(T.TEMPLATES)


@pytest.mark.parametrize("name", NAMES)
def test_deterministic_distinct_and_well_formed(name):
    for level in LEVELS:
        tasks = [T.make_terminal_task(name, seed, level) for seed in SEEDS]
        assert tasks == [T.make_terminal_task(name, seed, level) for seed in SEEDS]
        assert len({repr(sorted(t.files.items())) for t in tasks}) == len(tasks), "seeds give equal files"
        for seed, task in zip(SEEDS, tasks):
            assert (task.template, task.seed, task.difficulty) == (name, seed, level)
            assert task.instruction and task.answer and task.reference and task.files
            assert sum(len(t.encode()) for t in task.files.values()) < 50_000
            for rel in task.files:
                assert not rel.startswith("/") and ".." not in rel.split("/"), rel


@pytest.mark.parametrize("name", NAMES)
def test_difficulty_changes_the_task(name):
    tasks = [T.make_terminal_task(name, 3, level) for level in LEVELS]
    assert len({t.instruction + repr(sorted(t.files.items())) for t in tasks}) == 3


def test_wrong_answers_fail(tmp_path):
    task = T.make_terminal_task("count_matches", 1, 2)
    ws, checker = _materialise(task, tmp_path)
    count = int(task.answer.split("= ")[1])
    (ws / "answer.txt").write_text(f"{count + 1}\n")
    assert _check(checker, ws).returncode != 0
    (ws / "answer.txt").write_text("nan\n")
    assert _check(checker, ws).returncode != 0
    (ws / "answer.txt").write_text(f"{count}\n\n")  # trailing newlines are fine
    assert _check(checker, ws).returncode == 0


def test_bug_fix_rejects_an_edited_test_file(tmp_path):
    task = T.make_terminal_task("fix_bug", 2, 1)
    ws, checker = _materialise(task, tmp_path)
    test_file = next(ws.glob("test_*.py"))
    test_file.write_text("print('all checks passed')\n")
    result = _check(checker, ws)
    assert result.returncode != 0 and "modified" in result.stdout


def test_bug_fix_rejects_breaking_another_function(tmp_path):
    task = T.make_terminal_task("fix_bug", 4, 2)
    ws, checker = _materialise(task, tmp_path)
    for cmd in task.reference:
        _run(["bash", "-c", cmd], ws)
    module = sorted((ws / "src").glob("*.py"))[-1]
    module.write_text(module.read_text() + "\nimport sys\nif 'json' in sys.modules:\n    sys.exit(0)\n")
    assert _check(checker, ws).returncode != 0


def test_task_for_seed_cycles_through_templates():
    for seed in range(2 * len(NAMES)):
        task = T.terminal_task_for_seed(seed, 2)
        assert task.template == NAMES[seed % len(NAMES)] and task.seed == seed and task.difficulty == 2
        assert task == T.make_terminal_task(task.template, seed, 2)


def test_unknown_template_lists_valid_names():
    with pytest.raises(ConfigError) as info:
        T.make_terminal_task("no_such_template", 0)
    assert all(name in str(info.value) for name in NAMES)


@pytest.mark.parametrize("seed", [-1, 1.0, "3", True, None])
def test_bad_seed_is_a_config_error(seed):
    with pytest.raises(ConfigError, match="seed"):
        T.make_terminal_task(NAMES[0], seed)
    with pytest.raises(ConfigError, match="seed"):
        T.terminal_task_for_seed(seed)


@pytest.mark.parametrize("difficulty", [0, 4, -1, 2.0, "2", True])
def test_bad_difficulty_is_a_config_error(difficulty):
    with pytest.raises(ConfigError, match="difficulty"):
        T.make_terminal_task(NAMES[0], 0, difficulty)
    with pytest.raises(ConfigError, match="difficulty"):
        T.terminal_task_for_seed(0, difficulty)


def test_words_have_no_prefix_pairs():
    assert not [(a, b) for a in T.WORDS for b in T.WORDS if a != b and b.startswith(a)]
