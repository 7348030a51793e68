"""User domains played as episodes: a sandbox environment judged by a checker command
(`UserEpisodeDomain`), and tool use with the user's own tools (`UserToolDomain`).

    domain = build_domain(spec, rows)                   # domains.user.build: picks the class
    env = domain.make_env(sandbox, max_turns=4)         # UserSandboxEnv or a tools ToolEnv
    obs, info = env.reset(options={"task": domain.make_task(seed)})

A user tool is declared by contract (`domains.user.spec.UserToolSpec`: JSON-Schema input,
output format, error codes) and implemented by a shell command or a Python function; either
runs in the task's sandbox, never in the trainer. A command gets the arguments as one JSON
object on stdin; a function runs through `domains.user.tool_runner`. A tool domain's reward
is the verifier's verdict on the final reply (FORMAT_WEIGHT for an answer the extraction
finds, CORRECT_WEIGHT if it is right), with the episode's call statistics in the breakdown;
tools help the model but calling them earns nothing by itself.

Not covered: one network allow-list per domain (a run's sandboxes share one spec).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path

from core.errors import ConfigError, SandboxError, SandboxTimeout
from domains.contract import CORRECT_WEIGHT, FORMAT_WEIGHT, EpisodeDomain, Task, ToolUseDomain
from domains.terminal.env import SYSTEM_PROMPT as SHELL_PROMPT
from domains.terminal.env import TerminalEnv
from domains.terminal.tasks import TerminalTask
from domains.tools.contract import CallError, ToolCall, call_text, check_call, scripted_tool_turns
from domains.tools.env import TOOL_SYSTEM_PROMPT, ToolEnv, call_stats, score_as_one_turn, tool_prompt
from domains.tools.toolbox import SANDBOX_TOOLS, TOOLS, ToolContext, ToolFailure, ToolRunner
from domains.user.data import TaskRow
from domains.user.domain import INSTRUCTIONS, UserRows, sandbox_runtime
from domains.user.spec import UserToolSpec
from domains.user.verifiers import in_worker

TOOL_DIR = ".rlwb_tools"  # where a task's workspace holds the user's tool sources
TOOL_RUNNER = (Path(__file__).with_name("tool_runner.py")).read_text(encoding="utf-8")
RUNNER_FILE, RESULT_FILE = f"{TOOL_DIR}/_runner.py", f"{TOOL_DIR}/_result.json"  # no tool is named "_..."
CHECK_TIMEOUT_S = 2.0  # checking a call's arguments against a user tool's schema (its patterns may backtrack)
MAX_CALLS_PER_TURN = 4  # `ToolEnv`'s default: reference calls are played this many per turn


class UserSandboxEnv(TerminalEnv):
    """A user's sandbox task played turn by turn, as the terminal family's `TerminalEnv`
    (same command format, observations and budgets): `reset` writes the row's files and runs
    its setup command; at the end `check` runs the row's checker command in /workspace."""

    def __init__(self, sandbox, max_turns: int, command_timeout_s: float, checker_timeout_s: float,
                 checker_score: bool) -> None:
        super().__init__(sandbox, max_turns=max_turns, command_timeout_s=command_timeout_s)
        self.checker_timeout_s, self.checker_score = checker_timeout_s, checker_score
        self.user_task: Task | None = None

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[str, dict]:
        """Start an episode of `options["task"]` (a user domain's `Task`).

        Raises:
            ConfigError: no task given.
            SandboxError: the row's setup command failed (its output in the message).
        """
        task = (options or {}).get("task")
        if task is None:
            raise ConfigError("a user sandbox task is started with options={'task': task}")
        self.user_task = task
        e = task.entry
        obs, info = super().reset(options={"task": TerminalTask(task.domain, task.seed, task.difficulty, task.question,
                                                                 e["files"], "", (), task.answer)})
        if e.get("setup"):
            r = self._exec(e["setup"], timeout_s=self.checker_timeout_s, budget=False)
            if not r.ok:
                raise SandboxError(f"the task's setup command exited {r.exit_code}: {(r.stderr or r.stdout)[-300:]}")
        return obs, info

    def check(self) -> tuple[float, str]:
        """The row's checker in the sandbox: (1.0 if it exits 0, else 0.0; or with
        `checker_score` the score on its last stdout line), and its one-line verdict."""
        r = self._exec(self.user_task.entry["checker"], timeout_s=self.checker_timeout_s, budget=False)
        lines = r.stdout.strip().splitlines()
        verdict = (lines or [r.stderr.strip()[-200:] or f"exit {r.exit_code}"])[-1][:300]
        if r.timed_out:
            return 0.0, f"the checker ran past {self.checker_timeout_s:g} s"
        if not self.checker_score:
            return (1.0 if r.ok else 0.0), verdict
        try:
            score = float(lines[-1]) if lines and r.ok else float("nan")
        except ValueError:
            score = float("nan")
        if not 0.0 <= score <= 1.0:
            return 0.0, f"the checker's last line is not a score in [0, 1]: {verdict[:100]!r}"
        return score, verdict


