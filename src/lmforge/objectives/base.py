"""What every objective shares: the special-token ids, the documents it reads, seeding.

An objective is a pure function of (its input, the vocabulary's special ids, its parameters,
a seeded ``numpy.random.Generator``) that returns one *example*: a dict of 1-D (or 2-D)
NumPy arrays with documented keys. Padding and packing into batches are the feature
converters' job (``features.py``), not the objective's. Nothing here knows a tokenizer's
spelling conventions: special ids come from the tokenizer's saved roles, word and sentence
boundaries from the token store's flags.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from ..errors import LmforgeError

IGNORE_INDEX = -100  # label value the losses skip (PyTorch's cross_entropy default)


class ObjectiveError(LmforgeError, ValueError):
    """Bad objective parameters or a tokenizer without the special tokens an objective needs."""


@dataclass(frozen=True)
class Vocab:
    """Vocabulary size and the special-token ids an objective may need."""

    size: int
    pad: int | None = None
    eos: int | None = None
    bos: int | None = None
    unk: int | None = None
    cls: int | None = None
    sep: int | None = None
    mask: int | None = None
    sentinels: tuple[int, ...] = ()  # <extra_id_0>, <extra_id_1>, ... (ids counting down)
    special_ids: frozenset[int] = field(default_factory=frozenset)
    char_table: np.ndarray | None = field(default=None, compare=False, repr=False)  # ELMo: (size, max_chars)

    def require(self, objective: str, *roles: str) -> None:
        missing = [r for r in roles if getattr(self, r) is None]
        if missing:
            raise ObjectiveError(f"{objective}: the tokenizer has no {', '.join(missing)} token (needed by this objective)")

    def require_sentinels(self, objective: str, n: int) -> None:
        if len(self.sentinels) < n:
            raise ObjectiveError(f"{objective}: needs {n} sentinel tokens, the tokenizer has {len(self.sentinels)}")

    @property
    def special_array(self) -> np.ndarray:
        return np.array(sorted(self.special_ids), dtype=np.int64)

    @classmethod
    def from_tokenizer(cls, directory: str | Path) -> Vocab:
        """Read the roles saved next to ``tokenizer.json`` (``tokenizer_config.json``)."""
        from tokenizers import Tokenizer

        d = Path(directory)
        tok = Tokenizer.from_file(str(d / "tokenizer.json"))
        config = json.loads((d / "tokenizer_config.json").read_text(encoding="utf-8"))
        roles = {}
        for role in ("pad", "eos", "bos", "unk", "cls", "sep", "mask"):
            token = config.get(f"{role}_token")
            if isinstance(token, dict):  # older transformers store AddedToken dicts
                token = token.get("content")
            roles[role] = tok.token_to_id(token) if token else None
        sentinels = []
        while (i := tok.token_to_id(f"<extra_id_{len(sentinels)}>")) is not None:
            sentinels.append(i)
        specials = {i for i in roles.values() if i is not None} | set(sentinels)
        extra = config.get("extra_special_tokens") or config.get("additional_special_tokens") or []
        specials |= {tok.token_to_id(t) for t in extra if tok.token_to_id(t) is not None}
        table = np.load(d / "char_table.npy") if (d / "char_table.npy").exists() else None
        return cls(size=tok.get_vocab_size(), sentinels=tuple(sentinels), special_ids=frozenset(specials), char_table=table, **roles)


@dataclass(frozen=True)
class Document:
    """One document of a token store split: its tokens and boundaries."""

    tokens: np.ndarray  # int64
    word_starts: np.ndarray  # bool, one per token
    sentence_starts: np.ndarray  # bool, one per token
    index: int = 0

    def __len__(self) -> int:
        return len(self.tokens)

    def slice(self, start: int, end: int) -> Document:
        return Document(self.tokens[start:end], self.word_starts[start:end], self.sentence_starts[start:end], self.index)

    def sentences(self) -> list[tuple[int, int]]:
        """(start, end) token ranges of the sentences."""
        starts = np.flatnonzero(self.sentence_starts).tolist()
        if not starts or starts[0] != 0:
            starts = [0] + starts
        ends = starts[1:] + [len(self.tokens)]
        return [(s, e) for s, e in zip(starts, ends) if e > s]


class Corpus:
    """Documents by index: what an objective reads. This one holds a list (tests, benchmarks);
    ``lmforge.datasets.open.StoreCorpus`` reads a token store split."""

    def __init__(self, documents: Sequence[Document] = ()):
        self._docs = list(documents)

    def __len__(self) -> int:
        return len(self._docs)

    def __getitem__(self, d: int) -> Document:
        return self._docs[d]


def rng_for(seed: int, epoch: int, index: int) -> np.random.Generator:
    """The generator for one example in one epoch: dynamic masking re-draws every epoch,
    yet any (epoch, example) can be reproduced alone."""
    return np.random.default_rng([seed, epoch, index])


def check_rate(objective: str, name: str, value: float, low: float = 0.0, high: float = 1.0) -> None:
    if not (low < value < high):
        raise ObjectiveError(f"{objective}: {name} must be in ({low:g}, {high:g}), got {value}")


def check_length(objective: str, name: str, value: int, minimum: int) -> None:
    if value < minimum:
        raise ObjectiveError(f"{objective}: {name} must be at least {minimum}, got {value}")


class Objective(ABC):
    """One pretraining objective over a corpus: an example index and a seeded example builder.

    Subclasses set ``name``, ``family`` (which feature converter pads them: ``encoder``,
    ``decoder`` or ``encoder_decoder``), ``tokenizer_kind`` (whose token store it reads:
    ``bpe``, ``wordpiece``, ``unigram`` or ``char``), ``Config`` (a ``StrictModel`` of the
    objective's parameters, with the reference values as defaults) and implement ``__len__`` and
    ``example``. ``example`` must depend only on (corpus, vocab, config, index, rng): dynamic
    masking passes ``rng_for(seed, epoch, index)``. ``ordered`` objectives (Transformer-XL
    segments) must be consumed in index order, never shuffled.
    """

    name: str = ""
    family: str = "encoder"
    tokenizer_kind: str = ""
    ordered: bool = False
    Config: type = object

    def __init__(self, corpus: Corpus, vocab: Vocab, config=None):
        self.corpus = corpus
        self.vocab = vocab
        self.config = config if config is not None else self.Config()

    @abstractmethod
    def __len__(self) -> int:
        """Examples per epoch."""

    @abstractmethod
    def example(self, index: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """Example ``index`` (0 <= index < len(self)), drawn with ``rng``."""

    def statistics(self, examples: list[dict[str, np.ndarray]]) -> dict:
        """The objective's defining numbers measured on built examples (mask rate, label
        balance, span lengths, ...). The dataset stage adds the generic ones."""
        return {}
