"""Masked language modelling: BERT's MLM (+ NSP), ALBERT's MLM + SOP, ERNIE 1.0's knowledge masking.

All four build one encoder example per index from the corpus and choose the positions to
predict with the shared primitives of ``masking.py``: 15% of the non-special positions, of
those 80% -> [MASK], 10% -> a random non-special id, 10% unchanged. Masks are drawn from the
``rng`` passed to ``example``, so ``rng_for(seed, epoch, index)`` re-draws them every epoch
(RoBERTa's dynamic masking) instead of BERT's static ``dupe_factor`` copies.

Keys (1-D int64 arrays of one length L <= ``max_length`` unless noted):

- ``mlm``: ``input_ids`` (``[CLS] tokens [SEP]``, masked), ``labels`` (original id at the
  predicted positions, -100 elsewhere), ``token_type_ids`` (zeros), ``special_tokens_mask``
  (1 at special ids: [CLS], [SEP], and any special id in the text such as [UNK]).
- ``mlm_nsp``: the same over ``[CLS] A [SEP] B [SEP]`` with ``token_type_ids`` 0 over
  ``[CLS] A [SEP]`` and 1 over ``B [SEP]``, plus ``next_sentence_label`` (0-d: 0 = B is A's
  continuation, 1 = B comes from another document).
- ``mlm_sop``: the same pair layout plus ``sentence_order_label`` (0-d: 0 = in order,
  1 = swapped).
- ``knowledge_mlm``: the ``mlm`` keys.

Parameters and their reference values (each class's ``Config``):

- ``max_length`` 128 (BERT's first phase) counts the special tokens.
- ``max_predictions``: ``None`` means the reference cap: with ``exact_count`` it is
  ``ceil(max_length * mask_rate)`` (20 at 128, BERT's ``max_predictions_per_seq``; 77 at 512
  where BERT used 80); it never binds on the default settings because the exact count
  ``round(n_eligible * mask_rate)`` is below it, so it does not bias the rate. With Bernoulli
  sampling (``exact_count=False``, HF's collator and ERNIE) ``None`` means no cap, as in those
  references: a cap near the mean would cut the upper tail and lower the realised rate.
- ``masking``: ``token``, ``whole_word`` (units from the token store's word-start flags, never
  from a "##" spelling), ``ngram`` (ALBERT: n <= ``max_ngram`` words, p(n) proportional to 1/n).

Pairs (NSP, SOP) follow BERT's ``create_instances_from_document`` with one index per chunk of
``max_length - 3`` tokens (``chunk_index``): the target length is ``max_length - 3``, or with
probability ``short_seq_prob`` uniform in [2, max_length - 3]; sentences from the chunk start
are gathered until they reach it, A is the first 1..k-1 of those k sentences and B the rest.
Where a pair needs more text than its chunk holds it reads on into the document, instead of
BERT's "put the unused sentences back" (our examples are indexed, not streamed). Then the
longer side loses a token, from its front or back at random, until the pair fits. NSP's
NotNext B starts at a random sentence of a uniformly drawn *other* non-empty document (drawn
exactly, not by BERT's ten retries that could return the same document). When the chunk is a
document's last sentence there is no continuation to pair it with; BERT then always makes a
NotNext pair, which tilts the labels towards NotNext on short documents. We instead pair the
sentences just before it (A) with it (B), so the labels stay 50/50; only a document of one
sentence is forced to NotNext. SOP never leaves the document: the same fallback applies, and
a one-sentence document is cut at a random inner word start into two segments, which are then
ordered or swapped like any other pair (ALBERT fell back to another document there).

Knowledge masking (ERNIE 1.0). ERNIE masks whole units at three levels: basic (a word here),
phrase and entity, each unit chosen with p = ``mask_rate`` and the 80/10/10 rule decided per
token. ERNIE trained the levels in stages; we mix them: each example draws its level with
probabilities proportional to ``basic_weight``, ``phrase_weight``, ``entity_weight`` (equal
by default). At the phrase (entity) level the units are the phrases (entities) found in the
example, greedily left to right, longest first, and single words everywhere else. Units never
cross a sentence start.

ERNIE took phrases from a chunker and entities from NER on Chinese text. We have no such tools
for an arbitrary language and objectives must not read spelling (no capitalisation test: the
``Vocab`` carries no per-token casing), so both unit kinds come from one corpus statistic
computed in the constructor: over the words (token runs between word-start flags) of up to
``table_documents`` evenly spaced documents, every word n-gram (2 <= n <= ``max_unit_words``,
inside one sentence) seen at least ``min_count`` times is scored by its normalised pointwise
mutual information, taking the weakest of its binary splits:

    npmi(a, b) = log(p(ab) / (p(a) p(b))) / -log p(ab),   score(g) = min over splits of npmi

(1 when the parts only ever occur together, 0 when independent). ``score >= entity_min_npmi``
(0.65) makes an *entity*, ``phrase_min_npmi <= score < entity_min_npmi`` (0.4) a *phrase*.
The idea is that names ("New York", npmi ~0.75 in English text) are rigid, their parts rarely
occur apart, while phrases ("such as" ~0.6, "take place" ~0.5) are looser and frequent
function-word pairs ("of the" ~0.3) are not units at all. Limits, stated plainly: these are
*cohesive multi-word expressions*, not named entities. Single-word entities ("Paris") are
never entity units; rigid non-names ("per cent", "et al") become entities; entities rarer
than ``min_count`` are missed and rare word pairs that happen to co-occur a few times score
high; the thresholds come from back-of-the-envelope English estimates, not tuning. Words are
compared by 64-bit hashes of their token ids (a collision is possible, vanishingly rare).
"""

