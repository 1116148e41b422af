"""Baselines every fine-tuned model should beat, and the metrics they are scored with.

- ``majority_baseline``: always the most frequent train label (ties: the first in
  ``task.label_names``);
- ``bag_of_words_baseline``: counts of lower-cased unigrams and bigrams (scikit-learn's
  ``CountVectorizer``) into a logistic regression, fit on train, scored on test. A pair is one
  text, ``a SEP b`` with a separator word the vectoriser keeps, so bigrams mark the boundary.

``accuracy`` and ``macro_f1`` are scikit-learn's; the baselines average F1 over all of
``task.label_names``, as the fine-tuning evaluation does.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from .tasks import Example, Task

PAIR_SEPARATOR = "xxsepxx"  # a word CountVectorizer's default token pattern keeps


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


def scores(pred: Sequence[str], gold: Sequence[str], labels: Sequence[str] | None = None) -> dict[str, float]:
    return {"accuracy": accuracy(pred, gold), "macro_f1": macro_f1(pred, gold, labels)}


def majority_label(task: Task) -> str:
    counts = Counter(e.label for e in task.splits["train"])
    return max(task.label_names, key=lambda name: (counts.get(name, 0), -task.label_names.index(name)))


def majority_baseline(task: Task, split: str = "test") -> dict[str, Any]:
    """Accuracy and macro F1 on ``split`` of predicting the most frequent train label."""
    label = majority_label(task)
    gold = [e.label for e in task.splits[split]]
    return {**scores([label] * len(gold), gold, task.label_names), "prediction": label, "split": split, "examples": len(gold)}


def joined_text(example: Example) -> str:
    if example.text_pair is None:
        return example.text
    return f"{example.text} {PAIR_SEPARATOR} {example.text_pair}"


def bag_of_words_baseline(task: Task, seed: int = 0, split: str = "test") -> dict[str, Any]:
    """Accuracy and macro F1 on ``split`` of unigram + bigram counts -> logistic regression."""
    from sklearn.feature_extraction.text import CountVectorizer
    from sklearn.linear_model import LogisticRegression

    train = task.splits["train"]
    gold = [e.label for e in task.splits[split]]
    if len({e.label for e in train}) < 2:  # nothing to learn: the classifier needs two classes
        result = majority_baseline(task, split)
        return {**result, "note": "one label in train: majority prediction"}
    vectorizer = CountVectorizer(ngram_range=(1, 2), lowercase=True)
    x_train = vectorizer.fit_transform([joined_text(e) for e in train])
    model = LogisticRegression(max_iter=2000, random_state=seed)
    model.fit(x_train, [e.label for e in train])
    pred = list(model.predict(vectorizer.transform([joined_text(e) for e in task.splits[split]])))
    return {**scores(pred, gold, task.label_names), "split": split, "examples": len(gold), "features": len(vectorizer.vocabulary_)}
