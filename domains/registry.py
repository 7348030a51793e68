"""The domain registry: the one module that imports every domain family.

    from domains.registry import get_domain, build_messages, heldout_tasks
    d = get_domain("chain_sum")
    task = d.make_task(seed=train_seed(rng), difficulty=2)
    messages = build_messages(task)            # -> the trainer's chat template
    reward, breakdown = d.score(task, completion)

The families (`domains.reasoning_gym`, `domains.reasoning_core`, `domains.code`, `domains.terminal`,
`domains.long_docs`, `domains.tools`, `domains.cad`) build their domains; this module
gathers them by name, built on first use (importing reasoning-gym and its curricula takes
~2 s). Every registered domain follows the contract of `domains.contract` and passes
`domains.conformance.check_domain` (tests/domains/test_contract.py).

Not covered here: mixes (`domains.mixes`), validation (`domains.validation`) and the
curriculum (`trainer.curriculum`) -- they use this registry; chat templates (the trainer
applies the model's template to `build_messages`).
"""

from __future__ import annotations

import difflib
import threading
from collections.abc import Sequence

from core.errors import ConfigError, DomainNotFound
from domains.contract import Domain, RetrievalDomain, Task
from domains.splits import HELDOUT_SEED_RANGE, heldout_seeds

_REGISTRY: dict[str, Domain] = {}
_REGISTRY_LOCK = threading.Lock()


def registry() -> dict[str, Domain]:
    """All registered domains by name, built on first call: the hand-made six, every
    other reasoning-gym generator (`domains.reasoning_gym.catalogue`), `humaneval` and the
    `terminal_*` family (sandbox-verified), the long-document domains
    (`domains.long_docs.domain`: needle_haystack, financial_report) and the tool-use domains
    (`domains.tools.domain`: tool_sql, tool_calc, tool_files, tool_docs; `domains.cad.domain`:
    cad_bracket, cad_shaft, cad_table), the professional calculations
    (`domains.professional`: finance, units, physics, statistics), six TextArena games played
    turn by turn (`domains.textarena`), nine document-analysis questions over generated
    invoices, agreements, ledgers and statements (`domains.documents`), eight code-writing
    specifications with hidden tests (`domains.code.generated`), 20 constraint puzzles
    (`domains.puzzles`, chuk-puzzles-gym), DeepMind's school-maths modules
    (`domains.mathematics_dataset`) and every reasoning-core generator
    (`domains.reasoning_core.catalogue`; a name another family has keeps that family's)."""
    if not _REGISTRY:
        with _REGISTRY_LOCK:
            if not _REGISTRY:
                # the families on first use, not at import: they pull in gymnasium, numpy,
                # sandboxes and retrieval (~0.3 s), which `rlwb --help` and the page's start skip
                from domains.cad.domain import cad_domains
                # on first use: it pulls in numpy, pydantic
                from domains.code.generated import generated_code_domains
                from domains.code.humaneval import HUMANEVAL
                # on first use: Faker comes with the first task
                from domains.documents.domain import document_domains
                from domains.long_docs.domain import long_doc_domains
                # on first use: it pulls in numpy
                from domains.mathematics_dataset.catalogue import build_md_domains
                # on first use: it pulls in numpy
                from domains.professional.domain import professional_domains
                # on first use: it pulls in chuk_puzzles_gym's games
                from domains.puzzles.catalogue import build_puzzle_domains
                # on first use: it pulls in numpy
                from domains.reasoning_core.catalogue import build_rc_domains
                # on first use: it pulls in numpy
                from domains.reasoning_gym.catalogue import build_rg_domains
                # on first use: it pulls in numpy
                from domains.reasoning_gym.hand_made import hand_made_domains
                # on first use: it pulls in gymnasium, numpy
                from domains.terminal.env import TERMINAL_DOMAINS
                # on first use: it pulls in gymnasium, numpy
                from domains.textarena.domain import game_domains
                # on first use: it pulls in gymnasium, numpy, jsonschema
                from domains.tools.domain import tool_domains

                hand = hand_made_domains()
                long_docs = long_doc_domains()  # replaces reasoning-gym's short needle_haystack
                built = {**hand, **build_rg_domains(skip=set(hand) | set(long_docs)), HUMANEVAL.name: HUMANEVAL,
                         **TERMINAL_DOMAINS, **long_docs, **tool_domains(), **cad_domains(), **professional_domains(),
                         **game_domains(), **document_domains(), **generated_code_domains()}
                for family in (build_rc_domains(), build_puzzle_domains(), build_md_domains()):
                    built.update({n: d for n, d in family.items() if n not in built})  # a taken name stays
                _REGISTRY.update(sorted(built.items()))
                _BUILT_IN.update(built)
    return _REGISTRY


_BUILT_IN: set[str] = set()  # names of the shipped domains (a user domain may not take one)


def register(domain: Domain) -> None:
    """Add a user domain to the registry, or replace the registered one of that name (a new
    version). The caller has checked it against the contract (`domains.user.library` does,
    with `domains.conformance.check_domain`, before it stores a domain).

    Raises:
        ConfigError: the name is a built-in domain's.
    """
    names = registry()
    if domain.name in _BUILT_IN:
        raise ConfigError(f"domain field 'name': {domain.name!r} is a built-in domain; pick another name")
    with _REGISTRY_LOCK:
        names[domain.name] = domain


