"""Cutting documents into examples: the index most objectives share."""

from __future__ import annotations

import numpy as np

from .base import Corpus, Document


def chunk_document(doc: Document, max_tokens: int) -> list[tuple[int, int]]:
    """(start, end) pieces of at most ``max_tokens`` tokens covering the document, cut at the
    last sentence start that fits when there is one (a sentence longer than the limit is cut
    where the limit falls)."""
    pieces = []
    n = len(doc)
    starts = np.flatnonzero(doc.sentence_starts)
    start = 0
    while start < n:
        limit = start + max_tokens
        if limit >= n:
            pieces.append((start, n))
            break
        inside = starts[(starts > start) & (starts <= limit)]
        end = int(inside[-1]) if len(inside) else limit
        pieces.append((start, end))
        start = end
    return pieces


def chunk_index(corpus: Corpus, max_tokens: int, min_tokens: int = 1) -> np.ndarray:
    """(document, start, end) rows for every piece of every document, in corpus order;
    pieces shorter than ``min_tokens`` are left out."""
    rows = []
    for d in range(len(corpus)):
        for s, e in chunk_document(corpus[d], max_tokens):
            if e - s >= min_tokens:
                rows.append((d, s, e))
    return np.array(rows, dtype=np.int64).reshape(-1, 3)
