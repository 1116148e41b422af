"""What every fine-tuning task shares: the example types of each task family, the ``Task``,
their checks, capping a split by a seeded sample, carving validation out of train, and label
names.

A task's ``family`` says what its examples are:

- ``classification``: ``Example`` (a text or a pair, one class label);
- ``regression``: ``Example`` whose ``label`` is a float (STS-B's similarity; ``label_names`` is
  empty);
- ``tagging``: ``TaggedSentence`` (words, one IOB2 tag per word; ``label_names`` are the tags);
- ``span_qa``: ``SpanQuestion`` (a question, a context, the answers as character spans of the
  context; ``label_names`` is empty);
- ``generation``: ``TextPair`` (a source text and its reference target: a summary, a
  translation, an answer; ``label_names`` is empty).
"""

from __future__ import annotations

import math
import random
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import xxhash

from ...errors import LmforgeError

SPLIT_NAMES = ("train", "validation", "test")
FAMILIES = ("classification", "regression", "tagging", "span_qa", "generation")
CARVE_FRACTION = 0.1


class TaskError(LmforgeError, ValueError):
    """A task that cannot be built: the message names the spec, file, column or row at fault."""


@dataclass(frozen=True)
class Example:
    text: str
    text_pair: str | None
    label: str  # a float for a regression task
    id: str | None = None  # where it came from ("stdlib:json:JSONDecoder#2", "train.csv:17"); not part of the input


@dataclass(frozen=True)
class TaggedSentence:
    """One sentence of a tagging task: its words and one tag per word (``O``, ``B-X``, ``I-X``)."""

    words: tuple[str, ...]
    tags: tuple[str, ...]
    id: str | None = None  # where it came from ("train.conll:17")


@dataclass(frozen=True)
class Answer:
    """An answer of a span question: its text and where it starts in the context (characters)."""

    text: str
    start: int


@dataclass(frozen=True)
class SpanQuestion:
    """One question of an extractive QA task: every answer is ``context[start:start + len(text)]``;
    training uses the first, scoring takes the best over all (SQuAD's rule)."""

    question: str
    context: str
    answers: tuple[Answer, ...]
    id: str | None = None


@dataclass(frozen=True)
class TextPair:
    """One example of a generation task: the input text and the reference output."""

    source: str
    target: str
    id: str | None = None


@dataclass
class Task:
    name: str
    description: str
    label_names: list[str]
    pair: bool
    splits: dict[str, list[Example]]  # "train", "validation", "test": all three, non-empty
    prefix: str  # the text-to-text prefix, e.g. "docstring kind"
    info: dict[str, Any] = field(default_factory=dict)  # provenance and sizes before capping
    family: str = "classification"  # one of FAMILIES: what the splits' examples are

    def label_counts(self, split: str) -> dict[str, int]:
        """Examples per label in ``split`` (tagging: words per tag), every label listed (in
        ``label_names`` order); empty for span QA."""
        if self.family == "tagging":
            counts = Counter(t for e in self.splits[split] for t in e.tags)
        elif self.family in ("span_qa", "regression", "generation"):
            return {}
        else:
            counts = Counter(e.label for e in self.splits[split])
        return {name: counts.get(name, 0) for name in self.label_names}

    def summary(self) -> dict[str, Any]:
        out = {
            "task": self.name,
            "labels": list(self.label_names),
            "pair": self.pair,
            "splits": {s: {"examples": len(self.splits[s]), "labels": self.label_counts(s)} for s in SPLIT_NAMES},
        }
        if self.family != "classification":  # the classification summary stays as it was (fingerprints)
            out["family"] = self.family
        return out


def cap_splits(task: Task, *, max_train: int | None, max_eval: int | None, seed: int = 0) -> Task:
    """Cap each split by a seeded sample that keeps the examples' order; sizes before the cap
    go to ``task.info["uncapped"]``."""
    task.info.setdefault("uncapped", {s: len(task.splits[s]) for s in SPLIT_NAMES})
    for split in SPLIT_NAMES:
        cap = max_train if split == "train" else max_eval
        examples = task.splits[split]
        if cap is not None and len(examples) > cap:
            keep = sorted(random.Random(f"{seed}:{task.name}:{split}").sample(range(len(examples)), cap))
            task.splits[split] = [examples[i] for i in keep]
    task.info["capped"] = {"max_train": max_train, "max_eval": max_eval, "seed": seed}
    check_task(task)
    return task


def check_task(task: Task) -> None:
    """Every split present and non-empty, every label known, pairs consistent; a tagging
    sentence has one known tag per word, a span question's answers are spans of its context."""
    if task.family not in FAMILIES:
        raise TaskError(f"task {task.name!r}: unknown family {task.family!r}; known: {list(FAMILIES)}")
    for split in SPLIT_NAMES:
        if not task.splits.get(split):
            raise TaskError(f"task {task.name!r}: the {split} split is empty")
    if task.family == "tagging":
        _check_tagging(task)
        return
    if task.family == "span_qa":
        _check_span_qa(task)
        return
    if task.family == "regression":
        _check_regression(task)
        return
    if task.family == "generation":
        _check_generation(task)
        return
    known = set(task.label_names)
    if len(known) < 2:
        raise TaskError(f"task {task.name!r}: needs at least two labels, has {task.label_names}")
    for split, examples in task.splits.items():
        for e in examples:
            if e.label not in known:
                raise TaskError(f"task {task.name!r}: {split} example {e.id or e.text[:40]!r} has label {e.label!r}, "
                                f"not one of {task.label_names}")
            if (e.text_pair is not None) != task.pair:
                raise TaskError(f"task {task.name!r}: {split} example {e.id or e.text[:40]!r} "
                                f"{'lacks' if task.pair else 'has'} a second text")


