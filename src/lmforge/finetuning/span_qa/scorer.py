"""Fine-tuning on an extractive-QA task: the span head's start and end scores over every window
of a question's context, the best span (``features.py``) taken across its
windows, and the answers scored by SQuAD's rule (``metrics.py``: exact match
and token F1 after normalisation, the best over the gold answers)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from .metrics import squad_scores
from .features import Window, best_span, span_text
from ..tasks import SpanQuestion
from ..eval_batches import batch_logits

MAX_ANSWER_TOKENS = 30


def predict_answers(model: torch.nn.Module, encoded: list[dict[str, np.ndarray]], windows: list[Window],
                    spans: list[list[tuple[int, int]]], questions: list[SpanQuestion], collate: Callable,
                    device="cpu", batch_size: int = 64) -> list[str]:
    """The predicted answer text of every question (the best span over its windows; "" when
    none of its windows holds context)."""
    best: dict[int, tuple[float, int, int]] = {}
    for i, _, logits in batch_logits(model, encoded, collate, device, batch_size):
        for j, row in enumerate(logits.float().cpu().numpy()):
            w = windows[i + j]
            found = best_span(row[:, 0], row[:, 1], w, MAX_ANSWER_TOKENS)
            if found is not None and (w.question not in best or found[0] > best[w.question][0]):
                best[w.question] = found
    return [span_text(q.context, spans[qi], *best[qi][1:]) if qi in best else "" for qi, q in enumerate(questions)]


def span_scorer(encoded: list[dict[str, np.ndarray]], windows: list[Window], spans: list[list[tuple[int, int]]],
                questions: list[SpanQuestion], collate: Callable) -> Callable[[torch.nn.Module, Any], dict[str, Any]]:
    """``evaluate(model, device)``: exact match and F1 of the model's answers to ``questions``."""

    def evaluate(model: torch.nn.Module, device) -> dict[str, Any]:
        answers = predict_answers(model, encoded, windows, spans, questions, collate, device=device)
        return squad_scores(answers, [[a.text for a in q.answers] for q in questions])

    return evaluate
