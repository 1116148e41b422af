"""BERT's masked language model (``mlm``), and the masked-LM machinery that NSP/SOP
(``sentence_pairs.py``) and ERNIE's knowledge masking (``knowledge_masking.py``) share: the
80/10/10 replacement, the prediction budget and the masking statistics. See
docs/OBJECTIVES.md (masked language modelling) for the example keys and the reference values.
"""

from __future__ import annotations

import math

import numpy as np

from ..schema import StrictModel
from . import masking
from .base import IGNORE_INDEX, Corpus, Document, Objective, ObjectiveError, Vocab, check_length, check_rate
from .examples import chunk_index

MASKINGS = ("token", "whole_word", "ngram")


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


class MaskedLM(Objective):
    """Validation, special ids, masking and statistics shared by the masked-LM objectives."""

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


class MLM(MaskedLM):
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
