"""A user domain: the user's rows as tasks, split into training and held-out rows, scored
by the verifier the user picked. Single-turn ones are here (`UserDomain`, a `TextDomain`
like the built-in ones, and the sandbox-judged `UserCodeDomain` and `UserRewardDomain`);
the episode kinds are in `domains.user.episodes`; `domains.user.build` picks the class.
Mixes, the curriculum, validation, evaluation and reports treat them as built-in ones.

    domain = build_domain(spec, build_rows(spec, read_rows("questions.jsonl")), version=1)
    task = domain.make_task(seed, difficulty=1)        # a training row (seed % rows of its side)
    reward, breakdown = domain.score(task, "Answer: 42")

Seeds map onto rows: a training seed onto the training rows of its level, a held-out seed
(`domains.splits.is_heldout`) onto the held-out rows, so evaluation never plays a row
training saw. A row is held out when the hash of its id falls in the domain's
`heldout_fraction` (`domains.splits.heldout_share`).

Not covered: storing and versioning (`domains.user.library`), reading files
(`domains.user.data`), the verifiers (`domains.user.verifiers`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from core.errors import ConfigError
from domains.answers import MAX_COMPLETION_CHARS, malformed
from domains.code.humaneval import job_nonce, tests_job, tests_score
from domains.contract import (ANSWER_INSTRUCTION, CORRECT_WEIGHT, FORMAT_WEIGHT, SYSTEM_PROMPT, TAG_INSTRUCTION,
                              SandboxDomain, Task, TextDomain, as_int, check_difficulty)
from domains.splits import is_heldout
from domains.user.data import TaskRow
from domains.user.spec import UserDomainSpec
from domains.user.verifiers import extract, verify
from sandboxes.pool import SandboxJob

FAMILY = "user"
INSTRUCTIONS = {"answer_line": ANSWER_INSTRUCTION, "tags": TAG_INSTRUCTION,
                "boxed": "Put your final answer in \\boxed{}.", "last_number": "End your reply with the final number.",
                "whole": ""}
REWARD_RUNNER = (Path(__file__).with_name("reward_runner.py")).read_text(encoding="utf-8")
CODE_INSTRUCTION = "Reply with your code in one ```python code block."


def sandbox_runtime(network) -> str:
    """The catalogue's words for where a sandboxed user domain runs, with its network."""
    if network == "none":
        return "sandbox (Docker; local bubblewrap fallback), no network"
    return f"sandbox (Docker only: the local backend has no network), network allow-list {', '.join(network)}"


def data_digest(rows: tuple[TaskRow, ...]) -> str:
    """SHA-256 (hex) of the task rows as canonical JSON: the content address of a domain's data.
    A row without reference calls is written without the field, so digests from before tool
    domains stay the same."""
    rows_json = [{k: v for k, v in asdict(r).items() if k != "calls" or v} for r in rows]
    blob = json.dumps(rows_json, sort_keys=True, ensure_ascii=False).encode()
    return hashlib.sha256(blob).hexdigest()