@dataclass(frozen=True, eq=False)
class UserEpisodeDomain(UserRows, EpisodeDomain):
    """A user's multi-turn sandbox environment: per row an instruction, files, a setup and a
    checker command, played by the same episode loop as the terminal domains (one shell
    command per turn, snapshot-free reset between episodes, the run's turn and token
    budgets). The answer column holds reference commands, one per line."""

    kind = "multi_turn"
    needs_sandbox = True

    @property
    def reward_rule(self) -> str:
        if self.spec.verifier.checker_score:
            return "the score the row's checker prints on its last line, in [0, 1]"
        return "1 if the row's checker command exits 0 after the episode, else 0"

    @property
    def environment(self) -> dict:
        return {**self.sandbox_environment("the row's checker command after the episode"), "gymnasium": "UserSandboxEnv",
                "checker_score": self.spec.verifier.checker_score}

    def row_entry(self, row: TaskRow) -> dict:
        return {"files": row.files, "setup": row.setup, "checker": row.checker, "task_id": row.id}

    def messages(self, task: Task) -> list[dict]:
        """The shell-work system prompt (the terminal family's: command format) and the instruction."""
        return [{"role": "system", "content": task.entry.get("system") or SHELL_PROMPT},
                {"role": "user", "content": task.question}]

    def reference_completion(self, task: Task) -> str:
        return task.answer

    def make_env(self, sandbox=None, max_turns: int = 4, timeout_s: float = 10.0) -> UserSandboxEnv:
        return UserSandboxEnv(sandbox, max_turns=max_turns, command_timeout_s=timeout_s,
                              checker_timeout_s=self.spec.verifier.timeout_s, checker_score=self.spec.verifier.checker_score)

    def reference_turns(self, task: Task) -> list[str]:
        return self.scripted_turns(task.answer)

    def wrong_turns(self, task: Task) -> list[str]:
        return ["```bash\necho hello > greeting.txt\n```", "DONE"]

    def scripted_turns(self, text: str) -> list[str]:
        """One fenced command per non-empty line, then DONE."""
        return [*(f"```bash\n{c}\n```" for c in str(text).splitlines() if c.strip()), "DONE"]



def _declared_error(tool: UserToolSpec, text: str, exit_code: int) -> tuple[str, str]:
    """(code, message) of a failed command: the code of its last line "CODE: message" when
    CODE is one of the tool's declared errors, else "tool_error" with the output's tail."""
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    if lines and ":" in lines[-1]:
        code, message = lines[-1].split(":", 1)
        if code.strip() in tool.errors:
            return code.strip(), message.strip()[:1000]
    tail = "\n".join(lines[-5:])[-1000:]
    return "tool_error", f"the command exited {exit_code}" + (f": {tail}" if tail else "")


