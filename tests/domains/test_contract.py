"""The domain contract (domains/contract.py) and its checker (domains/conformance.py).

Every registered domain passes `check_domain`; a domain that breaks the contract is
reported with the verb and the fix; callers outside `domains/` dispatch on the contract's
parts, never on `kind` strings or `hasattr` probes.
"""

import ast
import dataclasses
from pathlib import Path

import pytest

from domains.conformance import DomainContractError, check_domain
from domains.contract import (Domain, EpisodeDomain, RetrievalDomain, SandboxDomain, TextDomain,
                              ToolUseDomain)
from domains.registry import domain_names, get_domain

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", domain_names())
def test_every_registered_domain_keeps_the_contract(name):
    check_domain(get_domain(name))


def test_each_domain_is_exactly_one_part_and_its_kind_names_it():
    parts = {}
    for name in domain_names():
        d = get_domain(name)
        assert isinstance(d, Domain)
        is_text, is_sandbox, is_episode = (isinstance(d, c) for c in (TextDomain, SandboxDomain, EpisodeDomain))
        assert is_text + is_sandbox + is_episode == 1, name
        part = next(c for c in (RetrievalDomain, TextDomain, SandboxDomain, ToolUseDomain, EpisodeDomain)
                    if isinstance(d, c))
        parts.setdefault(part.__name__, set()).add(d.kind)
    assert parts == {"TextDomain": {"single_turn"}, "RetrievalDomain": {"retrieval"}, "SandboxDomain": {"code"},
                     "EpisodeDomain": {"multi_turn"}, "ToolUseDomain": {"multi_turn"}}
    assert isinstance(get_domain("needle_haystack"), RetrievalDomain)
    assert isinstance(get_domain("cad_bracket"), ToolUseDomain) and isinstance(get_domain("tool_sql"), ToolUseDomain)


def test_a_domain_that_breaks_the_contract_is_told_each_breach_and_its_fix():
    base = get_domain("chain_sum")
    broken = dataclasses.replace(base, name="Chain Sum", kind="multi_turn", level_notes={1: "easy"})
    with pytest.raises(DomainContractError) as err:
        check_domain(broken)
    text = str(err.value)
    assert "lower-case letters" in text and "set kind = 'single_turn'" in text and "level_notes" in text

    class Drifting(type(base)):  # a generator that is not a function of (seed, difficulty)
        calls = [0]

        def make_task(self, seed, difficulty=1):
            task = base.make_task(seed, difficulty)
            Drifting.calls[0] += 1
            return dataclasses.replace(task, answer=str(Drifting.calls[0])) if seed >= 0 else task

    drifting = Drifting(**{f.name: getattr(base, f.name) for f in dataclasses.fields(base)})
    with pytest.raises(DomainContractError, match=r"make_task\(0, 1\) twice gave different tasks"):
        check_domain(drifting)


def test_a_domain_that_accepts_bad_seeds_is_reported():
    base = get_domain("chain_sum")

    class Lenient(type(base)):
        def make_task(self, seed, difficulty=1):
            return base.make_task(abs(int(seed)), difficulty)

    lenient = Lenient(**{f.name: getattr(base, f.name) for f in dataclasses.fields(base)})
    with pytest.raises(DomainContractError, match="accepted a negative seed"):
        check_domain(lenient)


def test_an_object_that_is_no_domain_is_refused():
    with pytest.raises(DomainContractError, match="is not a domains.contract.Domain"):
        check_domain(object())


def _literal(node) -> bool:
    return isinstance(node, ast.Constant) or (isinstance(node, (ast.Tuple, ast.List, ast.Set))
                                              and all(isinstance(e, ast.Constant) for e in node.elts))


def _dispatch_on_kind_or_hasattr(path: Path) -> list[str]:
    """`x.kind == "..."`/`x.kind in (...)` comparisons with a literal and `hasattr(...)`
    calls in one file (`rlwb domains list --kind K` compares with the user's K: a filter)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if (isinstance(node, ast.Compare) and isinstance(node.left, ast.Attribute) and node.left.attr == "kind"
                and any(_literal(c) for c in node.comparators)):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "hasattr":
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_no_caller_outside_domains_dispatches_on_kind_or_hasattr():
    """The parts are typed: callers ask `isinstance(d, RetrievalDomain)`, not `d.kind ==`."""
    found = []
    for folder in ("app", "backend", "trainer"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            found += _dispatch_on_kind_or_hasattr(path)
    # eval_stats' `hasattr(obj, "as_dict")` is JSON encoding of result objects, not a domain
    assert [f for f in found if not f.startswith("trainer/eval_stats.py")] == []


def test_a_pasted_reply_becomes_the_turns_its_family_writes():
    terminal = get_domain("terminal_csv_sum")
    assert terminal.scripted_turns("ls\n\ncat a.csv") == ["```bash\nls\n```", "```bash\ncat a.csv\n```", "DONE"]
    tool = get_domain("tool_sql")
    task = tool.make_task(0, 1)
    reference = tool.reference_turns(task)
    assert tool.scripted_turns(tool.reference_completion(task)) == reference  # answers last: no DONE added
    calls_only = tool.scripted_turns(reference[0])
    assert calls_only == [reference[0], "DONE"]  # the last line calls tools: the episode is ended after it
    cad = get_domain("cad_table")
    assert cad.scripted_turns("") == [""]
