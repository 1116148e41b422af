"""A regression task's baselines: ``mean_baseline`` (the training targets' mean for every
example: no correlation, its MSE the spread of the targets) and
``bag_of_words_regression_baseline`` (the classification baseline's counts into a ridge
regression), scored on Pearson, Spearman and MSE (``metrics.correlations``, SciPy's)."""

from __future__ import annotations

from typing import Any

from ..classification.baselines import joined_text
from ..tasks import Task


def mean_baseline(task: Task, split: str = "test") -> dict[str, Any]:
    """The regression scores on ``split`` of predicting the training targets' mean everywhere
    (a constant: both correlations 0 by ``correlations``' rule)."""
    from .metrics import correlations

    train = [float(e.label) for e in task.splits["train"]]
    mean = sum(train) / len(train)
    gold = [float(e.label) for e in task.splits[split]]
    return {**correlations([mean] * len(gold), gold), "prediction": mean, "split": split}


def bag_of_words_regression_baseline(task: Task, seed: int = 0, split: str = "test") -> dict[str, Any]:
    """The regression scores on ``split`` of unigram + bigram counts -> ridge regression (a pair
    as one text, as ``bag_of_words_baseline`` joins it)."""
    from sklearn.feature_extraction.text import CountVectorizer
    from sklearn.linear_model import Ridge

    from .metrics import correlations

    vectorizer = CountVectorizer(ngram_range=(1, 2), lowercase=True)
    x_train = vectorizer.fit_transform([joined_text(e) for e in task.splits["train"]])
    model = Ridge(alpha=1.0, random_state=seed)
    model.fit(x_train, [float(e.label) for e in task.splits["train"]])
    pred = model.predict(vectorizer.transform([joined_text(e) for e in task.splits[split]])).tolist()
    gold = [float(e.label) for e in task.splits[split]]
    return {**correlations(pred, gold), "split": split, "features": len(vectorizer.vocabulary_)}
