"""Bidirectional language modelling (ELMo): one sentence per example, ``<S> w1 ... wn </S>``,
with forward ``labels`` and ``backward_labels`` both aligned to ``input_ids``, and each word's
characters (``char_ids``). See docs/OBJECTIVES.md.
"""

from __future__ import annotations

import numpy as np

from ..schema import StrictModel
from .base import IGNORE_INDEX, Corpus, Objective, ObjectiveError, Vocab, check_length


class BidirectionalLMConfig(StrictModel):
    """``max_length``: positions per example, the markers included (see docs/OBJECTIVES.md)."""

    max_length: int = 64


def sentence_pieces(start: int, end: int, max_length: int) -> list[tuple[int, int, bool, bool]]:
    """``(start, end, has_bos, has_eos)`` pieces of the sentence ``[start, end)`` such that
    ``(end - start) + has_bos + has_eos <= max_length`` (``max_length >= 3``): ``<S>`` only on
    the first piece, ``</S>`` only on the last; no piece is the bare ``</S>``."""
    pieces = []
    pos, bos = start, True
    while True:
        room = max_length - bos
        remaining = end - pos
        if remaining + 1 <= room:  # the rest fits with </S>
            pieces.append((pos, end, bos, True))
            return pieces
        take = room if remaining > room else room - 1  # leave a word to go with </S>
        pieces.append((pos, pos + take, bos, False))
        pos, bos = pos + take, False


def lm_labels(input_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(forward, backward) targets aligned to ``input_ids``: the next and the previous id,
    -100 where there is none."""
    forward = np.full(len(input_ids), IGNORE_INDEX, dtype=np.int64)
    backward = np.full(len(input_ids), IGNORE_INDEX, dtype=np.int64)
    forward[:-1] = input_ids[1:]
    backward[1:] = input_ids[:-1]
    return forward, backward


class BidirectionalLM(Objective):
    """ELMo's forward + backward LM over character-encoded sentences."""

    name = "bilm"
    tokenizer_kind = "char"  # ELMo
    family = "encoder"
    Config = BidirectionalLMConfig

    def __init__(self, corpus: Corpus, vocab: Vocab, config: BidirectionalLMConfig | None = None):
        super().__init__(corpus, vocab, config)
        check_length(self.name, "max_length", self.config.max_length, 3)
        vocab.require(self.name, "bos", "eos")
        table = vocab.char_table
        if table is None:
            raise ObjectiveError(f"{self.name}: the tokenizer has no char_table (char_table.npy): "
                                 "ELMo needs the character encoding of the word vocabulary (the 'char' tokenizer kind)")
        if table.ndim != 2 or table.shape[0] != vocab.size:
            raise ObjectiveError(f"{self.name}: char_table has shape {table.shape}, expected ({vocab.size}, max_characters)")
        self.char_table = np.asarray(table, dtype=np.int64)
        rows = []
        for d in range(len(corpus)):
            for s, e in corpus[d].sentences():
                rows += [(d, *piece) for piece in sentence_pieces(s, e, self.config.max_length)]
        self.index = np.array(rows, dtype=np.int64).reshape(-1, 5)  # (document, start, end, has_bos, has_eos)

    def __len__(self) -> int:
        return len(self.index)

    def example(self, index: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        # Deterministic: rng is accepted for the common interface and not used.
        d, start, end, bos, eos = (int(x) for x in self.index[index])
        words = np.asarray(self.corpus[d].tokens[start:end], dtype=np.int64)
        ids = np.concatenate([[self.vocab.bos] * bos, words, [self.vocab.eos] * eos]).astype(np.int64)
        if len(ids) and (ids.min() < 0 or ids.max() >= len(self.char_table)):
            raise ObjectiveError(f"{self.name}: document {d} has token ids outside the char_table's {len(self.char_table)} rows")
        forward, backward = lm_labels(ids)
        return {"input_ids": ids, "char_ids": self.char_table[ids], "labels": forward, "backward_labels": backward}

    def statistics(self, examples: list[dict[str, np.ndarray]]) -> dict:
        ids = np.concatenate([e["input_ids"] for e in examples]) if examples else np.zeros(0, np.int64)
        lengths = np.array([len(e["input_ids"]) for e in examples], dtype=np.int64)
        markers = np.isin(ids, [self.vocab.bos, self.vocab.eos])
        words = int((~markers).sum())
        whole = sum(int(e["input_ids"][0] == self.vocab.bos and e["input_ids"][-1] == self.vocab.eos) for e in examples)
        out = {
            "max_length": self.config.max_length,
            "max_characters": int(self.char_table.shape[1]),
            "examples": len(examples),
            "words": words,
            "words_per_example": round(words / max(1, len(examples)), 3),
            "whole_sentence_fraction": round(whole / max(1, len(examples)), 6),
            "mean_length": round(float(lengths.mean()), 3) if len(lengths) else 0.0,
            "forward_targets": int(sum((e["labels"] != IGNORE_INDEX).sum() for e in examples)),
            "backward_targets": int(sum((e["backward_labels"] != IGNORE_INDEX).sum() for e in examples)),
        }
        if self.vocab.unk is not None:
            out["unk_fraction"] = round(float((ids[~markers] == self.vocab.unk).mean()), 6) if words else 0.0
        return out
