"""The tokenizer kinds, and which one each architecture reads.

A *kind* is one trained tokenizer shared by every architecture that uses it, so T5 and
Switch (and ALBERT and XLNet) read the same Unigram vocabulary and the same token store.
An architecture's kind is not declared here: it is the kind its pretraining objective reads
(``tokenizer_kind`` on the objective), for the objectives its model heads consume. Transformer-XL,
whose reference used a word-level WikiText-103 vocabulary, uses byte-level BPE here: the segment
objective only needs a token stream.
"""

from __future__ import annotations

from dataclasses import dataclass

from .models.registry import ARCHITECTURES
from .objectives.registry import tokenizer_kind

ARCHITECTURE_TOKENIZER: dict[str, str] = {arch: tokenizer_kind(spec.objectives[0]) for arch, spec in ARCHITECTURES.items()}


@dataclass(frozen=True)
class KindInfo:
    name: str
    description: str
    round_trip: bool  # does decode(encode(x)) == x hold for any text?


KIND_INFO: dict[str, KindInfo] = {
    "bpe": KindInfo("bpe", "byte-level BPE, GPT-2 pre-tokenisation", round_trip=True),
    "wordpiece": KindInfo("wordpiece", "WordPiece over BERT pre-tokenisation", round_trip=False),
    "unigram": KindInfo("unigram", "Unigram LM with Metaspace", round_trip=False),
    "char": KindInfo("char", "ELMo characters (bilm) + word vocabulary", round_trip=False),
}

KINDS = tuple(KIND_INFO)


def architectures_for(kind: str) -> list[str]:
    return sorted(a for a, k in ARCHITECTURE_TOKENIZER.items() if k == kind)
