"""Sequence-labelling (tagging) metrics: entity-level scores of BIO tags, as seqeval gives them.

``entity_scores`` takes one list of tags per sentence (``"O"``, ``"B-PER"``, ``"I-LOC"``, ...)
and scores entities, not tags: an entity counts as found only when its type and its first and
last word are all right, so a partly found entity is one false positive and one false negative.
The entities are read by seqeval's default mode, the conlleval-compatible one: an ``I-X`` after
``O``, at the start or after another type opens an entity, so IOB1 and IOB2 tags give the same
entities (``tasks.tagging_files.to_iob2`` rewrites IOB1 files as strict IOB2 while reading).
The numbers are seqeval's own:

- ``precision``, ``recall``, ``f1``: micro averages over all entities of all types
  (``seqeval.metrics.precision_score`` / ``recall_score`` / ``f1_score``), 0 where undefined
  (no predicted or no gold entity), fractions in [0, 1];
- ``per_type``: the same three and ``support`` (gold entities of that type) for every type that is
  gold or predicted (``seqeval.metrics.classification_report`` with ``output_dict=True``);
- ``token_accuracy``: the share of words whose predicted tag equals the gold tag, in [0, 1];
- ``entities`` / ``predicted_entities``: how many entities gold / the prediction has;
  ``sentences``: how many sentences were scored.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

_AVERAGES = ("micro avg", "macro avg", "weighted avg")


def _check_sentences(pred: Sequence[Sequence[str]], gold: Sequence[Sequence[str]]) -> None:
    if len(pred) != len(gold):
        raise ValueError(f"entity_scores: {len(pred)} predicted sentences for {len(gold)} gold sentences")
    if not gold:
        raise ValueError("entity_scores: no sentences")
    for i, (p, g) in enumerate(zip(pred, gold)):
        if isinstance(p, str) or isinstance(g, str):
            raise ValueError(f"entity_scores: sentence {i} is a string, not a list of tags (one list per sentence)")
        if len(p) != len(g):
            raise ValueError(f"entity_scores: sentence {i} has {len(p)} predicted tags for {len(g)} gold tags")


def entity_scores(pred: Sequence[Sequence[str]], gold: Sequence[Sequence[str]]) -> dict[str, Any]:
    """Entity-level micro precision / recall / F1, per-type scores, token accuracy and counts of
    ``pred`` against ``gold`` (one tag list per sentence; see the module docstring). Plain Python
    floats and ints. Raises ValueError when the sentence counts differ, there are none, a
    sentence's tag counts differ (naming its index) or there are no tags at all."""
    from seqeval.metrics import classification_report, f1_score, precision_score, recall_score
    from seqeval.metrics.sequence_labeling import get_entities

    _check_sentences(pred, gold)
    y_true = [list(g) for g in gold]
    y_pred = [list(p) for p in pred]
    words = sum(len(g) for g in y_true)
    if words == 0:
        raise ValueError("entity_scores: every sentence is empty, no tags to score")
    # zero_division=0: seqeval's value where a score is undefined anyway, without its warning
    report = classification_report(y_true, y_pred, output_dict=True, zero_division=0)
    per_type = {
        str(name): {
            "precision": float(row["precision"]),
            "recall": float(row["recall"]),
            "f1": float(row["f1-score"]),
            "support": int(row["support"]),
        }
        for name, row in report.items()
        if name not in _AVERAGES
    }
    return {
        "precision": float(precision_score(y_true, y_pred, zero_division=0)),
        "recall": float(recall_score(y_true, y_pred, zero_division=0)),
        "f1": float(f1_score(y_true, y_pred, zero_division=0)),
        "token_accuracy": sum(p == g for ps, gs in zip(y_pred, y_true) for p, g in zip(ps, gs)) / words,
        # per sentence: get_entities on a list of sentences would join them
        "entities": sum(len(get_entities(g)) for g in y_true),
        "predicted_entities": sum(len(get_entities(p)) for p in y_pred),
        "sentences": len(y_true),
        "per_type": per_type,
    }
