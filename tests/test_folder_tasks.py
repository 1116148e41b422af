"""benchmarks/folder_tasks.py: the labelled folder tasks read from installed packages'
docstrings, checked on a small package tree written here (no installed package is read)."""

from __future__ import annotations

import csv
import random
from pathlib import Path

from .conftest import load_benchmark


def _module():
    return load_benchmark("folder_tasks")


NUMPYDOC = '''"""Add two numbers together and return the sum of both of them.

Parameters
----------
a : int
    The first number that is added to the second one here.
b : int
    The second number, short.

Returns
-------
int
    The sum of the two numbers that were given as arguments.

Examples
--------
>>> add(1, 2) and more words to pass the length
"""
'''


def _package(root: Path, name: str, docs: list[str]) -> Path:
    folder = root / name
    (folder / "tests").mkdir(parents=True)
    (folder / "__init__.py").write_text(f'"""The {name} package: a module docstring of more than eight words."""\n')
    for i, doc in enumerate(docs):
        (folder / f"m{i}.py").write_text(f"def f{i}():\n    {doc}    return 1\n")
    (folder / "tests" / "test_x.py").write_text('"""A test module docstring that must never be read here."""\n')
    (folder / "broken.py").write_text("def (:\n")
    return folder


def test_numpydoc_lines_are_labelled_by_their_section_and_examples_are_left_out(tmp_path):
    m = _module()
    root = _package(tmp_path, "pkg", [NUMPYDOC])
    rows = [r for split in m.section_rows({"pkg": root}).values() for r in split]
    assert sorted(rows) == sorted([
        ("The first number that is added to the second one here.", "Parameters"),
        ("The sum of the two numbers that were given as arguments.", "Returns"),
    ])


def test_package_paragraphs_keep_a_docstring_in_one_split_and_skip_tests(tmp_path):
    m = _module()
    roots = {name: _package(tmp_path, name, [NUMPYDOC]) for name in ("alpha", "beta")}
    rows = m.package_rows(roots)
    texts = [t for split in rows.values() for t, _ in split]
    assert not any("must never be read" in t for t in texts)
    assert {label for split in rows.values() for _, label in split} == {"alpha", "beta"}
    for name in roots:  # the three paragraphs of one function's docstring share a split
        split_of_doc = {s for s, r in rows.items() for t, label in r if label == name and "numbers" in t}
        assert len(split_of_doc) == 1


def test_a_balanced_sample_has_as_many_rows_per_label_and_files_have_text_and_label(tmp_path):
    m = _module()
    rows = [(f"a text {i}", "x") for i in range(10)] + [(f"b text {i}", "y") for i in range(4)]
    chosen = m.sample(rows, 100, random.Random(0), balanced=True)
    assert sorted(label for _, label in chosen) == ["x"] * 4 + ["y"] * 4
    info = m.write(tmp_path / "t", {"train": rows, "validation": rows[:3], "test": rows[-3:]},
                   {"train": 6, "validation": 10, "test": 10}, 0, False, "d", ["pytest"])
    with open(tmp_path / "t" / "train.csv", newline="") as f:
        table = list(csv.reader(f))
    assert table[0] == ["text", "label"] and len(table) == 7
    assert info["labels"]["validation"] == {"x": 3} and "pytest" in info["versions"]