@dataclass(frozen=True, eq=False)
class UserRows:
    """What every user domain has, whatever its verifier: the rows, their split, the
    catalogue facts, `make_task` and `to_json` (`UserDomain`, `domains.user.code.UserCodeDomain`).

    Attributes:
        spec: The definition (`UserDomainSpec`).
        rows: Every task row, in file order.
        version: The stored version (0: not stored yet).
        data_sha256: `data_digest(rows)`.
        sides: (level, held out?) -> indices into `rows`.
    """

    spec: UserDomainSpec
    rows: tuple[TaskRow, ...] = field(repr=False)
    version: int = 0
    data_sha256: str = ""
    sides: dict = field(default_factory=dict, repr=False)
    family = FAMILY
    pooled = True

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def sandbox_network(self) -> str | tuple[str, ...]:
        """The definition's network allow-list as the sandboxes take it ("none" without one)."""
        return tuple(self.spec.network) if self.spec.network else "none"

    @property
    def version_key(self) -> str:
        return f"v{self.version}"

    @property
    def description(self) -> str:
        n = len(self.rows)
        return self.spec.description or f"User domain: {n} rows, {self.spec.verifier.kind} verifier."

    @property
    def source(self) -> str:
        return f"user data, version {self.version} (sha256 {self.data_sha256[:12]})"

    @property
    def license(self) -> str:
        return self.spec.license

    @property
    def answer_format(self) -> str:
        return "tag" if self.spec.extraction == "tags" else "line"

    @property
    def multiple_answers(self) -> bool:
        v = self.spec.verifier
        return v.kind == "regex" or (v.kind == "json" and v.json_schema is not None)

    @property
    def levels(self) -> dict[int, dict]:
        return {lvl: {"rows": len(train) + len(self.sides[(lvl, True)])}
                for (lvl, held), train in sorted(self.sides.items()) if not held}

    @property
    def level_notes(self) -> dict[int, str]:
        return {lvl: f"{len(self.sides[(lvl, False)])} training rows, {len(self.sides[(lvl, True)])} held out"
                for lvl in self.levels}

    def make_task(self, seed: int, difficulty: int = 1) -> Task:
        """The row of `seed` at level `difficulty`: `side[seed % len(side)]` of the seed's side.

        Raises:
            ConfigError: a negative or non-int seed, or a level the data has no rows of.
        """
        index = as_int(seed)
        if index is None or index < 0:
            raise ConfigError(f"seed must be a non-negative int, got {seed!r}")
        level = check_difficulty(difficulty, self.levels)
        side = self.sides[(level, is_heldout(index))]
        row = self.rows[side[index % len(side)]]
        entry = {"question": row.prompt, "answer": row.answer, "id": row.id, "system": row.system,
                 "pattern": row.pattern, "metadata": row.metadata, **self.row_entry(row)}
        return Task(self.name, index, row.prompt, row.answer, level, entry, entry)

    def messages(self, task: Task) -> list[dict]:
        """The row's system prompt (or the built-in one), then the prompt and the extraction's instruction."""
        instruction = INSTRUCTIONS[self.spec.extraction]
        user = f"{task.question}\n{instruction}" if instruction else task.question
        return [{"role": "system", "content": task.entry.get("system") or SYSTEM_PROMPT},
                {"role": "user", "content": user}]

    def reference_completion(self, task: Task) -> str:
        return self.wrap_answer(task.answer)

    def wrap_answer(self, answer: str) -> str:
        """`answer` as the extraction expects it (`Answer: x`, `<answer>x</answer>`, `\\boxed{x}`, x)."""
        how = self.spec.extraction
        return {"answer_line": f"Answer: {answer}", "tags": f"<answer>{answer}</answer>",
                "boxed": f"\\boxed{{{answer}}}"}.get(how, answer)

    def sandbox_environment(self, verifier: str) -> dict:
        """The catalogue's environment facts of a sandbox-scored user domain."""
        return {"runtime": sandbox_runtime(self.sandbox_network), "image": "rlwb-sandbox",
                "verifier": verifier, "timeout_s": self.spec.verifier.timeout_s,
                "heldout_fraction": self.spec.heldout_fraction}

    def judged(self, task: Task, reply: str) -> tuple[float, dict]:
        """(reward, breakdown) of a reply's answer by the domain's answer verifier:
        FORMAT_WEIGHT when the extraction finds one, CORRECT_WEIGHT more when it passes
        ("verifier_error" says why a verifier failed); 0 without an answer."""
        answer = extract(reply, self.spec.extraction) if isinstance(reply, str) else None
        if answer is None:
            return 0.0, {"format": 0.0, "correct": 0.0, "score": 0.0, "extracted": None}
        ok, why = verify(self.spec.verifier, answer, task.answer, task.entry.get("pattern", ""))
        breakdown = {"format": 1.0, "correct": float(ok), "score": float(ok), "extracted": answer[:200]}
        if why.startswith("verifier error"):
            breakdown["verifier_error"] = why
        return FORMAT_WEIGHT + CORRECT_WEIGHT * float(ok), breakdown

    def row_entry(self, row: TaskRow) -> dict:
        """Fields a verifier needs beyond the common ones (code domains: tests, entry point)."""
        return {}

    def to_json(self) -> dict:
        """The definition and rows as JSON types (`from_json` rebuilds the same domain)."""
        return {"spec": self.spec.model_dump(mode="json"), "rows": [asdict(r) for r in self.rows],
                "version": self.version}


@dataclass(frozen=True, eq=False)
class UserDomain(UserRows, TextDomain):
    """A user domain scored in this process by a verifier of `domains.user.verifiers`
    (`build_domain` makes it for every verifier but "code_tests")."""

    kind = "single_turn"
    needs_sandbox = False

    @property
    def environment(self) -> dict:
        v = self.spec.verifier
        return {"runtime": "in-process; the verifier in a worker process", "verifier": v.kind,
                "verifier_options": v.model_dump(exclude_defaults=True, exclude={"kind"}),
                "extraction": self.spec.extraction, "answer_format": self.answer_format,
                "heldout_fraction": self.spec.heldout_fraction}

    def score(self, task: Task, completion: str) -> tuple[float, dict]:
        """(reward, breakdown): FORMAT_WEIGHT for an answer found by the extraction, plus
        CORRECT_WEIGHT if the verifier passes it. Never raises on a reply (a verifier
        error or timeout scores the answer as wrong, "verifier_error" says why).

        Raises:
            ConfigError: the task belongs to another domain.
        """
        if task.domain != self.name:
            raise ConfigError(f"task of domain {task.domain!r} given to domain {self.name!r}")
        nothing = {"format": 0.0, "correct": 0.0, "score": 0.0, "extracted": None}
        if not isinstance(completion, str) or len(completion) > MAX_COMPLETION_CHARS or malformed(completion, "\n\t\r"):
            return 0.0, nothing
        return self.judged(task, completion)



