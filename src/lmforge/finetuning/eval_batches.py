"""Running a model over encoded examples for scoring: in evaluation mode (restored afterwards),
without gradients, ``batch_size`` examples at a time in their order (``ordered_batches``: the
collated batches alone)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np
import torch


@contextmanager
def evaluating(model: torch.nn.Module) -> Iterator[torch.nn.Module]:
    """``model`` in evaluation mode (no dropout) inside the block, its own mode again after."""
    was_training = model.training
    model.eval()
    try:
        yield model
    finally:
        model.train(was_training)


@torch.no_grad()
def batch_logits(model: torch.nn.Module, encoded: list[dict[str, np.ndarray]], collate: Callable, device="cpu",
                 batch_size: int = 64) -> Iterator[tuple[int, dict[str, torch.Tensor], torch.Tensor]]:
    """(index of the batch's first example, the batch on ``device``, the model's logits) for
    every ``batch_size`` examples of ``encoded``, the labels kept out of the model's inputs."""
    with evaluating(model):
        for i in range(0, len(encoded), batch_size):
            batch = {k: v.to(device) for k, v in collate(encoded[i:i + batch_size]).items()}
            yield i, batch, model(**{k: v for k, v in batch.items() if k != "labels"}).logits


def ordered_batches(examples: list[dict[str, np.ndarray]], collate: Callable, size: int = 64) -> Iterator[dict]:
    """The examples in order, ``size`` at a time (no DataLoader: nothing here draws random numbers)."""
    for i in range(0, len(examples), size):
        yield collate(examples[i:i + size])
