"""A tagging task (one tag per word, NER-style) from a folder of files as the public datasets
write them.

- CoNLL-2003-style column files, ``.conll`` (and ``.txt``: the CoNLL-2003 redistribution's
  ``train.txt`` / ``valid.txt`` / ``test.txt``; a folder task never reads ``.txt`` otherwise, so
  a ``train.txt`` makes the folder a tagging one; the original ``eng.train`` / ``eng.testa`` /
  ``eng.testb`` too): one word per line, columns separated by spaces or tabs, the word first and
  its tag in the last column (CoNLL-2003: ``word POS chunk NER``); a blank line ends a sentence;
  ``-DOCSTART-`` lines (document boundaries) end one too and are skipped.
- JSONL: one sentence per line, ``{"tokens": [...], "tags": [...]}`` (``ner_tags`` is accepted
  for ``tags`` when it holds tag names; Hugging Face's integer class ids are refused: the file
  does not say their names).

Tags are ``O``, ``B-X`` or ``I-X``. IOB1 files (CoNLL-2003's original tagging, where an ``I-X``
opens an entity and ``B-X`` only separates two adjacent entities of one type) are rewritten as
IOB2 (every entity opens with ``B-X``) by ``to_iob2``, which leaves IOB2 tags as
they are; ``task.info["tag_scheme"]`` says whether anything was rewritten and
``task.info["tags_rewritten"]`` how many tags of each split.

The folder holds ``train``, ``test`` and optionally ``validation`` (or ``valid`` / ``dev``;
carved out of train when missing). A malformed file is refused with one ``TaskError`` naming
the file and line (``path:17: ...``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .base import CARVE_FRACTION, SPLIT_NAMES, TaggedSentence, Task, TaskError, carve_validation, check_task
from .files import SPLIT_STEMS, first_jsonl_object, jsonl_objects, one_file, read_lines

COLUMN_SUFFIXES = (".conll", ".txt")
TAGGING_SUFFIXES = (*COLUMN_SUFFIXES, ".jsonl")
# CoNLL-2003's original names of the splits (tried after SPLIT_STEMS with each suffix)
ORIGINAL_NAMES = {"train": "eng.train", "validation": "eng.testa", "test": "eng.testb"}
DOCSTART = "-DOCSTART-"
_TAG = re.compile(r"O|[BI]-\S+")


def to_iob2(tags: Sequence[str]) -> list[str]:
    """One sentence's tags rewritten from IOB1 to IOB2: an ``I-X`` that starts an entity (first
    tag, after ``O``, or after a tag of another type) becomes ``B-X``; every other tag is kept, so
    IOB2 input comes back unchanged. Raises ValueError on a tag that is not ``O``, ``B-X`` or
    ``I-X`` (X non-empty), naming it and its position."""
    if isinstance(tags, str):
        raise ValueError("to_iob2: expected a list of tags, got a string")
    out: list[str] = []
    previous_type: str | None = None  # None: outside an entity
    for i, tag in enumerate(tags):
        if tag == "O":
            out.append(tag)
            previous_type = None
            continue
        prefix, _, kind = tag.partition("-") if isinstance(tag, str) else ("", "", "")
        if prefix not in ("B", "I") or not kind:
            raise ValueError(f"to_iob2: tag {i} is {tag!r}, not O, B-X or I-X")
        out.append(f"B-{kind}" if prefix == "I" and kind != previous_type else tag)
        previous_type = kind
    return out


def _bad_tag(tag: Any) -> bool:
    return not isinstance(tag, str) or _TAG.fullmatch(tag) is None


def read_conll(path: str | Path) -> list[TaggedSentence]:
    """The sentences of a CoNLL-style column file, tags as written (not yet IOB2); each
    sentence's id is ``path:line`` of its first word."""
    path = Path(path)
    lines = read_lines(path)
    sentences: list[TaggedSentence] = []
    words: list[str] = []
    tags: list[str] = []
    start = 0

    def end_sentence() -> None:
        if words:
            sentences.append(TaggedSentence(tuple(words), tuple(tags), id=f"{path}:{start}"))
            words.clear()
            tags.clear()

    for n, line in enumerate(lines, start=1):
        columns = line.split()
        if not columns:
            end_sentence()
            continue
        if columns[0] == DOCSTART:
            end_sentence()
            continue
        if len(columns) < 2:
            raise TaskError(f"{path}:{n}: one column ({line.strip()!r}); expected the word first and its tag in the "
                            "last column, separated by spaces or tabs")
        tag = columns[-1]
        if _bad_tag(tag):
            raise TaskError(f"{path}:{n}: tag {tag!r} (last column) is not O, B-X or I-X")
        if not words:
            start = n
        words.append(columns[0])
        tags.append(tag)
    end_sentence()
    if not sentences:
        raise TaskError(f"{path}: no sentences")
    return sentences