def unregister(name: str) -> bool:
    """Drop a user domain from the registry; False if none was registered by that name.

    Raises:
        ConfigError: the name is a built-in domain's.
    """
    if name in _BUILT_IN:
        raise ConfigError(f"{name!r} is a built-in domain; only user domains can be removed")
    names = registry()
    with _REGISTRY_LOCK:
        return names.pop(name, None) is not None


def is_built_in(name: str) -> bool:
    """True if `name` is a shipped domain (not a user domain)."""
    registry()
    return name in _BUILT_IN


def user_domain_definitions(names: Sequence[str] | None = None) -> list[dict]:
    """The registered user domains (those of `names`, or all) as JSON definitions
    (`register_definitions` rebuilds them: a child process gets them this way)."""
    return [d.to_json() for n, d in sorted(registry().items())
            if n not in _BUILT_IN and (names is None or n in names)]


def register_definitions(definitions: Sequence[dict]) -> list[str]:
    """Build and register user domains from `user_domain_definitions`' output; their names.

    Raises:
        ConfigError: a malformed definition.
    """
    from domains.user.build import from_json  # the user family on first use

    built = [from_json(d) for d in definitions]
    for d in built:
        register(d)
    return [d.name for d in built]


def reset_generator_caches() -> None:
    """Forget every built task generator, here and in the upstream workers, so the next task
    comes from a fresh instance (validation's determinism check)."""
    # the families on first use (start-up)
    from domains.mathematics_dataset.domain import reset_caches as reset_md
    from domains.reasoning_core.domain import reset_caches as reset_rc
    from domains.reasoning_gym.domain import UPSTREAM, reset_caches

    reset_caches()
    for reset in (reset_rc, reset_md):
        reset()
        UPSTREAM.reset(reset)


def upstream_cpu_time() -> float:
    """CPU seconds of this thread plus those the upstream workers spent on its calls."""
    import time

    from domains.reasoning_gym.domain import UPSTREAM  # the family on first use (start-up)

    return time.thread_time() + UPSTREAM.cpu_time()


def generator_version() -> str:
    """The version of the task generators' package (reasoning-gym), stored with reports."""
    from domains.reasoning_gym.domain import RG_VERSION  # the family on first use (start-up)

    return RG_VERSION


def domain_names() -> list[str]:
    """Names of the registered domains, sorted."""
    return sorted(registry())


def get_domain(name: str) -> Domain:
    """The registered domain called `name`.

    Raises:
        DomainNotFound: If no such domain; the message suggests close names.
    """
    try:
        return registry()[name]
    except (KeyError, TypeError):
        raise DomainNotFound(unknown_domain_message(name)) from None


def unknown_domain_message(name: object) -> str:
    """What to say of a domain name that isn't registered: up to three close names, and
    where the whole list is (hundreds of names: too many for one line)."""
    close = difflib.get_close_matches(str(name), domain_names(), n=3)
    hint = f"did you mean {', '.join(close)}? " if close else ""
    return f"unknown domain {name!r}; {hint}list them with `rlwb domains list`"


def build_messages(task: Task, tokenizer=None, context_budget_tokens: int | None = None) -> list[dict]:
    """Chat messages that pose a task to the model (its domain's `messages`): for
    reasoning-gym domains the question plus the answer-format instruction
    (`ANSWER_INSTRUCTION`); coding and terminal domains have their own instructions;
    retrieval domains put the context assembled in `tokenizer`'s tokens (the policy's;
    None: the embedding model's, for previews) before the question, in
    `context_budget_tokens` (None: the domain's default)."""
    domain = get_domain(task.domain)
    if isinstance(domain, RetrievalDomain):
        if context_budget_tokens is None:
            return domain.messages(task, tokenizer)
        return domain.messages(task, tokenizer, context_budget_tokens)
    return domain.messages(task)


DISTINCT_SCAN = 4  # `heldout_tasks` tries at most this many held-out seeds per task wanted


def heldout_tasks(domain: str, levels: Sequence[int], n: int, offset: int = 0) -> list[Task]:
    """Up to `n` distinct held-out tasks of `domain`, the same every time.

    The held-out seeds from `offset` are taken in order, the i-th at level
    `levels[i % len(levels)]`; a task whose (level, question, answer) repeats an earlier
    kept one is passed over, so a small domain (products level 1 has 65 held-out questions,
    a pooled one its held-out side) is not counted several times over, which would narrow
    its intervals for nothing. The answer is part of the key because a game's opening can
    be the same for every seed while its hidden state (the secret number) is not. At most `DISTINCT_SCAN * n` seeds are tried: a domain with fewer
    distinct held-out questions gives fewer tasks.

    Raises:
        ConfigError: an unknown level, or the seeds would leave the held-out range.
        DomainNotFound: no such domain.
    """
    span = HELDOUT_SEED_RANGE[1] - HELDOUT_SEED_RANGE[0]
    seeds = heldout_seeds(max(n, min(DISTINCT_SCAN * n, span - offset)), offset)  # raises past the range
    d, seen, out = get_domain(domain), set(), []
    for i, seed in enumerate(seeds if levels else []):
        task = d.make_task(seed, levels[i % len(levels)])
        if (key := (task.difficulty, task.question, task.answer)) not in seen:
            seen.add(key)
            out.append(task)
            if len(out) == n:
                break
    return out
