"""Multi-turn episodes: terminal tasks (shell commands in a sandbox) and tool-use tasks
(`domains.tools.env.ToolEnv`: schema-checked tool calls, some in a sandbox).

    runtime = SandboxRuntime.open(cfg)                 # warm pool + scheduler (Docker by default)
    samples = rollout_episodes(engine, tokenizer, tasks, group_size=8, runtime=runtime, ...)
    runtime.close()

A multi-turn episode is trained as one sequence: the prompt, then every model turn
(policy tokens, mask 1, with their sampling logprobs) interleaved with the environment's
observation tokens (mask 0, never trained on). Observation tokens are exactly what the
chat template renders between two assistant turns (end of turn, a user message with the
observation, the start of the next assistant turn), so the learner sees the same tokens
the rollout engine saw (role "user" for terminal domains, "tool" for tool domains, whose
tools are rendered by the template when it takes them, else listed in the system message).
Episodes of a step run in waves of `pool.size` (all at once when no episode needs a
sandbox); each turn, the active episodes are generated as one batch and their commands or
tool calls run in parallel.

Not covered: asynchronous (off-policy) overlap of generation and sandbox work.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable

from core.errors import ConfigError, SandboxError
from sandboxes.base import Sandbox
from sandboxes.pool import SandboxPool, Scheduler
from sandboxes.spec import SandboxSpec
from trainer.types import Completion, Sample
from domains.contract import Breakdown, EpisodeEnv, Task, ToolUseDomain, Turn
from domains.registry import build_messages, get_domain
from domains.tools.env import tool_prompt

_SENTINEL = "RLWB_TURN_SENTINEL_5f2c"


@dataclass
class SandboxRuntime:
    """The sandboxes of one run: a warm pool and a scheduler over it, and for domains whose
    sandboxes get a network allow-list (`Domain.sandbox_network`) one more pool per
    allow-list, opened on first use by `opener` (network -> started pool)."""

    pool: SandboxPool
    scheduler: Scheduler
    opener: Callable[[tuple[str, ...]], SandboxPool] | None = None
    networked: dict = field(default_factory=dict)

    @classmethod
    def open(cls, cfg) -> "SandboxRuntime":
        """Start the pool the config asks for.

        Raises:
            SandboxUnavailable: the backend can't run here (never replaced silently).
        """
        pool = SandboxPool(cfg.sandbox_backend, sandbox_spec(cfg), size=cfg.sandbox_pool_size).start()

        def opener(network: tuple[str, ...]) -> SandboxPool:
            return SandboxPool(cfg.sandbox_backend, sandbox_spec(cfg, network), size=cfg.sandbox_pool_size).start()

        return cls(pool, Scheduler(pool), opener)

    def pool_for(self, domain) -> SandboxPool:
        """The pool whose sandboxes have `domain`'s network: the run's own for "none".

        Raises:
            ConfigError: the domain needs a network and this runtime can't open pools.
            SandboxUnavailable: the backend can't give that network (the local one has none).
        """
        network = domain.sandbox_network
        if network == "none":
            return self.pool
        if network not in self.networked:
            if self.opener is None:
                raise ConfigError(f"domain {domain.name} needs sandboxes that reach {', '.join(network)}; this "
                                  "runtime opens none")
            self.networked[network] = self.opener(network)
        return self.networked[network]

    def open_networks(self, names: list[str]) -> "SandboxRuntime":
        """Open now the pools of the named domains' network allow-lists, so a host that does
        not resolve fails the run at its start, not at its first episode of that domain.

        Raises:
            SandboxUnavailable: a pool could not start (the runtime is closed).
        """
        try:
            for name in names:
                self.pool_for(get_domain(name))
        except Exception:
            self.close()
            raise
        return self

    def close(self) -> None:
        self.scheduler.close()
        for pool in self.networked.values():
            pool.close()
        self.pool.close()


def sandbox_spec(cfg, network: str | tuple[str, ...] = "none"):
    """The `SandboxSpec` of a run's sandboxes (memory, command and episode time limits), with
    `network` ("none", or the hosts a domain's sandboxes may reach)."""
    return SandboxSpec(memory_mb=cfg.sandbox_memory_mb, command_timeout_s=cfg.command_timeout_s,
                       episode_timeout_s=max(60.0, cfg.command_timeout_s * (cfg.max_turns + 2)), network=network)


def observation_ids(tokenizer, messages: list[dict], observation: str, after_eos: bool, role: str = "user",
                    template_kw: dict | None = None, eos_text: str | None = None) -> list[int]:
    """Token ids that close an assistant turn, add `observation` as a user turn and open the
    next assistant turn, as the model's chat template renders them.

    Args:
        tokenizer: the policy's tokenizer (with a chat template).
        messages: the episode's opening messages (system, user).
        observation: the environment's text for the model.
        after_eos: the assistant turn already ended with an end-of-sequence token, whose text
            (`eos_text`) is then not repeated where the template's next turn starts with it.
        role: the observation message's role ("user", or "tool" for tool results).
        template_kw: extra `apply_chat_template` arguments of the episode (its `tools`).
        eos_text: the text of the token that ended the turn; None: the tokenizer's eos. It
            may be another of the model's end-of-sequence ids (its generation config's).

    Returns:
        The observation segment's token ids (masked out of the loss).
    """
    kw = template_kw or {}
    turn = [*messages, {"role": "assistant", "content": _SENTINEL}]
    before = tokenizer.apply_chat_template(turn, tokenize=False, **kw)
    after = tokenizer.apply_chat_template([*turn, {"role": role, "content": observation}], tokenize=False,
                                          add_generation_prompt=True, **kw)
    cut = before.index(_SENTINEL) + len(_SENTINEL)
    assert after[:cut] == before[:cut], "chat template renders earlier turns differently once a turn is added"
    segment = after[cut:]
    eos = (tokenizer.eos_token or "") if eos_text is None else eos_text
    if after_eos and eos and segment.startswith(eos):
        segment = segment[len(eos):]
    return tokenizer(segment, add_special_tokens=False)["input_ids"]


@dataclass
class _Episode:
    group: int
    index: int
    task: Task
    env: EpisodeEnv | None = None
    sandbox: Sandbox | None = None
    pool: SandboxPool | None = None  # where `sandbox` came from (`SandboxRuntime.pool_for`)
    ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)
    turns: list[Turn] = field(default_factory=list)
    done: bool = False
    reward: float = 0.0
    check: str = ""
    finish: str = "stop"
    fault: str | None = None
    breakdown: Breakdown | None = None
    last_text: str = ""
    truncated: str | None = None


