"""``lmforge predict``: a fine-tuned model's label for new text, with its probability.

The text (and its pair, for a pair task) is encoded exactly as fine-tuning encoded its examples
(``finetuning.features.encode_examples`` with the task record's prefix and input length). A
classifier's probabilities are the softmax of its logits; a text-to-text model scores each
label's target sequence (rank classification, as its evaluation) and the probabilities are the
softmax of those log-likelihoods over the labels.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from .loading import InferenceError, LoadedModel


@dataclass
class Prediction:
    label: str
    score: float  # the label's probability
    scores: dict[str, float]  # every label's


def check_classifier(loaded: LoadedModel) -> dict:
    task = loaded.task
    if not task:
        raise InferenceError(f"{loaded.directory}: a pretrained model, not a fine-tuned one; predict needs a model from "
                             "`lmforge finetune` (e.g. models/<arch>/<task>)")
    for key in ("labels", "mode", "prefix", "max_length"):
        if key not in task:
            raise InferenceError(f"{loaded.directory}: its task record has no {key!r}; fine-tune the model again")
    if task["mode"] not in ("classification", "text_to_text"):
        raise InferenceError(f"{loaded.directory}: a {task['mode']} model; `lmforge predict` labels texts with "
                             "classification models (a generation model writes with `lmforge generate`)")
    return task


def predict(loaded: LoadedModel, texts: Sequence[str], pairs: Sequence[str | None] | None = None,
            batch_size: int = 32) -> list[Prediction]:
    from ..finetuning.features import FeatureError, collate, encode_examples
    from ..finetuning.tasks import Example
    from ..models.generation import candidate_scores

    task = check_classifier(loaded)
    pairs = list(pairs) if pairs is not None else [None] * len(texts)
    if len(pairs) != len(texts):
        raise InferenceError(f"{len(texts)} texts but {len(pairs)} pairs")
    if any(not str(t).strip() for t in texts):
        raise InferenceError("empty text: every row needs a text")
    if task.get("pair") and any(p is None for p in pairs):
        raise InferenceError("this model was fine-tuned on text pairs: give each text its pair (the text_pair column)")
    if not task.get("pair") and any(p is not None for p in pairs):
        raise InferenceError("this model was fine-tuned on single texts: give no pair")
    labels = task["labels"]
    try:
        rows = encode_examples([Example(str(t), p, "") for t, p in zip(texts, pairs)], loaded.arch,
                               loaded.tokenizer.directory, task["max_length"], {"": 0}, prefix=task["prefix"],
                               mode="classification")
    except FeatureError as exc:
        raise InferenceError(str(exc)) from exc
    for r in rows:
        r.pop("labels")
    pad = loaded.vocab.pad if loaded.vocab.pad is not None else 0
    candidates = {int(k): v for k, v in task["targets"].items()} if task["mode"] == "text_to_text" else None
    out: list[Prediction] = []
    with torch.inference_mode():
        for b in range(0, len(rows), batch_size):
            batch = collate(rows[b:b + batch_size], pad)
            if candidates is None:
                scores = loaded.model(**batch).logits.float()
            else:
                scores = candidate_scores(loaded.model, batch["input_ids"], batch["attention_mask"], candidates)
            probs = scores.softmax(-1)
            for row in probs.tolist():
                best = max(range(len(row)), key=row.__getitem__)
                out.append(Prediction(labels[best], row[best], dict(zip(labels, row))))
    return out
