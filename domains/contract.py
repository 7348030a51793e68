"""The domain contract: what every domain is and does, whatever its family.

A *domain* (DESIGN.md) is a family of tasks with one automatic verifier. Every domain has
the same core, `Domain`: catalogue facts (name, family, description, source, licence,
numbered levels with notes, the environment it runs in), `make_task(seed, difficulty)`
(deterministic: the same pair always gives the same `Task`), `messages(task)` (the chat
that poses it) and `reference_completion(task)` (a reply the verifier gives full marks).
What differs between domains is how a reply becomes a reward; each domain is exactly one
of these typed parts, and callers dispatch on them with `isinstance`, never on `kind`
strings or `hasattr` probes:

| part | the reward comes from | verbs beyond the core | families |
|---|---|---|---|
| `TextDomain` | one completion, scored in this process | `score`, `wrap_answer` | reasoning-gym |
| `RetrievalDomain` | one completion over a context retrieved from documents | `documents`, `context`, `messages(task, tokenizer, budget)` | long documents |
| `SandboxDomain` | one completion, scored by a job in a sandbox | `verification_job`, `score_result` | code |
| `EpisodeDomain` | a multi-turn episode in a Gymnasium environment (`EpisodeEnv`) | `make_env`, `reference_turns`, `wrong_turns` | terminal |
| `ToolUseDomain` | an episode of contract-first tool calls | `tool_specs`, `opening`, `tool_runner`, `score_episode` | tools, cad |

`needs_sandbox` says whether scoring or playing needs a sandbox (every `SandboxDomain`,
the terminal domains, tool_files and cad). `check_domain` (`domains.conformance`) checks
a domain against this contract; every registered domain passes it in the fast suite.

    from domains.contract import Task, TextDomain
    isinstance(get_domain("chain_sum"), TextDomain)      # True: score(task, completion)

Rewards of the answer-line domains: reward = FORMAT_WEIGHT * format + CORRECT_WEIGHT *
correct, in [0, 1]. Not covered here: the registry (`domains.registry`), the held-out
split (`domains.splits`), which answer of a reply is scored (`domains.answers`).
"""

from __future__ import annotations

import abc
import hashlib
import operator
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypedDict

from core.errors import ConfigError

# Reward = FORMAT_WEIGHT * format + CORRECT_WEIGHT * correct. The format term exists
# because SmolLM2-135M rarely writes the answer line at all (0-10% of samples), so the
# first gains of RL come from learning the format; correctness carries most of the weight.
FORMAT_WEIGHT = 0.2
CORRECT_WEIGHT = 0.8

DIFFICULTIES = (1, 2, 3)  # levels of the hand-made domains (1 easy .. 3 hard)

SYSTEM_PROMPT = "You are a helpful assistant. Solve the problem and keep your reply short."
ANSWER_INSTRUCTION = "Give your final answer on the last line as: Answer: <answer>"
TAG_INSTRUCTION = "Give your final answer between <answer> and </answer> tags; it may span several lines."
# a pass is full marks; partial credit that sums to 0.9999999999999999 (spell_backward
# gives that to the answer followed by junk) is not
PASS_THRESHOLD = 1.0


@dataclass(frozen=True)
class Task:
    """One instance of a domain.

    Attributes:
        domain: Domain name, e.g. "basic_arithmetic".
        seed: Task seed; the same (domain, seed, difficulty) always gives the same task.
        question: The generator's question text (shown to the model).
        answer: Hidden reference answer (never shown to the model).
        difficulty: Level 1..n (1 easy .. n hard).
        entry: The generator's entry (question/answer/metadata, or the family's own fields:
            a terminal task's files and checker, a tool task's tools) as plain JSON types
            (for storage and display).
        raw_entry: The entry exactly as the generator made it (tuples, Fractions): the
            verifier gets this one, since some scorers compare with `==` (arc_agi boards
            are tuples). None for tasks rebuilt from JSON; `score` then regenerates it.
    """

    domain: str
    seed: int
    question: str
    answer: str
    difficulty: int
    entry: dict
    raw_entry: Any = field(default=None, compare=False, repr=False)


