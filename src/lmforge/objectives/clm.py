"""Causal language modelling (GPT): next-token prediction over contiguous blocks of the corpus
stream (every document followed by ``eos``). ``labels`` equal ``input_ids``: the model shifts
once. ``TokenStream`` is shared with ``segments``. See docs/OBJECTIVES.md.
"""

from __future__ import annotations

import numpy as np

from ..schema import StrictModel
from .base import Corpus, Objective, Vocab, check_length


class TokenStream:
    """The corpus as one stream, every document followed by ``eos``, read lazily by position.

    Only the document lengths are held in memory; ``slice`` reads the documents it overlaps
    (keeping the last one read, since consecutive slices usually fall in the same document).
    """

    def __init__(self, corpus: Corpus, eos: int):
        self.corpus = corpus
        self.eos = eos
        lengths = np.array([len(corpus[d]) + 1 for d in range(len(corpus))], dtype=np.int64)  # +1: the eos
        # document d occupies [offsets[d], offsets[d + 1]); its eos is at offsets[d + 1] - 1
        self.offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        self._cached: tuple[int, np.ndarray] | None = None

    def __len__(self) -> int:
        return int(self.offsets[-1])

    def _document(self, d: int) -> np.ndarray:
        """Document ``d``'s tokens followed by eos."""
        if self._cached is None or self._cached[0] != d:
            tokens = np.asarray(self.corpus[d].tokens, dtype=np.int64)
            self._cached = (d, np.append(tokens, np.int64(self.eos)))
        return self._cached[1]

    def slice(self, start: int, end: int) -> np.ndarray:
        """Stream positions ``[start, end)`` as int64 (0 <= start <= end <= len)."""
        if not 0 <= start <= end <= len(self):
            raise IndexError(f"stream slice [{start}, {end}) outside [0, {len(self)})")
        out = np.empty(end - start, dtype=np.int64)
        pos = start
        d = int(np.searchsorted(self.offsets, start, side="right")) - 1
        while pos < end:
            doc = self._document(d)
            lo = pos - int(self.offsets[d])
            n = min(len(doc) - lo, end - pos)
            out[pos - start : pos - start + n] = doc[lo : lo + n]
            pos += n
            d += 1
        return out

    def to_array(self) -> np.ndarray:
        """The whole stream (tests and small corpora)."""
        return self.slice(0, len(self))


class CausalLMConfig(StrictModel):
    """GPT-style packed blocks. ``block_size`` 512 is GPT-1's context (GPT-2 used 1024)."""

    block_size: int = 512


class CausalLM(Objective):
    """Contiguous ``block_size`` blocks of the eos-separated corpus stream; labels == inputs."""

    name = "clm"
    tokenizer_kind = "bpe"  # GPT
    family = "decoder"
    Config = CausalLMConfig

    def __init__(self, corpus: Corpus, vocab: Vocab, config: CausalLMConfig | None = None):
        super().__init__(corpus, vocab, config)
        check_length(self.name, "block_size", self.config.block_size, 2)
        vocab.require(self.name, "eos")
        self.stream = TokenStream(corpus, vocab.eos)

    def __len__(self) -> int:
        return len(self.stream) // self.config.block_size

    def example(self, index: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        # Deterministic: rng is accepted for the common interface and not used.
        if not 0 <= index < len(self):
            raise IndexError(index)
        size = self.config.block_size
        block = self.stream.slice(index * size, (index + 1) * size)
        return {"input_ids": block, "labels": block.copy()}

    def statistics(self, examples: list[dict[str, np.ndarray]]) -> dict:
        ids = np.concatenate([e["input_ids"] for e in examples]) if examples else np.zeros(0, np.int64)
        stream = len(self.stream)
        return {
            "block_size": self.config.block_size,
            "blocks": len(examples),
            "tokens": int(len(ids)),
            "eos_fraction": round(float((ids == self.vocab.eos).mean()), 6) if len(ids) else 0.0,
            "labels_equal_inputs": all(np.array_equal(e["labels"], e["input_ids"]) for e in examples),
            "stream_tokens": stream,
            "stream_tokens_dropped": stream - len(self) * self.config.block_size,
        }
