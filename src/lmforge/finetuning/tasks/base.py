"""What every fine-tuning task shares: the ``Example`` and ``Task`` types, their checks, capping
a split by a seeded sample, carving validation out of train, and label names."""

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
CARVE_FRACTION = 0.1


class TaskError(LmforgeError, ValueError):
    """A task that cannot be built: the message names the spec, file, column or row at fault."""


@dataclass(frozen=True)
class Example:
    text: str
    text_pair: str | None
    label: str
    id: str | None = None  # where it came from ("stdlib:json:JSONDecoder#2", "train.csv:17"); not part of the input


@dataclass
class Task:
    name: str
    description: str
    label_names: list[str]
    pair: bool
    splits: dict[str, list[Example]]  # "train", "validation", "test": all three, non-empty
    prefix: str  # the text-to-text prefix, e.g. "docstring kind"
    info: dict[str, Any] = field(default_factory=dict)  # provenance and sizes before capping

    def label_counts(self, split: str) -> dict[str, int]:
        """Examples per label in ``split``, every label listed (in ``label_names`` order)."""
        counts = Counter(e.label for e in self.splits[split])
        return {name: counts.get(name, 0) for name in self.label_names}

    def summary(self) -> dict[str, Any]:
        return {
            "task": self.name,
            "labels": list(self.label_names),
            "pair": self.pair,
            "splits": {s: {"examples": len(self.splits[s]), "labels": self.label_counts(s)} for s in SPLIT_NAMES},
        }


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
    """Every split present and non-empty, every label known, pairs consistent."""
    for split in SPLIT_NAMES:
        if not task.splits.get(split):
            raise TaskError(f"task {task.name!r}: the {split} split is empty")
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



def carve_validation(train: list[Example], fraction: float = CARVE_FRACTION, salt: str = "lmforge-finetune"
                     ) -> tuple[list[Example], list[Example]]:
    """(train, validation): the ``ceil(fraction * n)`` examples with the lowest stable hash of
    their text become validation (identical texts hash alike, so they land on the same side);
    both keep their original order."""
    if len(train) < 2:
        raise TaskError(f"cannot carve a validation split out of {len(train)} training example(s)")

    def key(e: Example) -> int:
        return xxhash.xxh64_intdigest(f"{salt}\x00{e.text}\x00{e.text_pair or ''}".encode("utf-8"))

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
        raise TaskError(f"{where}: label {value!r} is not a class (regression tasks are not supported)")
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

