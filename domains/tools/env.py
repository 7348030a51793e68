"""Multi-turn tool use as a Gymnasium environment, and how its prompt is rendered.

    env = ToolEnv(get_domain("tool_sql"), sandbox=None, max_turns=4)
    obs, info = env.reset(options={"task": get_domain("tool_sql").make_task(3, 1)})
    obs, reward, terminated, truncated, info = env.step('<tool_call>{"name": "sql", ...}</tool_call>')
    obs, reward, terminated, truncated, info = env.step("Answer: 412")   # scored by the domain

An episode: each model turn is parsed for calls (`domains.tools.contract`, one format:
``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``); the valid ones run
(`domains.tools.toolbox.ToolRunner`: schema-checked, timed out, errors as codes) and the
observation is one JSON line per call, ``{"call": i, "name": ..., "result": text}`` or
``{"error": {"code": ..., "message": ..., "call": i}}``. A turn without any call is the final
answer: the episode ends and the domain scores it (`score_episode`). After `max_turns` turns
the episode is truncated and scored on its last turn.

Every turn is stored as a record: the model text, each call with its arguments, validation
result (error code or None), observation and time in ms.

Prompts: tools are handed to the chat template (`apply_chat_template(..., tools=...)`). A
template that ignores them (SmolLM2's does) renders the same text with and without; the
tool list (name, description, JSON-Schema input, output format, error codes) and the call
format then go into the system message instead, and `tool_prompt` says which way it went.
Observations are messages of role "tool".

Not covered: tools the model defines itself; parallel calls (a turn's calls run in order).
"""

from __future__ import annotations

import json

import gymnasium as gym

from core.errors import ConfigError, SandboxError
from domains.contract import EpisodeEnv
from domains.tools.contract import CALL_CLOSE, CALL_FORMAT, CALL_OPEN, ToolSpec, chat_tools
from domains.terminal.env import text_spaces

TOOL_SYSTEM_PROMPT = (
    "You solve the user's task with tools. " + CALL_FORMAT + " Call tools as often as you need (one or more "
    "calls per turn). When you are finished, reply without any tool call.")


def tools_block(specs: list[ToolSpec]) -> str:
    """The tool list written for a system message (templates without tool support): one
    JSON object per tool with its input schema, output format and error codes, then an
    example call of the first tool that has an example."""
    lines = ["Tools:"]
    for t in specs:
        lines.append(json.dumps({"name": t.name, "description": t.description, "parameters": t.input_schema,
                                 "returns": t.output, "errors": t.errors}, ensure_ascii=False))
    example = next((t for t in specs if t.example is not None), None)
    if example is not None:
        call = json.dumps({"name": example.name, "arguments": example.example}, ensure_ascii=False)
        lines.append(f"Example call: {CALL_OPEN}{call}{CALL_CLOSE}")
    return "\n".join(lines)


def template_takes_tools(tokenizer) -> bool:
    """True if the tokenizer's chat template renders a `tools=` list (it changes the text)."""
    key = (id(tokenizer), tokenizer.chat_template or "")
    if key not in _TAKES_TOOLS:
        probe = [{"role": "user", "content": "hi"}]
        spec = ToolSpec("probe_tool", "A probe.", {"type": "object", "properties": {}}, output="nothing")
        try:
            with_tools = tokenizer.apply_chat_template(probe, tools=chat_tools([spec]), tokenize=False)
            plain = tokenizer.apply_chat_template(probe, tokenize=False)
            _TAKES_TOOLS[key] = with_tools != plain and "probe_tool" in with_tools
        except Exception:  # noqa: BLE001 - a template that fails on tools does not take them
            _TAKES_TOOLS[key] = False
    return _TAKES_TOOLS[key]


_TAKES_TOOLS: dict[tuple[int, str], bool] = {}