from __future__ import annotations

import math

import numpy as np

from ..schema import StrictModel
from . import masking
from .base import IGNORE_INDEX, Corpus, Document, Objective, ObjectiveError, Vocab, check_length, check_rate
from .examples import chunk_document, chunk_index

MASKINGS = ("token", "whole_word", "ngram")
LEVELS = ("basic", "phrase", "entity")


# ---------------------------------------------------------------------------------------------
# configuration


class MaskingConfig(StrictModel):
    """Parameters every masked-LM objective shares (reference values as defaults)."""

    max_length: int = 128
    mask_rate: float = 0.15
    mask_token_prob: float = 0.8
    random_token_prob: float = 0.1
    max_predictions: int | None = None  # None: ceil(max_length * mask_rate) if exact_count, else no cap
    exact_count: bool = True  # Google's exact count; False: Bernoulli per token (HF) / per unit (ERNIE)


def _check_probability(objective: str, name: str, value: float) -> None:
    if not (0.0 <= value <= 1.0):
        raise ObjectiveError(f"{objective}: {name} must be in [0, 1], got {value}")


def _check_masking(objective: str, config: MaskingConfig, min_length: int) -> None:
    check_length(objective, "max_length", config.max_length, min_length)
    check_rate(objective, "mask_rate", config.mask_rate)
    _check_probability(objective, "mask_token_prob", config.mask_token_prob)
    _check_probability(objective, "random_token_prob", config.random_token_prob)
    total = config.mask_token_prob + config.random_token_prob
    if total > 1.0 + 1e-9:
        raise ObjectiveError(f"{objective}: mask_token_prob + random_token_prob must be at most 1, got {total:g}")
    if config.max_predictions is not None:
        check_length(objective, "max_predictions", config.max_predictions, 1)
    masking_kind = getattr(config, "masking", None)
    if masking_kind is not None and masking_kind not in MASKINGS:
        raise ObjectiveError(f"{objective}: masking must be one of {', '.join(MASKINGS)}, got {masking_kind!r}")
    if hasattr(config, "max_ngram"):
        check_length(objective, "max_ngram", config.max_ngram, 1)
    if hasattr(config, "short_seq_prob"):
        _check_probability(objective, "short_seq_prob", config.short_seq_prob)


# ---------------------------------------------------------------------------------------------
# the shared masked-LM machinery