def _check_tagging(task: Task) -> None:
    known = set(task.label_names)
    if not known:
        raise TaskError(f"task {task.name!r}: a tagging task needs its tag names")
    for split, sentences in task.splits.items():
        for e in sentences:
            where = f"task {task.name!r}: {split} sentence {e.id or ' '.join(e.words[:8])!r}"
            if not isinstance(e, TaggedSentence):
                raise TaskError(f"{where} is a {type(e).__name__}, not a TaggedSentence")
            if not e.words:
                raise TaskError(f"{where} has no words")
            if len(e.words) != len(e.tags):
                raise TaskError(f"{where} has {len(e.words)} words and {len(e.tags)} tags")
            unknown = sorted(set(e.tags) - known)
            if unknown:
                raise TaskError(f"{where} has tags {unknown} not in {task.label_names}")


def _check_regression(task: Task) -> None:
    for split, examples in task.splits.items():
        for e in examples:
            if not isinstance(e.label, float) or not math.isfinite(e.label):
                raise TaskError(f"task {task.name!r}: {split} example {e.id or e.text[:40]!r} has target {e.label!r}, "
                                "not a finite float")
            if (e.text_pair is not None) != task.pair:
                raise TaskError(f"task {task.name!r}: {split} example {e.id or e.text[:40]!r} "
                                f"{'lacks' if task.pair else 'has'} a second text")


def _check_generation(task: Task) -> None:
    for split, pairs in task.splits.items():
        for e in pairs:
            where = f"task {task.name!r}: {split} example {e.id or str(getattr(e, 'source', ''))[:40]!r}"
            if not isinstance(e, TextPair):
                raise TaskError(f"{where} is a {type(e).__name__}, not a TextPair")
            if not e.source.strip() or not e.target.strip():
                raise TaskError(f"{where} has an empty {'source' if not e.source.strip() else 'target'}")


def _check_span_qa(task: Task) -> None:
    for split, questions in task.splits.items():
        for e in questions:
            where = f"task {task.name!r}: {split} question {e.id or e.question[:40]!r}"
            if not isinstance(e, SpanQuestion):
                raise TaskError(f"{where} is a {type(e).__name__}, not a SpanQuestion")
            if not e.answers:
                raise TaskError(f"{where} has no answer")
            for a in e.answers:
                if a.start < 0 or e.context[a.start:a.start + len(a.text)] != a.text:
                    raise TaskError(f"{where}: answer {a.text!r} is not at character {a.start} of the context")


def example_text(e: Any) -> str:
    """The text an example is known by (for hashing and messages), whatever its family."""
    if isinstance(e, TaggedSentence):
        return " ".join(e.words)
    if isinstance(e, SpanQuestion):
        return f"{e.question}\x00{e.context}"
    if isinstance(e, TextPair):
        return f"{e.source}\x00{e.target}"
    return f"{e.text}\x00{e.text_pair or ''}"


def carve_validation(train: list, fraction: float = CARVE_FRACTION, salt: str = "lmforge-finetune"
                     ) -> tuple[list, list]:
    """(train, validation): the ``ceil(fraction * n)`` examples with the lowest stable hash of
    their text become validation (identical texts hash alike, so they land on the same side);
    both keep their original order."""
    if len(train) < 2:
        raise TaskError(f"cannot carve a validation split out of {len(train)} training example(s)")

    def key(e) -> int:
        return xxhash.xxh64_intdigest(f"{salt}\x00{example_text(e)}".encode("utf-8"))

    hashes = [key(e) for e in train]
    k = min(max(1, math.ceil(fraction * len(train))), len(train) - 1)
    threshold = sorted(hashes)[k - 1]
    held = [h <= threshold for h in hashes]
    if all(held):  # every text identical: hold out exactly k
        held = [i < k for i in range(len(train))]
    return [e for e, h in zip(train, held) if not h], [e for e, h in zip(train, held) if h]



def label_name(value: Any, where: str) -> str:
    """A label value as its name: integers (and integral floats) become ``"0"``, ``"1"``, ...,
    booleans ``"true"`` / ``"false"``, strings are kept (stripped)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        raise TaskError(f"{where}: missing label")
    if isinstance(value, bool):
        return "true" if value else "false"
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):  # numpy scalars
        value = value.item()
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value.is_integer():
            return str(int(value))
        raise TaskError(f"{where}: label {value!r} is not a class (a regression task's target goes in a "
                        "'score' column, or a folder named STS-B)")
    if isinstance(value, str):
        name = value.strip()
        if not name:
            raise TaskError(f"{where}: empty label")
        if re.fullmatch(r"[-+]?\d*\.\d+|[-+]?\d+\.", name):  # "1.0" from a CSV column pandas wrote as floats
            return label_name(float(name), where)
        return name
    raise TaskError(f"{where}: label {value!r} is a {type(value).__name__}, expected a string or an integer")


def sort_labels(names: Iterable[str]) -> list[str]:
    """Integer names in numeric order, any other names alphabetically."""
    names = set(names)
    if all(re.fullmatch(r"-?\d+", n) for n in names):
        return sorted(names, key=int)
    return sorted(names)