def tool_implementation(tool: UserToolSpec):
    """The `ToolRunner` implementation of a user tool: (arguments, context, timeout_s) ->
    result text, run in the context's sandbox within the tool's own `timeout_s`.

    Raises (inside the runner, which turns them into the call's error code):
        ToolFailure: the tool failed (a declared code, or "tool_error").
        TimeoutError: it ran past its time limit.
    """

    def run(arguments: dict, ctx: ToolContext, timeout_s: float) -> str:
        sb = ctx.sandbox
        if sb is None:
            raise ToolFailure("tool_error", "this task has no sandbox")
        stdin = json.dumps(arguments, ensure_ascii=False)
        command = tool.command if tool.command is not None else \
            f"rm -f {RESULT_FILE}; python3 -I {RUNNER_FILE} {tool.name}"
        try:
            res = sb.exec(command, timeout_s=tool.timeout_s, stdin=stdin)
        except SandboxTimeout as e:  # the episode's own time budget is spent
            raise TimeoutError(f"could not run: {str(e)[:200]}") from None
        if res.timed_out:
            raise TimeoutError(f"ran past its limit of {tool.timeout_s:g} s")
        if tool.command is not None:
            if res.exit_code != 0:
                raise ToolFailure(*_declared_error(tool, res.stderr or res.stdout, res.exit_code))
            return res.stdout
        try:
            result = json.loads(sb.read_file(RESULT_FILE).decode("utf-8", "replace"))
        except (ConfigError, SandboxError, json.JSONDecodeError):
            raise ToolFailure("tool_error", f"the tool gave no result (exit code {res.exit_code}: "
                                            f"{res.stderr[-300:]!r})") from None
        if "error" in result:
            code, message = str(result["error"].get("code")), str(result["error"].get("message", ""))
            if code not in tool.errors and code != "tool_error":
                code, message = "tool_error", f"undeclared error code {code[:40]!r}: {message}"
            raise ToolFailure(code, message)
        return str(result.get("output", ""))

    return run


def check_in_worker(call: ToolCall, specs: dict) -> CallError | None:
    """`check_call` in a user-code worker, at most CHECK_TIMEOUT_S: a user schema's pattern
    that backtracks for ever costs the call (a `schema_violation`), not the trainer."""
    try:
        return in_worker(check_call, call, specs, what=f"checking the arguments of {call.name[:40]}",
                         seconds=CHECK_TIMEOUT_S)
    except ConfigError:
        return CallError("schema_violation", f"checking the arguments against {call.name[:40]}'s schema took over "
                         f"{CHECK_TIMEOUT_S:g} s (a pattern that backtracks?)", call.raw[:200], call.index)


FINISH = "When you have the answer, reply without a tool call."


