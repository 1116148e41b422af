"""Classification: a label per example (or pair of texts), by the sequence head of encoder
models, GPT, Transformer-XL, XLNet and ELMo (the input layouts of ``finetuning/features.py``),
or text to text for T5, BART and Switch (the label word is the target, scored by rank
classification). Selected on the recipe's ``finetune.metric``; the test split's confusion matrix
is kept; the baselines are the majority label and a bag-of-words logistic regression."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...config import ConfigError
from .. import features
from ..family import SPLITS, WRITTEN, Family, FamilyInputs, scored_as
from ..tasks import Task
from . import baselines


class Classification(Family):
    name = "classification"
    default_metric = "accuracy"  # headline: the task's own metric (GLUE's), else accuracy
    baseline_metrics = {"majority": "", "bag_of_words": ""}

    def mode(self, recipe_mode: str) -> str:
        return recipe_mode  # the sequence head (classification) or the label words (text_to_text)

    def saved_mode(self, mode: str) -> str:
        return mode

    def check(self, task: Task, arch: str, ft: Any, recipe: Path) -> None:
        if ft.metric == "f1" and len(task.label_names) != 2:
            raise ConfigError(f"{recipe}: finetune.metric f1 is the positive label's, for two-label "
                              f"tasks; {task.name} has {len(task.label_names)} labels (use macro_f1)")

    def select(self, task: Task, ft: Any) -> str:
        return ft.metric  # the recipe's

    def encode(self, task: Task, arch: str, tok_dir: Path, max_length: int, mode: str) -> FamilyInputs:
        label_ids = {name: i for i, name in enumerate(task.label_names)}
        encoded = {split: features.encode_split(task, split, arch, tok_dir, max_length, label_ids, mode=mode)
                   for split in SPLITS}
        candidates = None
        if mode == "text_to_text":
            targets = features.label_token_ids(task, arch, tok_dir)
            candidates = {label_ids[name]: ids for name, ids in targets.items()}
        head = WRITTEN if mode == "text_to_text" else "classification"
        return FamilyInputs(encoded, len(task.label_names), head, candidates=candidates)

    def weighted_labels(self, inputs: FamilyInputs, ft: Any) -> list[int] | None:
        if ft.class_weights != "balanced":
            return None
        return [int(e["labels"]) for e in inputs.encoded["train"]]

    def scorer(self, inputs: FamilyInputs, task: Task, split: str, arch: str, tok_dir: Path, collate: Callable):
        from .scorer import split_scorer

        return split_scorer(inputs.encoded[split], collate, scored_as(inputs), inputs.candidates, task.label_names)

    def score_test(self, inputs: FamilyInputs, task: Task, arch: str, tok_dir: Path, collate: Callable, model: Any,
                   device: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        """The test scores, and the test confusion matrix (rows: gold label, columns: predicted)."""
        from ...charts.training import confusion_matrix
        from ..eval_batches import ordered_batches
        from .scorer import predict, prediction_scores

        predicted, gold = predict(model, ordered_batches(inputs.encoded["test"], collate), scored_as(inputs),
                                  inputs.candidates, device=device)
        confusion = {"labels": list(task.label_names), "matrix": confusion_matrix(predicted, gold, inputs.num_labels)}
        return prediction_scores(predicted, gold, task.label_names), {"test_confusion": confusion}

    def baselines(self, task: Task, seed: int) -> dict[str, dict]:
        return {"majority": baselines.majority_baseline(task),
                "bag_of_words": baselines.bag_of_words_baseline(task, seed=seed)}

    def summary(self, metrics: dict[str, Any], select: str) -> str:
        t, b, own = metrics["test"], metrics["baselines"], metrics["metric"]
        return ("test " + (f"{own} {t[own]:.3f}, " if own != "accuracy" else "") + f"accuracy {t['accuracy']:.3f}, "
                f"macro-F1 {t['macro_f1']:.3f} (majority {b['majority']['accuracy']:.3f}, bag of words "
                f"{b['bag_of_words']['accuracy']:.3f})")


FAMILY = Classification()
