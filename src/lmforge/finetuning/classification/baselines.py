"""The baselines every fine-tuned classifier should beat, scored by ``metrics.scores``:

- ``majority_baseline``: always the most frequent train label (ties: the first in
  ``task.label_names``);
- ``bag_of_words_baseline``: counts of lower-cased unigrams and bigrams (scikit-learn's
  ``CountVectorizer``) into a logistic regression, fit on train, scored on test. A pair is one
  text, ``a SEP b`` with a separator word the vectoriser keeps, so bigrams mark the boundary
  (``joined_text``, which the regression baseline joins its pairs with too).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from ..tasks import Example, Task
from .metrics import scores

PAIR_SEPARATOR = "xxsepxx"  # a word CountVectorizer's default token pattern keeps


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
