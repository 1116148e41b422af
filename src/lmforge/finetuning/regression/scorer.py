"""Fine-tuning on a regression task (STS-B-style similarity): the one-output head's values scored
by their Pearson and Spearman correlations with the gold targets (``metrics.py``,
SciPy's) and their mean squared error."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from .metrics import correlations
from ..eval_batches import batch_logits


def predict_values(model: torch.nn.Module, encoded: list[dict[str, np.ndarray]], collate: Callable, device="cpu",
                   batch_size: int = 64) -> tuple[list[float], list[float]]:
    """(predicted values, gold targets) of every example, in order."""
    predicted: list[float] = []
    gold: list[float] = []
    for _, batch, logits in batch_logits(model, encoded, collate, device, batch_size):
        predicted += logits.float().reshape(-1).tolist()
        gold += batch["labels"].float().reshape(-1).tolist()
    return predicted, gold


def regression_scorer(encoded: list[dict[str, np.ndarray]], collate: Callable) -> Callable[[torch.nn.Module, Any], dict]:
    """``evaluate(model, device)``: Pearson, Spearman and MSE of the model's values on ``encoded``."""

    def evaluate(model: torch.nn.Module, device) -> dict[str, Any]:
        return correlations(*predict_values(model, encoded, collate, device=device))

    return evaluate
