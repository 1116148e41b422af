"""The embedded demo corpus: docstrings of the Python standard library.

It ships with every Python installation, so ``make run`` needs no download. Modules are
parsed with :mod:`ast` (never imported: importing ``antigravity`` opens a browser), and
docstrings are reflowed so that each paragraph is one line, as web text has it: C4's line
rules assume one paragraph per line.

Granularity: one document per module docstring, per public class (its docstring followed by
its public methods' docstrings) and per public module-level function. Ids are stable:
``stdlib:<module>``, ``stdlib:<module>:<Class>``, ``stdlib:<module>:<function>``.
"""

from __future__ import annotations

import ast
import re
import sysconfig
from collections.abc import Iterator
from pathlib import Path

import xxhash

from .document import CorpusError, Document

# Folders that hold tests, demos or vendored code rather than documentation.
# The documents' shape (text and metadata); the clean stage's fingerprint holds it, so a change
# here makes an existing clean corpus stale. 2: function documents' ``parameters`` and class
# documents' ``method_parameters`` (the docstring_params task's labels). 3: function documents'
# ``signature`` and class documents' ``method_signatures`` (the docstring_signature task's signatures).
CORPUS_VERSION = 3

_SKIP_DIRS = {"test", "tests", "idle_test", "site-packages", "dist-packages", "__pycache__", "_bundled", "turtledemo"}
_BULLET = re.compile(r"^([-*+\u2022]|\d+[.)]|[a-zA-Z][.)])\s")
_DOCTEST = ("<<<", ">>>", "... ")


def reflow(doc: str) -> str:
    """Join wrapped lines into one line per paragraph.

    A paragraph ends at a blank line. Lines that are structure rather than wrapping (doctest
    prompts, bullets, lines indented differently from the paragraph's first line, literal
    blocks after ``::``) start a new line instead of being joined.
    """
    out: list[str] = []
    current: list[str] = []
    indent = 0
    literal = False  # inside an indented literal block (after "::")
    doctest = False  # inside a doctest example: prompts and their output, until a blank line

    def flush() -> None:
        if current:
            out.append(" ".join(current))
            current.clear()

    for raw in doc.expandtabs().splitlines():
        stripped = raw.strip()
        if not stripped:
            flush()
            doctest = False
            continue
        this_indent = len(raw) - len(raw.lstrip())
        structural = (
            stripped.startswith(_DOCTEST)
            or stripped == "..."
            or _BULLET.match(stripped) is not None
            or (current and this_indent != indent)
            or literal
            or doctest
        )
        doctest = doctest or stripped.startswith(">>>")
        if structural or not current:
            flush()
            indent = this_indent
            literal = literal and this_indent > 0
        current.append(stripped)
        if stripped.endswith("::"):
            literal = True
    flush()
    return "\n".join(out)


def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def line_key(line: str) -> str:
    """A short hash of a line with its whitespace folded: how a class document names the lines of
    the class's own docstring (as opposed to its methods')."""
    return xxhash.xxh64_hexdigest(" ".join(line.split()).encode("utf-8"))