class _MaskedLM(Objective):
    """Validation, special ids, masking and statistics shared by the four objectives."""

    family = "encoder"
    min_length = 3  # [CLS] x [SEP]

    def __init__(self, corpus: Corpus, vocab: Vocab, config=None):
        super().__init__(corpus, vocab, config)
        _check_masking(self.name, self.config, self.min_length)
        self._check_config()
        vocab.require(self.name, "cls", "sep", "mask")
        self.specials = vocab.special_array
        self.random_ids = np.setdiff1d(np.arange(vocab.size, dtype=np.int64), self.specials)  # (V - specials,)
        if len(self.random_ids) == 0:
            raise ObjectiveError(f"{self.name}: the vocabulary has no non-special token to draw random replacements from")
        c = self.config
        if c.max_predictions is not None:
            self.max_predictions: int | None = c.max_predictions
        elif c.exact_count:
            self.max_predictions = math.ceil(round(c.max_length * c.mask_rate, 6))
        else:
            self.max_predictions = None

    def _check_config(self) -> None:
        """Objective-specific parameter checks."""

    def _choose(self, ids: np.ndarray, word_starts: np.ndarray, eligible: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """(L,) bool positions to predict under ``config.masking``."""
        c = self.config
        if c.masking == "token":
            return masking.choose_tokens(eligible, c.mask_rate, self.max_predictions, rng, exact=c.exact_count)
        if c.masking == "whole_word":
            starts = word_starts
        else:  # ngram
            starts = masking.ngram_unit_starts(word_starts, eligible, c.max_ngram, rng)
        return masking.choose_units(starts, eligible, c.mask_rate, self.max_predictions, rng, exact=c.exact_count)

    def _masked_example(self, ids: np.ndarray, chosen: np.ndarray, eligible: np.ndarray, rng: np.random.Generator) -> dict:
        c = self.config
        input_ids, labels = masking.replace_chosen(
            ids, chosen, self.vocab.mask, self.random_ids, c.mask_token_prob, c.random_token_prob, rng
        )
        return {
            "input_ids": input_ids,
            "labels": labels,
            "token_type_ids": np.zeros(len(ids), dtype=np.int64),
            "special_tokens_mask": (~eligible).astype(np.int64),
        }

    def _single(self, doc: Document) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``[CLS] tokens [SEP]`` ids, word starts and eligibility, each (L,)."""
        ids = np.concatenate([[self.vocab.cls], doc.tokens, [self.vocab.sep]]).astype(np.int64)
        starts = np.concatenate([[False], doc.word_starts, [False]])
        return ids, starts, masking.eligible_positions(ids, self.specials)

    def statistics(self, examples: list[dict[str, np.ndarray]]) -> dict:
        return masking_statistics(examples, self.vocab.mask)


def masking_statistics(examples: list[dict[str, np.ndarray]], mask_id: int) -> dict:
    """Realised mask rate (predicted / eligible positions), the replacement split of the
    predicted positions, predictions per example, and the lengths of maximal runs of
    consecutive predicted tokens (adjacent units merge into one run)."""
    if not examples:
        return {"examples": 0}
    ids = np.concatenate([e["input_ids"] for e in examples])
    labels = np.concatenate([e["labels"] for e in examples])
    eligible = np.concatenate([e["special_tokens_mask"] for e in examples]) == 0
    chosen = labels != IGNORE_INDEX
    n = int(chosen.sum())
    masked = int((ids[chosen] == mask_id).sum())
    unchanged = int((ids[chosen] == labels[chosen]).sum())
    runs = np.concatenate([_run_lengths(e["labels"] != IGNORE_INDEX) for e in examples])
    per_example = np.array([(e["labels"] != IGNORE_INDEX).sum() for e in examples])
    hist = np.bincount(np.minimum(runs, 11), minlength=12)[1:] / max(1, len(runs))
    return {
        "examples": len(examples),
        "eligible_tokens": int(eligible.sum()),
        "predictions": n,
        "mask_rate": n / max(1, int(eligible.sum())),
        "mask_token_fraction": masked / max(1, n),
        "random_token_fraction": (n - masked - unchanged) / max(1, n),
        "unchanged_fraction": unchanged / max(1, n),
        "predictions_per_example": float(per_example.mean()),
        "max_predictions_seen": int(per_example.max()),
        "masked_run_length_mean": float(runs.mean()) if len(runs) else 0.0,
        "masked_run_lengths": {(str(k + 1) if k < 10 else ">10"): float(f) for k, f in enumerate(hist)},
    }


def _run_lengths(flags: np.ndarray) -> np.ndarray:
    """Lengths of the maximal runs of True in a 1-D bool array."""
    edges = np.diff(np.concatenate([[0], flags.astype(np.int8), [0]]))
    return np.flatnonzero(edges == -1) - np.flatnonzero(edges == 1)


# ---------------------------------------------------------------------------------------------
# BERT MLM


class MLM(_MaskedLM):
    """BERT masked LM over chunks of ``max_length - 2`` tokens: ``[CLS] tokens [SEP]``."""

    name = "mlm"
    tokenizer_kind = "wordpiece"  # BERT

    class Config(MaskingConfig):
        masking: str = "token"
        max_ngram: int = 3

    def __init__(self, corpus: Corpus, vocab: Vocab, config: Config | None = None):
        super().__init__(corpus, vocab, config)
        self.chunks = chunk_index(corpus, self.config.max_length - 2)  # (N, 3): document, start, end

    def __len__(self) -> int:
        return len(self.chunks)

    def example(self, index: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        d, s, e = (int(x) for x in self.chunks[index])
        ids, word_starts, eligible = self._single(self.corpus[d].slice(s, e))
        return self._masked_example(ids, self._choose(ids, word_starts, eligible, rng), eligible, rng)


# ---------------------------------------------------------------------------------------------
# sentence pairs: BERT NSP, ALBERT SOP


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


class _SentencePair(_MaskedLM):
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
        if b_end is None:  # the last sentence: pair the text before it with it (module doc)
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


# ---------------------------------------------------------------------------------------------
# ERNIE 1.0 knowledge masking

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


class KnowledgeMLM(_MaskedLM):
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
        """Phrase and entity n-gram tables from NPMI over evenly spaced documents (module doc)."""
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
