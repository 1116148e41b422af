"""Decontamination: the training documents that share a long word n-gram with an evaluation text.

The rule is GPT-3's (Brown et al. 2020, appendix C): text is lower-cased and split into words
(runs of letters and digits, so punctuation and spacing do not matter), and a document overlaps
an evaluation text when they share a run of ``n`` = 13 words. An evaluation text (or one of its
lines) shorter than ``n`` words but at least ``min_words`` long is matched whole, as GPT-3 did for
its short examples; a shorter one is too short to tell from common phrasing and is not checked
(the report counts it).

Each word is hashed once (xxh64) and a window of ``k`` words is the polynomial
``sum(w_i * P^(k-1-i)) mod 2^64`` of its word hashes, computed for every window at once with
NumPy; the evaluation side is a sorted array of window hashes per window length, searched with
``searchsorted``. With 64-bit hashes a false match between two different windows has a
probability of about 2^-64 per pair.

This module knows only texts and hashes; the clean stage (``stage.py``) decides which documents
are held out (the validation and test splits, from which the corpus's own tasks are built) and
what the evaluation texts are, and applies the verdicts.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import xxhash

from ..config import SplitConfig

_WORD = re.compile(r"[^\W_]+")
_P = np.uint64(0x9E3779B97F4A7C15)  # the multiplier of the window polynomial (odd, so no information is lost)
_NPZ_KEY = "k{}"


def words(text: str) -> list[str]:
    """The words the rule compares: runs of letters and digits, case-folded."""
    return _WORD.findall(text.casefold())


class WordHashes:
    """Each distinct word's 64-bit hash, computed once per process."""

    def __init__(self) -> None:
        self._cache: dict[str, int] = {}

    def __call__(self, ws: list[str]) -> np.ndarray:
        cache = self._cache
        out = np.empty(len(ws), dtype=np.uint64)
        for i, w in enumerate(ws):
            h = cache.get(w)
            if h is None:
                h = cache[w] = xxhash.xxh64_intdigest(w.encode("utf-8"))
            out[i] = h
        return out


