"""Sentence-pair objectives: BERT's MLM + next-sentence prediction (``mlm_nsp``) and ALBERT's
MLM + sentence-order prediction (``mlm_sop``), ``[CLS] A [SEP] B [SEP]`` examples built the
way BERT's ``create_instances_from_document`` builds them. See docs/OBJECTIVES.md (sentence
pairs) for where and why they differ from the references.
"""

from __future__ import annotations

import numpy as np

from . import masking
from .base import Corpus, Document, ObjectiveError, Vocab
from .examples import chunk_document, chunk_index
from .mlm import MaskedLM, MaskingConfig


def _sentence_ends(doc: Document, start: int) -> np.ndarray:
    """(S,) end offsets of the sentences from ``start`` on (the first may begin mid-sentence)."""
    starts = np.flatnonzero(doc.sentence_starts)
    return np.append(starts[starts > start], len(doc)).astype(np.int64)


def _first_reaching(ends: np.ndarray, start: int, target: int) -> int:
    """Index of the first end at least ``target`` tokens after ``start`` (the last if none is)."""
    return min(int(np.searchsorted(ends - start, target)), len(ends) - 1)


def _true_pair(doc: Document, start: int, target: int, rng: np.random.Generator) -> tuple[int, int | None]:
    """BERT's segment A and its true continuation B from ``start``: returns ``(a_end, b_end)``,
    A = [start, a_end), B = [a_end, b_end); ``b_end`` is None when nothing follows A."""
    ends = _sentence_ends(doc, start)
    k = _first_reaching(ends, start, target)  # sentences 0..k reach the target length
    if k >= 1:
        return int(ends[rng.integers(0, k)]), int(ends[k])  # A = the first 1..k sentences
    a_end = int(ends[0])
    if len(ends) == 1:
        return a_end, None
    return a_end, int(ends[1 + _first_reaching(ends[1:], start, target)])


def _preceding(doc: Document, end: int, need: int) -> int:
    """Start of the sentences just before ``end`` that hold at least ``need`` tokens (0 if
    the document before ``end`` is shorter)."""
    starts = np.flatnonzero(doc.sentence_starts[:end])
    starts = starts[end - starts >= need]
    return int(starts[-1]) if len(starts) else 0


def _truncation_counts(la: int, lb: int, max_tokens: int) -> tuple[int, int]:
    """Tokens BERT's ``truncate_seq_pair`` removes from A and B: one at a time from the longer
    side (B on ties) until ``la + lb <= max_tokens``."""
    excess = la + lb - max_tokens
    if excess <= 0:
        return 0, 0
    ra = min(excess, max(0, la - lb))  # first bring the longer side down to the shorter
    rb = min(excess, max(0, lb - la))
    rest = excess - ra - rb  # then alternate, B first (the tie case)
    return ra + rest // 2, rb + (rest + 1) // 2


def _truncate(segment: Document, remove: int, rng: np.random.Generator) -> Document:
    """Drop ``remove`` tokens, each from the front or the back with probability 1/2."""
    if remove == 0:
        return segment
    front = int(rng.binomial(remove, 0.5))
    return segment.slice(front, len(segment) - (remove - front))


