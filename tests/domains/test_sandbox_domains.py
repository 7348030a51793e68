"""humaneval and terminal domains scored in real Docker sandboxes: every reference solution
scores 1, an empty answer scores 0, failures are classified, episodes follow Gymnasium."""

import pytest

from domains.code.humaneval import HUMANEVAL, build_solution, extract_code, problems
from domains.registry import get_domain
from domains.splits import heldout_seeds
from domains.terminal.env import TERMINAL_DOMAINS, TerminalEnv, parse_action, terminal_task
from domains.terminal.tasks import template_names
from sandboxes.pool import SandboxPool, Scheduler
from sandboxes.spec import SandboxSpec


@pytest.fixture(scope="module")
def pool(docker_engine):
    with SandboxPool("docker", SandboxSpec(memory_mb=256, episode_timeout_s=120), size=2,
                     labels={"rlwb.test": "sandbox-domains"}, gc_interval_s=0) as p:
        yield p


def _problem_task(i):
    """A Task for problem i of HumanEval (bypassing the seed -> problem mapping)."""
    from domains.contract import Task

    p = problems()[i]
    return Task("humaneval", i, p["prompt"], p["canonical_solution"], 1,
                {k: p[k] for k in ("task_id", "prompt", "test", "entry_point")})


def test_every_humaneval_reference_solution_scores_1_and_empty_scores_0(pool):
    tasks = [_problem_task(i) for i in range(len(problems()))]
    assert len(tasks) == 164
    sched = Scheduler(pool)
    refs = sched.run([HUMANEVAL.verification_job(t, t.answer) for t in tasks])
    empties = sched.run([HUMANEVAL.verification_job(t, "") for t in tasks])
    sched.close()
    scores = [HUMANEVAL.score_result(t, t.answer, r) for t, r in zip(tasks, refs)]
    failed = [t.entry["task_id"] for t, (reward, _) in zip(tasks, scores) if reward != 1.0]
    assert failed == []
    empty_scores = [HUMANEVAL.score_result(t, "", r) for t, r in zip(tasks, empties)]
    assert all(reward == 0.0 and b["error"] is not None for reward, b in empty_scores)


def test_humaneval_failures_are_named(pool):
    t = _problem_task(0)
    body = t.answer
    cases = {
        "syntax_error": "```python\ndef has_close_elements(numbers, threshold)\n    return True\n```",
        "assertion": "```python\ndef has_close_elements(numbers, threshold):\n    return True\n```",
        "timeout": "```python\ndef has_close_elements(numbers, threshold):\n    while True:\n        pass\n```",
        "crash": "```python\ndef has_close_elements(numbers, threshold):\n    raise SystemExit(3)\n```",
        None: f"Here it is:\n```python\ndef has_close_elements(numbers, threshold):\n{body}```\nDone.",
    }
    sched = Scheduler(pool)
    jobs = [HUMANEVAL.verification_job(t, c) for c in cases.values()]
    jobs[2].timeout_s = 1.0
    results = sched.run(jobs)
    sched.close()
    for (want, completion), res in zip(cases.items(), results):
        reward, b = HUMANEVAL.score_result(t, completion, res)
        assert b["error"] == want, (want, b)
        assert reward == (1.0 if want is None else 0.0)


