"""Scoring a classifier on a split: the sequence head's most likely class, or, for T5, BART and
Switch fine-tuned text to text, the label whose target sequence the model finds most likely
(rank classification: each candidate scored by its summed token log-likelihood). The predicted
class ids are scored against the gold ones by ``metrics.scores``; the validation passes during
training and the final test score both use :func:`predict`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from ...models.generation import candidate_scores
from ...objectives.base import IGNORE_INDEX
from ..eval_batches import evaluating, ordered_batches
from . import metrics


@torch.no_grad()
def predict(model: torch.nn.Module, batches, mode: str, candidates: dict[int, list[int]] | None = None,
            device="cpu") -> tuple[list[int], list[int]]:
    """(predicted class ids, gold class ids). Text-to-text: each candidate target sequence is
    scored by its summed token log-likelihood and the most likely label is predicted."""
    preds: list[int] = []
    gold: list[int] = []
    with evaluating(model):
        for batch in batches:
            batch = {k: v.to(device) for k, v in batch.items()}
            if mode == "classification":
                logits = model(**{k: v for k, v in batch.items() if k != "labels"}).logits
                preds += logits.argmax(-1).tolist()
                gold += batch["labels"].tolist()
                continue
            gold += _gold_from_targets(batch["labels"], candidates)
            scores = candidate_scores(model, batch["input_ids"], batch["attention_mask"], candidates)
            order = sorted(candidates)
            preds += [order[i] for i in scores.argmax(-1).tolist()]
    return preds, gold


def _gold_from_targets(labels: torch.Tensor, candidates: dict[int, list[int]]) -> list[int]:
    out = []
    by_target = {tuple(t): cid for cid, t in candidates.items()}
    for row in labels.tolist():
        key = tuple(x for x in row if x != IGNORE_INDEX)
        if key not in by_target:
            raise ValueError(f"a target sequence {key} is not one of the label targets")
        out.append(by_target[key])
    return out


def prediction_scores(preds: list[int], gold: list[int], label_names: list[str]) -> dict[str, float]:
    """Predicted against gold class ids: accuracy, macro-F1, Matthews correlation and, for two
    labels, the positive label's F1 (``metrics.scores``, the baselines' own)."""
    p, g = [label_names[i] for i in preds], [label_names[i] for i in gold]
    return {**metrics.scores(p, g, label_names), "examples": len(g)}


def split_scorer(examples: list[dict[str, np.ndarray]], collate: Callable, mode: str,
                 candidates: dict[int, list[int]] | None, label_names: list[str]
                 ) -> Callable[[torch.nn.Module, Any], dict[str, float]]:
    """``evaluate(model, device)``: the :func:`prediction_scores` of :func:`predict` on ``examples``."""

    def evaluate(model: torch.nn.Module, device) -> dict[str, float]:
        return prediction_scores(*predict(model, ordered_batches(examples, collate), mode, candidates, device=device),
                                 label_names)

    return evaluate