@dataclass(frozen=True, eq=False)
class UserToolDomain(UserRows, ToolUseDomain):
    """A user domain of tool use: the row's prompt, the user's tools (and any built-in ones
    the definition lists) offered by contract, turn by turn in a `ToolEnv`; the final reply
    is judged by the domain's verifier. The row's files (the `files_column`) are written
    into the workspace first, with the tools' sources under `TOOL_DIR`."""

    kind = "multi_turn"
    reward_rule = (f"{FORMAT_WEIGHT:g} x format (an answer in the last reply) + {CORRECT_WEIGHT:g} x correct; tool "
                   "calls earn nothing by themselves")

    @property
    def needs_sandbox(self) -> bool:
        return bool(self.spec.tools) or bool(set(self.spec.builtin_tools) & SANDBOX_TOOLS)

    @property
    def environment(self) -> dict:
        where = sandbox_runtime(self.sandbox_network) if self.needs_sandbox else "in-process tools"
        return {"runtime": where, "gymnasium": "ToolEnv", "call_format": "<tool_call>{json}</tool_call>",
                "tools": [*self.spec.builtin_tools, *(t.name for t in self.spec.tools)],
                "verifier": self.spec.verifier.kind, "extraction": self.spec.extraction,
                "heldout_fraction": self.spec.heldout_fraction}

    @functools.cached_property
    def user_contracts(self) -> dict:
        """name -> `ToolSpec` of the user's tools (built once: checking a schema takes time)."""
        return {t.name: t.contract() for t in self.spec.tools}

    def row_entry(self, row: TaskRow) -> dict:
        return {"files": row.files, "reference_calls": [[c["name"], c["arguments"]] for c in row.calls],
                "task_id": row.id}

    def tool_specs(self, task: Task) -> list:
        return [*(TOOLS[n] for n in self.spec.builtin_tools), *self.user_contracts.values()]

    def opening(self, task: Task) -> list[dict]:
        """[system: the row's system prompt, then how to call tools; user: the prompt, how to
        finish and the extraction's instruction]."""
        system = task.entry.get("system")
        instruction = INSTRUCTIONS[self.spec.extraction]
        return [{"role": "system", "content": f"{system}\n\n{TOOL_SYSTEM_PROMPT}" if system else TOOL_SYSTEM_PROMPT},
                {"role": "user", "content": f"{task.question}\n{FINISH} {instruction}".rstrip()}]

    def messages(self, task: Task) -> list[dict]:
        return tool_prompt(None, self.opening(task), self.tool_specs(task))[0]

    def make_env(self, sandbox=None, max_turns: int = 4, timeout_s: float = 10.0) -> ToolEnv:
        return ToolEnv(self, sandbox, max_turns=max_turns, timeout_s=timeout_s)

    def tool_runner(self, task: Task, sandbox, timeout_s: float = 10.0, max_calls: int = 4) -> ToolRunner:
        """A `ToolRunner` over the task's tools; the row's files and the tools' sources are
        written into the sandbox's workspace first.

        Raises:
            SandboxError: the workspace could not be written (harness fault).
        """
        if sandbox is not None:
            for path, text in task.entry.get("files", {}).items():
                sandbox.write_file(path, text)
            python_tools = [t for t in self.spec.tools if t.python is not None]
            if python_tools:
                sandbox.write_file(RUNNER_FILE, TOOL_RUNNER)
                for t in python_tools:
                    sandbox.write_file(f"{TOOL_DIR}/{t.name}.py", t.python)
        names = [*self.spec.builtin_tools, *(t.name for t in self.spec.tools)]
        impls = {t.name: tool_implementation(t) for t in self.spec.tools}
        return ToolRunner(names, ToolContext(sandbox=sandbox), timeout_s=timeout_s, max_calls=max_calls,
                          implementations=impls, specs=self.user_contracts, in_caller=SANDBOX_TOOLS | set(impls),
                          check=check_in_worker if self.spec.tools else None)

    def score_episode(self, task: Task, final_text: str, results: list, sandbox=None) -> tuple[float, dict]:
        """(reward, breakdown): FORMAT_WEIGHT for an answer the extraction finds in the final
        reply, CORRECT_WEIGHT if the verifier passes it; the call statistics beside them."""
        reward, breakdown = self.judged(task, final_text)
        return reward, {**breakdown, **call_stats(results)}

    def score(self, task: Task, completion: str) -> tuple[float, dict]:
        """Score one text as a whole episode (domains without a sandbox): its calls run,
        then its answer is judged.

        Raises:
            ConfigError: the domain's tools run in a sandbox (play it in a `ToolEnv`).
        """
        return score_as_one_turn(self, task, completion)

    def reference_turns(self, task: Task) -> list[str]:
        """The row's reference calls (or, for a row without any, each tool's example), at most
        MAX_CALLS_PER_TURN a turn, then the answer. Validation fails the domain when one of
        them does not work (`domains.validation.failed_reference_calls`)."""
        calls = [tuple(c) for c in task.entry.get("reference_calls") or []] or \
            [(t.name, t.example) for t in self.spec.tools if t.example is not None]
        turns = ["".join(call_text(n, a) for n, a in calls[i:i + MAX_CALLS_PER_TURN])
                 for i in range(0, len(calls), MAX_CALLS_PER_TURN)]
        return [*turns, self.wrap_answer(task.answer)]

    def reference_completion(self, task: Task) -> str:
        return "\n".join(self.reference_turns(task))

    def wrong_turns(self, task: Task) -> list[str]:
        """Another row's answer (one that differs from this row's)."""
        other = next((r.answer for r in self.rows if r.answer.strip().lower() != task.answer.strip().lower()), None)
        return [self.wrap_answer(other if other is not None else f"{task.answer} not")]

    def scripted_turns(self, text: str) -> list[str]:
        return scripted_tool_turns(text)