@pytest.mark.parametrize("cheat", [
    "import sys\nsys.exit(0)",
    "import os\nos._exit(0)",
    "raise SystemExit(0)",
    "import atexit, os\natexit.register(lambda: os._exit(0))\nraise KeyboardInterrupt",
    "import sys\nprint('0' * 32)\nsys.stdout.flush()\nimport os\nos._exit(0)",
    # read the judge's stdin (nonce and tests) again, print the nonce, exit 0
    "import os\nos.lseek(0, 0, 0)\nn = os.read(0, 1 << 20)\nos.write(1, n)\nos._exit(0)",
    # walk the caller's frames for a nonce
    "import sys, os\nf = sys._getframe()\nwhile f is not None and 'nonce' not in f.f_locals:\n    f = f.f_back\n"
    "os.write(1, ('\\n' + str(f and f.f_locals['nonce']) + '\\n').encode())\nos._exit(0)",
    # read the judge's memory through /proc (it is non-dumpable) or its stdin fd
    "import os\nppid = os.getppid()\nfor p in (f'/proc/{ppid}/fd/0', f'/proc/{ppid}/mem', '/rlwb/stdin'):\n"
    "    try:\n        print(open(p, 'rb').read(100))\n    except OSError as e:\n        print('denied', p)\n",
    # an object that equals everything
    "class _A:\n    def __eq__(s, o): return True\n    def __ne__(s, o): return False\n"
    "    def __bool__(s): return True\n    def __lt__(s, o): return True\n"
    "def has_close_elements(*a, **k):\n    return _A()",
])
def test_exiting_early_with_status_0_is_not_a_pass(pool, cheat):
    t = _problem_task(0)
    completion = f"```python\ndef has_close_elements(numbers, threshold):\n    return True\n{cheat}\n```"
    sched = Scheduler(pool)
    [res] = sched.run([HUMANEVAL.verification_job(t, completion)])
    sched.close()
    reward, b = HUMANEVAL.score_result(t, completion, res)
    assert reward == 0.0 and b["error"] in ("crash", "assertion"), b


def test_code_extraction_and_program_assembly():
    t = _problem_task(0)
    assert extract_code("```python\nx = 1\n```\ntext") == "x = 1"
    assert extract_code("    return 1\n") == "    return 1"
    assert extract_code(None) == ""
    assert extract_code("```text\nnotes\n```\n```python\ndef f():\n    return 1\n```") == "def f():\n    return 1"
    prog = build_solution(t, "    return False\n")  # a body continues the prompt
    assert prog == t.entry["prompt"] + "    return False\n" and "check(" not in prog  # tests stay with the judge


def test_humaneval_train_and_heldout_problems_are_disjoint():
    train = {HUMANEVAL.make_task(s, lvl).entry["task_id"] for s in range(0, 400) for lvl in (1, 2, 3)}
    held = {HUMANEVAL.make_task(s, lvl).entry["task_id"] for s in heldout_seeds(200) for lvl in (1, 2, 3)}
    assert train and held and not train & held
    assert len(train | held) == 164  # every problem is reachable from some split and level


def _play_reference(env, task):
    obs, info = env.reset(options={"task": terminal_task(task)})
    assert isinstance(obs, str) and obs == task.question and isinstance(info, dict)
    reward, done = 0.0, False
    for cmd in task.entry["reference"]:
        obs, reward, terminated, truncated, info = env.step(f"```bash\n{cmd}\n```")
        assert isinstance(obs, str) and info["turn"]["action"] == "command"
        assert info["turn"]["exit_code"] == 0, info["turn"]
        done = terminated or truncated
        assert not done
    obs, reward, terminated, truncated, info = env.step("DONE")
    assert terminated and not truncated
    return reward, info


def test_every_terminal_template_reference_scores_1_and_doing_nothing_scores_0(pool):
    names = template_names()
    tasks = [TERMINAL_DOMAINS[f"terminal_{n}"].make_task(seed, lvl) for n in names for lvl in (1, 2, 3)
             for seed in (0, 1)]
    assert len(tasks) >= 30 and len(names) >= 8
    with pool.lease() as sb:
        env = TerminalEnv(sb, max_turns=12)
        for task in tasks:
            reward, info = _play_reference(env, task)
            assert reward == 1.0, (task.domain, task.seed, task.difficulty, info["check"])
            env.reset(options={"task": terminal_task(task)})
            _, reward, terminated, _, info = env.step("DONE")  # the empty answer
            assert terminated and reward == 0.0, (task.domain, info["check"])


def test_terminal_turn_budget_truncates_and_invalid_turns_are_observed(pool):
    task = get_domain("terminal_count_matches").make_task(5, 1)
    with pool.lease() as sb:
        env = TerminalEnv(sb, max_turns=2, command_timeout_s=1.0)
        env.reset(options={"task": terminal_task(task)})
        obs, reward, terminated, truncated, info = env.step("I think I should count.")
        assert "invalid turn" in obs and not terminated and not truncated and info["turn"]["action"] == "invalid"
        obs, reward, terminated, truncated, info = env.step("```bash\nsleep 30\n```")
        assert truncated and not terminated and info["turn"]["timed_out"] and "timed out" in obs
        assert reward == 0.0 and "check" in info
        with pytest.raises(Exception, match="episode is over"):
            env.step("DONE")


