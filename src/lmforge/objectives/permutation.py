"""Permutation language modelling (XLNet): about 1/k of a piece's tokens, chosen in spans of
whole words, are predicted in a sampled factorisation order, given as ``perm_mask`` and
``target_mapping``. See docs/OBJECTIVES.md.
"""

from __future__ import annotations

import numpy as np

from ..schema import StrictModel
from .base import IGNORE_INDEX, Corpus, Objective, ObjectiveError, Vocab, check_length
from .examples import chunk_index

CLS_SEGMENT_ID = 2  # XLNet's segment id for <cls>


class PermutationLMConfig(StrictModel):
    """XLNet's pretraining values: seq_len 512, num_predict 85 (= 512 / 6), spans of <= 5 words."""

    max_length: int = 512
    partial_prediction_k: float = 6.0
    max_span_length: int = 5
    num_predict: int | None = None  # rows of target_mapping; None: round(max_length / k)
    add_special_tokens: bool = True  # append <sep> <cls>


def span_length_probabilities(max_span_length: int) -> np.ndarray:
    """p(w) for span lengths w = 1..max_span_length words, proportional to 1/w."""
    p = 1.0 / np.arange(1, max_span_length + 1)
    return p / p.sum()


def sample_target_spans(
    word_starts: np.ndarray,
    candidates: np.ndarray,
    goal: int,
    max_span_length: int,
    k: float,
    rng: np.random.Generator,
) -> np.ndarray:
    """``(m, 2)`` sorted ``[start, end)`` target spans covering exactly ``goal`` candidate
    positions (``goal <= candidates.sum()``).

    Spans are whole words (a word starts where ``word_starts`` is set or after a non-candidate)
    of at most ``max_span_length`` words, never crossing a non-candidate; each takes a window of
    ~``k`` times its token length. Positions still missing at the end are single tokens chosen
    where they touch no other target when possible.
    """
    n = len(candidates)
    candidates = np.asarray(candidates, dtype=bool)
    if goal > int(candidates.sum()):
        raise ValueError(f"goal {goal} exceeds the {int(candidates.sum())} candidate positions")
    boundary = np.asarray(word_starts, dtype=bool).copy()  # a word starts here
    if n:
        boundary[0] = True
        boundary[1:] |= ~candidates[:-1]
    span_starts = np.flatnonzero(boundary & candidates)
    lengths = np.arange(1, max_span_length + 1)
    probs = span_length_probabilities(max_span_length)

    target = np.zeros(n, dtype=bool)
    spans: list[tuple[int, int]] = []
    count, cur = 0, 0
    while count < goal and cur < n:
        words = int(rng.choice(lengths, p=probs))
        left = int(rng.integers(0, max(1, round(words * (k - 1)))))  # context before the span
        i = int(np.searchsorted(span_starts, cur + left))
        if i == len(span_starts):
            break
        beg = int(span_starts[i])
        end, w = beg + 1, 1  # extend to `words` whole words, stopping at a non-candidate
        while end < n and candidates[end]:
            if boundary[end]:
                if w == words:
                    break
                w += 1
            end += 1
        if end - beg > goal - count:  # over budget: cut back to a word boundary that fits
            end = beg + goal - count
            while end > beg and not boundary[end]:
                end -= 1
            if end == beg:  # not even one whole word fits: the fill below finishes
                break
        target[beg:end] = True
        spans.append((beg, end))
        count += end - beg
        # the window is ~k times the span: what the left context did not use goes on the right
        cur = end + max(1, round((end - beg) * (k - 1)) - left)

    missing = goal - count
    if missing:
        for p in rng.permutation(np.flatnonzero(candidates & ~target)):
            if missing == 0:
                break
            if (p > 0 and target[p - 1]) or (p + 1 < n and target[p + 1]):
                continue
            target[p] = True
            spans.append((int(p), int(p) + 1))
            missing -= 1
        if missing:  # too crowded for isolated tokens: any free candidate
            for p in rng.choice(np.flatnonzero(candidates & ~target), missing, replace=False):
                target[p] = True
                spans.append((int(p), int(p) + 1))
    return np.array(sorted(spans), dtype=np.int64).reshape(-1, 2)


