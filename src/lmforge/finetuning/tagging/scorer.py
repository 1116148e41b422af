"""Fine-tuning on a tagging task: the tagging head's predictions scored on entities.

``tagging_scorer`` is the tagging counterpart of ``classification.scorer.split_scorer``: the whole
split is tagged (each word's tag read at its first sub-token, ``features.py``) and
scored as seqeval scores entities (``metrics.py``): entity precision, recall
and F1, and token accuracy. Validation passes keep the numbers only; the final test score also
has the scores per entity type.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from .metrics import entity_scores
from .features import word_tags
from ..tasks import TaggedSentence
from ..eval_batches import batch_logits


def predict_tags(model: torch.nn.Module, encoded: list[dict[str, np.ndarray]], tagged_words: list[list[int]],
                 sentences: list[TaggedSentence], collate: Callable, tag_names: list[str], device="cpu",
                 batch_size: int = 64) -> list[list[str]]:
    """One predicted tag per word of every sentence, in order."""
    out: list[list[str]] = []
    for i, batch, logits in batch_logits(model, encoded, collate, device, batch_size):
        for j, (row, labels) in enumerate(zip(logits.argmax(-1).tolist(), batch["labels"].tolist())):
            s = sentences[i + j]
            out.append(word_tags(row, labels, tagged_words[i + j], len(s.words), tag_names))
    return out


def tagging_scorer(encoded: list[dict[str, np.ndarray]], tagged_words: list[list[int]],
                   sentences: list[TaggedSentence], collate: Callable, tag_names: list[str], *,
                   per_type: bool = False) -> Callable[[torch.nn.Module, Any], dict[str, Any]]:
    """``evaluate(model, device)``: the entity scores of the model's tags on ``sentences``
    (``per_type``: with the scores per entity type)."""

    def evaluate(model: torch.nn.Module, device) -> dict[str, Any]:
        predicted = predict_tags(model, encoded, tagged_words, sentences, collate, tag_names, device=device)
        return sentence_scores(predicted, sentences, per_type=per_type)

    return evaluate


def sentence_scores(predicted: list[list[str]], sentences: list[TaggedSentence], *, per_type: bool = False
                    ) -> dict[str, Any]:
    """The entity scores of ``predicted`` tags against the sentences' own, with ``examples``
    (``per_type``: the scores per entity type too)."""
    scores = entity_scores(predicted, [list(s.tags) for s in sentences])
    if not per_type:
        scores.pop("per_type")
    return {**scores, "examples": len(sentences)}