def test_terminal_env_passes_gymnasiums_env_checker(pool):
    import warnings

    from gymnasium.utils.env_checker import check_env

    with pool.lease() as sb, warnings.catch_warnings():
        warnings.simplefilter("error")  # a checker warning fails the test
        check_env(TerminalEnv(sb, max_turns=2), skip_render_check=True)


def test_spent_episode_budget_ends_with_the_checker_not_a_harness_fault(docker_engine):
    from sandboxes.docker_backend import DockerSandbox

    task = get_domain("terminal_count_matches").make_task(5, 1)
    with DockerSandbox(SandboxSpec(episode_timeout_s=1.5), {"rlwb.test": "budget"}) as sb:
        env = TerminalEnv(sb, max_turns=5, command_timeout_s=5)
        env.reset(options={"task": terminal_task(task)})
        obs, reward, terminated, truncated, info = env.step("```bash\nsleep 10\n```")  # cut at the budget
        assert info["turn"]["timed_out"] and not terminated
        obs, reward, terminated, truncated, info = env.step("```bash\nls\n```")
        assert terminated and "budget" in obs and reward == 0.0 and info["check"].startswith("FAIL")


def test_a_harness_fault_ends_the_episode_for_good(docker_engine):
    from core.errors import SandboxError
    from sandboxes.docker_backend import DockerSandbox

    task = get_domain("terminal_count_matches").make_task(5, 1)
    sb = DockerSandbox(SandboxSpec(), {"rlwb.test": "fault"}).start()
    try:
        env = TerminalEnv(sb, max_turns=5)
        env.reset(options={"task": terminal_task(task)})
        docker_engine.containers.get(sb.id).kill()
        with pytest.raises(SandboxError):
            env.step("```bash\nls\n```")
        with pytest.raises(Exception, match="episode is over"):
            env.step("DONE")  # no stale reply can score it
    finally:
        sb.close()


def test_fix_bug_checker_cannot_be_read_by_the_model_code(pool):
    task = get_domain("terminal_fix_bug").make_task(1, 1)
    t = terminal_task(task)
    src = sorted(p for p in t.files if p.startswith("src/") and p.endswith(".py"))[0]
    # the "fix": leave the bug, and when imported under the checker, try to read its script
    spy = ("import os, sys\n"
           "for path in ('/proc/%d/fd/0' % os.getppid(), '/proc/%d/mem' % os.getppid(), '/dev/stdin'):\n"
           "    try:\n"
           "        data = open(path, 'rb').read(1 << 20)\n"
           "        if b'HIDDEN_EXPECTED' in data:\n"
           "            open('/workspace/LEAKED', 'w').write(path)\n"
           "    except OSError:\n"
           "        pass\n")
    with pool.lease() as sb:
        env = TerminalEnv(sb, max_turns=3)
        env.reset(options={"task": t})
        sb.write_file(src, spy + t.files[src])
        _, reward, terminated, _, info = env.step("DONE")
        assert terminated and reward == 0.0
        assert "LEAKED" not in [f.name for f in sb.list_dir()]


@pytest.mark.parametrize("text,kind,cmd", [
    ("```bash\nls -la\n```", "command", "ls -la"),
    ("Let me look.\n```sh\ncat a.txt\n```\n```bash\nrm x\n```", "command", "cat a.txt"),
    ("```\necho hi\n```", "command", "echo hi"),
    ("All finished. DONE", "done", ""),
    ("```bash\n\n```", "invalid", None),
    ("just text", "invalid", None),
    (None, "invalid", None),
    # the closing fence of a non-shell block is not an opening one
    ("```text\nERROR x\n```\nrm -rf src\n```bash\nls\n```", "command", "ls"),
    ("```bash\r\nls -1\r\n```\r\n", "command", "ls -1"),
    ("I'm not DONE yet", "invalid", None),
    ("Finished.\nDONE\n", "done", ""),
    ("All set. **DONE.**", "done", ""),
    ("DONE? Not yet, first:\nlet me think", "invalid", None),
])
def test_parse_action(text, kind, cmd):
    got_kind, payload = parse_action(text)
    assert got_kind == kind
    if cmd is not None:
        assert payload == cmd
