"""Baselines a fine-tuned generation model should beat, scored as the model is:

- ``lead_sentence_baseline``: predict the source's first sentence (the "lead" baseline of news
  summarisation; sentences split by ``tasks.docstring_summary.split_sentences``: a sentence ends
  after ``.``, ``!`` or ``?`` followed by whitespace and an uppercase letter, or at the end of
  the text);
- ``copy_input_baseline``: predict the whole source unchanged.

Each returns ``metrics.generation_scores`` of its predictions against the split's
targets, for the metrics that fit the task's ``generation_kind`` (``KIND_METRICS``: ROUGE for
summarization and generic text, BLEU and chrF for translation; exact match always), plus
``"split"`` and ``"examples"``.
"""

from __future__ import annotations

from typing import Any

from .metrics import generation_scores

# the generation_scores metrics of each generation kind (a task without a kind: "text")
KIND_METRICS = {"summarization": ("rouge", "exact_match"), "translation": ("bleu", "exact_match"),
                "qa": ("exact_match",), "text": ("rouge", "exact_match")}


def _pairs(task, split: str) -> tuple[list[str], list[str], tuple[str, ...]]:
    """(sources, targets, metrics) of a generation task's split."""
    if getattr(task, "family", None) != "generation":
        raise ValueError(f"task {task.name!r} is a {task.family} task, not a generation one")
    if split not in task.splits or not task.splits[split]:
        raise ValueError(f"task {task.name!r}: no {split!r} split (has {sorted(task.splits)})")
    kind = task.info.get("generation_kind") or "text"
    if kind not in KIND_METRICS:
        raise ValueError(f"task {task.name!r}: unknown generation_kind {kind!r}; known: {', '.join(KIND_METRICS)}")
    pairs = task.splits[split]
    return [p.source for p in pairs], [p.target for p in pairs], KIND_METRICS[kind]


def _scored(predictions: list[str], targets: list[str], metrics, split: str) -> dict[str, Any]:
    return {**generation_scores(predictions, targets, metrics), "split": split, "examples": len(targets)}


def lead_sentence(text: str) -> str:
    """The first sentence of ``text`` (the whole text, stripped, when it has no sentence end)."""
    from ..tasks.docstring_summary import split_sentences

    found = split_sentences(text)
    return found[0] if found else text.strip()


def lead_sentence_baseline(task, split: str = "test") -> dict[str, Any]:
    """Scores of predicting each source's first sentence."""
    sources, targets, metrics = _pairs(task, split)
    return _scored([lead_sentence(s) for s in sources], targets, metrics, split)


def copy_input_baseline(task, split: str = "test") -> dict[str, Any]:
    """Scores of predicting each source unchanged."""
    sources, targets, metrics = _pairs(task, split)
    return _scored(sources, targets, metrics, split)