def windows(hashes: np.ndarray, k: int) -> np.ndarray:
    """The hash of every run of ``k`` consecutive words (an empty array when there are fewer)."""
    n = len(hashes) - k + 1
    if n <= 0:
        return np.empty(0, dtype=np.uint64)
    out = np.zeros(n, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for j in range(k):
            out = out * _P + hashes[j:j + n]
    return out


def text_windows(hashes: np.ndarray, line_bounds: list[tuple[int, int]], n: int, min_words: int) -> dict[int, np.ndarray]:
    """What an evaluation text registers (window length -> hashes): every ``n``-word window of the
    whole text, or the whole text when it is shorter; and each line of ``min_words`` to ``n - 1``
    words whole (``line_bounds``: each line's word range)."""
    out: dict[int, list[np.ndarray]] = {}
    total = len(hashes)
    if total >= min_words:
        k = min(n, total)
        out.setdefault(k, []).append(windows(hashes, k))
    for a, b in line_bounds:
        if min_words <= b - a < n and b - a < total:
            out.setdefault(b - a, []).append(windows(hashes[a:b], b - a))
    return {k: np.concatenate(v) for k, v in out.items()}


def tokenize_lines(text: str, word_hashes: WordHashes) -> tuple[np.ndarray, np.ndarray, list[tuple[int, int]]]:
    """(the text's word hashes, each word's line number, each line's word range)."""
    ws: list[str] = []
    line_of: list[int] = []
    bounds = []
    for i, line in enumerate(text.split("\n")):
        lw = words(line)
        bounds.append((len(ws), len(ws) + len(lw)))
        ws += lw
        line_of += [i] * len(lw)
    return word_hashes(ws), np.asarray(line_of, dtype=np.int64), bounds


@dataclass
class GramSet:
    """Window hashes by window length: what the evaluation texts register, or what matched."""

    by_length: dict[int, np.ndarray] = field(default_factory=dict)

    @classmethod
    def union(cls, parts: Iterable[dict[int, np.ndarray]]) -> GramSet:
        merged: dict[int, list[np.ndarray]] = {}
        for part in parts:
            for k, h in part.items():
                merged.setdefault(int(k), []).append(h)
        return cls({k: np.unique(np.concatenate(v)) for k, v in sorted(merged.items())})

    def __len__(self) -> int:
        return sum(len(h) for h in self.by_length.values())

    def hits(self, k: int, hashes: np.ndarray) -> np.ndarray:
        """A boolean per window: is it in the set."""
        table = self.by_length.get(k)
        if table is None or not len(table) or not len(hashes):
            return np.zeros(len(hashes), dtype=bool)
        i = np.searchsorted(table, hashes)
        i[i == len(table)] = 0
        return table[i] == hashes

    def any_hit(self, grams: dict[int, np.ndarray]) -> bool:
        return any(self.hits(k, h).any() for k, h in grams.items())

    def save(self, path: Path) -> None:
        import io

        from ..artifacts import atomic_write_bytes

        buf = io.BytesIO()
        np.savez(buf, **{_NPZ_KEY.format(k): h for k, h in self.by_length.items()})
        atomic_write_bytes(path, buf.getvalue())

    @classmethod
    def load(cls, path: Path) -> GramSet:
        with np.load(path) as z:
            return cls({int(name[1:]): z[name] for name in z.files})


@dataclass
class Verdict:
    """What decontamination found in one training document."""

    matched: dict[int, np.ndarray]  # window length -> the evaluation windows it holds
    lines: set[int]  # the lines those windows touch


def scan(text: str, grams: GramSet, word_hashes: WordHashes) -> Verdict | None:
    """The evaluation windows ``text`` holds and the lines they touch; None when it holds none."""
    hashes, line_of, _ = tokenize_lines(text, word_hashes)
    matched: dict[int, np.ndarray] = {}
    lines: set[int] = set()
    for k in grams.by_length:
        w = windows(hashes, k)
        hit = grams.hits(k, w)
        if hit.any():
            matched[k] = np.unique(w[hit])
            for start in np.flatnonzero(hit):
                lines.update(line_of[start:start + k].tolist())
    return Verdict(matched, lines) if matched else None


def remove_lines(text: str, lines: set[int]) -> str:
    return "\n".join(line for i, line in enumerate(text.split("\n")) if i not in lines)


@dataclass
class Overlap:
    """How many of a set of evaluation texts share a window with a body of text."""

    texts: int = 0
    too_short: int = 0  # fewer than min_words words: not checked
    overlapping: int = 0

    def to_dict(self) -> dict[str, int]:
        return {"texts": self.texts, "too_short": self.too_short, "overlapping": self.overlapping}


def overlap(texts: Iterable[str], found: GramSet, n: int, min_words: int, word_hashes: WordHashes) -> Overlap:
    """Count the ``texts`` that registered a window ``found`` holds (``found``: the evaluation
    windows a scan met in the training documents)."""
    out = Overlap()
    for text in texts:
        out.texts += 1
        hashes, _, bounds = tokenize_lines(text, word_hashes)
        grams = text_windows(hashes, bounds, n, min_words)
        if not grams:
            out.too_short += 1
        elif found.any_hit(grams):
            out.overlapping += 1
    return out


@dataclass
class EvaluationSets:
    """What the clean stage decontaminates against (built by the stage from the whole configuration).

    ``split``: the split settings (only training documents are scanned; with ``held_out``, the
    validation and test documents are evaluation texts); ``texts``: source name -> evaluation
    texts; ``corpus_tasks``: from a cleaned folder, task -> split -> texts of the tasks built from
    the corpus, or the reason one cannot be built (for the report)."""

    split: SplitConfig
    texts: dict[str, list[str]] = field(default_factory=dict)
    corpus_tasks: Callable[[Path], dict[str, dict[str, list[str]] | str]] | None = None

    def fingerprint(self) -> list:
        """What identifies them in the stage's fingerprint (the corpus tasks follow from the corpus)."""
        digest = xxhash.xxh64()
        for name in sorted(self.texts):
            digest.update(name.encode("utf-8") + b"\x00")
            for text in self.texts[name]:
                digest.update(text.encode("utf-8") + b"\x01")
        return [self.split.model_dump(mode="json"), digest.hexdigest()]


def registered(texts: Iterable[str], n: int, min_words: int, word_hashes: WordHashes) -> dict[int, np.ndarray]:
    """The windows a set of evaluation texts registers (window length -> hashes)."""
    parts = []
    for text in texts:
        hashes, _, bounds = tokenize_lines(text, word_hashes)
        parts.append(text_windows(hashes, bounds, n, min_words))
    return GramSet.union(parts).by_length