def rollout_episodes(engine, tokenizer, tasks, group_size: int, runtime: SandboxRuntime, *, max_turns: int,
                     max_new_tokens: int, max_episode_tokens: int, temperature: float, top_p: float,
                     command_timeout_s: float, groups: list[int] | None = None) -> list[Sample]:
    """Play `group_size` episodes of each multi-turn task and score them in sandboxes.

    Args:
        tasks: multi-turn tasks (terminal domains).
        groups: the group index of each task (its place in the step); default 0, 1, ...
        max_new_tokens: cap per model turn (tokens). max_episode_tokens: cap on the whole
            sequence (tokens); an episode that would exceed it, or the engine's window,
            ends (finish "length", breakdown["truncated"] says which).

    Returns:
        len(tasks) * group_size samples, task by task; a harness fault sets Sample.fault, and so
        does an opening prompt that leaves no room for a token ("context": never played).
    """

    prompts_of = [episode_prompt(tokenizer, t) for t in tasks]
    opening = [(m, kw, role) for m, kw, role, _ in prompts_of]
    prompts = [tokenizer.apply_chat_template(m, add_generation_prompt=True, tokenize=False, **kw)
               for m, kw, _, _ in prompts_of]
    prompt_ids = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
    episodes = [_Episode(g, i, t) for g, t in enumerate(tasks) for i in range(group_size)]
    sandboxed = any(get_domain(t.domain).needs_sandbox for t in tasks)
    if sandboxed and runtime is None:
        raise ConfigError("these episodes need sandboxes (terminal_*, tool_files, cad_*): open a sandbox runtime")
    size = runtime.pool.size if sandboxed else min(len(episodes), 16)
    with ThreadPoolExecutor(size, thread_name_prefix="episode") as workers:
        for start in range(0, len(episodes), size):
            wave = episodes[start : start + size]
            try:
                for ep in wave:
                    domain = get_domain(ep.task.domain)
                    if domain.needs_sandbox:
                        ep.pool = runtime.pool_for(domain)
                        ep.sandbox = ep.pool.acquire()
                    ep.env = domain.make_env(ep.sandbox, max_turns=max_turns, timeout_s=command_timeout_s)
                list(workers.map(lambda ep: _guard(ep, lambda: ep.env.reset(options={"task": ep.task})), wave))
                _play_wave(engine, tokenizer, wave, opening, prompt_ids, workers, max_new_tokens,
                           max_episode_tokens, temperature, top_p)
            finally:
                for ep in wave:
                    if ep.env is not None:
                        ep.env.close()
                    if ep.sandbox is not None:
                        (ep.pool.replace if ep.fault == "harness" else ep.pool.release)(ep.sandbox)
    samples = []
    for ep in episodes:
        valid = sum(t["action"] != "invalid" for t in ep.turns)
        breakdown = ep.breakdown or {"correct": ep.reward, "format": valid / max(len(ep.turns), 1),
                                     "turns": len(ep.turns), "invalid_turns": len(ep.turns) - valid,
                                     "check": ep.check}
        breakdown.setdefault("turns", len(ep.turns))
        if prompts_of[ep.group][3]:
            breakdown["tools_in"] = prompts_of[ep.group][3]
        if ep.fault:
            breakdown["fault"] = ep.fault
        if ep.truncated:
            breakdown["truncated"] = ep.truncated
        text = tokenizer.decode(ep.ids, skip_special_tokens=False)
        comp = Completion(ep.ids, ep.logprobs, text, ep.finish, mask=ep.mask)
        group = groups[ep.group] if groups is not None else ep.group
        samples.append(Sample(domain=ep.task.domain, task_seed=ep.task.seed, group=group,
                              index=ep.index, prompt=prompts[ep.group], prompt_ids=list(prompt_ids[ep.group]),
                              completion=comp, reward=ep.reward, breakdown=breakdown, answer=ep.task.answer,
                              fault=ep.fault, turns=ep.turns, difficulty=ep.task.difficulty))
    return samples