class _SentencePair(MaskedLM):
    """``[CLS] A [SEP] B [SEP]`` examples, one per chunk of ``max_length - 3`` tokens."""

    min_length = 5  # [CLS] a [SEP] b [SEP]
    pair_label = ""  # the key of the 0-d pair label
    positive_name = ""  # what label 1 means, for statistics

    def _chunks(self, min_tokens: int) -> np.ndarray:
        return chunk_index(self.corpus, self.config.max_length - 3, min_tokens)

    def __len__(self) -> int:
        return len(self.chunks)

    def _target_length(self, rng: np.random.Generator) -> int:
        max_tokens = self.config.max_length - 3
        if rng.random() < self.config.short_seq_prob:
            return int(rng.integers(2, max_tokens + 1))
        return max_tokens

    def _pair_example(self, a: Document, b: Document, label: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        ra, rb = _truncation_counts(len(a), len(b), self.config.max_length - 3)
        a, b = _truncate(a, ra, rng), _truncate(b, rb, rng)
        v = self.vocab
        ids = np.concatenate([[v.cls], a.tokens, [v.sep], b.tokens, [v.sep]]).astype(np.int64)
        word_starts = np.concatenate([[False], a.word_starts, [False], b.word_starts, [False]])
        eligible = masking.eligible_positions(ids, self.specials)
        out = self._masked_example(ids, self._choose(ids, word_starts, eligible, rng), eligible, rng)
        out["token_type_ids"][len(a) + 2 :] = 1  # B [SEP]
        out[self.pair_label] = np.array(label, dtype=np.int64)
        return out

    def statistics(self, examples: list[dict[str, np.ndarray]]) -> dict:
        stats = super().statistics(examples)
        if examples:
            labels = np.array([int(e[self.pair_label]) for e in examples])
            b_lengths = np.array([int(e["token_type_ids"].sum()) - 1 for e in examples])
            a_lengths = np.array([len(e["input_ids"]) for e in examples]) - b_lengths - 3
            stats[f"{self.positive_name}_fraction"] = float(labels.mean())
            stats["segment_a_length_mean"] = float(a_lengths.mean())
            stats["segment_b_length_mean"] = float(b_lengths.mean())
            stats["length_mean"] = float((a_lengths + b_lengths + 3).mean())
        return stats


class MLMNextSentence(_SentencePair):
    """BERT: MLM + next-sentence prediction (0 = IsNext, 1 = NotNext, 50/50)."""

    name = "mlm_nsp"
    tokenizer_kind = "wordpiece"  # BERT
    pair_label = "next_sentence_label"
    positive_name = "not_next"

    class Config(MaskingConfig):
        masking: str = "token"
        max_ngram: int = 3
        short_seq_prob: float = 0.1

    def __init__(self, corpus: Corpus, vocab: Vocab, config: Config | None = None):
        super().__init__(corpus, vocab, config)
        self.chunks = self._chunks(1)  # (N, 3): document, start, end
        self.documents = np.unique(self.chunks[:, 0])  # non-empty documents, sorted
        if len(self.chunks) and len(self.documents) < 2:
            raise ObjectiveError(f"{self.name}: needs at least 2 non-empty documents for NotNext pairs, the corpus has {len(self.documents)}")

    def _other_document(self, d: int, rng: np.random.Generator) -> Document:
        """A uniformly drawn non-empty document other than ``d``."""
        r = int(rng.integers(0, len(self.documents) - 1))
        if r >= int(np.searchsorted(self.documents, d)):
            r += 1
        return self.corpus[int(self.documents[r])]

    def example(self, index: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        d, s, _ = (int(x) for x in self.chunks[index])
        doc = self.corpus[d]
        target = self._target_length(rng)
        a_end, b_end = _true_pair(doc, s, target, rng)
        not_next = rng.random() < 0.5
        a_start = s
        if b_end is None:  # the last sentence: pair the text before it with it (docs/OBJECTIVES.md)
            if s == 0:
                not_next = True  # a one-sentence document has no true pair
            elif not not_next:
                a_start, a_end, b_end = _preceding(doc, s, max(1, target - (a_end - s))), s, a_end
        a = doc.slice(a_start, a_end)
        if not_next:
            other = self._other_document(d, rng)
            sentences = other.sentences()
            b_start = sentences[int(rng.integers(0, len(sentences)))][0]
            ends = _sentence_ends(other, b_start)
            b_stop = int(ends[_first_reaching(ends, b_start, max(1, target - len(a)))])
            b = other.slice(b_start, b_stop)
        else:
            b = doc.slice(a_end, b_end)
        return self._pair_example(a, b, int(not_next), rng)


class MLMSentenceOrder(_SentencePair):
    """ALBERT: MLM (n-gram masking) + sentence-order prediction (0 = in order, 1 = swapped, 50/50);
    both segments always come from the same document."""

    name = "mlm_sop"
    tokenizer_kind = "unigram"  # ALBERT
    pair_label = "sentence_order_label"
    positive_name = "swapped"

    class Config(MaskingConfig):
        masking: str = "ngram"
        max_ngram: int = 3
        short_seq_prob: float = 0.1

    def __init__(self, corpus: Corpus, vocab: Vocab, config: Config | None = None):
        super().__init__(corpus, vocab, config)
        # a pair needs two tokens from the chunk start to the document end
        rows = []
        for d in range(len(corpus)):
            doc = corpus[d]
            rows += [(d, s, e) for s, e in chunk_document(doc, self.config.max_length - 3) if len(doc) - s >= 2]
        self.chunks = np.array(rows, dtype=np.int64).reshape(-1, 3)  # (N, 3): document, start, end

    def example(self, index: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        d, s, _ = (int(x) for x in self.chunks[index])
        doc = self.corpus[d]
        target = self._target_length(rng)
        a_end, b_end = _true_pair(doc, s, target, rng)
        a_start = s
        if b_end is None and s > 0:  # the last sentence: pair the text before it with it
            a_start, a_end, b_end = _preceding(doc, s, max(1, target - (a_end - s))), s, a_end
        elif b_end is None:  # a one-sentence document: cut it at an inner word start (a token if none)
            inner = np.flatnonzero(doc.word_starts[s + 1 : a_end]) + s + 1
            cut = int(rng.choice(inner)) if len(inner) else int(rng.integers(s + 1, a_end))
            a_end, b_end = cut, a_end
        a, b = doc.slice(a_start, a_end), doc.slice(a_end, b_end)
        swapped = rng.random() < 0.5
        if swapped:
            a, b = b, a
        return self._pair_example(a, b, int(swapped), rng)
