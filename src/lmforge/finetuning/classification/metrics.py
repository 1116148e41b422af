"""The classification metrics, scikit-learn's: ``accuracy``, ``macro_f1`` (averaged over all of
``task.label_names``, as the fine-tuning evaluation does), ``mcc`` (Matthews correlation) and,
for two labels, ``binary_f1`` of the positive one; ``scores`` gives them all, for the baselines
and the fine-tuned models alike."""

from __future__ import annotations

from collections.abc import Sequence


def accuracy(pred: Sequence, gold: Sequence) -> float:
    """The share of predictions equal to their gold label (``sklearn.metrics.accuracy_score``)."""
    from sklearn.metrics import accuracy_score

    if len(pred) != len(gold):
        raise ValueError(f"accuracy: {len(pred)} predictions for {len(gold)} gold labels")
    if not gold:
        raise ValueError("accuracy: no examples")
    return float(accuracy_score(list(gold), list(pred)))


def macro_f1(pred: Sequence, gold: Sequence, labels: Sequence | None = None) -> float:
    """The unweighted mean over ``labels`` (default: every label in ``gold`` or ``pred``) of each
    label's F1, 0 for a label neither predicted nor true (``sklearn.metrics.f1_score``).

    scikit-learn gives each label's F1; the mean is taken here, in ``labels`` order, because
    ``average="macro"`` sums with NumPy, which can differ from this sum in the last bit."""
    from sklearn.metrics import f1_score

    if len(pred) != len(gold):
        raise ValueError(f"macro_f1: {len(pred)} predictions for {len(gold)} gold labels")
    if not gold:
        raise ValueError("macro_f1: no examples")
    if labels is None:
        labels = sorted(set(gold) | set(pred), key=str)
    if not labels:
        raise ValueError("macro_f1: no labels")
    per_label = f1_score(list(gold), list(pred), labels=list(labels), average=None, zero_division=0).tolist()
    return sum(per_label) / len(per_label)


def mcc(pred: Sequence, gold: Sequence) -> float:
    """Matthews correlation coefficient (``sklearn.metrics.matthews_corrcoef``; its multiclass
    form beyond two labels): GLUE's metric for CoLA-style acceptability, 0 for a constant
    prediction, whatever the class balance."""
    from sklearn.metrics import matthews_corrcoef

    if len(pred) != len(gold):
        raise ValueError(f"mcc: {len(pred)} predictions for {len(gold)} gold labels")
    if not gold:
        raise ValueError("mcc: no examples")
    return float(matthews_corrcoef(list(gold), list(pred)))


def binary_f1(pred: Sequence, gold: Sequence, positive: str) -> float:
    """F1 of the ``positive`` label (``sklearn.metrics.f1_score`` with ``pos_label``; 0 when it is
    neither predicted nor true): GLUE's metric for MRPC / QQP-style paraphrase."""
    from sklearn.metrics import f1_score

    if len(pred) != len(gold):
        raise ValueError(f"binary_f1: {len(pred)} predictions for {len(gold)} gold labels")
    if not gold:
        raise ValueError("binary_f1: no examples")
    labels = sorted(set(gold) | set(pred) | {positive}, key=str)
    per_label = f1_score(list(gold), list(pred), labels=labels, average=None, zero_division=0).tolist()
    return per_label[labels.index(positive)]


def positive_label(labels: Sequence[str]) -> str | None:
    """The positive class of a two-label task: the second of its labels in their order (``1`` of
    GLUE's 0/1, ``true`` of false/true, ...); None for more labels."""
    return labels[1] if len(labels) == 2 else None


def scores(pred: Sequence[str], gold: Sequence[str], labels: Sequence[str] | None = None) -> dict[str, float]:
    """Accuracy, macro-F1 over ``labels`` and the Matthews correlation; for a two-label task
    also ``f1``, the positive label's (``positive_label``)."""
    out = {"accuracy": accuracy(pred, gold), "macro_f1": macro_f1(pred, gold, labels), "mcc": mcc(pred, gold)}
    positive = positive_label(list(labels)) if labels is not None else None
    if positive is not None:
        out["f1"] = binary_f1(pred, gold, positive)
    return out
