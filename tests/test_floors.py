"""The house by floors: each top-level package imports only the packages below it.

core/ is the ground (it imports nothing of the project); sandboxes/ and retrieval/ stand on
it; domains/ on those; trainer/ on domains/; backend/ on the trainer; app/ on top. Imports
inside functions count too: a lazy import is still an import. The module-level import
graph has no circle either.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FLOOR = {"core": 0, "sandboxes": 1, "retrieval": 1, "domains": 2, "trainer": 3, "backend": 4, "app": 5}


def _imports(path: Path, top_level_only: bool = False) -> set[str]:
    """Dotted names of the project modules `path` imports."""
    tree = ast.parse(path.read_text())
    nodes = tree.body if top_level_only else ast.walk(tree)
    out = set()
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)  # `from pkg import module`
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return {m for m in out if m.split(".")[0] in FLOOR}


def _modules() -> dict[str, Path]:
    found = {}
    for package in FLOOR:
        for path in (ROOT / package).rglob("*.py"):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            found[name.removesuffix(".__init__")] = path
    return found


def test_no_import_runs_back_up_a_floor():
    up = []
    for name, path in _modules().items():
        for target in _imports(path):
            if FLOOR[target.split(".")[0]] > FLOOR[name.split(".")[0]]:
                up.append(f"{name} -> {target}")
    assert up == []


def test_the_ground_and_the_domain_families_import_what_they_stand_on_only():
    modules = _modules()
    assert all(t.startswith("core.") for n, p in modules.items() if n.startswith("core") for t in _imports(p))
    # the registry gathers the families (lazily, for start-up); no other shared module of
    # domains/ reaches into a family
    families = ("domains.reasoning_gym", "domains.code", "domains.terminal", "domains.long_docs", "domains.tools",
                "domains.cad", "domains.user", "domains.reasoning_core", "domains.mathematics_dataset",
                "domains.puzzles", "domains.professional", "domains.textarena", "domains.documents")
    for name, path in modules.items():
        if name.startswith("domains.") and not name.startswith(families) and name != "domains.registry":
            assert not [t for t in _imports(path) if t.startswith(families)], name


def test_the_module_import_graph_has_no_circle():
    modules = _modules()
    graph = {n: {t for t in _imports(p, top_level_only=True) if t in modules and t != n} for n, p in modules.items()}
    state: dict[str, int] = {}
    circles: list[str] = []

    def visit(node, stack):
        state[node] = 1
        for nxt in graph[node]:
            if state.get(nxt) == 1:
                circles.append(" -> ".join(stack[stack.index(nxt):] + [nxt]))
            elif nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = 2

    for node in graph:
        if node not in state:
            visit(node, [node])
    assert circles == []


def test_each_import_inside_a_function_says_why():
    """A project import placed in a function defers a heavy library (start-up of `rlwb` and
    the page); the import, or the comment line over its block of imports, says which."""
    silent = []
    for name, path in _modules().items():
        lines = path.read_text().splitlines()
        for fn in ast.walk(ast.parse("\n".join(lines))):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if not isinstance(node, (ast.Import, ast.ImportFrom)):
                    continue
                module = node.module if isinstance(node, ast.ImportFrom) else node.names[0].name
                if not module or module.split(".")[0] not in FLOOR:
                    continue
                i = node.lineno - 1
                while i > 0 and lines[i - 1].strip().startswith(("from ", "import ")) and "#" not in lines[i]:
                    i -= 1  # up through the block of imports it stands in
                if "#" not in lines[node.lineno - 1] and "#" not in lines[i] and not lines[i - 1].strip().startswith("#"):
                    silent.append(f"{path}:{node.lineno} {module}")
    assert silent == []
