"""The `terminal` domain family: multi-turn shell episodes in a sandbox, as Gymnasium envs.

    env = TerminalEnv(sandbox, max_turns=4)
    obs, info = env.reset(options={"task": get_domain("terminal_count_matches").make_task(3)})
    obs, reward, terminated, truncated, info = env.step("```bash\\ngrep -c ERROR app.log > answer.txt\\n```")
    obs, reward, terminated, truncated, info = env.step("DONE")   # reward from the task's checker

Command format (what the model is told, and the only thing parsed): each turn holds one
shell command in a fenced block, ```` ```bash ... ``` ```` (``sh``, ``shell``, ``console`` or
no language tag work too; only the first such block counts). A turn without one whose last
line ends with the word ``DONE`` ends the episode; any other turn without a block is an invalid action: the observation says so and
the turn is spent. The observation of a command is its exit code and output, cut to
`observation_chars`. The episode ends at DONE, after `max_turns` turns (truncated), or when
the sandbox's per-episode budget is spent; the reward is then 1.0 if the task's checker
(run in the sandbox with ``python3 -I -``, the script on stdin, so it never sits in the
workspace) exits 0, else 0.0.

Each domain `terminal_<template>` wraps one template of `domains.terminal.tasks`.
Not covered: rendering turns into tokens (the trainer's episode rollout does that) or
choosing the sandbox (the pool does).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

import gymnasium as gym
from gymnasium import spaces

from core.errors import ConfigError, SandboxError, SandboxTimeout
from domains.contract import EpisodeDomain, EpisodeEnv, Task
from domains.fences import first_block
from domains.terminal.tasks import make_terminal_task, template_names, terminal_task_for_seed, TerminalTask

SYSTEM_PROMPT = (
    "You are working in a Linux shell (bash) in the directory /workspace. Each turn, reply with exactly one "
    "shell command in a ```bash code block; you will see its exit code and output. When the task is done, "
    "reply with DONE.")
MAX_ACTION_CHARS = 20_000
CHECK_TIMEOUT_S = 20.0
SHELL_TAGS = {"bash", "sh", "shell", "console", ""}
_DONE_RE = re.compile(r"(?:^|[\s*_`])DONE$")


@functools.cache
def text_spaces() -> tuple[spaces.Text, spaces.Text]:
    """(observation space, action space): arbitrary Unicode text (command output, model
    replies). Built once (~0.1 s for the 1.1M-character charset) and shared by every env."""
    charset = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)
    return (spaces.Text(max_length=100_000, min_length=0, charset=charset),
            spaces.Text(max_length=MAX_ACTION_CHARS, min_length=0, charset=charset))


def parse_action(text: str) -> tuple[str, str]:
    """Parse one model turn.

    Returns:
        ("command", cmd) for the first ```bash (or sh, shell, console, untagged) block
        (`domains.fences`), ("done", "") for a turn without one whose last line ends with
        the word DONE ("DONE", "All set. DONE."), else ("invalid", reason).
    """
    if not isinstance(text, str):
        return "invalid", "the reply is not text"
    if len(text) > MAX_ACTION_CHARS:
        return "invalid", f"the reply is over {MAX_ACTION_CHARS} characters"
    cmd = first_block(text, SHELL_TAGS)
    if cmd is not None:
        cmd = cmd.strip()
        if cmd and "\x00" not in cmd:
            return "command", cmd
        return "invalid", "the ```bash block is empty"
    last = next((ln for ln in reversed(text.splitlines()) if ln.strip()), "")
    if _DONE_RE.search(last.strip().rstrip(".!*`_ ")):
        return "done", ""
    return "invalid", "no ```bash block, and the last line does not end with DONE"


def format_observation(result, limit: int) -> str:
    """What the model sees after a command: exit code (or timeout) and output, cut to `limit` chars."""
    head = "timed out (killed)" if result.timed_out else "out of memory (killed)" if result.oom_killed \
        else f"exit code {result.exit_code}"
    body = result.stdout + (("\n[stderr]\n" + result.stderr) if result.stderr else "")
    if len(body) > limit or result.truncated_bytes:
        body = body[:limit] + "\n[output cut]"
    return f"[{head}]\n{body}".rstrip()


