"""The import structure of ``src/lmforge``, read from the source with ``ast`` (nothing is imported).

- No import circle among lmforge's modules. Only module-level imports count (those in a
  module's body, or in an ``if``/``try`` at that level, other than ``if TYPE_CHECKING``): they
  are the ones that run when the module is imported. An import inside a function runs later
  and is not counted there.
- Nor one that hides behind function-level imports: the circle of config, objectives and
  tokenization was one (config called a function importing the objectives while it was being
  imported, and the objectives imported the token store inside functions), so a second test
  counts every import.
- ``objectives/`` imports nothing from lmforge outside itself but the leaf modules, counting
  every import, function-level ones included.
- The leaf modules import nothing from lmforge.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = "lmforge"
LEAVES = {"lmforge.errors", "lmforge.schema", "lmforge.token_flags", "lmforge.chars"}


def _modules() -> dict[str, Path]:
    """Dotted name -> file of every module of the package (a package is its ``__init__``)."""
    out = {}
    for path in sorted((SRC / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _is_package(name: str) -> bool:
    return MODULES[name].name == "__init__.py"


def _statements(tree: ast.Module, module_level: bool):
    """The import statements of a module: those that run on import, or every one."""
    if not module_level:
        yield from (n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom)))
        return
    todo = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If):
            if "TYPE_CHECKING" not in ast.unparse(node.test):
                todo += node.body + node.orelse
        elif isinstance(node, ast.Try):
            todo += node.body + node.orelse + node.finalbody + [s for h in node.handlers for s in h.body]


def _imported(name: str, node: ast.Import | ast.ImportFrom) -> set[str]:
    """The lmforge modules an import statement in module ``name`` loads."""
    if isinstance(node, ast.Import):
        targets = [alias.name for alias in node.names]
    else:
        if node.level:
            base = name.split(".") if _is_package(name) else name.split(".")[:-1]
            base = base[: len(base) - node.level + 1]
            prefix = ".".join(base + ([node.module] if node.module else []))
        else:
            prefix = node.module or ""
        # ``from pkg import sub`` loads the module pkg.sub; ``from mod import name`` loads mod
        targets = [f"{prefix}.{a.name}" if f"{prefix}.{a.name}" in MODULES else prefix for a in node.names]
    out = set()
    for target in targets:
        while target and target not in MODULES:  # a name inside a module: the module
            target = target.rpartition(".")[0]
        if target.startswith(PACKAGE):
            out.add(target)
    return out


def imports_of(name: str, module_level: bool) -> set[str]:
    tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))
    found = set()
    for node in _statements(tree, module_level):
        found |= _imported(name, node)
    return found - {name}


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_import_reader_sees_relative_absolute_and_function_level_imports():
    assert "lmforge.objectives.base" in imports_of("lmforge.objectives.clm", module_level=True)
    assert "lmforge.config" in imports_of("lmforge.layout", module_level=True)
    assert "lmforge.tokenization.train" in imports_of("lmforge.stages.kinds.tokenizer", module_level=False)
    assert "lmforge.tokenization.train" not in imports_of("lmforge.stages.kinds.tokenizer", module_level=True)
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_circle_among_lmforge_modules():
    graph = {name: imports_of(name, module_level=True) for name in MODULES}
    assert _circles(graph) == []


def test_no_import_circle_even_through_function_level_imports():
    graph = {name: imports_of(name, module_level=False) for name in MODULES}
    assert _circles(graph) == []


def test_objectives_import_only_themselves_and_the_leaves():
    outside = {}
    for name in MODULES:
        if name.startswith("lmforge.objectives"):
            bad = {m for m in imports_of(name, module_level=False) if not m.startswith("lmforge.objectives")} - LEAVES
            if bad:
                outside[name] = sorted(bad)
    assert outside == {}


def test_the_leaves_import_nothing_from_lmforge():
    assert {leaf: sorted(imports_of(leaf, module_level=False)) for leaf in LEAVES} == {leaf: [] for leaf in LEAVES}