def read_tagged_jsonl(path: str | Path) -> list[TaggedSentence]:
    """The sentences of a JSONL file, one ``{"tokens": [...], "tags": [...]}`` (or ``ner_tags``
    as names) per line; each sentence's id is ``path:line``."""
    path = Path(path)
    sentences = []
    for n, row in jsonl_objects(path):
        at = f"{path}:{n}"
        key = "tags" if "tags" in row else "ner_tags"
        if "tokens" not in row or key not in row:
            raise TaskError(f"{at}: expected 'tokens' and 'tags' (or 'ner_tags'), found {sorted(row)}")
        tokens, tags = row["tokens"], row[key]
        if not isinstance(tokens, list) or not all(isinstance(t, str) and t.strip() for t in tokens):
            raise TaskError(f"{at}: 'tokens' must be a list of non-empty strings")
        if not tokens:
            raise TaskError(f"{at}: no tokens")
        if not isinstance(tags, list):
            raise TaskError(f"{at}: {key!r} must be a list of tags")
        if any(isinstance(t, int) for t in tags):
            raise TaskError(f"{at}: {key!r} holds integer class ids; a JSONL tagging file needs the tag names "
                            "('O', 'B-PER', ...)")
        if len(tokens) != len(tags):
            raise TaskError(f"{at}: {len(tokens)} tokens but {len(tags)} {key}")
        bad = [t for t in tags if _bad_tag(t)]
        if bad:
            raise TaskError(f"{at}: tag {bad[0]!r} is not O, B-X or I-X")
        sentences.append(TaggedSentence(tuple(tokens), tuple(tags), id=at))
    if not sentences:
        raise TaskError(f"{path}: no sentences")
    return sentences


def read_tagged(path: str | Path) -> list[TaggedSentence]:
    """A tagging file of either kind, by its suffix (``.jsonl``: JSON lines, else columns)."""
    path = Path(path)
    return read_tagged_jsonl(path) if path.suffix == ".jsonl" else read_conll(path)


def _split_file(directory: Path, split: str) -> Path | None:
    candidates = [directory / f"{stem}{suffix}" for stem in SPLIT_STEMS[split] for suffix in TAGGING_SUFFIXES]
    return one_file(directory, split, [*candidates, directory / ORIGINAL_NAMES[split]])


def is_tagging_folder(directory: str | Path) -> bool:
    """Whether ``directory`` holds a tagging task: a split file in CoNLL columns (``.conll``,
    ``.txt``, ``eng.train``...), or a ``train.jsonl`` whose first object has ``tokens`` and
    ``tags`` / ``ner_tags``."""
    directory = Path(directory)
    for split in SPLIT_NAMES:
        names = [f"{stem}{suffix}" for stem in SPLIT_STEMS[split] for suffix in COLUMN_SUFFIXES] + [ORIGINAL_NAMES[split]]
        if any((directory / name).is_file() for name in names):
            return True
    first = first_jsonl_object(directory / "train.jsonl") if (directory / "train.jsonl").is_file() else None
    return first is not None and "tokens" in first and ("tags" in first or "ner_tags" in first)


def tagging_folder_task(directory: str | Path) -> Task:
    """A tagging task from ``directory``'s ``train``, ``test`` and optional ``validation`` files
    (the module docstring lists the kinds); tags rewritten as IOB2; ``label_names`` are the tags
    of all splits, ``O`` first, then sorted."""
    directory = Path(directory)
    files = {s: _split_file(directory, s) for s in SPLIT_NAMES}
    for split in ("train", "test"):
        if files[split] is None:
            names = " or ".join(f"{split}{s}" for s in TAGGING_SUFFIXES)
            raise TaskError(f"{directory}: no {split} file ({names})")
    splits: dict[str, list[TaggedSentence]] = {}
    rewritten: dict[str, int] = {}
    for split, path in files.items():
        if path is None:
            continue
        sentences, changed = [], 0
        for s in read_tagged(path):
            tags = tuple(to_iob2(s.tags))  # the tags were checked as O / B-X / I-X while reading
            changed += sum(a != b for a, b in zip(s.tags, tags))
            sentences.append(TaggedSentence(s.words, tags, id=s.id))
        splits[split], rewritten[split] = sentences, changed
    carved = "validation" not in splits
    if carved:
        splits["train"], splits["validation"] = carve_validation(splits["train"])
    tags = {t for sentences in splits.values() for s in sentences for t in s.tags}
    labels = (["O"] if "O" in tags else []) + sorted(tags - {"O"})
    types = sorted({t[2:] for t in tags if t != "O"})
    converted = any(rewritten.values())
    name = directory.resolve().name
    notes = ["IOB1 tags rewritten as IOB2"] if converted else []
    if carved:
        notes.append(f"validation carved from train ({CARVE_FRACTION:.0%})")
    task = Task(
        name=name,
        description=f"{name}: tagging words with {len(labels)} tags ({', '.join(types) or 'no'} entities) from "
                    f"{directory}" + (f"; {'; '.join(notes)}" if notes else ""),
        label_names=labels,
        pair=False,
        splits={s: splits[s] for s in SPLIT_NAMES},
        prefix=re.sub(r"[_\-]+", " ", name).strip().lower() or "tagging",
        info={"source": str(directory), "files": {s: str(p) for s, p in files.items() if p is not None},
              "tag_scheme": "IOB1, rewritten as IOB2" if converted else "IOB2", "tags_rewritten": rewritten,
              "validation_carved_from_train": carved},
        family="tagging",
    )
    check_task(task)
    return task