class TerminalEnv(gym.Env, EpisodeEnv):
    """One terminal task played in one sandbox (Gymnasium contract; text observations/actions).

    Args:
        sandbox: a started `Sandbox`; reset by `reset` (the env does not own or close it).
        max_turns: turn budget of an episode.
        command_timeout_s: wall-clock limit per command, seconds.
        observation_chars: output shown to the model per turn, characters.
    """

    metadata = {"render_modes": []}

    def __init__(self, sandbox, max_turns: int = 4, command_timeout_s: float = 10.0,
                 observation_chars: int = 1200) -> None:
        if max_turns < 1:
            raise ConfigError(f"max_turns must be >= 1, got {max_turns}")
        self.sandbox, self.max_turns = sandbox, max_turns
        self.command_timeout_s, self.observation_chars = command_timeout_s, observation_chars
        self.observation_space, self.action_space = text_spaces()
        self.task: TerminalTask | None = None
        self.turn = 0
        self._over = True

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[str, dict]:
        """Start an episode: a clean sandbox with the task's files.

        Args:
            seed: picks the task (`terminal_task_for_seed`) when options has no "task".
            options: {"task": TerminalTask} and optionally {"difficulty": 1..3}.

        Returns:
            (the instruction, {"task": template name, "files": sorted file names}).
        """
        super().reset(seed=seed)
        options = options or {}
        task = options.get("task")
        if task is not None and not isinstance(task, TerminalTask):  # a registry Task of a terminal domain
            task = terminal_task(task)
        if task is None:
            task = terminal_task_for_seed(seed if seed is not None else 0, options.get("difficulty", 1))
        self.task, self.turn, self._over = task, 0, False
        self.sandbox.reset()
        for path, text in task.files.items():
            self.sandbox.write_file(path, text)
        return task.instruction, {"task": task.template, "files": sorted(task.files)}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        """Play one model turn.

        Returns:
            (observation, reward, terminated, truncated, info). reward is 0.0 until the
            episode ends, then the checker's verdict (1.0 solved, 0.0 not). info["turn"] is
            the stored record of the turn; at the end info["check"] has the checker's output.

        Raises:
            ConfigError: step after the episode ended, or before reset.
            SandboxError: harness fault (the caller tags the episode, no reward).
        """
        if self._over or self.task is None:
            raise ConfigError("episode is over; call reset() first")
        self.turn += 1
        kind, payload = parse_action(action)
        record: dict = {"turn": self.turn, "action": kind, "text": action if isinstance(action, str) else ""}
        terminated = kind == "done"
        obs = ""
        if kind == "command":
            try:
                r = self._exec(payload, timeout_s=self.command_timeout_s)
            except SandboxTimeout:
                terminated = True
                obs = "[episode time budget spent]"
                record.update(command=payload, exit_code=None, timed_out=True, outcome="timeout")
            else:
                obs = format_observation(r, self.observation_chars)
                record.update(command=payload, stdout=r.stdout[-4000:], stderr=r.stderr[-4000:],
                              exit_code=r.exit_code, duration_ms=round(r.duration_ms, 1), timed_out=r.timed_out,
                              oom_killed=r.oom_killed, outcome=r.outcome)
        elif kind == "invalid":
            obs = f"[invalid turn: {payload}] Reply with one command in a ```bash block, or DONE."
        truncated = not terminated and self.turn >= self.max_turns
        info = {"turn": record}
        reward = 0.0
        if terminated or truncated:
            self._over = True
            reward, info["check"] = self.check()
        return obs, reward, terminated, truncated, info

    def _exec(self, cmd: str, **kw):
        """sandbox.exec; a harness fault ends the episode for good (no later step may be scored)."""
        try:
            return self.sandbox.exec(cmd, **kw)
        except SandboxTimeout:
            raise
        except SandboxError:
            self._over = True
            raise

    def finish(self, final_text: str) -> tuple[float, dict]:
        """End the episode early (the token budget is spent): the checker judges the
        workspace as it is; (reward, {"check": verdict}) as `step`'s info at the end."""
        reward, verdict = self.check()
        return reward, {"check": verdict}

    def check(self) -> tuple[float, str]:
        """Run the task's checker in the sandbox: (1.0 or 0.0, its one-line verdict)."""
        # budget=False: the checker runs even when the episode's time is spent
        r = self._exec("python3 -I -", timeout_s=CHECK_TIMEOUT_S, stdin=self.task.checker, budget=False)
        verdict = (r.stdout.strip().splitlines() or [r.stderr.strip()[-200:] or f"exit {r.exit_code}"])[-1]
        return (1.0 if r.ok else 0.0), verdict


