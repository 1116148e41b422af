"""A task from a folder: ``train``, ``validation`` (optional: carved out of train when missing)
and ``test`` files, each ``.csv``, ``.tsv`` or ``.jsonl``, with GLUE's column names."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path
from typing import Any

from .base import CARVE_FRACTION, SPLIT_NAMES, Example, Task, TaskError, carve_validation, check_task, sort_labels
from .rows import LABEL_COLUMN, rows_to_examples, text_columns

FILE_SUFFIXES = (".csv", ".tsv", ".jsonl")


def _split_file(directory: Path, split: str) -> Path | None:
    found = [directory / f"{split}{suffix}" for suffix in FILE_SUFFIXES if (directory / f"{split}{suffix}").exists()]
    if len(found) > 1:
        raise TaskError(f"{directory}: more than one {split} file ({', '.join(p.name for p in found)}); keep one")
    return found[0] if found else None


def read_rows(path: Path) -> tuple[list[str], list[dict[str, Any]]]:
    """(columns, rows) of a .csv / .tsv / .jsonl file; errors name the file (and line)."""
    if path.suffix == ".jsonl":
        rows, columns = [], {}
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise TaskError(f"{path}: unreadable: {exc}") from None
        for n, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as exc:
                raise TaskError(f"{path}: line {n}: not valid JSON ({exc})") from None
            if not isinstance(row, dict):
                raise TaskError(f"{path}: line {n}: expected a JSON object, got {type(row).__name__}")
            rows.append(row)
            columns.update(dict.fromkeys(row))
        return list(columns), rows
    import pandas as pd

    options = {"sep": "\t", "quoting": csv.QUOTE_NONE} if path.suffix == ".tsv" else {}
    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8", **options)
    except pd.errors.EmptyDataError:
        raise TaskError(f"{path}: empty file (no header row)") from None
    except (OSError, UnicodeDecodeError, pd.errors.ParserError) as exc:
        raise TaskError(f"{path}: unreadable {path.suffix[1:].upper()}: {exc}") from None
    columns = [str(c) for c in frame.columns]
    return columns, frame.to_dict(orient="records")


def folder_task(directory: str | Path) -> Task:
    """A task from ``train`` / ``validation`` / ``test`` files in ``directory``."""
    directory = Path(directory)
    files = {s: _split_file(directory, s) for s in SPLIT_NAMES}
    for split in ("train", "test"):
        if files[split] is None:
            raise TaskError(f"{directory}: no {split} file ({' or '.join(split + s for s in FILE_SUFFIXES)})")
    columns = None
    splits: dict[str, list[Example]] = {}
    for split, path in files.items():
        if path is None:
            continue
        names, rows = read_rows(path)
        if columns is None:
            columns = text_columns(names, str(path))
        missing = [c for c in (*columns, LABEL_COLUMN) if c is not None and c not in names]
        if missing:
            raise TaskError(f"{path}: missing column(s) {missing} (found {names})")
        examples = rows_to_examples(rows, columns, str(path))
        if not examples:
            raise TaskError(f"{path}: no examples")
        splits[split] = examples
    carved = "validation" not in splits
    if carved:
        splits["train"], splits["validation"] = carve_validation(splits["train"])
    labels = sort_labels(e.label for ex in splits.values() for e in ex)
    first, second = columns
    name = directory.resolve().name
    layout = f"sentence pairs ({first}, {second})" if second else f"single texts ({first})"
    task = Task(
        name=name,
        description=f"{name}: {len(labels)}-way classification of {layout} from {directory}"
                    + (f"; validation carved from train ({CARVE_FRACTION:.0%})" if carved else ""),
        label_names=labels,
        pair=second is not None,
        splits={s: splits[s] for s in SPLIT_NAMES},
        prefix=re.sub(r"[_\-]+", " ", name).strip().lower() or "task",
        info={"source": str(directory), "files": {s: str(p) for s, p in files.items() if p is not None},
              "columns": [c for c in columns if c], "validation_carved_from_train": carved},
    )
    check_task(task)
    return task

