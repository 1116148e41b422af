"""The quality classifier: a linear model on hashed word unigrams and bigrams that tells a
reference set (the positives) from the corpus being filtered (the negatives), measured on
held-out documents of both, and its score of a document: how reference-like it is (0 to 1).

This is fastText's model family (a linear classifier over a bag of word n-grams, DCLM's quality
filter) built from scikit-learn: a ``HashingVectorizer`` (lower-cased words of two or more
letters or digits, unigrams and bigrams, hashed into ``quality.features`` buckets, each
document's vector scaled to unit length) and a ``LogisticRegression`` with balanced class
weights. fastText learns a low-dimensional embedding of each n-gram and averages them; here
each hashed n-gram has its own weight, which on a few thousand documents does as well and
needs no compiler. The stage that runs it over the clean corpus is ``quality_stage.py``.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..config import QualityConfig
from ..errors import LmforgeError


class QualityError(LmforgeError, ValueError):
    """The quality stage cannot run: no reference documents, too few documents of a class, no
    clean corpus."""


def clip(text: str, cfg: QualityConfig) -> str:
    """The part of a document the classifier reads: its first ``quality.max_characters``."""
    return text[: cfg.max_characters]


def sample(texts: Iterable[tuple[str, str]], k: int, seed: int, cfg: QualityConfig) -> tuple[list[tuple[str, str]], int]:
    """(At most ``k`` of the (id, text) pairs with a non-empty text, a uniform seeded sample made
    in one pass (reservoir sampling) and kept in the order they came, each text clipped to what
    the classifier reads; how many non-empty ones there were)."""
    rng = random.Random(seed)
    kept: list[tuple[int, tuple[str, str]]] = []
    seen = 0
    for doc_id, text in texts:
        if not text or not text.strip():
            continue
        if len(kept) < k:
            kept.append((seen, (doc_id, clip(text, cfg))))
        else:
            j = rng.randrange(seen + 1)
            if j < k:
                kept[j] = (seen, (doc_id, clip(text, cfg)))
        seen += 1
    return [item for _, item in sorted(kept, key=lambda p: p[0])], seen


def build_classifier(cfg: QualityConfig) -> Any:
    """The untrained pipeline: hashed uni+bigram features, then the logistic regression."""
    from sklearn.feature_extraction.text import HashingVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import Pipeline

    return Pipeline([
        ("features", HashingVectorizer(ngram_range=(1, 2), n_features=cfg.features, alternate_sign=False,
                                       norm="l2", lowercase=True, dtype=np.float32)),
        ("classifier", LogisticRegression(C=cfg.regularization, class_weight="balanced", max_iter=1000,
                                          solver="liblinear", random_state=cfg.seed)),
    ])


@dataclass
class Trained:
    """The trained pipeline, its figures on the held-out documents (``validation``: accuracy,
    balanced accuracy, AUC, chance, counts) and the held-out documents' scores by class."""

    model: Any
    validation: dict[str, Any]
    held_out_scores: dict[str, list[float]]


