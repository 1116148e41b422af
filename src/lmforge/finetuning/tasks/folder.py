"""A task from a folder: ``train``, ``validation`` (optional: carved out of train when missing)
and ``test`` files, each ``.csv``, ``.tsv`` or ``.jsonl``, with GLUE's column names.

The folder's files say the task's family: CoNLL-style column files (``.conll``, ``.txt``) or
JSONL with ``tokens`` and ``tags`` make a tagging task (``tagging_files``); SQuAD's JSON or JSONL
with ``question``, ``context`` and ``answers`` a span-QA task (``squad``); a train file with a
generation task's columns (``article``/``highlights``, ``document``/``summary``,
``source``/``target``, ``input``/``output``, ``question``/``answer(s)``, a JSONL ``translation``)
and no ``label``, ``score``, ``tags`` or ``context`` column a generation task
(``generation_files``); any other is a
classification task, or a regression one (``family="regression"``, float targets) when the
folder is named as GLUE's STS-B (``STS-B``, ``stsb``: its ``score`` column, or ``label``) or the
train file has a ``score`` column and no ``label`` (the signal a regression folder gives: a
``label`` column of non-integer numbers is refused as no class).

GLUE's MNLI folder is read with its matched dev set (``dev_matched.tsv``); a folder named
``MNLI-mm`` or ``mnli_mismatched`` (GLUE's name for that evaluation) holding the same files is
read with ``dev_mismatched.tsv`` instead (and ``test_mismatched.tsv``)."""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path
from typing import Any

from .base import CARVE_FRACTION, SPLIT_NAMES, Example, Task, TaskError, carve_validation, check_task, sort_labels
from .files import first_line, json_line, read_bounded
from .generation_files import generation_folder_task, is_generation_folder
from .glue import canonical_glue_name
from .rows import LABEL_COLUMN, regression_target, rows_to_examples, text_columns
from .squad import is_squad_folder, squad_folder_task
from .tagging_files import is_tagging_folder, tagging_folder_task

FILE_SUFFIXES = (".csv", ".tsv", ".jsonl")


# GLUE's own files, as the benchmark distributes them (train.tsv, dev.tsv, test.tsv without
# labels): the text, second text and label columns of each task (STS-B's label: its similarity
# score); CoLA's files have no header row (source, label, the original label, sentence); MNLI's
# validation is dev_matched.tsv (mismatched: dev_mismatched.tsv), its test test_matched.tsv
GLUE_FILES: dict[str, tuple[str, str | None, str]] = {
    "cola": ("sentence", None, "label"), "sst2": ("sentence", None, "label"),
    "mrpc": ("#1 String", "#2 String", "Quality"), "qqp": ("question1", "question2", "is_duplicate"),
    "mnli": ("sentence1", "sentence2", "gold_label"), "qnli": ("question", "sentence", "label"),
    "rte": ("sentence1", "sentence2", "label"), "wnli": ("sentence1", "sentence2", "label"),
    "stsb": ("sentence1", "sentence2", "score"),
}
GLUE_FILES["mnli_matched"] = GLUE_FILES["mnli_mismatched"] = GLUE_FILES["mnli"]
COLA_COLUMNS = ["source", "label", "original_label", "sentence"]
GLUE_DEV = {"mnli": "dev_matched", "mnli_matched": "dev_matched", "mnli_mismatched": "dev_mismatched"}
GLUE_TEST = {"mnli": "test_matched", "mnli_matched": "test_matched", "mnli_mismatched": "test_mismatched"}
REGRESSION_GLUE = "stsb"  # GLUE's regression task
SCORE_COLUMN = "score"  # a regression target's column (STS-B's name for it)


def _split_file(directory: Path, split: str, glue: str | None = None) -> Path | None:
    found = [directory / f"{split}{suffix}" for suffix in FILE_SUFFIXES if (directory / f"{split}{suffix}").exists()]
    if len(found) > 1:
        raise TaskError(f"{directory}: more than one {split} file ({', '.join(p.name for p in found)}); keep one")
    if not found and split == "validation" and glue is not None:  # GLUE's name for it
        dev = directory / f"{GLUE_DEV.get(glue, 'dev')}.tsv"
        return dev if dev.exists() else None
    if not found and split == "test" and glue in GLUE_TEST:  # MNLI's (unlabelled) test_matched.tsv
        test = directory / f"{GLUE_TEST[glue]}.tsv"
        return test if test.exists() else None
    return found[0] if found else None


def _first_line(path: Path) -> list[str]:
    try:
        return first_line(path).rstrip("\r\n").split("\t")
    except (OSError, UnicodeDecodeError) as exc:
        raise TaskError(f"{path}: unreadable: {exc}") from None


def _headerless_cola(first_line: list[str]) -> bool:
    """CoLA's train and dev files start with a row (4 fields, no ``sentence`` name); its test
    file has a header (index, sentence)."""
    return len(first_line) == len(COLA_COLUMNS) and "sentence" not in first_line


def _glue_layout(directory: Path, train: Path) -> str | None:
    """The GLUE task whose distributed files ``directory`` holds (its name is the task's, and the
    train file has the task's columns, or is CoLA's header-less file), else None."""
    name = canonical_glue_name(directory.resolve().name)
    if name not in GLUE_FILES or train.suffix != ".tsv":
        return None
    header = _first_line(train)
    if name == "cola":
        return name if _headerless_cola(header) else None
    first, second, label = GLUE_FILES[name]
    return name if {first, label} | ({second} if second else set()) <= set(header) else None


