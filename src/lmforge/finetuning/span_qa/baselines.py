"""The baseline every extractive-QA (``family="span_qa"``) model should beat.

``sliding_window_baseline`` (the word-overlap baseline of MCTest and of the SQuAD paper, in its
simplest form), exactly:

- words are runs of word characters (``\\w+``), compared lower-cased;
- the question's words are its words, less ``STOP_WORDS`` and words made only of underscores
  (``___``), taken as a set;
- ``w``, the window's width in words, is the lower median (``statistics.median_low``) over the
  training questions of the number of words in the first gold answer (the one training uses),
  at least 1;
- every run of ``w`` consecutive words of the context is a window (a context of fewer than ``w``
  words is one window of all of them); a window's overlap is the number of distinct question
  words among its words; the prediction is the context's text from the first character of the
  window with the largest overlap to the last character of its last word, ties going to the
  earliest window (so with no overlap anywhere, the first ``w`` words); a context without words
  predicts the empty string.

Predictions are scored as the models are: SQuAD v1.1's exact match and token F1 against every
gold answer of the question, the best taken (``metrics.squad_scores``, fractions).
"""

from __future__ import annotations

import re
import statistics
from typing import Any

from .metrics import squad_scores
from ..tasks import SPLIT_NAMES, Task

WORD = re.compile(r"\w+")
STOP_WORDS = frozenset(
    "a an the of in on at to for from by with as and or not no is are was were be been it its this that these those "
    "what which who whom whose when where why how does do did can could should would will there their".split())


def question_words(question: str) -> set[str]:
    """The lower-cased words of ``question`` less ``STOP_WORDS`` and all-underscore words."""
    return {w for w in (m.lower() for m in WORD.findall(question)) if w not in STOP_WORDS and w.strip("_")}


def window_words(task: Task) -> int:
    """The lower median of the training questions' first gold answers' lengths in words, at least 1."""
    lengths = [len(WORD.findall(q.answers[0].text)) for q in task.splits["train"]]
    if not lengths:
        raise ValueError(f"task {task.name!r}: no training questions")
    return max(1, statistics.median_low(lengths))


def best_window(question: str, context: str, w: int) -> str:
    """The text of the ``w``-word window of ``context`` with the most distinct question words
    (ties: the earliest); see the module docstring."""
    if w < 1:
        raise ValueError(f"window width must be at least 1, got {w}")
    spans = [(m.start(), m.end(), m.group().lower()) for m in WORD.finditer(context)]
    if not spans:
        return ""
    asked = question_words(question)
    best, best_overlap = 0, -1
    for i in range(max(1, len(spans) - w + 1)):
        overlap = len({word for _, _, word in spans[i:i + w]} & asked)
        if overlap > best_overlap:
            best, best_overlap = i, overlap
    window = spans[best:best + w]
    return context[window[0][0]:window[-1][1]]


def sliding_window_baseline(task: Task, split: str = "test") -> dict[str, Any]:
    """The sliding-window word-overlap baseline on ``split`` of a span-QA task: ``exact_match``
    and ``f1`` (fractions), ``split``, ``examples`` and ``window_words`` (``w``)."""
    if task.family != "span_qa":
        raise ValueError(f"sliding_window_baseline: task {task.name!r} is a {task.family} task, not span_qa")
    if split not in SPLIT_NAMES:
        raise ValueError(f"sliding_window_baseline: unknown split {split!r}; known: {list(SPLIT_NAMES)}")
    w = window_words(task)
    questions = task.splits[split]
    predictions = [best_window(q.question, q.context, w) for q in questions]
    scores = squad_scores(predictions, [[a.text for a in q.answers] for q in questions])
    return {**scores, "split": split, "examples": len(questions), "window_words": w}