class Breakdown(TypedDict, total=False):
    """The named parts of a reward, as a domain's scorer returns them and the store keeps
    them (JSON). Every scorer gives "format" and "correct"; the others appear where they apply.

    Attributes:
        format: 1.0 if the reply is in the domain's answer format (or a valid turn), else 0.0.
        correct: 1.0 if the verifier passed the answer, else 0.0.
        score: the upstream verifier's own score in [0, 1] (partial credit, not rewarded).
        extracted: the answer the reply committed to (`domains.answers`), or None.
        rejected: why an answer in the format was refused (ambiguous, unsafe).
        verifier_error: the verifier raised or ran past its time limit.
        fault: "harness" (the sandbox failed) or "context" (the prompt did not fit).
        error: a code sample's failure class (syntax, wrong, crash, timeout).
        truncated: why an episode was cut (token budget, window, turns).
        overlong: "masked" or "penalized" by the run's `overlong` setting.
        unpenalized_reward: the reward before an overlong penalty.
        calls, valid_calls, call_validity, ok_calls, error_codes: tool-call statistics.
        check: a terminal task's checker verdict (one line).
        turns: how many turns an episode played.
    """

    format: float
    correct: float
    score: float
    extracted: str | None
    rejected: str
    verifier_error: str
    fault: str
    error: str | None
    truncated: str
    overlong: str
    unpenalized_reward: float
    calls: int
    valid_calls: int
    call_validity: float | None
    ok_calls: int
    error_codes: dict
    check: str
    turns: int


class Turn(TypedDict, total=False):
    """One model turn of a multi-turn episode, as the environment records it (`step`'s
    info["turn"]) and the store keeps it.

    Attributes:
        turn: 1-based turn number.
        action: "command", "done", "invalid" (terminal) or "tool_call", "answer" (tools).
        text: the model's text for the turn.
        command, stdout, stderr, exit_code, timed_out, oom_killed, outcome: a terminal
            command and what the sandbox returned.
        duration_ms: wall time of the command or calls (milliseconds).
        calls: the tool calls of the turn with their results and error codes.
    """

    turn: int
    action: str
    text: str
    command: str
    stdout: str
    stderr: str
    exit_code: int | None
    timed_out: bool
    oom_killed: bool
    outcome: str
    duration_ms: float
    calls: list[dict]


def as_int(value: Any) -> int | None:
    """value as a plain int (numpy ints too), or None for bools, floats and the rest."""
    if isinstance(value, bool):
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None


def check_seed(seed: Any) -> int:
    """seed as an int if it is a non-negative int (numpy ints too).

    Raises:
        ConfigError: anything else (a negative, a float, a bool, None).
    """
    index = as_int(seed)
    if index is None or index < 0:
        raise ConfigError(f"seed must be a non-negative int, got {seed!r}")
    return index


def task_random(name: str, level: int, seed: int) -> random.Random:
    """A `random.Random` seeded from sha256 of (domain name, level, seed): a task drawn from
    it is the same in every process (`hash()` of a str is not)."""
    key = hashlib.sha256(f"{name} {level} {seed}".encode()).digest()
    return random.Random(int.from_bytes(key[:8], "big"))


def check_difficulty(difficulty: Any, levels: Any = DIFFICULTIES) -> int:
    """difficulty as an int if it is one of `levels` (a sequence or a dict of levels).

    Raises:
        ConfigError: naming the valid levels.
    """
    level = as_int(difficulty)
    if level not in levels:
        raise ConfigError(f"difficulty must be one of {sorted(levels)}, got {difficulty!r}")
    return level


class Domain(abc.ABC):
    """The core every domain has. Subclasses are frozen dataclasses (or plain classes)
    that also set these catalogue facts:

    Attributes:
        name: Registry name, e.g. "chain_sum" (unique).
        family: Family for the catalogue ("arithmetic", "code", "terminal", "tool_use", ...).
        kind: The catalogue's word for the part ("single_turn", "retrieval", "code",
            "multi_turn"): for display and filters only; callers dispatch on the class.
        description: One line for the page.
        source: Where tasks and verifier come from (package and version).
        license: Licence of the generator's code and data.
        levels: Difficulty level (1 easy .. n hard) -> the generator's configuration.
        level_notes: Difficulty level -> what the level means, for the page.
        answer_format: "line" (a final `Answer: ...` line), "tag" (`<answer>...</answer>`) or
            "move" (a bracketed move in each turn of a game, `[up]`: `domains.textarena`).
        pooled: The tasks come from a finite pool of items split into training and held-out
            sides (`domains.splits`).
        multiple_answers: A task may have several valid answers (validation then doesn't
            treat other tasks' answers as wrong ones).
        needs_sandbox: Scoring or playing a task needs a sandbox.
        reward_rule: How a sample's reward is made, in words, for the Trajectories page
            ("0.2 x format + 0.8 x correct").
        sandbox_network: The network its sandboxes get: "none" (the default: loopback only)
            or a tuple of hosts to allow (`sandboxes.spec.SandboxSpec.network`); a run opens
            a pool of that network for the domain's episodes.
        version_key: What a validation report is of, beyond the name: "" for the shipped
            domains, the stored version for a user domain (a new version is not validated
            until it is validated itself; `domains.validation.current_validations`).
    """

    name: str
    family: str
    kind: str
    description: str
    source: str
    license: str
    levels: Mapping[int, Any]
    level_notes: Mapping[int, str]
    answer_format: str = "line"
    pooled: bool = False
    multiple_answers: bool = False
    needs_sandbox: bool = False
    sandbox_network: str | tuple[str, ...] = "none"
    reward_rule: str = ""
    version_key: str = ""

    @property
    @abc.abstractmethod
    def environment(self) -> dict:
        """Where tasks run and how they are verified, as JSON-able facts for the catalogue."""

    @abc.abstractmethod
    def make_task(self, seed: int, difficulty: int = 1) -> Task:
        """The deterministic task for (seed, difficulty).

        Raises:
            ConfigError: seed is not a non-negative int or difficulty is not a level.
        """

    @abc.abstractmethod
    def messages(self, task: Task) -> list[dict]:
        """The chat messages ({"role", "content"}) that pose `task`, before the model's
        chat template."""

    @abc.abstractmethod
    def reference_completion(self, task: Task) -> str:
        """A reply the verifier gives full marks (validation, the page's verifier box)."""