def episode_prompt(tokenizer, task) -> tuple[list[dict], dict, str, str | None]:
    """How an episode opens: (messages, `apply_chat_template` kwargs, observation role,
    where the tools were put: "chat_template", "system_message" or None for terminal tasks)."""

    domain = get_domain(task.domain)
    if isinstance(domain, ToolUseDomain):
        messages, kw, where = tool_prompt(tokenizer, domain.opening(task), domain.tool_specs(task))
        return messages, kw, "tool", where
    return build_messages(task), {}, "user", None


def _guard(ep: _Episode, fn):
    """Run fn; a harness fault ends the episode as `fault="harness"` (never scored)."""
    if ep.done:
        return None
    try:
        return fn()
    except SandboxError as e:
        ep.done, ep.fault, ep.check = True, "harness", f"harness fault: {e}"[:300]
        return None


def _play_wave(engine, tokenizer, wave, opening, prompt_ids, workers, max_new_tokens, max_episode_tokens,
               temperature, top_p) -> None:
    """Play a wave of episodes turn by turn until each ends. An episode stops cleanly
    (finish "length", the reason in its breakdown's "truncated") before its sequence
    would pass `max_episode_tokens` or the engine's window, whichever is smaller; one whose
    opening prompt already fills it is a "context" fault (not sent, not scored)."""
    window = engine.window
    limit = max_episode_tokens if window is None else min(max_episode_tokens, window)
    why = (f"episode token budget: max_episode_tokens {max_episode_tokens} reached" if limit == max_episode_tokens
           else f"context window: the engine's window of {window} tokens reached")
    while True:
        for ep in wave:  # no room left for one more token: end it before the engine would refuse it
            if not ep.done and len(prompt_ids[ep.group]) + len(ep.ids) >= limit:
                if ep.ids:
                    _end_for_length(ep, why)
                else:  # the opening prompt alone fills it: never sent, as a single-turn prompt over the window
                    ep.done, ep.fault, ep.finish = True, "context", "length"
                    ep.truncated = f"opening prompt of {len(prompt_ids[ep.group])} tokens leaves no room ({why}); not sent"
        if not (active := [ep for ep in wave if not ep.done]):
            return
        contexts = [prompt_ids[ep.group] + ep.ids for ep in active]
        budget = min(max_new_tokens, limit - max(len(c) for c in contexts))
        outs = engine.generate(contexts, n=1, max_new_tokens=budget, temperature=temperature, top_p=top_p)
        for ep, [comp] in zip(active, outs):
            ep.ids += comp.token_ids
            ep.logprobs += comp.logprobs
            ep.mask += [1] * len(comp.token_ids)
        steps = list(workers.map(lambda pair: _guard(pair[0], lambda: pair[0].env.step(pair[1].text)),
                                 [(ep, out[0]) for ep, out in zip(active, outs)]))
        for ep, [comp], result in zip(active, outs, steps):
            if result is None:  # harness fault
                continue
            obs, reward, terminated, truncated, info = result
            ep.turns.append(info["turn"])
            ep.last_text = comp.text
            if terminated or truncated:
                ep.done, ep.reward, ep.check = True, reward, info.get("check", "")
                ep.breakdown = info.get("breakdown")
                ep.finish = "stop" if terminated else "length"
                if truncated and not terminated:
                    ep.truncated = info.get("truncated_reason", "turn budget: the environment's max_turns reached")
                continue
            # "stop": the turn ended at one of the model's end-of-sequence ids, the tokenizer's
            # eos or another of its generation config's (the engines stop at each)
            ended = comp.finish_reason == "stop" and bool(comp.token_ids)
            end = tokenizer.decode(comp.token_ids[-1:]) if ended else None
            messages, kw, role = opening[ep.group]
            seg = observation_ids(tokenizer, messages, obs, ended, role=role, template_kw=kw, eos_text=end)
            if len(prompt_ids[ep.group]) + len(ep.ids) + len(seg) + 1 > limit:
                _end_for_length(ep, why)
                continue
            ep.ids += seg
            ep.logprobs += [0.0] * len(seg)
            ep.mask += [0] * len(seg)


def _end_for_length(ep: _Episode, reason: str) -> None:
    """The token budget is spent: end the episode and let the checker judge the workspace
    (terminal) or the domain score the last turn (tools); `reason` goes to the breakdown's
    "truncated"."""
    ep.truncated = reason
    result = _guard(ep, lambda: ep.env.finish(ep.last_text))
    if result is not None:  # info as `step` gives it when an episode ends: "check" or "breakdown"
        ep.reward, info = result
        if "check" in info:
            ep.check = info["check"]
        if "breakdown" in info:
            ep.breakdown = info["breakdown"]
    ep.done, ep.finish = True, "length"
