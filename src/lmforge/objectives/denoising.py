"""Denoising (BART): composable noise functions over a document's body (mask, delete, infill,
insert, permute sentences, rotate), composed by ``add_noise`` in the reference order; the
decoder is asked for the original. See docs/OBJECTIVES.md for the differences from fairseq.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..schema import StrictModel
from .base import Corpus, Objective, ObjectiveError, Vocab, check_length
from .examples import chunk_index

NAME = "denoising"


# ----------------------------------------------------------------------------- the noise functions


def replacement_tokens(count: int, mask_id: int, rng: np.random.Generator, random_token_prob: float = 0.0,
                       random_ids: np.ndarray | None = None) -> np.ndarray:
    """``count`` mask ids, each a random token from ``random_ids`` with ``random_token_prob``."""
    out = np.full(count, mask_id, dtype=np.int64)
    if random_token_prob > 0 and count:
        if random_ids is None or len(random_ids) == 0:
            raise ObjectiveError(f"{NAME}: random_token_prob > 0 needs a pool of random token ids")
        is_random = rng.random(count) < random_token_prob
        out[is_random] = random_ids[rng.integers(len(random_ids), size=int(is_random.sum()))]
    return out


def mask_tokens(tokens: np.ndarray, ratio: float, mask_id: int, rng: np.random.Generator, *,
                random_token_prob: float = 0.0, random_ids: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Token masking: (noised tokens, chosen positions as a bool array); length is kept."""
    tokens = np.asarray(tokens, dtype=np.int64)
    chosen = np.zeros(len(tokens), dtype=bool)
    chosen[rng.choice(len(tokens), size=math.ceil(len(tokens) * ratio), replace=False)] = True
    out = tokens.copy()
    out[chosen] = replacement_tokens(int(chosen.sum()), mask_id, rng, random_token_prob, random_ids)
    return out, chosen


