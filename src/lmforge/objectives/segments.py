"""Transformer-XL segments: the corpus stream cut into ``batch_size`` contiguous rows, read
``segment_length`` tokens at a time, so row b of batch t + 1 continues row b of batch t. The
objective is ``ordered`` (never shuffled) and its ``labels`` are already shifted. See
docs/OBJECTIVES.md.
"""

from __future__ import annotations

import numpy as np

from ..schema import StrictModel
from .base import Corpus, Objective, Vocab, check_length
from .clm import TokenStream


class SegmentsConfig(StrictModel):
    """``segment_length`` is ``tgt_len``; ``batch_size`` must equal the training batch size.
    60 rows is Transformer-XL's WikiText-103 base setting."""

    segment_length: int = 128
    batch_size: int = 60


def row_layout(stream_length: int, batch_size: int, segment_length: int) -> tuple[int, int]:
    """(steps per row, batches) for a stream cut into ``batch_size`` rows. A row of ``steps``
    tokens gives ``steps - 1`` (input, next token) pairs; zero batches if a row has < 2 tokens."""
    steps = stream_length // batch_size
    if steps < 2:
        return steps, 0
    return steps, -(-(steps - 1) // segment_length)  # ceil


class Segments(Objective):
    """Row ``b`` of batch ``t`` of Transformer-XL's ordered stream iterator."""

    name = "segments"
    tokenizer_kind = "bpe"  # Transformer-XL
    family = "decoder"
    ordered = True
    Config = SegmentsConfig

    def __init__(self, corpus: Corpus, vocab: Vocab, config: SegmentsConfig | None = None):
        super().__init__(corpus, vocab, config)
        check_length(self.name, "segment_length", self.config.segment_length, 1)
        check_length(self.name, "batch_size", self.config.batch_size, 1)
        vocab.require(self.name, "eos")
        self.stream = TokenStream(corpus, vocab.eos)
        self.steps, self.batches = row_layout(len(self.stream), self.config.batch_size, self.config.segment_length)

    def __len__(self) -> int:
        return self.batches * self.config.batch_size

    def example(self, index: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        # Deterministic: rng is accepted for the common interface and not used.
        if not 0 <= index < len(self):
            raise IndexError(index)
        t, b = divmod(index, self.config.batch_size)
        offset = t * self.config.segment_length  # within the row
        length = min(self.config.segment_length, self.steps - 1 - offset)
        start = b * self.steps + offset  # within the stream
        tokens = self.stream.slice(start, start + length + 1)  # one more: the last label
        return {"input_ids": tokens[:-1], "labels": tokens[1:].copy()}

    def statistics(self, examples: list[dict[str, np.ndarray]]) -> dict:
        ids = np.concatenate([e["input_ids"] for e in examples]) if examples else np.zeros(0, np.int64)
        return {
            "segment_length": self.config.segment_length,
            "batch_size": self.config.batch_size,
            "batches": self.batches,
            "row_tokens": self.steps,
            "segments": len(examples),
            "tokens": int(len(ids)),
            "eos_fraction": round(float((ids == self.vocab.eos).mean()), 6) if len(ids) else 0.0,
            "stream_tokens": len(self.stream),
            "stream_tokens_dropped": len(self.stream) - self.steps * self.config.batch_size,
        }
