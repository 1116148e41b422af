"""Two labelled tasks the project has never seen, written as folders of CSV, for
``benchmarks/transfer.py --task DIR`` and ``lmforge finetune ARCH --task DIR``.

    python benchmarks/folder_tasks.py [--out benchmarks/results/tasks] [--seed 0]

Both are read from the docstrings of packages installed beside lmforge (never from the standard
library the default corpus is built from), by parsing their source files (nothing is imported),
so they are the same for the same installed versions (written to ``info.json``):

- ``package`` (balanced, 4 classes): a docstring paragraph of at least 8 words: which package
  does it document, ``pandas``, ``torch``, ``transformers`` or ``dagster``? The same number
  of paragraphs is drawn per package for each split.
- ``numpydoc_section`` (imbalanced, 5 classes): a line of at least 5 words in a numpydoc-style
  docstring of ``pandas``, ``numpy`` or ``sklearn``: under which section heading is it,
  ``Parameters``, ``Returns``, ``Raises``, ``See Also`` or ``Notes``? The classes keep their
  natural proportions (``Parameters`` is most of them).

Paragraphs of one docstring stay in one split (a stable hash of the file and the object's
qualified name): 80% train, 10% validation, 10% test; each split is capped (``--train``,
``--eval``) by a seeded sample. Each folder has ``train.csv``, ``validation.csv`` and
``test.csv`` with the columns ``text,label``.
"""

from __future__ import annotations

import argparse
import ast
import csv
import hashlib
import importlib.metadata
import importlib.util
import json
import random
import re
import sys
from collections import Counter
from pathlib import Path

PACKAGE_TASK = ("pandas", "torch", "transformers", "dagster")
SECTION_PACKAGES = ("pandas", "numpy", "sklearn")
SECTIONS = ("Parameters", "Returns", "Raises", "See Also", "Notes")
DISTRIBUTIONS = {"sklearn": "scikit-learn"}
SPLITS = ("train", "validation", "test")


def package_root(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"folder_tasks.py: package {name!r} is not installed in {sys.prefix}")
    return Path(list(spec.submodule_search_locations)[0])


def docstrings(root: Path):
    """(key, docstring) of every module, class and function under ``root``, in path order;
    ``key`` is the file and the object's qualified name."""
    for path in sorted(root.rglob("*.py")):
        if "tests" in path.relative_to(root).parts:
            continue
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        rel = path.relative_to(root.parent).as_posix()

        def walk(node, prefix):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                    name = f"{prefix}.{child.name}" if prefix else child.name
                    doc = ast.get_docstring(child)
                    if doc:
                        yield f"{rel}:{name}", doc
                    yield from walk(child, name)

        doc = ast.get_docstring(tree)
        if doc:
            yield f"{rel}:", doc
        yield from walk(tree, "")


def split_of(key: str) -> str:
    h = int(hashlib.sha256(key.encode()).hexdigest()[:8], 16) % 100
    return "train" if h < 80 else "validation" if h < 90 else "test"


def clean(line: str) -> str:
    return " ".join(line.split())


def package_rows(roots: dict[str, Path]) -> dict[str, list[tuple[str, str]]]:
    """Each split's (paragraph, package) rows from the packages in ``roots`` (name -> folder)."""
    rows: dict[str, list[tuple[str, str]]] = {s: [] for s in SPLITS}
    for package, root in roots.items():
        for key, doc in docstrings(root):
            for paragraph in re.split(r"\n\s*\n", doc):
                text = clean(paragraph)[:512]
                if len(text.split()) >= 8 and not text.startswith((">>>", "..")):
                    rows[split_of(key)].append((text, package))
    return rows


def section_rows(roots: dict[str, Path]) -> dict[str, list[tuple[str, str]]]:
    """Each split's (line, numpydoc section) rows from the packages in ``roots``."""
    rows: dict[str, list[tuple[str, str]]] = {s: [] for s in SPLITS}
    for root in roots.values():
        for key, doc in docstrings(root):
            lines = doc.split("\n")
            section = None
            for i, line in enumerate(lines):
                following = lines[i + 1].strip() if i + 1 < len(lines) else ""
                if following and set(following) == {"-"} and line.strip():
                    section = line.strip()  # a numpydoc heading: a title underlined with dashes
                    continue
                if set(line.strip()) == {"-"}:
                    continue
                text = clean(line)
                if section in SECTIONS and len(text.split()) >= 5 and not text.startswith((">>>", "...")):
                    rows[split_of(key)].append((text, section))
    return rows


def sample(rows, cap: int, rng: random.Random, balanced: bool):
    if not balanced:
        return rng.sample(rows, min(cap, len(rows)))
    by_label: dict[str, list] = {}
    for row in rows:
        by_label.setdefault(row[1], []).append(row)
    each = min(cap // len(by_label), min(len(v) for v in by_label.values()))
    out = [r for label in sorted(by_label) for r in rng.sample(by_label[label], each)]
    rng.shuffle(out)
    return out


def write(folder: Path, rows, caps, seed: int, balanced: bool, description: str, packages) -> dict:
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    counts = {}
    for split in SPLITS:
        chosen = sample(sorted(set(rows[split])), caps[split], rng, balanced)
        with open(folder / f"{split}.csv", "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(["text", "label"])
            writer.writerows(chosen)
        counts[split] = dict(sorted(Counter(label for _, label in chosen).items()))
    versions = {p: importlib.metadata.version(DISTRIBUTIONS.get(p, p)) for p in packages}
    info = {"description": description, "seed": seed, "labels": counts, "versions": versions}
    (folder / "info.json").write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
    return info


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="benchmarks/results/tasks", help="where the task folders go")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--train", type=int, default=4000, help="training examples per task (at most)")
    parser.add_argument("--eval", type=int, default=800, help="validation and test examples per task (at most)")
    args = parser.parse_args(argv)
    caps = {"train": args.train, "validation": args.eval, "test": args.eval}
    out = Path(args.out)
    for name, rows, balanced, packages, description in (
        ("package", package_rows({p: package_root(p) for p in PACKAGE_TASK}), True, PACKAGE_TASK,
         "which package a docstring paragraph documents (balanced)"),
        ("numpydoc_section", section_rows({p: package_root(p) for p in SECTION_PACKAGES}), False, SECTION_PACKAGES,
         "the numpydoc section a docstring line is under (natural, imbalanced proportions)"),
    ):
        info = write(out / name, rows, caps, args.seed, balanced, description, packages)
        print(f"{out / name}: " + ", ".join(f"{s} {sum(c.values())} {c}" for s, c in info["labels"].items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
