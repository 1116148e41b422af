"""The ``split``, ``tokenizer`` and ``tokenize`` sections of ``params.yaml``: train / validation /
test by document id, each tokenizer kind's settings, and the token stores with their mixture
of sources (``lmforge.tokenization``, ``lmforge.splits``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from ..schema import StrictModel as _Strict
from ..tokenizer_kinds import KINDS as TOKENIZER_KINDS


def _check_roles(allowed: set[str], required: set[str]):
    """A validator for ``special_tokens``: known roles only, the required ones present, no token twice."""

    def check(cls, value: dict[str, str]) -> dict[str, str]:
        unknown = set(value) - allowed
        if unknown:
            raise ValueError(f"unknown role(s) {sorted(unknown)}; allowed: {sorted(allowed)}")
        missing = required - set(value)
        if missing:
            raise ValueError(f"missing role(s) {sorted(missing)}")
        if len(set(value.values())) != len(value):
            raise ValueError("a token is given for two roles")
        if any(not t for t in value.values()):
            raise ValueError("empty token")
        return value

    return field_validator("special_tokens")(classmethod(check))


class BpeConfig(_Strict):
    """Byte-level BPE (GPT, BART, Transformer-XL): GPT-2 pre-tokenisation, no normalisation."""

    vocab_size: int = Field(8000, ge=300, description="including the 256 byte symbols and the specials")
    min_frequency: int = Field(2, ge=1)
    special_tokens: dict[str, str] = Field(
        {"bos": "<s>", "pad": "<pad>", "eos": "</s>", "unk": "<unk>", "mask": "<mask>"},
        description="role -> token, at ids 0, 1, ... in this order",
    )

    _roles = _check_roles({"bos", "pad", "eos", "unk", "mask"}, required={"pad", "eos"})


class WordPieceConfig(_Strict):
    """WordPiece (BERT, ERNIE)."""

    vocab_size: int = Field(8000, ge=100)
    min_frequency: int = Field(2, ge=1)
    lowercase: bool = True
    strip_accents: bool | None = Field(None, description="null: strip accents when lower-casing, as BERT does")
    special_tokens: dict[str, str] = Field(
        {"pad": "[PAD]", "unk": "[UNK]", "cls": "[CLS]", "sep": "[SEP]", "mask": "[MASK]"},
        description="role -> token, at ids 0, 1, ... in this order",
    )

    _roles = _check_roles({"pad", "unk", "cls", "sep", "mask"}, required={"pad", "unk", "cls", "sep", "mask"})


class UnigramConfig(_Strict):
    """Unigram with Metaspace (T5, Switch, ALBERT, XLNet): one vocabulary with every family's specials."""

    vocab_size: int = Field(8000, ge=100, description="including the specials and the sentinels")
    sentinels: int = Field(100, ge=0, description="T5 <extra_id_N> tokens at the top ids")
    normalization: Literal["nfkc", "none"] = "nfkc"
    lowercase: bool = False
    special_tokens: dict[str, str] = Field(
        {"pad": "<pad>", "eos": "</s>", "unk": "<unk>", "bos": "<s>", "cls": "<cls>", "sep": "<sep>",
         "mask": "<mask>", "eod": "<eod>", "eop": "<eop>"},
        description="role -> token, at ids 0, 1, ... in this order (T5: pad 0, eos 1, unk 2)",
    )

    _roles = _check_roles({"pad", "eos", "unk", "bos", "cls", "sep", "mask", "eod", "eop"}, required={"pad", "eos", "unk"})

    @field_validator("special_tokens")
    @classmethod
    def _t5_ids(cls, value: dict[str, str]) -> dict[str, str]:
        if list(value)[:3] != ["pad", "eos", "unk"]:
            raise ValueError("the first three roles must be pad, eos, unk (ids 0, 1, 2 as in T5)")
        return value

    @model_validator(mode="after")
    def _room_for_pieces(self) -> UnigramConfig:
        reserved = self.sentinels + len(self.special_tokens)
        if reserved >= self.vocab_size:
            raise ValueError(f"sentinels ({self.sentinels}) and the {len(self.special_tokens)} special tokens take "
                             f"{reserved} of vocab_size ({self.vocab_size}) ids, leaving none for learned pieces; "
                             f"sentinels must be below {self.vocab_size - len(self.special_tokens)}")
        return self