class TextDomain(Domain):
    """A domain whose reward comes from one completion, scored in this process."""

    reward_rule = (f"{FORMAT_WEIGHT:g} x format (an answer found in the reply) + {CORRECT_WEIGHT:g} x correct (the "
                   "verifier's score of that answer)")

    kind = "single_turn"

    @abc.abstractmethod
    def score(self, task: Task, completion: str) -> tuple[float, Breakdown]:
        """(reward in [0, 1], breakdown) for one completion; never raises on bad replies.

        breakdown holds at least "format" and "correct" (0.0 or 1.0) and "extracted" (the
        answer scored, or None).
        """

    @abc.abstractmethod
    def wrap_answer(self, answer: str) -> str:
        """`answer` written the way this domain asks for it (`Answer: 17`, `<answer>..`)."""

    def near_miss(self, task: Task) -> str | None:
        """An answer close to the reference that must not pass, for validation's near-miss
        probe; None (the default): validation changes the reference's first letter or digit,
        which a domain with many valid answers (a graph colouring, a sokoban walk) may
        still accept, so such a domain gives a surely wrong one here."""
        return None


class LineAnswerDomain(TextDomain):
    """A single-turn domain generated in this project whose reply ends with an `Answer: ...`
    line: the chat (system prompt, the question, the answer instruction), the reference
    reply and the wrapper. Subclasses set `LEVEL_NOTES` (level -> what it means), the
    catalogue facts, `make_task` and `score`."""

    LEVEL_NOTES: Mapping[int, str] = {}
    kind = "single_turn"
    answer_format = "line"
    license = "Apache-2.0"

    @property
    def levels(self) -> dict[int, str]:
        return dict(self.LEVEL_NOTES)

    @property
    def level_notes(self) -> dict[int, str]:
        return dict(self.LEVEL_NOTES)

    def messages(self, task: Task) -> list[dict]:
        return [{"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": f"{task.question}\n{ANSWER_INSTRUCTION}"}]

    def reference_completion(self, task: Task) -> str:
        return self.wrap_answer(task.answer)

    def wrap_answer(self, answer: str) -> str:
        return f"Answer: {answer}"


class RetrievalDomain(TextDomain):
    """A text domain over long documents: the prompt holds only the fragments that
    retrieval picked for the question, in a token budget (`retrieval.context`)."""

    kind = "retrieval"

    @abc.abstractmethod
    def documents(self, task: Task) -> dict[str, str]:
        """The task's documents, name -> text (the haystack; may be ~4M characters)."""

    @abc.abstractmethod
    def context(self, task: Task, tokenizer: Any = None, budget_tokens: int | None = None) -> Any:
        """The assembled context (`retrieval.context.AssembledContext`) in `budget_tokens`
        tokens of `tokenizer` (None: the embedding model's)."""

    @abc.abstractmethod
    def messages(self, task: Task, tokenizer: Any = None, budget_tokens: int | None = None) -> list[dict]:
        """The question after its retrieved context, in `budget_tokens` of `tokenizer`."""