@dataclass(frozen=True, eq=False)
class TerminalDomain(EpisodeDomain):
    """One terminal template registered as a multi-turn domain."""

    template: str
    family: str = "terminal"
    kind: str = "multi_turn"
    license: str = "Apache-2.0"
    source: str = "rl-workbench terminal templates (domains/terminal/tasks.py)"
    needs_sandbox: bool = True
    levels = {1: {"difficulty": 1}, 2: {"difficulty": 2}, 3: {"difficulty": 3}}
    level_notes = {1: "small data, no traps", 2: "more data, decoys", 3: "most data, edge cases"}

    @property
    def name(self) -> str:
        return f"terminal_{self.template}"

    def messages(self, task) -> list[dict]:
        """The shell-work system prompt (with the command format) and the task's instruction."""
        return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": task.question}]

    @property
    def environment(self) -> dict:
        """Where tasks run and how they are verified, for the catalogue."""
        return {"runtime": "sandbox (Docker; local bubblewrap fallback)", "image": "rlwb-sandbox",
                "verifier": "a checker script run in the sandbox after the episode", "gymnasium": "TerminalEnv"}

    def make_env(self, sandbox, max_turns: int = 4, timeout_s: float = 10.0) -> TerminalEnv:
        """A `TerminalEnv` on `sandbox` for this domain's tasks."""
        return TerminalEnv(sandbox, max_turns=max_turns, command_timeout_s=timeout_s)

    def reference_turns(self, task) -> list[str]:
        """The reference episode: one fenced command per turn, then DONE."""
        return [*(f"```bash\n{c}\n```" for c in task.entry["reference"]), "DONE"]

    def wrong_turns(self, task) -> list[str]:
        """An episode that does something unrelated (validation: must not score 1)."""
        return ["```bash\necho hello > greeting.txt\n```", "DONE"]

    def scripted_turns(self, text: str) -> list[str]:
        """One fenced command per non-empty line, then DONE."""
        return [*(f"```bash\n{c}\n```" for c in str(text).splitlines() if c.strip()), "DONE"]

    def reference_completion(self, task) -> str:
        """The reference commands, one per line (the form `domains.validation.try_verifier`
        plays as one turn each)."""
        return "\n".join(task.entry["reference"])

    @property
    def description(self) -> str:
        return f"Multi-turn shell task '{self.template}' in a sandbox; a checker script decides the reward."

    def make_task(self, seed: int, difficulty: int = 1):
        """The `domains.contract.Task` for a seed; entry carries the terminal task's fields.

        Raises:
            ConfigError: bad seed or difficulty.
        """

        t = make_terminal_task(self.template, seed, difficulty)
        entry = {"template": t.template, "files": t.files, "checker": t.checker, "reference": list(t.reference)}
        return Task(self.name, t.seed, t.instruction, t.answer, t.difficulty, entry)


def terminal_task(task) -> TerminalTask:
    """The `TerminalTask` inside a terminal domain's `Task`."""
    e = task.entry
    return TerminalTask(e["template"], task.seed, task.difficulty, task.question, e["files"], e["checker"],
                        tuple(e["reference"]), task.answer)


TERMINAL_DOMAINS = {d.name: d for d in (TerminalDomain(t) for t in template_names())}