def parameter_names(node: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    """A function's parameter names in signature order: positional-only, regular, the ``*args``
    name, keyword-only, the ``**kwargs`` name; ``self`` and ``cls`` left out."""
    a = node.args
    names = [p.arg for p in (*a.posonlyargs, *a.args)]
    names += [a.vararg.arg] if a.vararg else []
    names += [p.arg for p in a.kwonlyargs]
    names += [a.kwarg.arg] if a.kwarg else []
    return [n for n in names if n not in ("self", "cls")]


def signature(node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    """A function's signature as ``name(a, b=..., /, c, *args, d, e=..., **kwargs)``: its name and
    parameters in signature order, ``/`` after the positional-only ones, a bare ``*`` before
    keyword-only ones when there is no ``*args``, every default shown as ``=...``; no annotations,
    ``self`` and ``cls`` left out (as ``parameter_names`` does)."""
    a = node.args
    positional = [*a.posonlyargs, *a.args]
    defaulted = {id(p) for p in positional[len(positional) - len(a.defaults):]} if a.defaults else set()

    def shown(p: ast.arg, default: bool) -> list[str]:
        return [] if p.arg in ("self", "cls") else [p.arg + ("=..." if default else "")]

    parts = [n for p in a.posonlyargs for n in shown(p, id(p) in defaulted)]
    parts += ["/"] if parts else []
    parts += [n for p in a.args for n in shown(p, id(p) in defaulted)]
    if a.vararg:
        parts.append("*" + a.vararg.arg)
    elif a.kwonlyargs:
        parts.append("*")
    parts += [n for p, d in zip(a.kwonlyargs, a.kw_defaults) for n in shown(p, d is not None)]
    parts += ["**" + a.kwarg.arg] if a.kwarg else []
    return f"{node.name}({', '.join(parts)})"


def _documents_in(tree: ast.Module, module: str) -> Iterator[tuple[str, str, str, dict]]:
    """(id, text, what the docstring documents: ``module``, ``class`` or ``function``, metadata: a
    function's ``parameters`` and ``signature``, a class's ``own_lines``, ``method_parameters`` and
    ``method_signatures``)."""
    doc = ast.get_docstring(tree)
    if doc:
        yield f"stdlib:{module}", reflow(doc), "module", {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.name.startswith("_"):
            doc = ast.get_docstring(node)
            if doc:
                yield (f"stdlib:{module}:{node.name}", reflow(doc), "function",
                       {"parameters": parameter_names(node), "signature": signature(node)})
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            parts = []
            methods: dict[str, list[str]] = {}  # a method docstring line's key -> that method's parameter names
            signatures: dict[str, list[str]] = {}  # ... -> that method's signature (a shared line: each method's)
            doc = ast.get_docstring(node)
            own = reflow(doc).split("\n") if doc else []
            if doc:
                parts.append(reflow(doc))
            for child in node.body:
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) and not child.name.startswith("_"):
                    child_doc = ast.get_docstring(child)
                    if child_doc:
                        sig = signature(child)
                        parts.append(reflow(child_doc))
                        for line in parts[-1].split("\n"):
                            if line.strip():  # a line two methods share gets both's names
                                names = methods.setdefault(line_key(line), [])
                                names += [n for n in parameter_names(child) if n not in names]
                                shared = signatures.setdefault(line_key(line), [])
                                shared += [sig] if sig not in shared else []
            if parts:
                # the lines of the class's own docstring, apart from its methods' that follow (and
                # those, each with its method's parameter names)
                yield (f"stdlib:{module}:{node.name}", "\n".join(parts), "class",
                       {"own_lines": sorted({line_key(line) for line in own if line.strip()}),
                        "method_parameters": dict(sorted(methods.items())),
                        "method_signatures": dict(sorted(signatures.items()))})


def python_files(root: Path) -> list[Path]:
    files = []
    for path in root.rglob("*.py"):
        rel = path.relative_to(root).parts
        if any(part in _SKIP_DIRS or part.startswith("config-") for part in rel[:-1]):
            continue
        if path.name.startswith("test_"):
            continue
        files.append(path)
    return sorted(files)


def site_package_roots(selection: bool | list[str]) -> list[Path]:
    """The installed packages whose docstrings join the corpus: none (``False``), every one
    (``True``: the whole ``site-packages`` folder) or the named top-level packages, each a folder
    of ``site-packages`` (an unknown name is a CorpusError naming it)."""
    purelib = Path(sysconfig.get_paths()["purelib"])
    if selection is False or selection == []:
        return []
    if selection is True:
        return [purelib]
    roots = []
    for name in selection:
        root = purelib / name
        if not name or "/" in name or name.startswith(".") or not (root / "__init__.py").is_file():
            raise CorpusError(f"clean.include_site_packages: {name!r} is not an installed package (a folder with "
                              f"__init__.py in {purelib})")
        roots.append(root)
    return roots


def stdlib_documents(include_site_packages: bool | list[str] = False) -> Iterator[Document]:
    """Yield the docstring documents, in a stable order (sorted file paths): the standard
    library's, then those of the installed packages ``include_site_packages`` selects
    (``site_package_roots``)."""
    paths = sysconfig.get_paths()
    stdlib, purelib = Path(paths["stdlib"]), Path(paths["purelib"])
    sources = [("stdlib", python_files(stdlib), stdlib)]
    for root in site_package_roots(include_site_packages):
        # the packages' own tests and vendored code are skipped as the standard library's are
        files = python_files(root) if root != purelib else sorted(purelib.rglob("*.py"))
        sources.append(("site-packages", files, purelib))
    for kind, files, root in sources:
        for path in files:
            try:
                source = path.read_text(encoding="utf-8")
                tree = ast.parse(source, filename=str(path))
            except (SyntaxError, UnicodeDecodeError, ValueError, OSError):
                # The installation's own files: a few are deliberately invalid (lib2to3 data).
                continue
            module = _module_name(root, path)
            for doc_id, text, documents, extra in _documents_in(tree, module):
                if kind != "stdlib":
                    doc_id = doc_id.replace("stdlib:", "site-packages:", 1)
                # "docstring_of" (and a class's "own_lines") label the default fine-tuning task
                # (finetuning/tasks/docstring_kind.py), a function's "parameters" (and a class's
                # "method_parameters") docstring_params, a function's "signature" (and a class's
                # "method_signatures") docstring_signature
                yield Document(id=doc_id, text=text, source=kind,
                               metadata={"module": module, "docstring_of": documents, **extra})
