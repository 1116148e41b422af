"""Finding and reading the files of a folder task, shared by the readers of each family
(``tagging_files``, ``squad``, ``generation_files``): a split's one file, a text file's lines, a
JSONL file's objects. Errors are ``TaskError``s naming the file and line (``path:17: ...``).

A task file is read one line at a time, each of at most ``MAX_LINE_BYTES`` (a longer line is an
error, found without holding it), and a JSON value Python's parser cannot hold (a number of more
digits than ``int`` converts, nesting deeper than the recursion limit) is an error naming its
line, as malformed JSON is."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ...bounded import DEFAULT_MAX_DOCUMENT_BYTES, is_cut
from .base import TaskError

MAX_LINE_BYTES = DEFAULT_MAX_DOCUMENT_BYTES  # a line of a task file (CSV, TSV, CoNLL, JSONL), at most

# the file names of each split (without suffix), tried in this order
SPLIT_STEMS = {"train": ("train",), "validation": ("validation", "valid", "dev"), "test": ("test",)}


def one_file(directory: Path, split: str, candidates) -> Path | None:
    """The one of ``candidates`` (paths in ``directory``) that is a file, None when none is; more
    than one is a TaskError naming them (which is the ``split`` file is ambiguous)."""
    found = [p for p in candidates if p.is_file()]
    if len(found) > 1:
        raise TaskError(f"{directory}: more than one {split} file ({', '.join(p.name for p in found)}); keep one")
    return found[0] if found else None


def read_bounded(path: Path) -> bytes:
    """A task file's bytes, read a line at a time; a line over ``MAX_LINE_BYTES`` (its line end
    not counted) is a ``TaskError`` naming it, raised before the line is held."""
    lines = []
    with path.open("rb") as f:
        while line := f.readline(MAX_LINE_BYTES + 1):
            lines.append(line)
            if is_cut(line, MAX_LINE_BYTES):
                raise TaskError(f"{path}:{len(lines)}: a line longer than {MAX_LINE_BYTES} bytes")
    return b"".join(lines)


def first_line(path: Path) -> str:
    """A text file's first line (with its line end; a byte-order mark dropped), at most
    ``MAX_LINE_BYTES`` characters: a longer one is a ``TaskError``; unreadable bytes raise as
    reading does."""
    with path.open(encoding="utf-8-sig", newline="") as f:
        line = f.readline(MAX_LINE_BYTES + 1)
    if is_cut(line, MAX_LINE_BYTES):
        raise TaskError(f"{path}:1: a line longer than {MAX_LINE_BYTES} characters")
    return line


def json_line(line: str, where: str) -> Any:
    """One line's JSON value; a ``TaskError`` naming ``where`` when it is not JSON Python can read."""
    try:
        return json.loads(line)
    except ValueError as exc:  # malformed, or a number of more digits than int() converts
        raise TaskError(f"{where}: not valid JSON ({str(exc).split(';')[0]})") from None
    except RecursionError:
        raise TaskError(f"{where}: not valid JSON (nested too deeply to read)") from None


def read_lines(path: Path) -> list[str]:
    """A UTF-8 text file's lines (split at ``\\n`` only, so numbered as an editor numbers them;
    a byte-order mark and ``\\r`` line ends dropped); a line over ``MAX_LINE_BYTES`` is an error."""
    try:
        text = read_bounded(path).decode("utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise TaskError(f"{path}: unreadable: {exc}") from None
    return [line.removesuffix("\r") for line in text.split("\n")]


def jsonl_objects(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) of each non-blank line of a JSONL file (lines as ``read_lines``
    numbers them); a line that is not valid JSON, or not a JSON object, is a ``TaskError``
    naming ``path:line``."""
    for n, line in enumerate(read_lines(path), start=1):
        if not line.strip():
            continue
        row = json_line(line, f"{path}:{n}")
        if not isinstance(row, dict):
            raise TaskError(f"{path}:{n}: expected a JSON object, got {type(row).__name__}")
        yield n, row


def first_jsonl_object(path: Path) -> dict[str, Any] | None:
    """The first line's object of a JSONL file, or None (unreadable, not JSON, not an object)."""
    try:
        with path.open(encoding="utf-8-sig") as f:
            while line := f.readline(MAX_LINE_BYTES + 1):
                if is_cut(line, MAX_LINE_BYTES):
                    return None
                if line.strip():
                    row = json.loads(line)
                    return row if isinstance(row, dict) else None
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return None
    return None