class CharConfig(_Strict):
    """ELMo characters (bilm scheme) and the word vocabulary its softmax predicts."""

    word_vocab_size: int = Field(10000, ge=10)
    min_frequency: int = Field(1, ge=1)
    max_characters: int = Field(50, ge=3, description="characters per token, bow and eow included")
    special_tokens: dict[str, str] = Field(
        {"pad": "<pad>", "unk": "<unk>", "bos": "<S>", "eos": "</S>"},
        description="role -> word-vocabulary token, at ids 0, 1, ... in this order",
    )

    _roles = _check_roles({"pad", "unk", "bos", "eos"}, required={"pad", "unk", "bos", "eos"})


class SplitConfig(_Strict):
    """Train / validation / test by a stable hash of the document id."""

    validation: float = Field(0.05, ge=0.0, lt=1.0)
    test: float = Field(0.05, ge=0.0, lt=1.0)
    salt: str = "lmforge"

    @field_validator("test")
    @classmethod
    def _leaves_training_data(cls, value: float, info: Any) -> float:
        if value + info.data.get("validation", 0.0) >= 1.0:
            raise ValueError("validation + test must be below 1 (nothing would be left to train on)")
        return value


TokenizerKind = Literal[TOKENIZER_KINDS]  # the kinds of tokenizer_kinds.py


class TokenizerConfig(_Strict):
    input: str | None = Field(None, description="clean Parquet shards; null: quality.output when quality is enabled, "
                                                "else clean.output")
    output: str = "data/tokenizers"
    kinds: list[TokenizerKind] = Field(list(TOKENIZER_KINDS), min_length=1)
    max_training_documents: int | None = Field(None, ge=1)
    bpe: BpeConfig = BpeConfig()
    wordpiece: WordPieceConfig = WordPieceConfig()
    unigram: UnigramConfig = UnigramConfig()
    char: CharConfig = CharConfig()


class MixtureRule(_Strict):
    """How much of one source the token store's train split takes (``tokenize.mixture``): every
    document ``floor(weight)`` times and a deterministic ``weight - floor(weight)`` of them once
    more, then at most ``max_tokens`` tokens of those copies."""

    weight: float = Field(1.0, ge=0.0, le=1000.0, description="copies per document: 2.5 = each twice and half of them a third time; 0.3 = 30% of them")
    max_tokens: int | None = Field(None, ge=1, description="the source's train tokens at most (documents in a deterministic order until the cap); null: no cap")

    @model_validator(mode="before")
    @classmethod
    def _says_something(cls, data: Any) -> Any:
        if isinstance(data, dict) and not data:
            raise ValueError("give weight and/or max_tokens")
        return data


class TokenizeConfig(_Strict):
    output: str = "data/tokens"
    kinds: list[TokenizerKind] | None = Field(None, description="null: every kind in tokenizer.kinds")
    batch_size: int = Field(1000, ge=1, description="documents encoded per batch (bounds memory)")
    mixture: dict[str, MixtureRule] = Field(
        default_factory=dict, description="source (as the clean stage records it, or a folder of them) -> its weight "
                                          "and/or max_tokens in the train split; {}: every document once")
    mixture_seed: int = Field(0, ge=0, description="which documents a fractional weight or a cap takes")

    @field_validator("mixture")
    @classmethod
    def _named_sources(cls, value: dict[str, MixtureRule]) -> dict[str, MixtureRule]:
        for name in value:
            if not name.strip() or name != name.strip():
                raise ValueError(f"{name!r}: a source name, without surrounding spaces")
        return value
