"""A generation task (``family="generation"``: ``TextPair`` of a source text and one reference
target) from a folder of files with the columns the public datasets use.

The folder holds ``train``, ``test`` and optionally ``validation`` (or ``valid`` / ``dev``;
carved out of train with ``carve_validation`` when missing), each ``.jsonl``, ``.csv`` or ``.tsv``
(a CSV field may hold newlines inside quotes, as CNN/DailyMail's articles do; a TSV is read
unquoted, one row per line, as ``folder.read_rows`` reads GLUE's). The train file's columns say
the kind of task, the first of these pairs it has deciding (``GENERATION_COLUMNS``):

- ``article`` / ``highlights`` (CNN/DailyMail) and ``document`` / ``summary`` (XSum):
  ``summarization``, prefix ``"summarize"``;
- ``source`` / ``target`` and ``input`` / ``output``: generic ``text``, prefix the folder name
  (``_`` and ``-`` as spaces, lower case);
- ``question`` / ``answer`` and ``question`` / ``answers`` (closed-book QA, as Natural Questions
  open and WebQuestions write it): ``qa``, prefix ``"question"``. A task keeps ONE target per
  ``TextPair``: an answer given as a list (or a SQuAD-style ``{"text": [...]}`` object) is
  represented by its first element, and ``task.info["rows_with_several_answers"]`` counts, per
  split, the rows whose other answers were dropped (exact match against the first answer only is
  stricter than the official best-over-answers rule);
- ``translation`` (JSONL only, WMT as Hugging Face ``datasets`` writes it:
  ``{"translation": {"de": "...", "en": "..."}}``): ``translation``, prefix ``"translate English
  to German"`` (the languages' names from their codes, ``LANGUAGE_NAMES``; an unknown code is
  named by itself). The direction: the folder's name when it ends in a pair of the file's
  language codes, read as source-target (``wmt16-de-en`` and ``de_en``: German to English;
  ``en-de``: English to German); otherwise the order of the first row's keys (the first is the
  source). Refused as ambiguous: a first row without exactly two languages, a folder name
  naming a pair of codes that are not the file's languages, a later row with other languages.

A file has the generation columns and no ``label``, ``score``, ``tags``, ``ner_tags`` or
``context`` column (those make the folder a classification, regression, tagging or span-QA task:
``is_generation_folder``). Each ``TextPair``'s id is ``path:line`` (a CSV row's first line). A
malformed file is refused with one ``TaskError`` naming the file and line (``path:17: ...``):
invalid JSON, a row without a column of the pair, an empty source or target, a CSV row with
too many or too few fields. ``task.info["generation_kind"]`` holds the kind, from which
``load_task`` picks the headline metric (``glue.GENERATION_METRICS``).
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path
from typing import Any

from .base import CARVE_FRACTION, SPLIT_NAMES, Task, TaskError, TextPair, carve_validation, check_task
from ...bounded import is_cut
from .files import MAX_LINE_BYTES, SPLIT_STEMS, first_jsonl_object, first_line, jsonl_objects, one_file, read_bounded

GENERATION_SUFFIXES = (".jsonl", ".csv", ".tsv")
# (source column, target column, kind), tried in this order
GENERATION_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("article", "highlights", "summarization"),
    ("document", "summary", "summarization"),
    ("source", "target", "text"),
    ("input", "output", "text"),
    ("question", "answer", "qa"),
    ("question", "answers", "qa"),
)
TRANSLATION_COLUMN = "translation"
GENERATION_KINDS = ("summarization", "translation", "qa", "text")
# columns that make a folder another family's task
OTHER_FAMILY_COLUMNS = ("label", "score", "tags", "ner_tags", "context")
KIND_PREFIXES = {"summarization": "summarize", "qa": "question"}
LANGUAGE_NAMES = {
    "ar": "Arabic", "cs": "Czech", "da": "Danish", "de": "German", "el": "Greek", "en": "English", "es": "Spanish",
    "et": "Estonian", "fi": "Finnish", "fr": "French", "gu": "Gujarati", "hi": "Hindi", "hu": "Hungarian",
    "it": "Italian", "ja": "Japanese", "kk": "Kazakh", "km": "Khmer", "ko": "Korean", "lt": "Lithuanian",
    "lv": "Latvian", "nl": "Dutch", "pl": "Polish", "ps": "Pashto", "pt": "Portuguese", "ro": "Romanian",
    "ru": "Russian", "sv": "Swedish", "ta": "Tamil", "tr": "Turkish", "uk": "Ukrainian", "zh": "Chinese",
}


def read_generation_rows(path: str | Path) -> list[tuple[int, dict[str, Any]]]:
    """(line, row) of every row of a ``.jsonl``, ``.csv`` or ``.tsv`` file (CSV / TSV: the first
    line is the header; a row's line is its first line); errors name the file and line."""
    path = Path(path)
    if path.suffix == ".jsonl":
        return list(jsonl_objects(path))
    options: dict[str, Any] = {"delimiter": "\t", "quoting": csv.QUOTE_NONE} if path.suffix == ".tsv" else {}
    try:
        with io.StringIO(read_bounded(path).decode("utf-8-sig"), newline="") as f:
            reader = csv.reader(f, **options)
            header = next(reader, None)
            if header is None:
                raise TaskError(f"{path}: empty file (no header row)")
            rows = []
            start = reader.line_num + 1
            for fields in reader:
                if fields:  # a blank line is no row
                    if len(fields) != len(header):
                        raise TaskError(f"{path}:{start}: {len(fields)} fields, the header has {len(header)}")
                    rows.append((start, dict(zip(header, fields))))
                start = reader.line_num + 1
    except (OSError, UnicodeDecodeError) as exc:
        raise TaskError(f"{path}: unreadable: {exc}") from None
    except csv.Error as exc:
        raise TaskError(f"{path}:{reader.line_num}: unreadable {path.suffix[1:].upper()} ({exc})") from None
    return rows


def _header(path: Path) -> list[str] | None:
    """The column names of a file's first row (JSONL: the first object's keys), None when unreadable."""
    if path.suffix == ".jsonl":
        first = first_jsonl_object(path)
        return list(first) if first is not None else None
    try:
        if path.suffix == ".tsv":
            first = first_line(path).rstrip("\r\n")
            return first.split("\t") if first else None
        with path.open(encoding="utf-8-sig", newline="") as f:  # a quoted header may span lines
            return next(csv.reader(_bounded(f)), None)
    except (OSError, UnicodeDecodeError, ValueError, csv.Error, TaskError):
        return None


def _bounded(f):
    """A text file's lines, for ``csv.reader``, each at most ``MAX_LINE_BYTES`` characters."""
    while line := f.readline(MAX_LINE_BYTES + 1):
        if is_cut(line, MAX_LINE_BYTES):
            raise TaskError(f"{f.name}: a line longer than {MAX_LINE_BYTES} characters")
        yield line


def generation_columns(columns, where: str = "") -> tuple[str, str, str] | None:
    """(source column, target column, kind) of a file with these columns, or None when it is not a
    generation file (no pair of ``GENERATION_COLUMNS``, no ``translation`` in a JSONL file, or a
    column of ``OTHER_FAMILY_COLUMNS``). ``where``: the file's name (a ``translation`` column
    counts in a ``.jsonl`` file only)."""
    present = set(columns)
    if present & set(OTHER_FAMILY_COLUMNS):
        return None
    for source, target, kind in GENERATION_COLUMNS:
        if source in present and target in present:
            return source, target, kind
    if TRANSLATION_COLUMN in present and str(where).endswith(".jsonl"):
        return TRANSLATION_COLUMN, TRANSLATION_COLUMN, "translation"
    return None


def _split_file(directory: Path, split: str) -> Path | None:
    candidates = [directory / f"{stem}{s}" for stem in SPLIT_STEMS[split] for s in GENERATION_SUFFIXES]
    return one_file(directory, split, candidates)


def is_generation_folder(directory: str | Path) -> bool:
    """Whether ``directory``'s one train file (``.jsonl``, ``.csv``, ``.tsv``) has generation
    columns and none of another family's (``generation_columns``)."""
    directory = Path(directory)
    found = [directory / f"train{s}" for s in GENERATION_SUFFIXES if (directory / f"train{s}").is_file()]
    if len(found) != 1:
        return False
    header = _header(found[0])
    return header is not None and generation_columns(header, found[0].name) is not None


def _text(value: Any, at: str, column: str) -> str:
    if value is None:
        raise TaskError(f"{at}: {column!r} is missing (null)")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        raise TaskError(f"{at}: {column!r} must be a string, got {type(value).__name__}")
    if not value.strip():
        raise TaskError(f"{at}: empty {column!r}")
    return value


def _answer(value: Any, at: str, column: str) -> tuple[str, int]:
    """(the first answer, how many answers the row gives)."""
    if isinstance(value, dict) and "text" in value:  # SQuAD-style {"text": [...], ...}
        value = value["text"]
    if isinstance(value, list):
        if not value:
            raise TaskError(f"{at}: {column!r} is an empty list")
        return _text(value[0], at, f"{column}[0]"), len(value)
    return _text(value, at, column), 1


def _direction(directory: Path, first: dict, at: str) -> tuple[str, str, str]:
    """(source language, target language, where the direction came from) of a translation file."""
    if not isinstance(first, dict) or len(first) != 2:
        found = sorted(first) if isinstance(first, dict) else type(first).__name__
        raise TaskError(f"{at}: 'translation' must map exactly two language codes to texts, found {found}; "
                        "which is the source is ambiguous")
    codes = [str(c) for c in first]
    name = directory.resolve().name.lower()
    named = re.search(r"(?:^|[^a-z])([a-z]{2,3})[-_]([a-z]{2,3})$", name)
    if named:
        source, target = named.groups()
        if {source, target} == {c.lower() for c in codes} and source != target:
            by_lower = {c.lower(): c for c in codes}
            return by_lower[source], by_lower[target], f"the folder name ({directory.resolve().name})"
        if source in LANGUAGE_NAMES or target in LANGUAGE_NAMES:
            raise TaskError(f"{directory}: the folder name says {source}-{target} but the file's languages are "
                            f"{codes} ({at}); the direction is ambiguous: name the folder <source>-<target> of "
                            "the file's codes")
    return codes[0], codes[1], "the first row's key order"


def _pairs(path: Path, source: str, target: str, kind: str, direction: tuple[str, str] | None,
           several: list[int]) -> list[TextPair]:
    out = []
    for n, row in read_generation_rows(path):
        at = f"{path}:{n}"
        if kind == "translation":
            texts = row.get(TRANSLATION_COLUMN)
            if TRANSLATION_COLUMN not in row:
                raise TaskError(f"{at}: no 'translation' column (found {sorted(row)})")
            if not isinstance(texts, dict):
                raise TaskError(f"{at}: 'translation' must be an object of language code -> text, "
                                f"got {type(texts).__name__}")
            if set(texts) != set(direction):
                raise TaskError(f"{at}: 'translation' has languages {sorted(texts)}, the file's first row "
                                f"{sorted(direction)}")
            out.append(TextPair(_text(texts[direction[0]], at, f"translation.{direction[0]}"),
                                _text(texts[direction[1]], at, f"translation.{direction[1]}"), id=at))
            continue
        missing = [c for c in (source, target) if c not in row]
        if missing:
            raise TaskError(f"{at}: missing column(s) {missing} (found {sorted(row)})")
        text = _text(row[source], at, source)
        if kind == "qa":
            answer, count = _answer(row[target], at, target)
            several[0] += count > 1
        else:
            answer = _text(row[target], at, target)
        out.append(TextPair(text, answer, id=at))
    if not out:
        raise TaskError(f"{path}: no examples")
    return out


def language_name(code: str) -> str:
    return LANGUAGE_NAMES.get(code.lower(), code)


def generation_folder_task(directory: str | Path) -> Task:
    """A generation task from ``directory``'s files (the module docstring says which columns make
    which kind, and how a translation's direction is read)."""
    directory = Path(directory)
    files = {s: _split_file(directory, s) for s in SPLIT_NAMES}
    for split in ("train", "test"):
        if files[split] is None:
            raise TaskError(f"{directory}: no {split} file ({' or '.join(split + s for s in GENERATION_SUFFIXES)})")
    header = _header(files["train"])
    columns = generation_columns(header or [], files["train"].name)
    if columns is None:
        raise TaskError(f"{files['train']}: no generation columns; expected one of "
                        + ", ".join(f"{a}/{b}" for a, b, _ in GENERATION_COLUMNS)
                        + f" or a JSONL 'translation' (and none of {list(OTHER_FAMILY_COLUMNS)}); found {header}")
    source, target, kind = columns
    direction = None
    info: dict[str, Any] = {}
    if kind == "translation":
        rows = read_generation_rows(files["train"])
        if not rows:
            raise TaskError(f"{files['train']}: no examples")
        line, first = rows[0]
        src, tgt, said_by = _direction(directory, first.get(TRANSLATION_COLUMN), f"{files['train']}:{line}")
        direction = (src, tgt)
        info["languages"] = {"source": src, "target": tgt, "from": said_by}
    splits: dict[str, list[TextPair]] = {}
    several: dict[str, int] = {}
    for split, path in files.items():
        if path is None:
            continue
        count = [0]
        if path.suffix != ".jsonl":  # a CSV / TSV header without the pair (JSONL: checked row by row)
            names = _header(path) or []
            missing = [c for c in (source, target) if c not in names]
            if missing:
                raise TaskError(f"{path}:1: missing column(s) {missing} (found {names})")
        splits[split] = _pairs(path, source, target, kind, direction, count)
        several[split] = count[0]
    carved = "validation" not in splits
    if carved:
        splits["train"], splits["validation"] = carve_validation(splits["train"])
    name = directory.resolve().name
    if kind == "translation":
        prefix = f"translate {language_name(direction[0])} to {language_name(direction[1])}"
        what = f"translation from {language_name(direction[0])} to {language_name(direction[1])}"
    else:
        prefix = KIND_PREFIXES.get(kind) or re.sub(r"[_\-]+", " ", name).strip().lower() or "generate"
        what = {"summarization": "summarization", "qa": "closed-book question answering",
                "text": "text-to-text generation"}[kind] + f" ({source} -> {target})"
    if kind == "qa":
        info["rows_with_several_answers"] = several  # per file read (train's before a validation is carved)
    notes = [f"validation carved from train ({CARVE_FRACTION:.0%})"] if carved else []
    if kind == "qa" and any(several.values()):
        notes.append("one target per question: the first of a list of answers")
    task = Task(
        name=name,
        description=f"{name}: {what} from {directory}" + (f"; {'; '.join(notes)}" if notes else ""),
        label_names=[],
        pair=False,
        splits={s: splits[s] for s in SPLIT_NAMES},
        prefix=prefix,
        info={"generation_kind": kind, "source": str(directory),
              "files": {s: str(p) for s, p in files.items() if p is not None},
              "columns": [source] if kind == "translation" else [source, target],
              "validation_carved_from_train": carved, **info},
        family="generation",
    )
    check_task(task)
    return task
