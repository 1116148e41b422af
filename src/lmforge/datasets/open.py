"""Opening an objective over a token store split, and drawing its examples epoch by epoch."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..config import Params
from ..layout import token_store_dir, tokenizer_dir
from ..objectives.base import Corpus, Document, Objective, ObjectiveError, Vocab, rng_for
from ..objectives.registry import OBJECTIVES, tokenizer_kind
from ..token_flags import SENTENCE_START, WORD_START
from ..tokenization.store import SplitArrays, TokenStore


class StoreCorpus(Corpus):
    """The documents of a token store split, read from its memory-mapped arrays on demand."""

    def __init__(self, split: SplitArrays):
        super().__init__()
        self._split = split

    def __len__(self) -> int:
        return self._split.documents

    def __getitem__(self, d: int) -> Document:
        s = self._split
        lo, hi = int(s.doc_offsets[d]), int(s.doc_offsets[d + 1])
        flags = np.asarray(s.flags[lo:hi])
        return Document(np.asarray(s.tokens[lo:hi], dtype=np.int64), (flags & WORD_START) > 0, (flags & SENTENCE_START) > 0, d)


def store_corpus(store_dir: str | Path, split: str = "train", tokenizer: str | Path | None = None) -> StoreCorpus:
    """Split ``split`` of the token store at ``store_dir`` (checked against ``tokenizer`` when given)."""
    return StoreCorpus(TokenStore(store_dir, tokenizer=tokenizer).split(split))


def open_objective(params: Params, name: str, split: str = "train") -> Objective:
    """The objective ``name`` over ``split`` of its tokenizer kind's token store."""
    if name not in OBJECTIVES:
        raise ObjectiveError(f"unknown objective {name!r}; known: {', '.join(sorted(OBJECTIVES))}")
    kind = tokenizer_kind(name)
    tok_dir = tokenizer_dir(params, kind)
    vocab = Vocab.from_tokenizer(tok_dir)
    corpus = store_corpus(token_store_dir(params, kind), split, tokenizer=tok_dir)
    return OBJECTIVES[name](corpus, vocab, getattr(params.dataset, name))


class ObjectiveDataset:
    """A map-style dataset (``torch.utils.data.Dataset`` protocol) drawing example ``i`` of the
    current epoch with ``rng_for(seed, epoch, i)``. Call ``set_epoch`` between epochs."""

    def __init__(self, objective: Objective, seed: int = 0, epoch: int = 0):
        self.objective = objective
        self.seed = seed
        self.epoch = epoch

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return len(self.objective)

    def __getitem__(self, index: int) -> dict[str, np.ndarray]:
        if not 0 <= index < len(self.objective):
            raise IndexError(index)
        return self.objective.example(index, rng_for(self.seed, self.epoch, index))