def factorisation_ranks(is_target: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A factorisation order as ranks: -1 for every non-target (all first, together), the
    targets a uniformly random permutation of 0..T-1."""
    ranks = np.full(len(is_target), -1, dtype=np.int64)
    positions = np.flatnonzero(is_target)
    ranks[positions] = rng.permutation(len(positions))
    return ranks


def permutation_mask(ranks: np.ndarray) -> np.ndarray:
    """``perm_mask[i, j] = 1`` (i cannot attend to j) iff j is a target (rank >= 0) and
    ``rank(i) <= rank(j)``; int8 [L, L]."""
    blocked = (ranks[:, None] <= ranks[None, :]) & (ranks[None, :] >= 0)  # [L(i), L(j)]
    return blocked.astype(np.int8)


def target_rows(input_ids: np.ndarray, is_target: np.ndarray, num_predict: int) -> tuple[np.ndarray, np.ndarray]:
    """``target_mapping`` [num_predict, L] (one-hot rows, targets in position order, zero rows
    after them) and ``labels`` [num_predict] (-100 on those zero rows)."""
    positions = np.flatnonzero(is_target)
    if len(positions) > num_predict:
        raise ValueError(f"{len(positions)} targets do not fit num_predict {num_predict}")
    mapping = np.zeros((num_predict, len(input_ids)), dtype=np.int8)
    mapping[np.arange(len(positions)), positions] = 1
    labels = np.full(num_predict, IGNORE_INDEX, dtype=np.int64)
    labels[: len(positions)] = input_ids[positions]
    return mapping, labels


class PermutationLM(Objective):
    """XLNet's permutation LM over sentence-aligned pieces of documents."""

    name = "permutation"
    tokenizer_kind = "unigram"  # XLNet
    family = "encoder"
    Config = PermutationLMConfig

    def __init__(self, corpus: Corpus, vocab: Vocab, config: PermutationLMConfig | None = None):
        super().__init__(corpus, vocab, config)
        cfg = self.config
        specials = 2 if cfg.add_special_tokens else 0
        check_length(self.name, "max_length", cfg.max_length, specials + 1)
        k = cfg.partial_prediction_k
        if not k > 1:
            raise ObjectiveError(f"{self.name}: partial_prediction_k must be > 1 (predict 1/k of the tokens), got {k}")
        check_length(self.name, "max_span_length", cfg.max_span_length, 1)
        self.num_predict = cfg.num_predict if cfg.num_predict is not None else max(1, round(cfg.max_length / k))
        check_length(self.name, "num_predict", self.num_predict, 1)
        if self.num_predict > cfg.max_length - specials:
            raise ObjectiveError(f"{self.name}: num_predict ({self.num_predict}) exceeds "
                                 f"the {cfg.max_length - specials} text tokens of an example")
        if cfg.add_special_tokens:
            vocab.require(self.name, "sep", "cls")
        self.special = vocab.special_array
        self.content_length = cfg.max_length - specials
        self.index = chunk_index(corpus, self.content_length)

    def __len__(self) -> int:
        return len(self.index)

    def example(self, index: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        cfg = self.config
        d, start, end = (int(x) for x in self.index[index])
        doc = self.corpus[d].slice(start, end)
        tokens = np.asarray(doc.tokens, dtype=np.int64)
        candidates = ~np.isin(tokens, self.special)
        n = int(candidates.sum())
        goal = min(self.num_predict, max(1, round(n / cfg.partial_prediction_k))) if n else 0
        spans = sample_target_spans(doc.word_starts, candidates, goal, cfg.max_span_length, cfg.partial_prediction_k, rng)
        is_target = np.zeros(len(tokens), dtype=bool)
        for s, e in spans:
            is_target[s:e] = True

        out: dict[str, np.ndarray] = {}
        if cfg.add_special_tokens:  # XLNet: text <sep> <cls>
            tokens = np.concatenate([tokens, [self.vocab.sep, self.vocab.cls]]).astype(np.int64)
            is_target = np.concatenate([is_target, [False, False]])
            out["token_type_ids"] = np.concatenate([np.zeros(len(tokens) - 1, np.int64), [CLS_SEGMENT_ID]])
        ranks = factorisation_ranks(is_target, rng)
        mapping, labels = target_rows(tokens, is_target, self.num_predict)
        return {"input_ids": tokens, "perm_mask": permutation_mask(ranks), "target_mapping": mapping, "labels": labels, **out}

    def statistics(self, examples: list[dict[str, np.ndarray]]) -> dict:
        text_tokens = targets = special_targets = 0
        runs: list[int] = []
        for e in examples:
            ids = e["input_ids"]
            real = e["labels"] != IGNORE_INDEX
            positions = np.sort(e["target_mapping"][real].argmax(axis=1))
            text_tokens += int((~np.isin(ids, self.special)).sum())
            targets += len(positions)
            special_targets += int(np.isin(ids[positions], self.special).sum())
            if len(positions):
                breaks = np.flatnonzero(np.diff(positions) != 1) + 1  # contiguous runs of targets
                runs += [len(r) for r in np.split(positions, breaks)]
        run_lengths = np.array(runs, dtype=np.int64)
        hist = np.bincount(run_lengths) if len(run_lengths) else np.zeros(1, np.int64)
        return {
            "num_predict": self.num_predict,
            "target_fraction": round(targets / max(1, text_tokens), 6),
            "targets_per_example": round(targets / max(1, len(examples)), 3),
            "special_targets": special_targets,
            "target_run_tokens": {
                "mean": round(float(run_lengths.mean()), 3) if len(run_lengths) else 0.0,
                "max": int(run_lengths.max()) if len(run_lengths) else 0,
                "histogram": {str(n): int(c) for n, c in enumerate(hist) if c},
            },
        }