def _split(n: int, share: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(train, held out) positions of ``n`` items, ``share`` of them held out (at least one each)."""
    order = rng.permutation(n)
    held = min(n - 1, max(1, round(n * share)))
    return np.sort(order[held:]), np.sort(order[:held])


def train(positives: list[str], negatives: list[str], cfg: QualityConfig) -> Trained:
    """Fit the classifier on all but ``quality.validation`` of each class and measure it on the
    rest. Each class needs two documents at least (one to train on, one to hold out)."""
    from sklearn.metrics import accuracy_score, balanced_accuracy_score, roc_auc_score

    for name, docs in (("reference (quality.reference)", positives), ("corpus (the clean output)", negatives)):
        if len(docs) < 2:
            raise QualityError(f"quality: the {name} has {len(docs)} non-empty document(s); the classifier needs "
                               "two at least of each class (one to train on, one to hold out)")
    rng = np.random.default_rng(cfg.seed)
    p_train, p_held = _split(len(positives), cfg.validation, rng)
    n_train, n_held = _split(len(negatives), cfg.validation, rng)
    x_train = [clip(positives[i], cfg) for i in p_train] + [clip(negatives[i], cfg) for i in n_train]
    y_train = np.array([1] * len(p_train) + [0] * len(n_train))
    model = build_classifier(cfg).fit(x_train, y_train)

    x_held = [clip(positives[i], cfg) for i in p_held] + [clip(negatives[i], cfg) for i in n_held]
    y_held = np.array([1] * len(p_held) + [0] * len(n_held))
    scores = model.predict_proba(x_held)[:, 1]
    predicted = (scores >= 0.5).astype(int)
    train_predicted = model.predict(x_train)
    validation = {
        "accuracy": round(float(accuracy_score(y_held, predicted)), 6),
        "balanced_accuracy": round(float(balanced_accuracy_score(y_held, predicted)), 6),
        "auc": round(float(roc_auc_score(y_held, scores)), 6),
        # what always answering the larger class scores: the accuracy a useless classifier has
        "chance_accuracy": round(max(len(p_held), len(n_held)) / len(y_held), 6),
        "train_accuracy": round(float(accuracy_score(y_train, train_predicted)), 6),
        "documents": {"reference_train": len(p_train), "reference_held_out": len(p_held),
                      "corpus_train": len(n_train), "corpus_held_out": len(n_held)},
    }
    held_out_scores = {"reference": [float(s) for s in scores[: len(p_held)]],
                       "corpus": [float(s) for s in scores[len(p_held):]]}
    return Trained(model, validation, held_out_scores)


def score(model: Any, texts: list[str], cfg: QualityConfig) -> np.ndarray:
    """Each text's probability of being reference-like, by the trained ``model``."""
    if not texts:
        return np.zeros(0)
    return model.predict_proba([clip(t, cfg) for t in texts])[:, 1]


def keep_mask(scores: np.ndarray, ids: list[str], cfg: QualityConfig) -> np.ndarray:
    """Which documents the filter keeps: the ``round(keep_fraction * n)`` (at least one) scoring
    highest, ties broken by id, or those scoring at least ``threshold``."""
    n = len(scores)
    keep = np.zeros(n, dtype=bool)
    if n == 0:
        return keep
    if cfg.threshold is not None:
        return scores >= cfg.threshold
    k = max(1, min(n, round(cfg.keep_fraction * n)))  # type: ignore[operator]
    order = sorted(range(n), key=lambda i: (-scores[i], ids[i]))
    keep[order[:k]] = True
    return keep


def top_features(model: Any, texts: Iterable[str], cfg: QualityConfig, k: int = 20) -> dict[str, list[list]]:
    """The n-grams seen in ``texts`` (twice at least) whose weights pull most towards each class:
    what the classifier learned, in words. Each bucket is named by its most frequent n-gram in
    ``texts``; it may hold others too (with 2**20 buckets, collisions happen)."""
    from collections import Counter

    from sklearn.feature_extraction.text import HashingVectorizer

    vectorizer, classifier = model.named_steps["features"], model.named_steps["classifier"]
    analyze = vectorizer.build_analyzer()
    counts: Counter = Counter()
    for text in texts:
        counts.update(analyze(clip(text, cfg)))
    seen = sorted(g for g, c in counts.items() if c >= 2)
    if not seen:
        return {"reference": [], "corpus": []}
    # each n-gram alone, hashed as the pipeline hashes it: its bucket; a bucket is named by its most
    # frequent n-gram (a rare one sharing the bucket of a frequent one would be credited its weight)
    single = HashingVectorizer(n_features=cfg.features, alternate_sign=False, norm=None, analyzer=lambda g: [g])
    named: dict[int, str] = {}
    for gram, bucket in zip(seen, single.transform(seen).tocsr().indices.tolist()):
        if bucket not in named or counts[gram] > counts[named[bucket]]:
            named[bucket] = gram
    buckets = np.array(sorted(named), dtype=np.int64)
    grams = [named[b] for b in buckets.tolist()]
    weights = classifier.coef_[0][buckets]
    order = np.argsort(weights, kind="stable")
    return {"reference": [[grams[i], round(float(weights[i]), 4)] for i in order[::-1][:k]],
            "corpus": [[grams[i], round(float(weights[i]), 4)] for i in order[:k]]}