class SandboxDomain(Domain):
    """A domain whose one completion is scored by a job run in a sandbox (unit tests)."""

    reward_rule = "1 if the reply's code passes every test in the sandbox, else 0"

    kind = "code"
    needs_sandbox = True

    @abc.abstractmethod
    def verification_job(self, task: Task, completion: str) -> Any:
        """The `sandboxes.pool.SandboxJob` that checks `completion`."""

    @abc.abstractmethod
    def score_result(self, task: Task, completion: str, job: Any) -> tuple[float, Breakdown]:
        """(reward, breakdown) from the job's `JobResult`; breakdown["fault"] == "harness"
        when the sandbox machinery failed (the sample then counts for nothing)."""

    def probe_replies(self, task: Task, other: Task | None) -> dict[str, str]:
        """Replies validation scores for `task` (`domains.validation`), by what they are:
        "reference" must score 1; "blank" and "malformed" 0; "wrong" (another task's
        answer) below 1. A domain whose verifier is the user's may add "junk_after" (the
        reference followed by junk: flagged if it scores as high as the reference),
        "no_answer" and "format_only" (flagged if they score above 0)."""
        probes = {"reference": self.reference_completion(task), "blank": "", "malformed": "```python\ndef broken(:\n```"}
        if other is not None:
            probes["wrong"] = other.answer
        return probes


class EpisodeEnv(abc.ABC):
    """What the Gymnasium environment an `EpisodeDomain` plays a task in adds to `gym.Env`
    (the envs subclass both): `reset(options={"task":
    task})`, `step(model_text) -> (observation, reward, terminated, truncated, info)` (info
    holds the turn's record under "turn" and, when the episode ends, the verdict under
    "check" or "breakdown"), `close()`, and `finish`."""

    @abc.abstractmethod
    def finish(self, final_text: str) -> tuple[float, dict]:
        """End the episode early (its token budget is spent) and score it as it stands:
        (reward, info) with "check" or "breakdown" as `step` gives them at the end."""


class EpisodeDomain(Domain):
    """A multi-turn domain: a task is played as an episode in a Gymnasium environment
    (`reset` / `step` / `close`), which scores it at the end."""

    reward_rule = "1 if the checker passes the sandbox's state at the end of the episode, else 0"

    kind = "multi_turn"

    @abc.abstractmethod
    def make_env(self, sandbox: Any = None, max_turns: int = 4, timeout_s: float = 10.0) -> EpisodeEnv:
        """An `EpisodeEnv` for this domain's tasks on `sandbox` (None where not needed)."""

    @abc.abstractmethod
    def reference_turns(self, task: Task) -> list[str]:
        """The model turns of an episode that solves `task` (validation)."""

    @abc.abstractmethod
    def wrong_turns(self, task: Task) -> list[str]:
        """The model turns of an episode that must not score 1 (validation)."""

    @abc.abstractmethod
    def scripted_turns(self, text: str) -> list[str]:
        """The model turns a pasted reply stands for, written as `reference_completion`
        writes it (the Domains page's "try the verifier")."""


class ToolUseDomain(EpisodeDomain):
    """An episode domain whose turns call tools by contract (`domains.tools.contract`):
    the rollout hands `tool_specs` to the chat template after `opening`."""

    @abc.abstractmethod
    def tool_specs(self, task: Task) -> list:
        """The `ToolSpec`s the model may call on `task`."""

    @abc.abstractmethod
    def opening(self, task: Task) -> list[dict]:
        """The first messages of an episode, without the tool list."""

    @abc.abstractmethod
    def tool_runner(self, task: Task, sandbox: Any, timeout_s: float = 10.0, max_calls: int = 4) -> Any:
        """A `ToolRunner` over this task's tools (its database, documents or sandbox)."""

    @abc.abstractmethod
    def score_episode(self, task: Task, final_text: str, results: list,
                      sandbox: Any = None) -> tuple[float, Breakdown]:
        """(reward, breakdown) of a finished episode from its last reply and tool results."""


def play_turns(domain, task: Task, turns: list[str], sandbox, max_turns: int = 16) -> tuple[float, dict, list]:
    """Play scripted turns of an `EpisodeDomain` in `sandbox` (None where it needs none; one
    env step each, ending the episode after the last): (reward, breakdown, the turn
    records). For terminal domains the breakdown is {"correct", "check"}; tool and game
    domains give their reward breakdown. Validation, the contract check and the game
    domains' `score` use it."""
    env = domain.make_env(sandbox, max_turns=max_turns)
    try:
        env.reset(options={"task": task})
        records = []
        for turn in turns:
            _, reward, term, trunc, info = env.step(turn)
            records.append(info["turn"])
            if term or trunc:
                return reward, info.get("breakdown") or {"correct": reward, "check": info.get("check")}, records
        # the scripted turns ran out before the episode ended
        reward, info = env.finish(turns[-1] if turns else "")
        return reward, info.get("breakdown") or {"correct": reward, "check": info.get("check")}, records
    finally:
        env.close()
