"""The tokenizer metrics (``measure``) on texts whose counts are known.

Each kind's pipeline (normaliser, pre-tokeniser, decoder) as the stage builds it, with a small
vocabulary set by hand, so that every token of every text can be counted here: bytes per
token, tokens per word, the unknown rate, the round-trip rate and the fertility histogram
follow from those counts.
"""

from __future__ import annotations

from tokenizers import models, pre_tokenizers, processors

from lmforge.config import TokenizerConfig
from lmforge.tokenization.train import build_bpe, build_char, build_unigram, build_wordpiece, measure

CFG = TokenizerConfig()


def _specials(kind: str) -> list[str]:
    return list(getattr(CFG, kind).special_tokens.values())


def _bpe(merges: list[tuple[str, str]]):
    tok, _ = build_bpe(CFG.bpe)
    pieces = _specials("bpe") + sorted(pre_tokenizers.ByteLevel.alphabet()) + ["".join(m) for m in merges]
    tok.model = models.BPE(vocab={t: i for i, t in enumerate(pieces)}, merges=merges)
    return tok


def _rates(m: dict) -> dict:
    return {k: m[k] for k in ("documents", "tokens", "tokens_per_word", "bytes_per_token", "unknown_rate", "round_trip_rate")}


def test_byte_level_bpe_without_merges_has_one_token_per_byte():
    # "naïve café": 12 UTF-8 bytes (ï and é take two each), 2 words; "the the": 7 bytes, 2 words
    m = measure(_bpe([]), "bpe", ["naïve café", "the the"], CFG)
    assert _rates(m) == {"documents": 2, "tokens": 19, "tokens_per_word": 19 / 4, "bytes_per_token": 1.0,
                         "unknown_rate": 0.0, "round_trip_rate": 1.0}


def test_byte_level_bpe_with_merges():
    # merges t+h, th+e, Ġ+the: "the the" is the | Ġthe (2 tokens); "naïve café" stays 12 byte tokens
    m = measure(_bpe([("t", "h"), ("th", "e"), ("\u0120", "the")]), "bpe", ["naïve café", "the the"], CFG)
    assert _rates(m) == {"documents": 2, "tokens": 14, "tokens_per_word": 14 / 4, "bytes_per_token": round(19 / 14, 4),
                         "unknown_rate": 0.0, "round_trip_rate": 1.0}
    # tokens per word: "naïve" 6 bytes, "café" 5 (the Ġ before it holds only the space, no word's
    # character), "the" 1 and "the" 1 (" the" is one token: it belongs to the word of its last character)
    assert m["fertility"] == {"documents": 2, "words": 4, "counts": [0, 2, 0, 0, 0, 1, 1, 0, 0]}


def test_wordpiece_counts_its_unknown_words():
    tok, _ = build_wordpiece(CFG.wordpiece)
    vocab = _specials("wordpiece") + ["un", "##able", "a"]
    tok.model = models.WordPiece(vocab={t: i for i, t in enumerate(vocab)}, unk_token="[UNK]", continuing_subword_prefix="##")
    # as the stage saves it: [CLS] ... [SEP] around an encoding that asks for special tokens (not counted)
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    # "Unable a xyz" -> un ##able a [UNK] (lower-cased; 12 bytes, 3 words); "unable a" -> un ##able a (8 bytes)
    m = measure(tok, "wordpiece", ["Unable a xyz", "unable a"], CFG)
    assert _rates(m) == {"documents": 2, "tokens": 7, "tokens_per_word": round(7 / 5, 4), "bytes_per_token": round(20 / 7, 4),
                         "unknown_rate": round(1 / 7, 6), "round_trip_rate": 0.5}  # "unable a [UNK]" is not the first text
    assert m["fertility"]["counts"][:3] == [0, 3, 2]  # a, xyz ([UNK]), a: 1 token; unable twice: 2


def test_unigram_counts_bytes_of_the_raw_text():
    tok, _ = build_unigram(CFG.unigram)
    specials = _specials("unigram")
    pieces = [(t, 0.0) for t in specials] + [("\u2581the", -1.0), ("\u2581cat", -1.0), ("\u2581", -2.0)] \
        + [(c, -3.0) for c in "thecat"]
    tok.model = models.Unigram(pieces, unk_id=specials.index("<unk>"), byte_fallback=False)
    # "the cat" -> ▁the ▁cat; "the  dog" -> ▁the ▁ <unk> (the spaces become one, "dog" one unknown
    # piece; 8 bytes, 2 words); "the\ncat\ncat" -> ▁the ▁cat ▁cat (3 words), decoded with spaces
    # where the newlines were
    texts = ["the cat", "the  dog", "the\ncat\ncat"]
    m = measure(tok, "unigram", texts, CFG)
    assert _rates(m) == {"documents": 3, "tokens": 8, "tokens_per_word": round(8 / 7, 4), "bytes_per_token": round(26 / 8, 4),
                         "unknown_rate": round(1 / 8, 6), "round_trip_rate": round(1 / 3, 6)}


def test_word_level_vocabulary_of_the_char_kind():
    tok, _ = build_char(CFG.char)
    tok.model = models.WordLevel(vocab={t: i for i, t in enumerate(_specials("char") + ["the", "cat", "sat", "on"])},
                                 unk_token="<unk>")
    # 6 tokens (mat unknown), 2 tokens, and 3 for "the cat." (the full stop is a word of its own, unknown)
    texts = ["the cat sat on the mat", "the cat", "the cat."]
    m = measure(tok, "char", texts, CFG)
    assert _rates(m) == {"documents": 3, "tokens": 11, "tokens_per_word": 11 / 10, "bytes_per_token": round(37 / 11, 4),
                         "unknown_rate": round(2 / 11, 6), "round_trip_rate": round(1 / 3, 6)}

