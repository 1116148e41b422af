"""The import structure of ``src/lmforge``, read from the source with ``ast`` (nothing is imported).

- ``docs/ARCHITECTURE.md``'s layer table is the code's: every module of the package is in
  exactly one of its rows, and no module imports (counting every import, function-level ones
  included) from a module of a higher layer. A synthetic table and import map show the check
  naming both modules of an upward import.

- No import circle among lmforge's modules. Only module-level imports count (those in a
  module's body, or in an ``if``/``try`` at that level, other than ``if TYPE_CHECKING``): they
  are the ones that run when the module is imported. An import inside a function runs later
  and is not counted there.
- Nor one that hides behind function-level imports: the circle of config, objectives and
  tokenization was one (config called a function importing the objectives while it was being
  imported, and the objectives imported the token store inside functions), so a second test
  counts every import.
- ``objectives/`` and ``models/`` import nothing from lmforge outside themselves but the leaf
  modules (the table's bottom layer), counting every import, function-level ones included.
- The leaf modules import nothing from lmforge.
- ``benchmarks/`` imports nothing from ``tests/`` (what both need lives in ``lmforge.testing``).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
PACKAGE = "lmforge"
ARCHITECTURE = ROOT / "docs" / "ARCHITECTURE.md"


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
    assert "lmforge.tokenization.tokenizer_stage" in imports_of("lmforge.stages.kinds.tokenizer", module_level=False)
    assert "lmforge.tokenization.tokenizer_stage" not in imports_of("lmforge.stages.kinds.tokenizer", module_level=True)
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_circle_among_lmforge_modules():
    graph = {name: imports_of(name, module_level=True) for name in MODULES}
    assert _circles(graph) == []


def test_no_import_circle_even_through_function_level_imports():
    graph = {name: imports_of(name, module_level=False) for name in MODULES}
    assert _circles(graph) == []


def read_layers(text: str) -> tuple[list[tuple[str, list[str]]], list[str]]:
    """The layer table of ARCHITECTURE.md's "Layers" section, bottom layer first: each layer's
    name and its entries as written (``cli.py``, ``stages/``), and what is wrong with its rows.
    The table lists the layers from the top down, one row per module or package:
    ``| layer | `entry` | its job |``, a layer's rows together."""
    section = text.split("## Layers", 1)[1].split("\n## ", 1)[0]
    layers: list[tuple[str, list[str]]] = []
    problems = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("|") or len(cells) < 3 or cells[0] in ("layer", "---"):
            continue
        entry = re.fullmatch(r"`([^`]+)`", cells[1])
        if not entry:
            problems.append(f"a layer row names one module or package in backticks, not {cells[1]!r}")
            continue
        if not layers or layers[-1][0] != cells[0]:
            if cells[0] in [name for name, _ in layers]:
                problems.append(f"`{entry.group(1)}`: layer {cells[0]}'s rows are not together")
                continue
            layers.append((cells[0], []))
        layers[-1][1].append(entry.group(1))
    return layers[::-1], problems


def _entry_name(entry: str) -> str:
    """``stages/`` -> ``lmforge.stages``; ``cli.py`` -> ``lmforge.cli``; ``__init__.py`` -> ``lmforge``."""
    parts = entry.rstrip("/").removesuffix(".py").split("/")
    return ".".join([PACKAGE] + [p for p in parts if p != "__init__"])


def assign_layers(layers: list[tuple[str, list[str]]], modules) -> tuple[dict[str, int], list[str]]:
    """Each module's layer (its index, 0 the bottom) and what is wrong with the table: a module in
    no row or in two, a row naming nothing there. A ``.py`` row is that module; a ``/`` row a
    package with everything in it."""
    rank: dict[str, int] = {}
    problems = []
    covering: dict[str, list[str]] = {m: [] for m in modules}
    for i, (layer, entries) in enumerate(layers):
        for entry in entries:
            name = _entry_name(entry)
            hits = [m for m in modules if m == name or (entry.endswith("/") and m.startswith(name + "."))]
            if not hits:
                problems.append(f"`{entry}` (layer {layer}) is no module or package of src/{PACKAGE}")
            for m in hits:
                covering[m].append(f"`{entry}` (layer {layer})")
                rank[m] = i
    for m, rows in sorted(covering.items()):
        if not rows:
            problems.append(f"{m} is in no layer of the table: give it a row")
        elif len(rows) > 1:
            problems.append(f"{m} is in more than one row: {', '.join(rows)}")
    return rank, problems


def upward_imports(imports: dict[str, set[str]], rank: dict[str, int], names: list[str]) -> list[str]:
    """Each import of a module from a module of a higher layer, as a sentence naming both."""
    return [
        f"{m} (layer {names[rank[m]]}) imports {t} (layer {names[rank[t]]}, higher)"
        for m in sorted(imports)
        for t in sorted(imports[m])
        if t in rank and m in rank and rank[t] > rank[m]
    ]


