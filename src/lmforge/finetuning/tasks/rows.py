"""Rows with GLUE's column names (a text column or a pair of them, and ``label``; a regression
task's float target through ``regression_target``) as examples:
what the sources that read tables (a folder of files, ``hf:`` datasets) share."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from .base import Example, TaskError, label_name

# (first, second) text columns of sentence-pair tasks, tried in this order, then single columns
PAIR_COLUMNS: tuple[tuple[str, str], ...] = (
    ("sentence1", "sentence2"),
    ("question", "sentence"),
    ("question1", "question2"),
    ("premise", "hypothesis"),
    ("question", "passage"),
    ("text", "text_pair"),
)
SINGLE_COLUMNS: tuple[str, ...] = ("sentence", "text")
LABEL_COLUMN = "label"


def text_columns(columns: Sequence[str], where: str) -> tuple[str, str | None]:
    """(text column, pair column or None) from GLUE-style column names."""
    present = set(columns)
    for first, second in PAIR_COLUMNS:
        if first in present and second in present:
            return first, second
    for single in SINGLE_COLUMNS:
        if single in present:
            return single, None
    expected = ", ".join(SINGLE_COLUMNS) + " (single) or " + ", ".join(f"{a}+{b}" for a, b in PAIR_COLUMNS) + " (pairs)"
    raise TaskError(f"{where}: no text column; expected {expected}; found {sorted(present)}")



def _text(value: Any, where: str, column: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        raise TaskError(f"{where}: missing {column!r}")
    if not isinstance(value, str):
        value = str(value)
    if not value.strip():
        raise TaskError(f"{where}: empty {column!r}")
    return value


def regression_target(value: Any, where: str) -> float:
    """A regression target (STS-B's similarity score) as a finite float: a number, or a string
    of one ("3.800", "5")."""
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):  # numpy scalars
        value = value.item()
    if isinstance(value, bool) or value is None:
        raise TaskError(f"{where}: target {value!r} is not a number")
    if isinstance(value, str):
        if not value.strip():
            raise TaskError(f"{where}: missing target")
        try:
            number = float(value.strip())
        except ValueError:
            raise TaskError(f"{where}: target {value.strip()!r} is not a number") from None
    elif isinstance(value, (int, float)):
        number = float(value)
    else:
        raise TaskError(f"{where}: target {value!r} is a {type(value).__name__}, not a number")
    if not math.isfinite(number):
        raise TaskError(f"{where}: target {value!r} is not a finite number")
    return number


def rows_to_examples(rows: Iterable[dict[str, Any]], columns: tuple[str, str | None], where: str,
                     label_map=None, label_column: str = LABEL_COLUMN) -> list[Example]:
    """Examples from dict rows; ``where`` names the source (``file``); rows are numbered from 1."""
    first, second = columns
    out = []
    for n, row in enumerate(rows, start=1):
        at = f"{where}: row {n}"
        if label_column not in row:
            raise TaskError(f"{at}: no {label_column!r} column")
        raw = row[label_column]
        label = label_map(raw, at) if label_map is not None else label_name(raw, at)
        if label is None:  # an unlabelled row (hf: -1), skipped
            continue
        pair = _text(row.get(second), at, second) if second is not None else None
        out.append(Example(_text(row.get(first), at, first), pair, label, id=f"{where}:{n}"))
    return out

