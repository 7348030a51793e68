"""One owner per default and per choice list, and the CLI's floors: the retrieval context
budget lives in `retrieval.context.DEFAULT_BUDGET_TOKENS`, the engine / algorithm / sandbox
choices in `core.choices`; the CLI, the run config, `EvalSettings` and the needle sweep read
them, and the `rlwb` command modules never import the entry point `backend.cli` back."""

import ast
from pathlib import Path
from typing import get_args

import pytest

from core.choices import ALGORITHMS, ROLLOUT_ENGINES, SANDBOX_BACKENDS
from backend.cli import build_parser
from trainer.config import RunConfig
from backend.evaluation import EvalSettings
from retrieval.context import DEFAULT_BUDGET_TOKENS
from retrieval.pipeline import RetrievalConfig
from trainer.context_length import SweepConfig

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("app", "backend", "core", "domains", "trainer", "retrieval", "sandboxes")


def _product_trees():
    for folder in PRODUCT:
        for path in sorted((ROOT / folder).rglob("*.py")):
            yield path.relative_to(ROOT).as_posix(), ast.parse(path.read_text(encoding="utf-8"))


def _subparser(parser, *names):
    for name in names:
        action = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
        parser = action.choices[name]
    return parser


def _option(parser, flag):
    return next(a for a in parser._actions if flag in a.option_strings)


def test_the_budget_1536_is_spelled_once_in_the_product_code():
    places = [f"{path}:{node.lineno}" for path, tree in _product_trees() for node in ast.walk(tree)
              if isinstance(node, ast.Constant) and type(node.value) is int and node.value == DEFAULT_BUDGET_TOKENS]
    assert places == [p for p in places if p.startswith("retrieval/context.py:")] and len(places) == 1, places


@pytest.mark.parametrize("choices", [ALGORITHMS, ROLLOUT_ENGINES, SANDBOX_BACKENDS])
def test_each_choice_list_is_spelled_once_in_the_product_code(choices):
    places = []
    for path, tree in _product_trees():
        for node in ast.walk(tree):
            if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
                words = {e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
                if set(choices) <= words:
                    places.append(f"{path}:{node.lineno}")
    assert len(places) == 1 and places[0].startswith("core/choices.py:"), places


def test_every_reader_takes_the_owners_budget():
    parser = build_parser()
    assert _option(_subparser(parser, "eval", "context-length"), "--budget").default == DEFAULT_BUDGET_TOKENS
    assert _option(_subparser(parser, "retrieval", "search"), "--budget").default == DEFAULT_BUDGET_TOKENS
    assert str(DEFAULT_BUDGET_TOKENS) in _option(_subparser(parser, "eval", "run"), "--context-budget").help
    assert str(DEFAULT_BUDGET_TOKENS) in EvalSettings.model_fields["context_budget_tokens"].description
    assert RunConfig().context_budget_tokens == DEFAULT_BUDGET_TOKENS
    assert RetrievalConfig().budget_tokens == SweepConfig().budget_tokens == DEFAULT_BUDGET_TOKENS


def test_every_reader_takes_the_owners_choices():
    parser = build_parser()
    assert tuple(_option(_subparser(parser, "eval", "run"), "--engine").choices) == ROLLOUT_ENGINES
    assert tuple(_option(_subparser(parser, "eval", "context-length"), "--engine").choices) == ROLLOUT_ENGINES
    for command in ("exec", "work"):
        assert tuple(_option(_subparser(parser, "sandbox", command), "--backend").choices) == SANDBOX_BACKENDS
    assert list(_option(_subparser(parser, "domains", "validate"), "--sandbox-backend").choices) == \
        [*SANDBOX_BACKENDS, "none"]
    fields = RunConfig.model_fields
    assert get_args(fields["algorithm"].annotation) == ALGORITHMS
    assert get_args(fields["rollout_engine"].annotation) == ROLLOUT_ENGINES
    assert get_args(fields["sandbox_backend"].annotation) == SANDBOX_BACKENDS
    assert get_args(EvalSettings.model_fields["rollout_engine"].annotation) == ROLLOUT_ENGINES


def test_the_cli_command_modules_never_import_the_entry_point():
    back = []
    for path in sorted((ROOT / "backend").glob("cli_*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == "backend.cli":
                back.append(f"{path.name}:{node.lineno}")
            elif isinstance(node, ast.ImportFrom) and node.module == "backend" \
                    and any(a.name == "cli" for a in node.names):
                back.append(f"{path.name}:{node.lineno}")
            elif isinstance(node, ast.Import) and any(a.name == "backend.cli" for a in node.names):
                back.append(f"{path.name}:{node.lineno}")
    assert not back, f"imports of backend.cli from its command modules (an import circle): {back}"
