"""Metrics against hand computations and scikit-learn; the baselines on toy tasks."""

import random

import pytest
from sklearn.metrics import f1_score

from lmforge.finetuning.classification.baselines import (
    PAIR_SEPARATOR, bag_of_words_baseline, joined_text, majority_baseline, majority_label,
)
from lmforge.finetuning.classification.metrics import accuracy, macro_f1
from lmforge.finetuning.tasks import Example, Task


def test_accuracy_by_hand():
    assert accuracy(["a", "b", "a", "a"], ["a", "b", "b", "a"]) == 0.75
    assert accuracy([1], [1]) == 1.0
    with pytest.raises(ValueError):
        accuracy(["a"], ["a", "b"])
    with pytest.raises(ValueError):
        accuracy([], [])


def test_macro_f1_by_hand():
    gold = ["a", "a", "a", "b", "b", "c"]
    pred = ["a", "a", "b", "b", "c", "c"]
    # a: tp 2 fp 0 fn 1 -> 4/5; b: tp 1 fp 1 fn 1 -> 2/4; c: tp 1 fp 1 fn 0 -> 2/3
    assert macro_f1(pred, gold) == pytest.approx((0.8 + 0.5 + 2 / 3) / 3)
    assert macro_f1(pred, gold, labels=["a", "b", "c", "d"]) == pytest.approx((0.8 + 0.5 + 2 / 3) / 4)
    assert macro_f1(["a"] * 4, ["a", "a", "b", "b"]) == pytest.approx((2 / 3 + 0) / 2)


@pytest.mark.parametrize("seed", range(8))
def test_macro_f1_matches_sklearn(seed):
    rng = random.Random(seed)
    names = ["x", "y", "z", "w"][: rng.randint(2, 4)]
    n = rng.randint(1, 40)
    gold = [rng.choice(names) for _ in range(n)]
    pred = [rng.choice(names[:-1]) if rng.random() < 0.5 else g for g in gold]
    assert macro_f1(pred, gold) == pytest.approx(f1_score(gold, pred, average="macro", zero_division=0))
    labels = names + ["unused"]
    assert macro_f1(pred, gold, labels) == pytest.approx(f1_score(gold, pred, labels=labels, average="macro", zero_division=0))


def _f1_by_counts(pred, gold, labels):
    """Each label's 2 tp / (2 tp + fp + fn) (0 when the label is neither predicted nor true),
    summed in ``labels`` order and divided: the numbers metrics.json has always held."""
    scores = []
    for label in labels:
        tp = sum(p == g == label for p, g in zip(pred, gold))
        fp = sum(p == label != g for p, g in zip(pred, gold))
        fn = sum(g == label != p for p, g in zip(pred, gold))
        scores.append(2 * tp / (2 * tp + fp + fn) if 2 * tp + fp + fn else 0.0)
    return sum(scores) / len(scores)


def test_metrics_are_exactly_the_per_label_formula():
    # "a" is true but never predicted; "d", "g" and "h" are neither predicted nor true. The mean of
    # these eight F1s is 0.22916666666666663; NumPy's sum (f1_score's average="macro") gives ...66
    gold = ["b", "e", "a", "e", "b", "f"]
    pred = ["c", "f", "b", "e", "b", "f"]
    labels = ["a", "b", "c", "d", "e", "f", "g", "h"]
    assert macro_f1(pred, gold, labels) == _f1_by_counts(pred, gold, labels) == 0.22916666666666663
    assert macro_f1(pred, gold) == _f1_by_counts(pred, gold, ["a", "b", "c", "e", "f"])
    assert accuracy(pred, gold) == 0.5
    for seed in range(200):
        rng = random.Random(seed)
        names = [f"l{i}" for i in range(rng.randint(2, 12))]
        gold = [rng.choice(names) for _ in range(rng.randint(1, 120))]
        pred = [rng.choice(names[:-1]) if rng.random() < 0.5 else g for g in gold]
        assert macro_f1(pred, gold, names) == _f1_by_counts(pred, gold, names)
        assert accuracy(pred, gold) == sum(p == g for p, g in zip(pred, gold)) / len(gold)


def toy_task(train, test, pair=False, labels=None):
    return Task("toy", "toy", labels or sorted({e.label for e in train + test}), pair,
                {"train": train, "validation": train[:2], "test": test}, "toy")


def test_majority_baseline_by_hand():
    train = [Example("t", None, "b")] * 3 + [Example("t", None, "a")] * 2
    test = [Example("t", None, lab) for lab in ["a", "b", "b", "c"]]
    task = toy_task(train, test)
    result = majority_baseline(task)
    assert result["prediction"] == "b" and result["accuracy"] == 0.5
    # b: tp 2, fp 2, fn 0 -> 4/6; a and c: 0 -> macro over {a, b, c}
    assert result["macro_f1"] == pytest.approx((4 / 6) / 3)
    wider = toy_task(train, test, labels=["a", "b", "c", "d"])  # averaged over every task label, as fine-tuning does
    assert majority_baseline(wider)["macro_f1"] == pytest.approx((4 / 6) / 4)
    tie = toy_task([Example("t", None, "b"), Example("t", None, "a")], test, labels=["b", "a", "c"])
    assert majority_label(tie) == "b"  # ties: the first in label_names


def separable(n, rng, pair=False):
    out = []
    for _ in range(n):
        label = "positive" if rng.random() < 0.4 else "negative"
        cue = rng.choice(["great", "lovely", "superb"] if label == "positive" else ["awful", "boring", "dull"])
        filler = " ".join(rng.choice(["the", "film", "was", "a", "plot", "actors", "very", "quite"]) for _ in range(6))
        if pair:
            out.append(Example(filler, f"it was {cue}", label))
        else:
            out.append(Example(f"{filler} {cue} {filler}", None, label))
    return out


@pytest.mark.parametrize("pair", [False, True])
def test_bag_of_words_beats_majority_on_a_separable_task(pair):
    rng = random.Random(0)
    task = toy_task(separable(200, rng, pair), separable(100, rng, pair), pair=pair)
    bow, majority = bag_of_words_baseline(task, seed=0), majority_baseline(task)
    assert majority["accuracy"] < 0.75
    assert bow["accuracy"] > 0.95 and bow["macro_f1"] > 0.95
    assert bow["accuracy"] > majority["accuracy"] and bow["macro_f1"] > majority["macro_f1"]
    assert bag_of_words_baseline(task, seed=0) == bow  # deterministic


def test_pairs_are_joined_with_a_separator_word():
    from sklearn.feature_extraction.text import CountVectorizer

    text = joined_text(Example("first part", "second part", "x"))
    assert text == f"first part {PAIR_SEPARATOR} second part"
    assert PAIR_SEPARATOR in CountVectorizer().fit([text]).vocabulary_
    assert joined_text(Example("only", None, "x")) == "only"


def test_bag_of_words_with_one_train_label_falls_back_to_majority():
    train = [Example("a b", None, "x")] * 3
    result = bag_of_words_baseline(toy_task(train, [Example("a", None, "x"), Example("b", None, "y")]))
    assert result["accuracy"] == 0.5 and "note" in result