def tool_prompt(tokenizer, messages: list[dict], specs: list[ToolSpec]) -> tuple[list[dict], dict, str]:
    """Messages and `apply_chat_template` keyword arguments that present `specs`.

    Args:
        tokenizer: the policy's tokenizer; None gives the system-message form (previews).
        messages: the task's [system, user] messages (system = `TOOL_SYSTEM_PROMPT`).

    Returns:
        (messages, template kwargs ({"tools": [...]} or {}), "chat_template" or "system_message").
    """
    if tokenizer is not None and template_takes_tools(tokenizer):
        return messages, {"tools": chat_tools(specs)}, "chat_template"
    first, *rest = messages
    return [{**first, "content": f"{first['content']}\n\n{tools_block(specs)}"}, *rest], {}, "system_message"


def observation_text(results) -> str:
    """What the model reads after a turn with calls: one JSON line per call, in order."""
    lines = []
    for r in results:
        if r.error is None:
            lines.append(json.dumps({"call": r.index, "name": r.name, "result": r.observation}, ensure_ascii=False))
        else:
            lines.append(r.observation)  # already {"error": {...}}
    return "\n".join(lines)


def score_as_one_turn(domain, task, completion) -> tuple[float, dict]:
    """A tool domain's verdict on one text played as a whole episode in process: its calls
    run, then its answer is judged (`score_episode`). Never raises on the text.

    Raises:
        ConfigError: the domain's tools run in a sandbox (play it in a `ToolEnv`).
    """
    if domain.needs_sandbox:
        raise ConfigError(f"{domain.name} runs its tools in a sandbox; play it in a ToolEnv (the Domains page's "
                          "try-the-verifier box does)")
    runner = domain.tool_runner(task, None)
    try:
        results = runner.run_turn(completion) if isinstance(completion, str) else []
    finally:
        runner.close()
    return domain.score_episode(task, completion, results)


MAX_RECORDED_ARGUMENT_CHARS = 4_000


def _storable(value):
    """`value` as clean JSON types: lone surrogates (a model can write them as JSON escapes)
    replaced, arguments over `MAX_RECORDED_ARGUMENT_CHARS` kept as a cut JSON string."""
    text = json.dumps(value, ensure_ascii=False).encode("utf-8", "replace").decode("utf-8")
    if len(text) > MAX_RECORDED_ARGUMENT_CHARS:
        return {"_cut": text[:MAX_RECORDED_ARGUMENT_CHARS], "_chars": len(text)}
    return json.loads(text)


def call_record(r) -> dict:
    """A call as stored in the trajectory: name, arguments, error code (None = valid and
    ran), observation, time in ms, plus tool extras (e.g. a mesh summary); text made safe to
    store and show (`_storable`)."""
    rec = {"index": r.index, "name": _storable(r.name), "arguments": _storable(r.arguments), "error": r.error,
           "observation": _storable(r.observation[:4000]), "duration_ms": round(r.duration_ms, 1)}
    if r.extra:
        rec["extra"] = r.extra
    return rec