LAYERS, ROW_PROBLEMS = read_layers(ARCHITECTURE.read_text(encoding="utf-8"))
LAYER_NAMES = [name for name, _ in LAYERS]
RANK, TABLE_PROBLEMS = assign_layers(LAYERS, MODULES)
TABLE_PROBLEMS = ROW_PROBLEMS + TABLE_PROBLEMS
LEAVES = {m for m, r in RANK.items() if r == 0}  # the bottom layer


def test_every_module_is_in_exactly_one_layer_of_the_architecture_table():
    assert LAYER_NAMES == ["leaves", "outputs", "models", "config", "data", "downstream", "training", "stages", "views"]
    assert TABLE_PROBLEMS == []
    assert set(RANK) == set(MODULES)
    assert RANK["lmforge.config"] == LAYER_NAMES.index("config")
    assert RANK["lmforge.evaluation.harness"] == LAYER_NAMES.index("downstream")
    assert {"lmforge.errors", "lmforge.schema", "lmforge.token_flags", "lmforge.chars", "lmforge"} <= LEAVES


def test_no_module_imports_from_a_higher_layer():
    imports = {name: imports_of(name, module_level=False) for name in MODULES}
    assert upward_imports(imports, RANK, LAYER_NAMES) == []


TOY_TABLE = """## Layers

| layer | module or package | its job |
| --- | --- | --- |
| top | `training/` | trains |
| bottom | `errors.py` | errors |
| bottom | `extra.py` | a row naming nothing |

## Next
"""


def test_the_layer_check_names_both_modules_of_an_upward_import_and_a_module_without_a_row():
    layers, row_problems = read_layers(TOY_TABLE)
    assert layers == [("bottom", ["errors.py", "extra.py"]), ("top", ["training/"])]
    assert row_problems == []
    modules = ["lmforge.errors", "lmforge.training", "lmforge.training.run", "lmforge.cli"]
    rank, problems = assign_layers(layers, modules)
    assert rank == {"lmforge.errors": 0, "lmforge.training": 1, "lmforge.training.run": 1}
    assert problems == [
        f"`extra.py` (layer bottom) is no module or package of src/{PACKAGE}",
        "lmforge.cli is in no layer of the table: give it a row",
    ]
    imports = {"lmforge.errors": {"lmforge.training.run"}, "lmforge.training.run": {"lmforge.errors"}}
    assert upward_imports(imports, rank, ["bottom", "top"]) == [
        "lmforge.errors (layer bottom) imports lmforge.training.run (layer top, higher)"
    ]
    split = TOY_TABLE.replace("| bottom | `extra.py` |", "| top | `extra.py` |")
    split = split.replace("| --- |\n", "| --- |\n| x | cli | no backticks |\n")
    assert read_layers(split)[1] == [
        "a layer row names one module or package in backticks, not 'cli'",
        "`extra.py`: layer top's rows are not together",
    ]
    twice = [("bottom", ["training/run.py"]), ("top", ["training/"])]
    assert assign_layers(twice, ["lmforge.training.run"])[1] == [
        "lmforge.training.run is in more than one row: `training/run.py` (layer bottom), `training/` (layer top)"
    ]


@pytest.mark.parametrize("package", ["lmforge.objectives", "lmforge.models"])
def test_objectives_and_models_import_only_themselves_and_the_leaves(package):
    outside = {}
    for name in MODULES:
        if name.startswith(package):
            bad = {m for m in imports_of(name, module_level=False) if not m.startswith(package)} - LEAVES
            if bad:
                outside[name] = sorted(bad)
    assert outside == {}


def test_the_leaves_import_nothing_from_lmforge():
    assert {leaf: sorted(imports_of(leaf, module_level=False)) for leaf in LEAVES} == {leaf: [] for leaf in LEAVES}


def test_the_architecture_page_names_files_that_exist():
    """Every path in backticks on ARCHITECTURE.md (``stages/graph.py``, ``interop/_<arch>.py``, a
    ``<placeholder>`` read as any name) is a file or folder of the repository or of src/lmforge."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    missing = []
    for path in sorted(set(re.findall(r"`([\w<>./-]+(?:\.py|\.yaml|/))`", text))):
        pattern = re.sub(r"<[^>]+>", "*", path.rstrip("/"))
        if not any(next(base.glob(f"**/{pattern}"), None) for base in (ROOT, SRC / PACKAGE)):
            missing.append(path)
    assert missing == []


def _benchmark_imports_from_tests(text: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.split(".")[0] == "tests"]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "tests":
            found.append(node.module)
    return found


def test_benchmarks_import_nothing_from_tests():
    assert _benchmark_imports_from_tests("import tests.waiting\nfrom tests.cleaning import x\nimport testsuite") == [
        "tests.waiting", "tests.cleaning"
    ]
    scripts = sorted((ROOT / "benchmarks").rglob("*.py"))
    assert len(scripts) > 5
    found = {p.name: _benchmark_imports_from_tests(p.read_text(encoding="utf-8")) for p in scripts}
    assert {name: names for name, names in found.items() if names} == {}
