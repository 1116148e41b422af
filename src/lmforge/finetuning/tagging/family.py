"""Tagging (NER-style): the tagging head (``models/token_classification.py``) reads each word's
tag at its first sub-token (``features.py``); scored and selected on seqeval's entity F1
(``metrics.py``), per entity type too on the test split, against each word's most frequent
training tag (``baselines.py``). T5, BART and Switch write the entities as text instead
(``text_to_text/``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..family import SPLITS, Family, FamilyInputs
from ..tasks import Task
from .baselines import most_frequent_tag_baseline
from .features import encode_tagged


class Tagging(Family):
    name = "tagging"
    select_prefix = "entity "
    headline_metric = "f1"
    baseline_metrics = {"most_frequent_tag": "f1"}

    def encode(self, task: Task, arch: str, tok_dir: Path, max_length: int, mode: str) -> FamilyInputs:
        tag_ids = {name: i for i, name in enumerate(task.label_names)}
        encoded: dict[str, list] = {}
        extra: dict[str, Any] = {}
        for split in SPLITS:
            encoded[split], extra[split] = encode_tagged(task.splits[split], arch, tok_dir, max_length, tag_ids,
                                                         prefix=task.prefix)
        return FamilyInputs(encoded, len(task.label_names), "token_classification", extra)

    def weighted_labels(self, inputs: FamilyInputs, ft: Any) -> list[int] | None:
        if ft.tag_weights != "balanced":
            return None
        return [t for e in inputs.encoded["train"] for t in e["labels"].tolist() if t >= 0]  # labelled positions

    def scorer(self, inputs: FamilyInputs, task: Task, split: str, arch: str, tok_dir: Path, collate: Callable):
        from .scorer import tagging_scorer

        return tagging_scorer(inputs.encoded[split], inputs.extra[split], task.splits[split], collate,
                              task.label_names, per_type=split == "test")

    def baselines(self, task: Task, seed: int) -> dict[str, dict]:
        return {"most_frequent_tag": most_frequent_tag_baseline(task)}

    def summary(self, metrics: dict[str, Any], select: str) -> str:
        t, b = metrics["test"], metrics["baselines"]
        return (f"test entity F1 {t['f1']:.3f} (precision {t['precision']:.3f}, recall {t['recall']:.3f}), token "
                f"accuracy {t['token_accuracy']:.3f} (most frequent tag: entity F1 {b['most_frequent_tag']['f1']:.3f})")


FAMILY = Tagging()
