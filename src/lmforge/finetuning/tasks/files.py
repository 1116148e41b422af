"""Finding and reading the files of a folder task, shared by the readers of each family
(``tagging_files``, ``squad``, ``generation_files``): a split's one file, a text file's lines, a
JSONL file's objects. Errors are ``TaskError``s naming the file and line (``path:17: ...``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .base import TaskError

# the file names of each split (without suffix), tried in this order
SPLIT_STEMS = {"train": ("train",), "validation": ("validation", "valid", "dev"), "test": ("test",)}


def one_file(directory: Path, split: str, candidates) -> Path | None:
    """The one of ``candidates`` (paths in ``directory``) that is a file, None when none is; more
    than one is a TaskError naming them (which is the ``split`` file is ambiguous)."""
    found = [p for p in candidates if p.is_file()]
    if len(found) > 1:
        raise TaskError(f"{directory}: more than one {split} file ({', '.join(p.name for p in found)}); keep one")
    return found[0] if found else None


def read_lines(path: Path) -> list[str]:
    """A UTF-8 text file's lines (split at ``\\n`` only, so numbered as an editor numbers them;
    a byte-order mark and ``\\r`` line ends dropped)."""
    try:
        text = path.read_text(encoding="utf-8-sig")
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
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise TaskError(f"{path}:{n}: not valid JSON ({exc})") from None
        if not isinstance(row, dict):
            raise TaskError(f"{path}:{n}: expected a JSON object, got {type(row).__name__}")
        yield n, row


def first_jsonl_object(path: Path) -> dict[str, Any] | None:
    """The first line's object of a JSONL file, or None (unreadable, not JSON, not an object)."""
    try:
        with path.open(encoding="utf-8-sig") as f:
            for line in f:
                if line.strip():
                    row = json.loads(line)
                    return row if isinstance(row, dict) else None
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return None
