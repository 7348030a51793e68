"""`check_domain`: does a domain keep the contract of `domains.contract`?

Modelled on Gymnasium's `check_env`: it plays a domain through the verbs every caller uses
and reports every breach at once, each naming the verb and what to fix. It checks the
catalogue facts (name, family, kind, levels and their notes, a JSON-able environment),
that `make_task` is deterministic for a training and a held-out seed at the lowest and
highest level and refuses bad seeds and levels with a `ConfigError`, that `messages`
gives chat messages ending with the user's turn, and that a reply is scored the domain's
way: a `TextDomain` scores its reference completion in the answer format (format 1, a
reward in [0, 1], a breakdown with "format" and "correct") and an empty reply 0; an
`EpisodeDomain` that needs no sandbox plays its reference turns through `reset`, `step`,
`finish` and `close` to a reward in [0, 1]; a `SandboxDomain` builds a verification job.

    from domains.conformance import check_domain
    check_domain(get_domain("chain_sum"))      # None, or raises DomainContractError

Not covered: whether the verifier is right (that the reference scores 1 and wrong answers
less: `rlwb domains validate`, which also plays sandboxed domains for real and finds six
reasoning-gym generators whose own verifier refuses their reference), how diverse or hard
the tasks are (also validation), and retrieval contexts (a
`RetrievalDomain`'s messages are built with the embedding model, so `check_domain` renders
them only when `render_retrieval` is set).
"""

from __future__ import annotations

import json
import re

from core.errors import ConfigError
from domains.contract import (Domain, EpisodeDomain, RetrievalDomain, SandboxDomain, Task, TextDomain,
                              ToolUseDomain, play_turns)
from domains.splits import heldout_seeds

#: the part a domain is, and the catalogue word its `kind` must be
PARTS = ((RetrievalDomain, "retrieval"), (TextDomain, "single_turn"), (SandboxDomain, "code"),
         (EpisodeDomain, "multi_turn"))
ROLES = {"system", "user", "assistant", "tool"}
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


class DomainContractError(ConfigError):
    """A domain breaks the contract; the message lists every breach."""


def check_domain(domain: Domain, seeds: tuple[int, ...] = (0,), render_retrieval: bool = False) -> None:
    """Check `domain` against the contract (see the module docstring).

    Args:
        domain: The domain object (e.g. from `domains.registry.get_domain`).
        seeds: Training seeds to make tasks from; the first held-out seed is added.
        render_retrieval: Also build a `RetrievalDomain`'s messages (loads the embedding
            model and indexes the task's documents: seconds per task).

    Raises:
        DomainContractError: one line per breach, e.g. "make_task(7, 1) twice gave
            different tasks: make the generator depend on (seed, difficulty) only".
    """
    problems = _catalogue_problems(domain)
    if not problems:
        for level in sorted({min(domain.levels), max(domain.levels)}):
            for seed in (*seeds, heldout_seeds(1)[0]):
                play = level == min(domain.levels) and seed == seeds[0]  # episodes: played once
                problems += _task_problems(domain, seed, level, render_retrieval, play)
        problems += _refusal_problems(domain)
    if problems:
        raise DomainContractError(f"domain {getattr(domain, 'name', domain)!r} breaks the contract:\n- "
                                  + "\n- ".join(dict.fromkeys(problems)))


def _catalogue_problems(domain) -> list[str]:
    """Breaches of the catalogue facts and the part (`PARTS`) the domain is."""
    if not isinstance(domain, Domain):
        return [f"{type(domain).__name__} is not a domains.contract.Domain: subclass one of its parts"]
    out = []
    parts = [kind for cls, kind in PARTS if isinstance(domain, cls)]
    if not parts:
        out.append("is none of TextDomain, SandboxDomain, EpisodeDomain: subclass the one that scores it")
    elif domain.kind != parts[0]:
        out.append(f"kind is {domain.kind!r} but the domain is a {parts[0]} part: set kind = {parts[0]!r}")
    if not isinstance(domain.name, str) or not _NAME.match(domain.name):
        out.append(f"name {domain.name!r} must be lower-case letters, digits and underscores")
    for fact in ("family", "description", "source", "license"):
        if not isinstance(getattr(domain, fact, None), str) or not getattr(domain, fact).strip():
            out.append(f"{fact} must be a non-empty string")
    levels = sorted(domain.levels) if isinstance(domain.levels, dict) else None
    if not levels or levels != list(range(1, len(levels) + 1)) or len(levels) > 5:
        out.append(f"levels must be numbered 1..n with 1 <= n <= 5, got {levels}")
    elif sorted(domain.level_notes) != levels or not all(isinstance(v, str) and v for v in domain.level_notes.values()):
        out.append("level_notes must give one non-empty note per level")
    try:
        json.dumps(domain.environment)
        if not isinstance(domain.environment, dict):
            raise TypeError("not a dict")
    except (TypeError, ValueError) as e:
        out.append(f"environment must be a JSON-able dict ({e})")
    if domain.answer_format not in ("line", "tag", "move"):
        out.append(f"answer_format must be 'line', 'tag' or 'move', got {domain.answer_format!r}")
    if isinstance(domain, SandboxDomain) and not domain.needs_sandbox:
        out.append("a SandboxDomain scores in a sandbox: needs_sandbox must be True")
    return out


