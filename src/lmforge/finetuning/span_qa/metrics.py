"""Extractive question-answering metrics, by SQuAD v1.1's documented rule.

An answer is compared after ``normalize_answer``: lower-cased, every ASCII punctuation character
(``string.punctuation``) removed, the articles "a", "an" and "the" removed where they are whole
words, and runs of whitespace collapsed to one space (ends stripped).

- ``exact_match``: 1.0 if the normalised prediction equals some normalised gold answer, else 0.0;
- ``token_f1``: the best over the gold answers of the F1 between the prediction's and the answer's
  normalised tokens (split on whitespace) taken as bags: the common count is the sum over tokens
  of the smaller of the two counts, precision = common / prediction tokens, recall = common /
  answer tokens, F1 = 2PR / (P + R), 0 when nothing is common. Where either side has no token
  left after normalisation, F1 is 1.0 if both are empty, else 0.0;
- ``squad_scores``: the means of both over the questions.

All scores are fractions in [0, 1], not the official script's percentages.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Sequence

_ARTICLES = re.compile(r"\b(?:a|an|the)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)


def normalize_answer(s: str) -> str:
    """``s`` lower-cased, without ``string.punctuation``, without the whole words a / an / the,
    with whitespace collapsed to single spaces."""
    text = s.lower().translate(_PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def _gold_answers(function: str, answers: Sequence[str]) -> list[str]:
    if isinstance(answers, str):
        raise ValueError(f"{function}: answers must be a list of strings, not one string")
    if not answers:
        raise ValueError(f"{function}: no gold answers")
    return list(answers)


def exact_match(prediction: str, answers: Sequence[str]) -> float:
    """1.0 if the normalised ``prediction`` equals one of the normalised ``answers``, else 0.0."""
    golds = _gold_answers("exact_match", answers)
    predicted = normalize_answer(prediction)
    return max(float(predicted == normalize_answer(a)) for a in golds)


def _f1(predicted_tokens: list[str], gold_tokens: list[str]) -> float:
    if not predicted_tokens or not gold_tokens:
        return float(predicted_tokens == gold_tokens)
    common = sum((Counter(predicted_tokens) & Counter(gold_tokens)).values())
    if common == 0:
        return 0.0
    precision = common / len(predicted_tokens)
    recall = common / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def token_f1(prediction: str, answers: Sequence[str]) -> float:
    """The best over ``answers`` of the bag-of-normalised-tokens F1 (see the module docstring)."""
    golds = _gold_answers("token_f1", answers)
    predicted = normalize_answer(prediction).split()
    return max(_f1(predicted, normalize_answer(a).split()) for a in golds)


def squad_scores(predictions: Sequence[str], answers: Sequence[Sequence[str]]) -> dict[str, float | int]:
    """``exact_match`` and ``f1``: the means over the questions of ``exact_match`` and
    ``token_f1`` of each prediction against its question's gold answers; ``examples``: how many.
    Raises ValueError when the counts differ, there are none, or a question has no gold answer."""
    if len(predictions) != len(answers):
        raise ValueError(f"squad_scores: {len(predictions)} predictions for {len(answers)} questions' answers")
    if not predictions:
        raise ValueError("squad_scores: no examples")
    n = len(predictions)
    for i, golds in enumerate(answers):
        if isinstance(golds, str) or not golds:
            raise ValueError(f"squad_scores: question {i} needs a non-empty list of gold answers, got {golds!r}")
    return {
        "exact_match": sum(exact_match(p, a) for p, a in zip(predictions, answers)) / n,
        "f1": sum(token_f1(p, a) for p, a in zip(predictions, answers)) / n,
        "examples": n,
    }