def read_rows(path: Path, names: list[str] | None = None) -> tuple[list[str], list[dict[str, Any]]]:
    """(columns, rows) of a .csv / .tsv / .jsonl file (``names``: the columns of a file without a
    header row); errors name the file (and line)."""
    if path.suffix == ".jsonl":
        rows, columns = [], {}
        try:
            lines = read_bounded(path).decode("utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise TaskError(f"{path}: unreadable: {exc}") from None
        for n, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            row = json_line(line, f"{path}: line {n}")
            if not isinstance(row, dict):
                raise TaskError(f"{path}: line {n}: expected a JSON object, got {type(row).__name__}")
            rows.append(row)
            columns.update(dict.fromkeys(row))
        return list(columns), rows
    import pandas as pd

    options: dict[str, Any] = {"sep": "\t", "quoting": csv.QUOTE_NONE} if path.suffix == ".tsv" else {}
    if names is not None:
        options.update(header=None, names=names)
    try:
        data = read_bounded(path)  # every line within MAX_LINE_BYTES before pandas reads it
        frame = pd.read_csv(io.BytesIO(data), dtype=str, keep_default_na=False, encoding="utf-8", **options)
    except pd.errors.EmptyDataError:
        raise TaskError(f"{path}: empty file (no header row)") from None
    except (OSError, UnicodeDecodeError, pd.errors.ParserError) as exc:
        raise TaskError(f"{path}: unreadable {path.suffix[1:].upper()}: {exc}") from None
    columns = [str(c) for c in frame.columns]
    return columns, frame.to_dict(orient="records")


def folder_task(directory: str | Path) -> Task:
    """A task from ``train`` / ``validation`` / ``test`` files in ``directory``, or from the files
    of a GLUE task as the benchmark distributes them (``train.tsv``, ``dev.tsv``, ``test.tsv``
    without labels: the dev split is tested on and validation is carved out of train); a folder
    of tagging, SQuAD or generation files is handed to ``tagging_folder_task`` /
    ``squad_folder_task`` / ``generation_folder_task`` (the module docstring says how each family is told)."""
    directory = Path(directory)
    if is_squad_folder(directory):
        return squad_folder_task(directory)
    if is_tagging_folder(directory):
        return tagging_folder_task(directory)
    if is_generation_folder(directory):
        return generation_folder_task(directory)
    train_file = _split_file(directory, "train")
    glue = _glue_layout(directory, train_file) if train_file is not None else None
    files = {s: _split_file(directory, s, glue) for s in SPLIT_NAMES}
    for split in ("train", "test"):
        if files[split] is None:
            raise TaskError(f"{directory}: no {split} file ({' or '.join(split + s for s in FILE_SUFFIXES)})")
    label_column = GLUE_FILES[glue][2] if glue else None  # else: the train file's (score or label)
    regression = glue == REGRESSION_GLUE or canonical_glue_name(directory.resolve().name) == REGRESSION_GLUE
    columns: tuple[str, str | None] | None = GLUE_FILES[glue][:2] if glue else None
    splits: dict[str, list[Example]] = {}
    notes = []
    for split, path in files.items():
        if path is None:
            continue
        headerless = glue == "cola" and path.suffix == ".tsv" and _headerless_cola(_first_line(path))
        names, rows = read_rows(path, COLA_COLUMNS if headerless else None)
        if columns is None:
            columns = text_columns(names, str(path))
        if label_column is None:
            regression = regression or (SCORE_COLUMN in names and LABEL_COLUMN not in names)
            label_column = SCORE_COLUMN if regression and SCORE_COLUMN in names else LABEL_COLUMN
        if glue and split == "test" and label_column not in names:  # GLUE's test labels are hidden
            notes.append(f"test = {files['validation'].name if files['validation'] else 'none'} "
                         f"({path.name} has no labels)")
            continue
        missing = [c for c in (*columns, label_column) if c is not None and c not in names]
        if missing:
            raise TaskError(f"{path}: missing column(s) {missing} (found {names})")
        examples = rows_to_examples(rows, columns, str(path), label_map=regression_target if regression else None,
                                    label_column=label_column)
        if not examples:
            raise TaskError(f"{path}: no examples")
        splits[split] = examples
    if "test" not in splits:
        if "validation" not in splits:
            raise TaskError(f"{directory}: {files['test'].name} has no labels and there is no dev file to test on")
        splits["test"] = splits.pop("validation")
    carved = "validation" not in splits
    if carved:
        splits["train"], splits["validation"] = carve_validation(splits["train"])
        notes.append(f"validation carved from train ({CARVE_FRACTION:.0%})")
    labels = [] if regression else sort_labels(e.label for ex in splits.values() for e in ex)
    first, second = columns
    name = directory.resolve().name
    layout = f"sentence pairs ({first}, {second})" if second else f"single texts ({first})"
    if regression:
        targets = [e.label for ex in splits.values() for e in ex]
        kind = f"regression ({label_column} from {min(targets):g} to {max(targets):g})"
    else:
        kind = f"{len(labels)}-way classification"
    task = Task(
        name=name,
        description=f"{name}: {kind} of {layout} from {directory}"
                    + (f" (GLUE's {glue} files)" if glue else "") + (f"; {'; '.join(notes)}" if notes else ""),
        label_names=labels,
        pair=second is not None,
        splits={s: splits[s] for s in SPLIT_NAMES},
        prefix=re.sub(r"[_\-]+", " ", name).strip().lower() or "task",
        info={"source": str(directory), "files": {s: str(p) for s, p in files.items() if p is not None},
              "columns": [c for c in columns if c], "validation_carved_from_train": carved,
              **({"glue_files": glue} if glue else {}), **({"target": label_column} if regression else {})},
        family="regression" if regression else "classification",
    )
    check_task(task)
    return task
