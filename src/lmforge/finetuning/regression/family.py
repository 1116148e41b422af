"""Regression (STS-B-style similarity): the sequence head with one output, trained on the mean
squared error over ``finetuning/features.py``'s inputs; scored and selected on Pearson (Spearman
and MSE beside it) against the training mean and a bag-of-words ridge regression."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import features
from ..family import SPLITS, Family, FamilyInputs
from ..tasks import Task
from . import baselines


class Regression(Family):
    name = "regression"
    headline_metric = "pearson"
    baseline_metrics = {"mean": "pearson", "bag_of_words": "pearson"}

    def encode(self, task: Task, arch: str, tok_dir: Path, max_length: int, mode: str) -> FamilyInputs:
        encoded = {split: features.encode_split(task, split, arch, tok_dir, max_length, {}, mode="regression")
                   for split in SPLITS}
        return FamilyInputs(encoded, 1, "classification")  # the sequence head, one output: mean squared error

    def scorer(self, inputs: FamilyInputs, task: Task, split: str, arch: str, tok_dir: Path, collate: Callable):
        from .scorer import regression_scorer

        return regression_scorer(inputs.encoded[split], collate)

    def baselines(self, task: Task, seed: int) -> dict[str, dict]:
        return {"mean": baselines.mean_baseline(task),
                "bag_of_words": baselines.bag_of_words_regression_baseline(task, seed=seed)}

    def summary(self, metrics: dict[str, Any], select: str) -> str:
        t, b = metrics["test"], metrics["baselines"]
        w = b["bag_of_words"]
        return (f"test Pearson {t['pearson']:.3f}, Spearman {t['spearman']:.3f}, MSE {t['mse']:.3f} (bag of words: "
                f"Pearson {w['pearson']:.3f}, Spearman {w['spearman']:.3f}; the mean: MSE {b['mean']['mse']:.3f})")


FAMILY = Regression()
