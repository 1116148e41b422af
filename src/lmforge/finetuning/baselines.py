"""Baselines every fine-tuned model should beat, and the metrics they are scored with.

- ``majority_baseline``: always the most frequent train label (ties: the first in
  ``task.label_names``);
- ``bag_of_words_baseline``: counts of lower-cased unigrams and bigrams (scikit-learn's
  ``CountVectorizer``) into a logistic regression, fit on train, scored on test. A pair is one
  text, ``a SEP b`` with a separator word the vectoriser keeps, so bigrams mark the boundary.

The metrics are scikit-learn's: ``accuracy``, ``macro_f1`` (averaged over all of
``task.label_names``, as the fine-tuning evaluation does), ``mcc`` (Matthews correlation) and,
for two labels, ``f1`` of the positive one; ``scores`` gives them all, for the baselines and the
fine-tuned models alike.

A regression task's baselines are ``mean_baseline`` (the training targets' mean for every
example: no correlation, its MSE the spread of the targets) and ``bag_of_words_regression_baseline``
(the same counts into a ridge regression), scored on Pearson, Spearman and MSE
(``metrics.regression.correlations``, SciPy's).

A tagging task's baseline is ``most_frequent_tag_baseline``: each word gets the tag it had most
often in training (``O`` for a word never seen there), scored on entities as the models are
(``metrics.tagging.entity_scores``, seqeval's).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from .tasks import Example, Task

OUTSIDE = "O"

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


def majority_label(task: Task) -> str:
    counts = Counter(e.label for e in task.splits["train"])
    return max(task.label_names, key=lambda name: (counts.get(name, 0), -task.label_names.index(name)))


def majority_baseline(task: Task, split: str = "test") -> dict[str, Any]:
    """The ``scores`` on ``split`` of predicting the most frequent train label."""
    label = majority_label(task)
    gold = [e.label for e in task.splits[split]]
    return {**scores([label] * len(gold), gold, task.label_names), "prediction": label, "split": split, "examples": len(gold)}


def joined_text(example: Example) -> str:
    if example.text_pair is None:
        return example.text
    return f"{example.text} {PAIR_SEPARATOR} {example.text_pair}"


def bag_of_words_baseline(task: Task, seed: int = 0, split: str = "test") -> dict[str, Any]:
    """The ``scores`` on ``split`` of unigram + bigram counts -> logistic regression."""
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


def most_frequent_tag_baseline(task: Task, split: str = "test") -> dict[str, Any]:
    """Entity scores on ``split`` of tagging each word with its most frequent training tag
    (ties: the first in ``task.label_names``; a word unseen in training: ``O``)."""
    from .metrics.tagging import entity_scores

    counts: dict[str, Counter] = {}
    for sentence in task.splits["train"]:
        for word, tag in zip(sentence.words, sentence.tags):
            counts.setdefault(word, Counter())[tag] += 1
    order = {name: i for i, name in enumerate(task.label_names)}

    def tag_of(word: str) -> str:
        seen = counts.get(word)
        if not seen:
            return OUTSIDE
        return max(seen, key=lambda tag: (seen[tag], -order.get(tag, len(order))))

    sentences = task.splits[split]
    scores = entity_scores([[tag_of(w) for w in s.words] for s in sentences], [list(s.tags) for s in sentences])
    return {**scores, "split": split, "examples": len(sentences), "words_seen_in_train": len(counts)}


def mean_baseline(task: Task, split: str = "test") -> dict[str, Any]:
    """The regression scores on ``split`` of predicting the training targets' mean everywhere
    (a constant: both correlations 0 by ``correlations``' rule)."""
    from .metrics.regression import correlations

    train = [float(e.label) for e in task.splits["train"]]
    mean = sum(train) / len(train)
    gold = [float(e.label) for e in task.splits[split]]
    return {**correlations([mean] * len(gold), gold), "prediction": mean, "split": split}


def bag_of_words_regression_baseline(task: Task, seed: int = 0, split: str = "test") -> dict[str, Any]:
    """The regression scores on ``split`` of unigram + bigram counts -> ridge regression (a pair
    as one text, as ``bag_of_words_baseline`` joins it)."""
    from sklearn.feature_extraction.text import CountVectorizer
    from sklearn.linear_model import Ridge

    from .metrics.regression import correlations

    vectorizer = CountVectorizer(ngram_range=(1, 2), lowercase=True)
    x_train = vectorizer.fit_transform([joined_text(e) for e in task.splits["train"]])
    model = Ridge(alpha=1.0, random_state=seed)
    model.fit(x_train, [float(e.label) for e in task.splits["train"]])
    pred = model.predict(vectorizer.transform([joined_text(e) for e in task.splits[split]])).tolist()
    gold = [float(e.label) for e in task.splits[split]]
    return {**correlations(pred, gold), "split": split, "features": len(vectorizer.vocabulary_)}