@dataclass(frozen=True, eq=False)
class UserCodeDomain(UserRows, SandboxDomain):
    """A user domain of code with unit tests, judged in a sandbox exactly as the built-in
    `humaneval` (`domains.code.humaneval.tests_job`: the model's code and the tests run in
    separate processes; passing needs the judge's per-job nonce). Reward 1 if every test
    passes, else 0; the reply's last ```python block (or the whole reply) is its code."""

    kind = "code"
    needs_sandbox = True

    @property
    def environment(self) -> dict:
        return self.sandbox_environment("the row's unit tests in a judge process")

    def row_entry(self, row: TaskRow) -> dict:
        return {"prompt": row.prefix, "test": row.test, "entry_point": row.entry_point, "task_id": row.id}

    def messages(self, task: Task) -> list[dict]:
        """The row's system prompt (or the built-in one), then the prompt and `CODE_INSTRUCTION`."""
        return [{"role": "system", "content": task.entry.get("system") or SYSTEM_PROMPT},
                {"role": "user", "content": f"{task.question}\n{CODE_INSTRUCTION}"}]

    def reference_completion(self, task: Task) -> str:
        return task.answer

    def verification_job(self, task: Task, completion: str):
        return tests_job(task, completion, kind=self.name, timeout_s=self.spec.verifier.timeout_s)

    def score_result(self, task: Task, completion: str, job) -> tuple[float, dict]:
        return tests_score(completion, job)


@dataclass(frozen=True, eq=False)
class UserRewardDomain(UserRows, SandboxDomain):
    """A user domain scored by the user's own Python reward function, run in a sandbox
    (`domains.user.reward_runner`), never in the trainer's process: network off, the
    sandbox's memory limit, `verifier.timeout_s` seconds. A function that raises, hangs,
    returns NaN or a value outside [0, 1] scores the reply 0 with "verifier_error" saying why.
    Its catalogue kind is "code", the kind of every sandbox-scored part (`domains.contract`)."""

    kind = "code"
    needs_sandbox = True
    reward_rule = "the value of your reward(reply, answer, row) in [0, 1] (0 if it fails)"

    @property
    def environment(self) -> dict:
        return {**self.sandbox_environment("the user's reward(reply, answer, row)"), "extraction": self.spec.extraction}

    def row_entry(self, row: TaskRow) -> dict:
        return {"task_id": row.id}

    def probe_replies(self, task: Task, other: Task | None) -> dict[str, str]:
        """The reward audit's replies (`domains.validation.reward_audit`): the reference, an
        empty reply, junk, the reference followed by junk, a reply with no answer but a
        number in it, the answer format alone, and another row's answer."""
        probes = {"reference": self.reference_completion(task), "blank": "", "malformed": "\x00\x01",
                  "junk_after": self.wrap_answer(f"{task.answer} zzz 12345 ### lorem ipsum"),
                  "no_answer": "I can't solve this one, sorry. Maybe 7?", "format_only": self.wrap_answer("")}
        if other is not None:
            probes["wrong"] = self.wrap_answer(other.answer)
        return probes

    def verification_job(self, task: Task, completion: str):
        job = SandboxJob("python3 -I reward_runner.py", kind=self.name, timeout_s=self.spec.verifier.timeout_s,
                         files={"reward_fn.py": self.spec.verifier.source, "reward_runner.py": REWARD_RUNNER})
        text = completion if isinstance(completion, str) else ""
        row = {"id": task.entry.get("id"), "prompt": task.question, "metadata": task.entry.get("metadata", {}),
               "extracted": extract(text, self.spec.extraction)}
        job.stdin = json.dumps({"nonce": job_nonce(job.id), "reply": text, "answer": task.answer, "row": row})
        return job

    def score_result(self, task: Task, completion: str, job) -> tuple[float, dict]:
        """(the function's reward, breakdown): "score" is the reward, "correct" 1.0 at full
        marks, "details" the function's own breakdown; a harness failure is a "fault"."""
        extracted = extract(completion if isinstance(completion, str) else "", self.spec.extraction)
        base = {"format": float(extracted is not None), "extracted": None if extracted is None else extracted[:200]}
        if job.result is None:
            return 0.0, {**base, "correct": 0.0, "fault": "harness", "error": job.error[:300]}
        nonce = job_nonce(job.job_id)
        line = next((ln for ln in reversed(job.result.stdout.splitlines()) if ln.startswith(nonce)), None)
        if job.result.timed_out:
            why = f"the reward function ran past {self.spec.verifier.timeout_s:g} s"
        elif line is None:
            why = f"the reward function gave no result (exit code {job.result.exit_code}: {job.result.stderr[-200:]!r})"
        else:
            result = json.loads(line[len(nonce):])
            if "error" not in result:
                reward = float(result["reward"])
                return reward, {**base, "score": reward, "correct": float(reward >= 1.0),
                                "details": result.get("breakdown", {})}
            why = result["error"]
        return 0.0, {**base, "score": 0.0, "correct": 0.0, "verifier_error": why[:300]}
