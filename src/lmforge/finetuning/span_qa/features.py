"""Extractive-QA inputs: a question and its context in an architecture's pair layout, the context
in overlapping windows (doc stride), the answer as the start and end positions of its tokens,
and the model's scores read back to a character span of the context.

- The question comes first, cut to 64 tokens and to half of ``max_length``; the context fills the
  room left in ``max_length`` in windows of that many tokens, each starting ``stride_fraction``
  (0.75) of a window after the last (so consecutive windows share a quarter of their tokens, as
  BERT's doc stride does), the last window ending at the context's end.
- Training keeps the windows that hold the whole first answer (``labels``: its first and last
  token's positions); evaluation scores every window of a question.
- Each context token keeps its character span (the tokenizer's offsets; ELMo: its char
  tokenizer's words), so a predicted (start, end) becomes ``context[first char : last char]``.
- The pair layouts are the sequence classifiers' (``features.py``): ``[CLS] q [SEP] c [SEP]``,
  GPT's ``<s> q <delim> c </s>``, ``q <eos> c <eos>`` (Transformer-XL), ``q <sep> c <sep> <cls>``
  (XLNet), ELMo's two ``<bos> ... <eos>`` sentences, ``prefix: q sentence2: c </s>`` (T5, Switch;
  ``<s>`` first for BART).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..features import (
    _CLASSIFICATION_LAYOUTS,
    TEXT_TO_TEXT,
    FeatureError,
    LoadedTokenizer,
    _check_arch,
    _TextToText,
    load_tokenizer,
)
from ..tasks import SpanQuestion

MAX_QUESTION_TOKENS = 64
NO_ANSWER = 0  # the position a window without the answer points at (its first): never trained on


@dataclass(frozen=True)
class Window:
    """Where one window's context tokens sit: ``positions[i]`` in the input holds context token
    ``first + i``, whose characters are ``spans[first + i]`` of the context."""

    question: int  # index of the question in its split
    first: int  # the window's first context token
    start: int  # the input position of that token
    length: int  # context tokens in the window


def _tokens_with_spans(loaded: LoadedTokenizer, arch: str, text: str, lead_space: bool
                       ) -> tuple[list, list[tuple[int, int]]]:
    """(tokens, each token's character span in ``text``); ELMo's tokens are its words."""
    if arch == "elmo":
        tok = loaded.tokenizer
        normalized = tok.normalizer.normalize_str(text) if tok.normalizer else text
        if len(normalized) != len(text):
            raise FeatureError("elmo: the char tokenizer's normaliser changes the text's length; spans cannot be mapped")
        words = tok.pre_tokenizer.pre_tokenize_str(normalized)
        return [w for w, _ in words], [tuple(span) for _, span in words]
    lead = 1 if lead_space else 0
    enc = loaded.tokenizer.encode((" " if lead_space else "") + text, add_special_tokens=False)
    spans = [(max(s - lead, 0), max(e - lead, 0)) for s, e in enc.offsets]
    return list(enc.ids), spans


def _layout(arch: str, loaded: LoadedTokenizer, t2t: _TextToText | None, a: list, b: list, max_length: int) -> dict:
    if t2t is not None:
        return t2t.inputs(a, b, max_length)
    return _CLASSIFICATION_LAYOUTS[arch](arch, loaded, a, b, max_length)


def _after_context(arch: str) -> int:
    """Special tokens the layout puts after the second text: XLNet's ``<sep> <cls>``, one elsewhere."""
    return 2 if arch == "xlnet" else 1


def answer_tokens(spans: Sequence[tuple[int, int]], start: int, end: int) -> tuple[int, int] | None:
    """The first and last context token covering characters ``[start, end)``, or None."""
    first = next((i for i, (s, e) in enumerate(spans) if e > start and e > s), None)
    last = next((i for i in range(len(spans) - 1, -1, -1) if spans[i][0] < end and spans[i][1] > spans[i][0]), None)
    if first is None or last is None or last < first:
        return None
    return first, last


def encode_questions(questions: Sequence[SpanQuestion], arch: str, tokenizer_dir: str | Path, max_length: int, *,
                     prefix: str = "", train: bool = False, stride_fraction: float = 0.75
                     ) -> tuple[list[dict[str, np.ndarray]], list[Window], list[list[tuple[int, int]]]]:
    """(the windows' model inputs, each with ``labels`` = [start, end] positions; the windows;
    each question's context token spans). ``train``: only the windows that hold the first answer."""
    _check_arch(arch)
    loaded = load_tokenizer(arch, tokenizer_dir)
    t2t = _TextToText(arch, loaded, prefix or "question") if arch in TEXT_TO_TEXT else None
    features: list[dict[str, np.ndarray]] = []
    windows: list[Window] = []
    all_spans: list[list[tuple[int, int]]] = []
    for qi, q in enumerate(questions):
        q_tokens, _ = _tokens_with_spans(loaded, arch, q.question, lead_space=t2t is not None)
        q_tokens = q_tokens[:min(MAX_QUESTION_TOKENS, max_length // 2)]
        c_tokens, spans = _tokens_with_spans(loaded, arch, q.context, lead_space=t2t is not None)
        all_spans.append(spans)
        empty = _layout(arch, loaded, t2t, list(q_tokens), [], max_length)
        room = max_length - len(empty["input_ids"])
        if room < 8:
            raise FeatureError(f"question {q.id or q.question[:40]!r}: max_length {max_length} leaves {room} context "
                               "tokens after the question")
        stride = max(1, int(room * stride_fraction))
        at_context = len(empty["input_ids"]) - _after_context(arch)
        target = answer_tokens(spans, q.answers[0].start, q.answers[0].start + len(q.answers[0].text))
        starts = list(range(0, max(len(c_tokens) - room, 0) + 1, stride))
        if starts[-1] + room < len(c_tokens):
            starts.append(len(c_tokens) - room)
        for first in starts:
            piece = c_tokens[first:first + room]
            inside = target is not None and first <= target[0] and target[1] < first + len(piece)
            if train and not inside:
                continue
            f = _layout(arch, loaded, t2t, list(q_tokens), list(piece), max_length)
            labels = [at_context + target[0] - first, at_context + target[1] - first] if inside else [NO_ANSWER] * 2
            f["labels"] = np.asarray(labels, dtype=np.int64)
            features.append(f)
            windows.append(Window(qi, first, at_context, len(piece)))
    return features, windows, all_spans


def best_span(start_scores: Sequence[float], end_scores: Sequence[float], window: Window, max_answer_tokens: int
              ) -> tuple[float, int, int] | None:
    """(score, first, last context token) of the best answer in ``window``: start and end inside
    its context, end not before start, at most ``max_answer_tokens`` long; score = start + end."""
    s = np.asarray(start_scores, dtype=np.float64)[window.start:window.start + window.length]
    e = np.asarray(end_scores, dtype=np.float64)[window.start:window.start + window.length]
    if not len(s):
        return None
    scores = s[:, None] + e[None, :]
    n = len(s)
    allowed = np.triu(np.ones((n, n), dtype=bool)) & ~np.triu(np.ones((n, n), dtype=bool), k=max_answer_tokens)
    scores = np.where(allowed, scores, -np.inf)
    i, j = np.unravel_index(int(np.argmax(scores)), scores.shape)
    return float(scores[i, j]), window.first + int(i), window.first + int(j)


def span_text(context: str, spans: Sequence[tuple[int, int]], first: int, last: int) -> str:
    """The context's characters from token ``first``'s start to token ``last``'s end."""
    return context[spans[first][0]:spans[last][1]].strip()