def delete_tokens(tokens: np.ndarray, ratio: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Token deletion: (kept tokens, keep as a bool array over the input)."""
    tokens = np.asarray(tokens, dtype=np.int64)
    keep = np.ones(len(tokens), dtype=bool)
    keep[rng.choice(len(tokens), size=math.ceil(len(tokens) * ratio), replace=False)] = False
    return tokens[keep], keep


def sample_span_lengths(budget: int, poisson_lambda: float, rng: np.random.Generator) -> np.ndarray:
    """Span lengths for infilling: Poisson(lambda) draws, in order, until they cover ``budget``;
    the last one is cut so they sum to exactly ``budget`` (zeros before it are kept: insertions)."""
    if budget <= 0:
        return np.zeros(0, dtype=np.int64)
    lengths = rng.poisson(poisson_lambda, size=budget)
    while lengths.sum() < budget:
        lengths = np.concatenate([lengths, rng.poisson(poisson_lambda, size=budget)])
    cumulative = np.cumsum(lengths)
    last = int(np.searchsorted(cumulative, budget))  # first draw reaching the budget
    lengths = lengths[: last + 1].astype(np.int64)
    lengths[last] = budget - (cumulative[last - 1] if last else 0)
    return lengths


@dataclass(frozen=True)
class InfillSpan:
    """One infilled span: it stands at ``position`` in the noised tokens as ``replaced_by``
    tokens (1: one mask; 0: nothing; len(original): one mask per token) and took ``original``
    out of the text (empty for a zero-length span, which inserts one mask)."""

    position: int
    replaced_by: int
    original: np.ndarray = field(repr=False)


def infill_text(tokens: np.ndarray, ratio: float, poisson_lambda: float, mask_id: int, rng: np.random.Generator, *,
                word_starts: np.ndarray | None = None, replace_length: int = 1, random_token_prob: float = 0.0,
                random_ids: np.ndarray | None = None) -> tuple[np.ndarray, list[InfillSpan]]:
    """Text infilling: (noised tokens, the spans in text order).

    Units are words when ``word_starts`` is given (the first token always starts one), else
    tokens. ``ceil(units * ratio)`` units are covered by spans with lengths from
    ``sample_span_lengths``, placed uniformly at random without overlapping (adjacent spans stay
    separate masks).
    """
    tokens = np.asarray(tokens, dtype=np.int64)
    n = len(tokens)
    if word_starts is None:
        unit_starts = np.arange(n)
    else:
        starts = np.asarray(word_starts, dtype=bool).copy()
        if n:
            starts[0] = True
        unit_starts = np.flatnonzero(starts)
    bounds = np.append(unit_starts, n)  # unit u is tokens[bounds[u]:bounds[u + 1]]
    units = len(unit_starts)
    lengths = sample_span_lengths(math.ceil(units * ratio), poisson_lambda, rng)
    if len(lengths) == 0:
        return tokens.copy(), []

    # k spans among the free units: span j takes item slot[j] of the (free + k) items in a row
    free = units - int(lengths.sum())
    slots = np.sort(rng.choice(free + len(lengths), size=len(lengths), replace=False))
    first_units = slots - np.arange(len(lengths)) + np.concatenate([[0], np.cumsum(lengths)[:-1]])

    pieces, spans, written, cursor = [], [], 0, 0
    for u, length in zip(first_units.tolist(), lengths.tolist()):
        a, b = int(bounds[u]), int(bounds[u + length])
        pieces.append(tokens[cursor:a])
        written += a - cursor
        if length == 0 or replace_length == 1:
            count = 1
        elif replace_length == 0:
            count = 0
        else:
            count = b - a
        pieces.append(replacement_tokens(count, mask_id, rng, random_token_prob, random_ids))
        spans.append(InfillSpan(written, count, tokens[a:b].copy()))
        written += count
        cursor = b
    pieces.append(tokens[cursor:])
    return np.concatenate(pieces).astype(np.int64), spans


def insert_masks(tokens: np.ndarray, ratio: float, mask_id: int, rng: np.random.Generator, *,
                 random_token_prob: float = 0.0, random_ids: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Mask insertion: (noised tokens, which noised positions were inserted, as a bool array)."""
    tokens = np.asarray(tokens, dtype=np.int64)
    count = math.ceil(len(tokens) * ratio)
    inserted = np.zeros(len(tokens) + count, dtype=bool)
    inserted[rng.choice(len(inserted), size=count, replace=False)] = True
    out = np.empty(len(inserted), dtype=np.int64)
    out[~inserted] = tokens
    out[inserted] = replacement_tokens(count, mask_id, rng, random_token_prob, random_ids)
    return out, inserted


def permute_sentences(tokens: np.ndarray, sentence_starts: np.ndarray, ratio: float,
                      rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Sentence permutation: (noised tokens, ``positions`` with ``noised == tokens[positions]``).

    ``ceil(sentences * ratio)`` sentences, chosen at random, are shuffled among their own
    places; the others stay. Text before the first sentence start counts as a sentence.
    Apply ``positions`` to any array aligned with the tokens (word starts).
    """
    tokens = np.asarray(tokens, dtype=np.int64)
    starts = np.flatnonzero(np.asarray(sentence_starts, dtype=bool)).tolist()
    if not starts or starts[0] != 0:
        starts = [0] + starts
    bounds = [*starts, len(tokens)]
    num = len(starts)
    chosen = rng.permutation(num)[: math.ceil(num * ratio)]
    order = np.arange(num)
    order[chosen] = chosen[rng.permutation(len(chosen))]
    positions = np.concatenate([np.arange(bounds[i], bounds[i + 1]) for i in order] or [np.zeros(0)]).astype(np.int64)
    return tokens[positions], positions


def rotate_document(tokens: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """Document rotation: (noised tokens, offset): the body restarted at ``tokens[offset]``,
    ``1 <= offset < n`` (0, no rotation, for fewer than two tokens)."""
    tokens = np.asarray(tokens, dtype=np.int64)
    offset = int(rng.integers(1, len(tokens))) if len(tokens) >= 2 else 0
    return np.concatenate([tokens[offset:], tokens[:offset]]), offset


# ----------------------------------------------------------------------------- composition


@dataclass
class NoiseTrace:
    """What ``add_noise`` did to one body (for tests and diagnostics)."""

    permuted: np.ndarray | None = None  # positions from permute_sentences
    deleted: int = 0
    masked: int = 0
    infill_spans: list[InfillSpan] = field(default_factory=list)
    inserted: int = 0
    rotation: int = 0


def add_noise(tokens: np.ndarray, word_starts: np.ndarray, sentence_starts: np.ndarray, config: Denoising.Config,
              mask_id: int, random_ids: np.ndarray | None, rng: np.random.Generator) -> tuple[np.ndarray, NoiseTrace]:
    """Every noise ``config`` turns on, in the reference order, over one body (no <s>/</s>)."""
    c, trace = config, NoiseTrace()
    body = np.asarray(tokens, dtype=np.int64)
    words = np.asarray(word_starts, dtype=bool)
    random = {"random_token_prob": c.random_token_prob, "random_ids": random_ids}
    if c.permute_sentences > 0:
        body, trace.permuted = permute_sentences(body, sentence_starts, c.permute_sentences, rng)
        words = words[trace.permuted]
    if c.delete_ratio > 0:
        body, keep = delete_tokens(body, c.delete_ratio, rng)
        words, trace.deleted = words[keep], int((~keep).sum())
    if c.token_mask_ratio > 0:
        body, chosen = mask_tokens(body, c.token_mask_ratio, mask_id, rng, **random)
        trace.masked = int(chosen.sum())
    if c.infill_ratio > 0:
        body, trace.infill_spans = infill_text(body, c.infill_ratio, c.poisson_lambda, mask_id, rng,
                                               word_starts=words if c.whole_words else None,
                                               replace_length=c.replace_length, **random)
    if c.insert_ratio > 0:
        body, inserted = insert_masks(body, c.insert_ratio, mask_id, rng, **random)
        trace.inserted = int(inserted.sum())
    if c.rotate_ratio > 0 and rng.random() < c.rotate_ratio:
        body, trace.rotation = rotate_document(body, rng)
    return body, trace


# ----------------------------------------------------------------------------- the objective


class Denoising(Objective):
    """BART's pretraining objective over chunks of the corpus (see docs/OBJECTIVES.md)."""

    name = NAME
    tokenizer_kind = "bpe"  # BART
    family = "encoder_decoder"

    class Config(StrictModel):
        """Defaults: the BART-large recipe (fairseq ``--mask 0.3 --mask-random 0.1
        --mask-length span-poisson --poisson-lambda 3 --replace-length 1 --permute-sentences 1
        --rotate 0 --insert 0``)."""

        max_length: int = 512  # <s> body </s>, for labels and inputs alike
        infill_ratio: float = 0.3  # fraction of units (words) covered by infilled spans (fairseq --mask)
        poisson_lambda: float = 3.0  # mean infilled span length, in units
        replace_length: int = 1  # an infilled span becomes 1 mask; 0: nothing; -1: one mask per token
        whole_words: bool = True  # infill whole words (fairseq's span-poisson uses word starts)
        random_token_prob: float = 0.1  # share of masks written as random tokens (fairseq --mask-random)
        token_mask_ratio: float = 0.0  # token masking
        delete_ratio: float = 0.0  # token deletion
        insert_ratio: float = 0.0  # mask insertion, relative to the body length
        permute_sentences: float = 1.0  # fraction of sentences shuffled
        rotate_ratio: float = 0.0  # probability of rotating the document

    def __init__(self, corpus: Corpus, vocab: Vocab, config=None):
        super().__init__(corpus, vocab, config)
        validate(self.config, vocab)
        specials = set(vocab.special_ids) | set(vocab.sentinels)
        specials |= {getattr(vocab, r) for r in ("pad", "eos", "bos", "unk", "cls", "sep", "mask")} - {None}
        self.random_ids = np.setdiff1d(np.arange(vocab.size, dtype=np.int64), np.array(sorted(specials), dtype=np.int64))
        if self.config.random_token_prob > 0 and len(self.random_ids) == 0:
            raise ObjectiveError(f"{NAME}: random_token_prob > 0 but the vocabulary has no non-special token")
        self.body_length = body_length(self.config.max_length, self.config.insert_ratio)
        self.index = chunk_index(corpus, self.body_length)

    def __len__(self) -> int:
        return len(self.index)

    def example(self, index: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        v = self.vocab
        d, start, end = (int(x) for x in self.index[index])
        doc = self.corpus[d].slice(start, end)
        body, _ = add_noise(doc.tokens, doc.word_starts, doc.sentence_starts, self.config, v.mask, self.random_ids, rng)
        body = body[: self.config.max_length - 2]  # only zero-length spans outnumbering the rest can overrun
        labels = np.concatenate([[v.bos], doc.tokens, [v.eos]]).astype(np.int64)
        return {
            "input_ids": np.concatenate([[v.bos], body, [v.eos]]).astype(np.int64),
            "labels": labels,
            "decoder_input_ids": np.concatenate([[v.eos], labels[:-1]]).astype(np.int64),
        }

    def statistics(self, examples: list[dict[str, np.ndarray]]) -> dict:
        """Numbers read off the examples. ``mask_token_fraction`` counts ``<mask>`` ids in the
        inputs. The ``estimated_*`` numbers hold when infilling (replace_length 1) is the only
        noise that changes lengths: a span stands as one mask, written as a random token with
        ``random_token_prob``, so spans ~ masks / (1 - random_token_prob), and each span removed
        (its length - 1) tokens."""
        if not examples:
            return {}
        c = self.config
        inputs = [np.asarray(e["input_ids"])[1:-1] for e in examples]
        labels = [np.asarray(e["labels"])[1:-1] for e in examples]
        input_tokens, label_tokens = sum(map(len, inputs)), sum(map(len, labels))
        masks = sum(int((x == self.vocab.mask).sum()) for x in inputs)
        out = {
            "input_to_label_length": round(input_tokens / max(label_tokens, 1), 6),
            "mask_token_fraction": round(masks / max(input_tokens, 1), 6),
            "masks_per_example": round(masks / len(examples), 3),
            "removed_token_fraction": round((label_tokens - input_tokens) / max(label_tokens, 1), 6),
        }
        only_infill = c.infill_ratio > 0 and c.replace_length == 1 and not (c.token_mask_ratio or c.delete_ratio or c.insert_ratio)
        if only_infill and c.random_token_prob < 1:
            spans = masks / (1 - c.random_token_prob)
            covered = label_tokens - input_tokens + spans
            out["estimated_infill_spans_per_example"] = round(spans / len(examples), 3)
            out["estimated_masked_fraction"] = round(covered / max(label_tokens, 1), 6)
            out["estimated_infill_span_length_mean"] = round(covered / max(spans, 1), 4)
        return out


def body_length(max_length: int, insert_ratio: float) -> int:
    """The longest body whose noised form (plus inserted masks) still fits ``max_length`` with <s>, </s>."""
    room = max_length - 2
    n = room
    while n > 1 and n + math.ceil(n * insert_ratio) > room:
        n -= 1
    return n


def validate(config: Denoising.Config, vocab: Vocab) -> None:
    """Parameter ranges and the special tokens the objective writes."""
    check_length(NAME, "max_length", config.max_length, 3)
    for name in ("infill_ratio", "random_token_prob", "token_mask_ratio", "delete_ratio", "insert_ratio",
                 "permute_sentences", "rotate_ratio"):
        value = getattr(config, name)
        if not 0.0 <= value <= 1.0:
            raise ObjectiveError(f"{NAME}: {name} must be in [0, 1], got {value}")
    if not config.poisson_lambda > 0:
        raise ObjectiveError(f"{NAME}: poisson_lambda must be positive, got {config.poisson_lambda}")
    if config.replace_length not in (-1, 0, 1):
        raise ObjectiveError(f"{NAME}: replace_length must be -1, 0 or 1, got {config.replace_length}")
    vocab.require(NAME, "bos", "eos", "mask", "pad")