def _task_problems(domain: Domain, seed: int, level: int, render_retrieval: bool, play: bool) -> list[str]:
    """Breaches of make_task, messages and the reference completion for one (seed, level)."""
    where = f"make_task({seed}, {level})"
    try:
        task, again = domain.make_task(seed, level), domain.make_task(seed, level)
    except Exception as e:  # noqa: BLE001 - any failure is a breach to report
        return [f"{where} raised {type(e).__name__}: {e}"]
    if not isinstance(task, Task):
        return [f"{where} returned {type(task).__name__}, not a domains.contract.Task"]
    out = []
    if task != again:
        out.append(f"{where} twice gave different tasks: make the generator depend on (seed, difficulty) only")
    if (task.domain, task.difficulty) != (domain.name, level):
        out.append(f"{where} gave a task of ({task.domain!r}, level {task.difficulty})")
    if not isinstance(task.question, str) or not task.question or not isinstance(task.answer, str):
        out.append(f"{where}: question must be a non-empty str and answer a str")
    try:
        json.dumps(task.entry)
    except (TypeError, ValueError) as e:
        out.append(f"{where}: entry must be JSON-able for the store ({e})")
    if render_retrieval or not isinstance(domain, RetrievalDomain):
        out += _message_problems(domain.messages(task), f"messages({where})")
    reference = domain.reference_completion(task)
    if not isinstance(reference, str):
        return out + [f"reference_completion({where}) must be a str"]
    out += _scoring_problems(domain, task, reference, where, play)
    return out


def _message_problems(messages, where: str) -> list[str]:
    if not isinstance(messages, list) or not messages:
        return [f"{where} must be a non-empty list of chat messages"]
    if not all(isinstance(m, dict) and m.get("role") in ROLES and isinstance(m.get("content"), str)
               for m in messages):
        return [f"{where}: every message needs a role in {sorted(ROLES)} and str content"]
    if messages[-1]["role"] != "user":
        return [f"{where} must end with the user's turn (the model answers next)"]
    return []


def _scoring_problems(domain: Domain, task: Task, reference: str, where: str, play: bool) -> list[str]:
    """A reply is scored the domain's way (see the module docstring); not whether rightly."""
    if isinstance(domain, TextDomain):
        reward, breakdown = domain.score(task, reference)
        blank, blank_breakdown = domain.score(task, "")
        out = [] if 0.0 <= reward <= 1.0 and breakdown.get("format") == 1.0 else [
            f"score(reference_completion) of {where} gave reward {reward}, format {breakdown.get('format')}: "
            "the reference must be written in the domain's answer format (wrap_answer)"]
        if blank != 0.0:
            out.append(f"score of an empty reply to {where} is {blank}, not 0.0")
        if not {"format", "correct"} <= set(breakdown) or not {"format", "correct"} <= set(blank_breakdown):
            out.append(f"score's breakdown for {where} must hold 'format' and 'correct'")
        return out
    if isinstance(domain, SandboxDomain):
        job = domain.verification_job(task, reference)
        return [] if getattr(job, "command", None) else [f"verification_job({where}) gave no command to run"]
    assert isinstance(domain, EpisodeDomain)
    right, wrong = domain.reference_turns(task), domain.wrong_turns(task)
    if not (right and wrong and all(isinstance(t, str) for t in [*right, *wrong])):
        return [f"reference_turns and wrong_turns of {where} must be non-empty lists of str"]
    if isinstance(domain, ToolUseDomain) and not domain.tool_specs(task):
        return [f"tool_specs({where}) is empty"]
    if domain.needs_sandbox or not play:
        return []
    reward, breakdown, records = play_turns(domain, task, right, None)
    if not (0.0 <= reward <= 1.0 and isinstance(breakdown, dict) and records):
        return [f"playing the reference turns of {where} gave reward {reward}, breakdown {breakdown!r}"]
    return []


def _refusal_problems(domain: Domain) -> list[str]:
    """Bad seeds and levels must be refused with a ConfigError, not crash or wrap around."""
    out = []
    for seed, level, what in ((-1, min(domain.levels), "a negative seed"),
                              (0, max(domain.levels) + 1, "a level it doesn't have"),
                              (1.5, min(domain.levels), "a float seed")):
        try:
            domain.make_task(seed, level)
        except ConfigError:
            continue
        except Exception as e:  # noqa: BLE001 - the wrong error is the breach
            out.append(f"make_task with {what} raised {type(e).__name__}, not ConfigError: raise ConfigError")
            continue
        out.append(f"make_task accepted {what} ({seed!r}, {level!r}): raise ConfigError")
    return out
