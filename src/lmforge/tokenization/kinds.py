"""Which tokenizer each architecture uses: declared once, as data.

A *kind* is one trained tokenizer shared by every architecture that uses it, so T5 and
Switch (and ALBERT and XLNet) read the same Unigram vocabulary and the same token store.
Transformer-XL, whose reference used a word-level WikiText-103 vocabulary, uses byte-level BPE
here: the segment objective only needs a token stream.
"""

from __future__ import annotations

from dataclasses import dataclass

KINDS = ("bpe", "wordpiece", "unigram", "char")

ARCHITECTURE_TOKENIZER: dict[str, str] = {
    "gpt": "bpe",
    "bart": "bpe",
    "transformer_xl": "bpe",
    "bert": "wordpiece",
    "ernie": "wordpiece",
    "t5": "unigram",
    "switch": "unigram",
    "albert": "unigram",
    "xlnet": "unigram",
    "elmo": "char",
}


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


def architectures_for(kind: str) -> list[str]:
    return sorted(a for a, k in ARCHITECTURE_TOKENIZER.items() if k == kind)
