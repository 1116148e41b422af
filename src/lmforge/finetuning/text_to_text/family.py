"""Tagging and span QA written as text, for an architecture whose recipe fine-tunes text to text
(T5, BART and Switch by default): the family's own task, baselines, selection metric and summary,
but the examples as source/target pairs (``pairs.py``), the model's pretraining head, and what it
writes read back into answers or tags and scored by the family's metric (``scorer.py``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..family import Family, FamilyInputs
from ..generation.family import check_writes, encode_written
from ..tasks import Task
from .pairs import as_pairs, text_prefix


class Written(Family):
    """``family`` (tagging or span QA) written as text."""

    def __init__(self, family: Family):
        self.family = family
        self.name = family.name
        self.select_prefix = family.select_prefix

    def mode(self, recipe_mode: str) -> str:
        return "text_to_text"

    def check(self, task: Task, arch: str, ft: Any, recipe: Path) -> None:
        check_writes(task, arch)
        self.family.check(task, arch, ft, recipe)

    def select(self, task: Task, ft: Any) -> str:
        return self.family.select(task, ft)

    def encode(self, task: Task, arch: str, tok_dir: Path, max_length: int, mode: str) -> FamilyInputs:
        return encode_written(as_pairs(task), text_prefix(task), arch, tok_dir, max_length)

    def scorer(self, inputs: FamilyInputs, task: Task, split: str, arch: str, tok_dir: Path, collate: Callable):
        from .scorer import text_to_text_scorer

        test = split == "test"
        return text_to_text_scorer(arch, inputs.extra[split], task, split, collate, tok_dir, per_type=test,
                                   samples=5 if test else 0)

    def baselines(self, task: Task, seed: int) -> dict[str, dict]:
        return self.family.baselines(task, seed)

    def summary(self, metrics: dict[str, Any], select: str) -> str:
        return self.family.summary(metrics, select)
