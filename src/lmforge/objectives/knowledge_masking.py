"""ERNIE 1.0's knowledge masking (``knowledge_mlm``): whole basic (word), phrase and entity
units, one level per example. Phrases and entities are word n-grams scored by normalised PMI
over the corpus itself; see docs/OBJECTIVES.md (knowledge masking) for the statistic and its
limits.
"""

from __future__ import annotations

import numpy as np

from . import masking
from .base import Corpus, Document, ObjectiveError, Vocab, check_length, check_rate
from .examples import chunk_index
from .mlm import MaskedLM, MaskingConfig

LEVELS = ("basic", "phrase", "entity")

_P = np.uint64(0x9E3779B97F4A7C15)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: a well-spread uint64 hash of uint64 values."""
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def _words(tokens: np.ndarray, word_starts: np.ndarray, sentence_starts: np.ndarray):
    """Per word: its first token (W,), a uint64 hash of its token ids (W,) and its sentence
    number (W,). The first token always starts a word and a sentence."""
    starts = word_starts.copy()
    starts[:1] = True
    first = np.flatnonzero(starts)
    word_of = np.cumsum(starts) - 1  # (L,) word of each token
    position = np.arange(len(tokens)) - first[word_of]  # (L,) position inside its word
    with np.errstate(over="ignore"):
        keys = _mix(tokens.astype(np.uint64) + np.uint64(1) + position.astype(np.uint64) * _P)
    hashes = _mix(np.add.reduceat(keys, first)) if len(first) else np.zeros(0, dtype=np.uint64)
    sentence_flags = sentence_starts[first].copy()
    sentence_flags[:1] = True
    return first, hashes, np.cumsum(sentence_flags)


def _gram_hashes(word_hashes: np.ndarray, sentence: np.ndarray, max_n: int) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """n -> (hash of the n words starting at each word (W-n+1,), whether they share one sentence)."""
    grams = {1: (word_hashes, np.ones(len(word_hashes), dtype=bool))}
    g = word_hashes
    for n in range(2, max_n + 1):
        if len(word_hashes) < n:
            break
        with np.errstate(over="ignore"):
            g = _mix(g[:-1] * _P + word_hashes[n - 1 :])
        grams[n] = (g, sentence[: len(g)] == sentence[n - 1 :])
    return grams


def _count(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return np.unique(values, return_index=True, return_counts=True)


class KnowledgeMLM(MaskedLM):
    """ERNIE 1.0: masking whole basic (word), phrase and entity units, one level per example."""

    name = "knowledge_mlm"
    tokenizer_kind = "wordpiece"  # ERNIE 1.0

    class Config(MaskingConfig):
        exact_count: bool = False  # ERNIE: each unit independently with p = mask_rate
        basic_weight: float = 1.0
        phrase_weight: float = 1.0
        entity_weight: float = 1.0
        max_unit_words: int = 4  # phrases and entities have 2..max_unit_words words
        min_count: int = 10
        phrase_min_npmi: float = 0.4
        entity_min_npmi: float = 0.65
        table_documents: int = 20_000  # documents the unit tables are counted on

    def _check_config(self) -> None:
        c = self.config
        for level in LEVELS:
            if getattr(c, f"{level}_weight") < 0:
                raise ObjectiveError(f"{self.name}: {level}_weight must be at least 0, got {getattr(c, f'{level}_weight')}")
        if c.basic_weight + c.phrase_weight + c.entity_weight <= 0:
            raise ObjectiveError(f"{self.name}: basic_weight + phrase_weight + entity_weight must be positive")
        check_length(self.name, "max_unit_words", c.max_unit_words, 2)
        check_length(self.name, "min_count", c.min_count, 1)
        check_length(self.name, "table_documents", c.table_documents, 1)
        check_rate(self.name, "phrase_min_npmi", c.phrase_min_npmi, -1.0, 1.0)
        if not (c.phrase_min_npmi < c.entity_min_npmi <= 1.0):
            raise ObjectiveError(
                f"{self.name}: entity_min_npmi must be in (phrase_min_npmi, 1], got {c.entity_min_npmi} (phrase_min_npmi {c.phrase_min_npmi})"
            )

    def __init__(self, corpus: Corpus, vocab: Vocab, config: Config | None = None):
        super().__init__(corpus, vocab, config)
        c = self.config
        self.chunks = chunk_index(corpus, c.max_length - 2)  # (N, 3): document, start, end
        weights = np.array([c.basic_weight, c.phrase_weight, c.entity_weight], dtype=np.float64)
        self.level_probs = weights / weights.sum()
        self.tables = self._unit_tables()  # level -> n -> sorted uint64 hashes of its n-grams

    def __len__(self) -> int:
        return len(self.chunks)

    def _unit_tables(self) -> dict[str, dict[int, np.ndarray]]:
        """Phrase and entity n-gram tables from NPMI over evenly spaced documents (docs/OBJECTIVES.md)."""
        c = self.config
        max_n = c.max_unit_words
        tables: dict[str, dict[int, np.ndarray]] = {"phrase": {}, "entity": {}}
        n_docs = len(self.corpus)
        if n_docs == 0:
            return tables
        picked = np.unique(np.linspace(0, n_docs - 1, min(n_docs, c.table_documents)).astype(np.int64))
        hashes, sentences, offset = [], [], 0
        for d in picked.tolist():
            doc = self.corpus[int(d)]
            if len(doc) == 0:
                continue
            _, h, sentence = _words(doc.tokens, doc.word_starts, doc.sentence_starts)
            hashes.append(h)
            sentences.append(sentence + offset)  # a new document starts a new sentence
            offset += int(sentence[-1]) + 1
        if not hashes:
            return tables
        grams = _gram_hashes(np.concatenate(hashes), np.concatenate(sentences), max_n)
        total = len(grams[1][0])  # words counted
        counted = {}  # n -> (sorted unique hashes, first window of each, counts)
        windows = {}  # n -> positions of the windows inside one sentence
        for n, (g, inside) in grams.items():
            windows[n] = np.flatnonzero(inside)
            counted[n] = _count(g[inside])
        for n in range(2, max_n + 1):
            if n not in counted:
                break
            unique, first, counts = counted[n]
            keep = counts >= c.min_count
            unique, at, counts = unique[keep], windows[n][first[keep]], counts[keep].astype(np.float64)
            score = np.full(len(unique), np.inf)
            for k in range(1, n):  # the weakest binary split: left k words, right n - k words
                left = _lookup(counted[k], grams[k][0][at])
                right = _lookup(counted[n - k], grams[n - k][0][at + k])
                with np.errstate(divide="ignore", invalid="ignore"):
                    npmi = np.log(counts * total / (left * right)) / -np.log(counts / total)
                score = np.minimum(score, np.nan_to_num(npmi, nan=-1.0, posinf=1.0))
            tables["entity"][n] = unique[score >= c.entity_min_npmi]
            tables["phrase"][n] = unique[(score >= c.phrase_min_npmi) & (score < c.entity_min_npmi)]
        return tables

    def unit_starts(self, doc: Document, level: str) -> np.ndarray:
        """(L,) bool: where the units of ``level`` start in ``doc`` (a chunk): words, with the
        table's n-grams merged into single units at the phrase and entity levels (greedily
        left to right, longest first, never across a sentence start)."""
        first, hashes, sentence = _words(doc.tokens, doc.word_starts, doc.sentence_starts)
        starts = np.zeros(len(doc), dtype=bool)
        if level == "basic" or len(first) == 0:
            starts[first] = True
            return starts
        table = self.tables[level]
        longest = np.ones(len(first), dtype=np.int64)  # (W,) words in the unit starting at each word
        for n, (g, inside) in sorted(_gram_hashes(hashes, sentence, self.config.max_unit_words).items(), reverse=True):
            if n == 1 or n not in table:
                continue
            hit = inside & np.isin(g, table[n])
            head = longest[: len(g)]
            head[(head == 1) & hit] = n
        w = 0
        while w < len(first):
            starts[first[w]] = True
            w += int(longest[w])
        return starts

    def example(self, index: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        d, s, e = (int(x) for x in self.chunks[index])
        chunk = self.corpus[d].slice(s, e)
        level = LEVELS[int(rng.choice(len(LEVELS), p=self.level_probs))]
        ids, _, eligible = self._single(chunk)
        starts = np.concatenate([[False], self.unit_starts(chunk, level), [False]])
        c = self.config
        chosen = masking.choose_units(starts, eligible, c.mask_rate, self.max_predictions, rng, exact=c.exact_count)
        return self._masked_example(ids, chosen, eligible, rng)

    def statistics(self, examples: list[dict[str, np.ndarray]]) -> dict:
        stats = super().statistics(examples)
        for level in ("phrase", "entity"):
            stats[f"{level}_table_size"] = int(sum(len(t) for t in self.tables[level].values()))
        return stats


def _lookup(counted: tuple[np.ndarray, np.ndarray, np.ndarray], values: np.ndarray) -> np.ndarray:
    """Counts of ``values`` in a ``_count`` table (every value is present)."""
    unique, _, counts = counted
    return counts[np.searchsorted(unique, values)].astype(np.float64)
