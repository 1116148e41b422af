"""The headline of a fine-tuned result, by task family: the one number a task is judged on, and
the baselines it must beat on that number (each family's ``headline_metric``, ``default_metric``
and ``baseline_metrics``, ``family.Family``):

- classification: the task's own metric (``result["metric"]``: accuracy, or GLUE's: the Matthews
  correlation for CoLA, the positive label's F1 for MRPC and QQP), against the majority class and
  the bag-of-words classifier;
- regression: test Pearson correlation, against the training mean (0 by definition) and the
  bag-of-words ridge regression;
- tagging: test entity F1 (seqeval's), against each word's most frequent training tag;
- span_qa: test F1 (SQuAD's token F1), against the sliding-window word-overlap baseline;
- generation: the task's own metric (``result["metric"]``: ROUGE-L for summaries, BLEU for
  translation, exact match for closed-book QA), against the lead sentence and the copied input.

``result`` is a fine-tuning ``metrics.json`` (or the evaluate stage's entry for one task): its
``family`` (classification when absent, as results written before the families were), its
``test`` scores and its ``baselines``.
"""

from __future__ import annotations

from typing import Any

from .families import FAMILIES_BY_NAME

# family -> (the metric, {baseline name: the baseline's metric}), each family's own
# (``Family.headline_metric``, ``baseline_metrics``); "": the result's own metric
# (``result["metric"]``, else the family's ``default_metric``)
HEADLINES: dict[str, tuple[str, dict[str, str]]] = {
    name: (family.headline_metric, dict(family.baseline_metrics)) for name, family in FAMILIES_BY_NAME.items()}
DEFAULT_METRICS = {name: family.default_metric for name, family in FAMILIES_BY_NAME.items() if family.default_metric}


def family_of(result: dict[str, Any]) -> str:
    return result.get("family") or "classification"


def headline_metric(result: dict[str, Any]) -> str:
    family = family_of(result)
    return HEADLINES[family][0] or result.get("metric") or DEFAULT_METRICS[family]


def headline(result: dict[str, Any] | None, split: str = "test") -> float | None:
    """The result's headline metric on ``split`` (None when missing)."""
    if not result:
        return None
    value = (result.get(split) or {}).get(headline_metric(result))
    return None if value is None else float(value)


def control_headline(result: dict[str, Any]) -> float | None:
    """The from-scratch control's test value of the result's headline metric (its ``scratch``
    entry has neither family nor metric of its own), or None."""
    scratch = result.get("scratch")
    if not isinstance(scratch, dict):
        return None
    return headline({**scratch, "family": family_of(result), "metric": result.get("metric")})


def baseline_headlines(result: dict[str, Any]) -> dict[str, float]:
    """Each baseline's value of the headline metric (those present)."""
    out = {}
    for name, metric in HEADLINES[family_of(result)][1].items():
        value = ((result.get("baselines") or {}).get(name) or {}).get(metric or headline_metric(result))
        if value is not None:
            out[name] = float(value)
    return out
