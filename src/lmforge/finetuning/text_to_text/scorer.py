"""Fine-tuning a tagging or span QA task text to text (``pairs.py``):
the model writes each example's answer or entity list (greedy search), which is read back into
answers or tags and scored by the family's own metric: SQuAD's exact match and F1, seqeval's
entity scores."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..span_qa.metrics import squad_scores
from ..tasks import Task
from .pairs import entity_types, tags_from_text
from ..generation.scorer import write
from ..tagging.scorer import sentence_scores


def text_to_text_scorer(arch: str, prompts: list[dict[str, np.ndarray]], task: Task, split: str, collate: Callable,
                        tokenizer_dir: str | Path, *, per_type: bool = False, samples: int = 0
                        ) -> Callable[[torch.nn.Module, Any], dict[str, Any]]:
    """``evaluate(model, device)``: the family's scores of what the model writes for ``split``
    (``per_type``: tagging's scores per entity type; ``samples``: the first few outputs)."""
    examples = task.splits[split]
    types = entity_types(task) if task.family == "tagging" else []

    def evaluate(model: torch.nn.Module, device) -> dict[str, Any]:
        written = write(model, arch, prompts, collate, tokenizer_dir, device=device)
        if task.family == "span_qa":
            scores: dict[str, Any] = squad_scores(written, [[a.text for a in q.answers] for q in examples])
        else:
            scores = sentence_scores([tags_from_text(w, s.words, types) for w, s in zip(written, examples)], examples,
                                     per_type=per_type)
        if samples:
            scores["samples"] = [{"id": e.id, "written": w} for e, w in zip(examples[:samples], written)]
        return scores

    return evaluate
