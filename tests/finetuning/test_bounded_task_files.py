"""Hostile task files: a line longer than ``MAX_LINE_BYTES`` (found without holding it), a JSON
number of 5,000 digits, nesting 100,000 deep: each is one ``TaskError`` naming the file and line,
for every kind of task file (CSV, TSV, CoNLL, JSONL, SQuAD's JSON)."""

from __future__ import annotations

import re
import tracemalloc

import pytest

from lmforge.finetuning.tasks.base import TaskError
from lmforge.finetuning.tasks.files import MAX_LINE_BYTES, jsonl_objects, read_lines
from lmforge.finetuning.tasks.folder import folder_task, read_rows
from lmforge.finetuning.tasks.generation_files import read_generation_rows
from lmforge.finetuning.tasks.squad import read_squad_json
from lmforge.finetuning.tasks.tagging_files import read_conll

LONG = "x" * (MAX_LINE_BYTES + 10)  # one line over the limit, no newline inside


def _one_line(exc: pytest.ExceptionInfo, where: str) -> str:
    message = str(exc.value)
    assert len(message.splitlines()) == 1 and message.startswith(where), message
    return message


BEFORE = {  # a file's lines before the long one
    "train.csv": "sentence,label\nfine,a\n", "train.tsv": "sentence\tlabel\nfine\ta\n",
    "train.jsonl": '{"sentence": "fine", "label": "a"}\n', "train.txt": "Bob B-PER\n",
}


@pytest.mark.parametrize(("name", "read"), [
    ("train.csv", read_generation_rows), ("train.tsv", read_generation_rows), ("train.jsonl", read_generation_rows),
    ("train.csv", read_rows), ("train.tsv", read_rows), ("train.jsonl", read_rows), ("train.txt", read_conll),
])
def test_an_over_long_line_is_an_error_naming_it(tmp_path, name, read):
    path = tmp_path / name
    path.write_text(BEFORE[name] + LONG + "\n", encoding="utf-8")
    n = BEFORE[name].count("\n") + 1
    with pytest.raises(TaskError) as exc:
        read(path)
    _one_line(exc, f"{path}:{n}: a line longer than {MAX_LINE_BYTES} bytes")


def test_an_over_long_line_is_never_held(tmp_path):
    path = tmp_path / "train.txt"
    with open(path, "wb") as fh:
        for _ in range(64):
            fh.write(b"y" * (1 << 20))
    tracemalloc.start()
    try:
        with pytest.raises(TaskError, match=r":1: a line longer than"):
            read_lines(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 3 * MAX_LINE_BYTES  # the limit's worth, not the 64 MiB line


def test_a_folder_task_with_an_over_long_row_fails_naming_it(tmp_path):
    d = tmp_path / "sst2"
    d.mkdir()
    (d / "train.csv").write_text("sentence,label\ngood film,1\n" + "bad," + LONG + "\n", encoding="utf-8")
    (d / "test.csv").write_text("sentence,label\nok film,1\n", encoding="utf-8")
    with pytest.raises(TaskError) as exc:
        folder_task(d)
    _one_line(exc, f"{d / 'train.csv'}:3: a line longer than")


DIGITS = '{"tokens": ["a"], "tags": ["O"], "n": ' + "7" * 5000 + "}"
NESTED = '{"tokens": ["a"], "tags": ["O"], "m": ' + "[" * 100_000 + "]" * 100_000 + "}"


@pytest.mark.parametrize(("line", "why"), [
    (DIGITS, "Exceeds the limit (4300 digits) for integer string conversion: value has 5000 digits"),
    (NESTED, "nested too deeply to read"),
])
def test_json_python_cannot_hold_is_an_error_naming_the_line(tmp_path, line, why):
    path = tmp_path / "train.jsonl"
    path.write_text('{"tokens": ["b"], "tags": ["O"]}\n' + line + "\n", encoding="utf-8")
    with pytest.raises(TaskError) as exc:
        list(jsonl_objects(path))
    assert str(exc.value) == f"{path}:2: not valid JSON ({why})"
    with pytest.raises(TaskError) as exc:
        read_rows(path)
    assert str(exc.value) == f"{path}: line 2: not valid JSON ({why})"
    squad = tmp_path / "train.json"
    squad.write_text('{"version": "1.1", "data": [], "x": ' + line + "}", encoding="utf-8")
    with pytest.raises(TaskError, match=re.escape(f"{squad}: not valid JSON ({why})")):
        read_squad_json(squad)


def test_lines_within_the_limit_are_read_as_before(tmp_path):
    """A line of exactly the limit (its "\\n" not counted) is whole; CRLF ends and a byte-order
    mark are handled as before."""
    path = tmp_path / "train.csv"
    path.write_bytes(b"\xef\xbb\xbfsource,target\r\n" + b"a" * (MAX_LINE_BYTES - 3) + b",b\r\n")
    columns, rows = read_rows(path)
    assert columns == ["source", "target"] and rows == [{"source": "a" * (MAX_LINE_BYTES - 3), "target": "b"}]
    assert read_lines(path)[0] == "source,target"
    path.write_bytes(b"\xef\xbb\xbfsource,target\r\n\"two\r\nlines\",b\r\n")  # a quoted field across lines
    assert read_generation_rows(path) == [(2, {"source": "two\r\nlines", "target": "b"})]
