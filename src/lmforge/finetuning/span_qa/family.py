"""Extractive question answering (SQuAD-style): the span head (``models/token_classification.py``)
over the windows of each question's context (``features.py``), the best span across them;
scored and selected on SQuAD's token F1 (exact match beside it, ``metrics.py``) against the
sliding window of context words closest to the question (``baselines.py``). T5, BART and Switch
write the answer as text instead (``text_to_text/``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...config import ConfigError
from ..family import SPLITS, Family, FamilyInputs
from ..tasks import Task
from .baselines import sliding_window_baseline
from .features import encode_questions


class SpanQA(Family):
    name = "span_qa"
    headline_metric = "f1"
    baseline_metrics = {"sliding_window": "f1"}

    def encode(self, task: Task, arch: str, tok_dir: Path, max_length: int, mode: str) -> FamilyInputs:
        encoded: dict[str, list] = {}
        extra: dict[str, Any] = {}
        for split in SPLITS:
            encoded[split], *extra[split] = encode_questions(task.splits[split], arch, tok_dir, max_length,
                                                             prefix=task.prefix, train=split == "train")
        if not encoded["train"]:
            raise ConfigError(f"{task.name}: no training window holds its answer at max_length {max_length}")
        return FamilyInputs(encoded, 2, "span_extraction", extra)

    def scorer(self, inputs: FamilyInputs, task: Task, split: str, arch: str, tok_dir: Path, collate: Callable):
        from .scorer import span_scorer

        return span_scorer(inputs.encoded[split], *inputs.extra[split], task.splits[split], collate)

    def baselines(self, task: Task, seed: int) -> dict[str, dict]:
        return {"sliding_window": sliding_window_baseline(task)}

    def summary(self, metrics: dict[str, Any], select: str) -> str:
        t, w = metrics["test"], metrics["baselines"]["sliding_window"]
        return (f"test exact match {t['exact_match']:.3f}, F1 {t['f1']:.3f} (sliding window: exact match "
                f"{w['exact_match']:.3f}, F1 {w['f1']:.3f})")


FAMILY = SpanQA()