class ToolEnv(gym.Env, EpisodeEnv):
    """One tool-use task played to the end (Gymnasium contract; text observations/actions).

    Args:
        domain: a tool domain (`domains.tools.domain.ToolDomain` or a `cad` domain).
        sandbox: a started `Sandbox` when the domain's tools need one (reset by `reset`,
            not owned or closed here); None otherwise.
        max_turns: turn budget of an episode.
        timeout_s: per-call time limit, seconds.
        max_calls: calls allowed per turn.

    Raises:
        ConfigError: max_turns < 1, or a sandbox-needing domain without a sandbox.
    """

    metadata = {"render_modes": []}

    def __init__(self, domain, sandbox=None, max_turns: int = 4, timeout_s: float = 10.0, max_calls: int = 4):
        if isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 1:
            raise ConfigError(f"max_turns must be an int >= 1, got {max_turns!r}")
        if domain.needs_sandbox and sandbox is None:
            raise ConfigError(f"domain {domain.name} runs its tools in a sandbox; pass one")
        self.domain, self.sandbox, self.max_turns = domain, sandbox, max_turns
        self.timeout_s, self.max_calls = timeout_s, max_calls
        self.observation_space, self.action_space = text_spaces()
        self.task, self.runner, self.results, self.turn, self._over = None, None, [], 0, True

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[str, dict]:
        """Start an episode of `options["task"]` (a `Task` of this env's domain); without
        one, of the domain's task for `seed` (default 0) at `options["difficulty"]` (1).

        Returns:
            (the question, {"tools": the tool names}).

        Raises:
            ConfigError: a task of another domain, or a bad seed or difficulty.
            SandboxError: the sandbox could not be prepared (harness fault).
        """
        super().reset(seed=seed)
        options = options or {}
        task = options.get("task")
        if task is None:
            task = self.domain.make_task(seed if seed is not None else 0, options.get("difficulty", 1))
        if getattr(task, "domain", None) != self.domain.name:
            raise ConfigError(f"reset needs options={{'task': a {self.domain.name} task}}, got {task!r:.80}")
        if self.runner is not None:
            self.runner.close()
        if self.sandbox is not None:
            self.sandbox.reset()
        self.task, self.results, self.turn, self._over = task, [], 0, False
        self.runner = self.domain.tool_runner(task, self.sandbox, timeout_s=self.timeout_s, max_calls=self.max_calls)
        return task.question, {"tools": list(self.runner.specs)}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        """Play one model turn.

        Returns:
            (observation, reward, terminated, truncated, info): reward is 0 until the end,
            then the domain's score; info["turn"] is the turn's record and, at the end,
            info["breakdown"] the reward breakdown (with call validity and error codes).

        Raises:
            ConfigError: step before reset or after the end.
            SandboxError: harness fault (the caller tags the episode; never scored).
        """
        if self._over or self.task is None:
            raise ConfigError("episode is over; call reset() first")
        self.turn += 1
        text = action if isinstance(action, str) else ""
        results = self.runner.run_turn(text)
        self.results += results
        record = {"turn": self.turn, "action": "tool_call" if results else "answer", "text": text[:20_000],
                  "calls": [call_record(r) for r in results]}
        terminated = not results
        truncated = not terminated and self.turn >= self.max_turns
        obs, reward, info = "", 0.0, {"turn": record}
        if results:
            obs = observation_text(results)
        if terminated or truncated:
            self._over = True
            reward, info["breakdown"] = self.score(text)
        return obs, reward, terminated, truncated, info

    def finish(self, final_text: str) -> tuple[float, dict]:
        """End the episode early (the token budget is spent) and score it on `final_text`:
        (reward, {"breakdown": ...}) as `step`'s info at the end of an episode."""
        self._over = True
        reward, breakdown = self.score(final_text)
        return reward, {"breakdown": breakdown}

    def score(self, final_text: str) -> tuple[float, dict]:
        """The domain's verdict on the episode so far (`final_text` holds the answer)."""
        try:
            reward, breakdown = self.domain.score_episode(self.task, final_text, self.results, self.sandbox)
        except SandboxError:
            self._over = True
            raise
        breakdown.update(turns=self.turn, **call_stats(self.results))
        return reward, breakdown

    def close(self) -> None:
        if self.runner is not None:
            self.runner.close()
            self.runner = None


CONTRACT_ERRORS = frozenset({"invalid_json", "bad_call_shape", "unknown_tool", "schema_violation", "too_many_calls",
                             "unclosed_call"})


def call_stats(results) -> dict:
    """Call statistics of an episode's `ToolResult`s: calls; valid_calls (the call parsed,
    named a tool of the environment and met its input schema: no code of
    `CONTRACT_ERRORS`); call_validity (valid / calls, None without calls); ok_calls (valid
    and the tool succeeded); error_codes (code -> count, contract and tool codes)."""
    codes: dict[str, int] = {}
    for r in results:
        if r.error:
            codes[r.error] = codes.get(r.error, 0) + 1
    valid = sum(r.error not in CONTRACT_ERRORS for r in results)
    return {"calls": len(results), "valid_calls": valid, "call_validity": valid / len(results) if results else None,
            "ok_calls": sum(r.error is None for r in results), "error_codes": codes}
