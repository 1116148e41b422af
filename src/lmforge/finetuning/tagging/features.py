"""Tagging inputs: a sentence's words as sub-word tokens in an architecture's layout, each word's
tag on its first sub-token and the other positions ignored (-100), and the model's per-token
predictions back to one tag per word.

The words are joined by single spaces and tokenized as one text (so every sub-word token lies
inside one word, and a word reads as it would in running text); a token belongs to the word that
holds its last character. ELMo's char tokenizer takes the words as they are, one token each.
The layouts are the sequence classifiers' (``features.py``): ``[CLS] words [SEP]`` for the
encoders, ``<s> words </s>`` for GPT, ``words <eos>`` for Transformer-XL, ``words <sep> <cls>`` for
XLNet, ``prefix: words </s>`` for T5 and Switch (``<s>`` first for BART). Words that do not fit
in ``max_length`` are cut; they are predicted ``O`` when the sentence is scored.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ...objectives.base import IGNORE_INDEX
from ..features import (
    _CLASSIFICATION_LAYOUTS,
    TEXT_TO_TEXT,
    FeatureError,
    LoadedTokenizer,
    _check_arch,
    _TextToText,
    load_tokenizer,
)
from ..tasks import TaggedSentence

OUTSIDE = "O"


def word_tokens(loaded: LoadedTokenizer, words: Sequence[str], lead_space: bool) -> tuple[list[int], list[int | None]]:
    """(token ids, the word index of each token or None) of ``words`` joined by spaces
    (``lead_space``: one more space in front, as a text follows ``prefix:`` in text to text)."""
    lead = " " if lead_space else ""
    text = lead + " ".join(words)
    owner: list[int | None] = [None] * len(text)
    at = len(lead)
    for i, w in enumerate(words):
        owner[at:at + len(w)] = [i] * len(w)
        at += len(w) + 1
    enc = loaded.tokenizer.encode(text, add_special_tokens=False)
    return list(enc.ids), [owner[end - 1] if end > 0 else None for _, end in enc.offsets]


def _layout(arch: str, loaded: LoadedTokenizer, t2t: _TextToText | None, ids: list, max_length: int) -> dict:
    if t2t is not None:
        return t2t.inputs(ids, None, max_length)
    return _CLASSIFICATION_LAYOUTS[arch](arch, loaded, ids, None, max_length)


def encode_tagged(sentences: Sequence[TaggedSentence], arch: str, tokenizer_dir: str | Path, max_length: int,
                  tag_ids: dict[str, int], *, prefix: str = "") -> tuple[list[dict[str, np.ndarray]], list[list[int]]]:
    """(each sentence as unpadded model inputs for ``arch``'s tagging head, with ``labels``: one
    per position, the word's tag id on its first sub-token and -100 elsewhere; and each
    sentence's word indices in the order of its labelled positions)."""
    _check_arch(arch)
    if OUTSIDE not in tag_ids:
        raise FeatureError(f"a tagging task needs the tag {OUTSIDE!r} (words cut off by max_length are predicted "
                           f"{OUTSIDE!r}); its tags are {sorted(tag_ids)}")
    if max_length < 2:
        raise FeatureError(f"max_length must be at least 2, got {max_length}")
    loaded = load_tokenizer(arch, tokenizer_dir)
    t2t = _TextToText(arch, loaded, prefix or "task") if arch in TEXT_TO_TEXT else None
    empty = _layout(arch, loaded, t2t, [], max_length)
    start = _text_start(arch, t2t)
    out, tagged = [], []
    for s in sentences:
        unknown = sorted(set(s.tags) - set(tag_ids))
        if unknown:
            raise FeatureError(f"sentence {s.id or ' '.join(s.words[:8])!r}: tags {unknown} not in {sorted(tag_ids)}")
        if arch == "elmo":  # the char tokenizer's tokens are the words themselves
            ids, owners = list(s.words), list(range(len(s.words)))
        else:
            ids, owners = word_tokens(loaded, s.words, lead_space=t2t is not None)
        features = _layout(arch, loaded, t2t, ids, max_length)
        kept = len(features["input_ids"]) - len(empty["input_ids"])  # text tokens left after the cut
        labels = np.full(len(features["input_ids"]), IGNORE_INDEX, dtype=np.int64)
        words: list[int] = []
        for j in range(kept):
            word = owners[j]
            if word is not None and word not in words[-1:]:
                words.append(word)
                labels[start + j] = tag_ids[s.tags[word]]
        features["labels"] = labels
        out.append(features)
        tagged.append(words)
    return out, tagged


def _text_start(arch: str, t2t: _TextToText | None) -> int:
    """Where the text's first token sits in ``arch``'s layout."""
    if t2t is not None:
        return len(t2t.start) + len(t2t.prefix_ids)
    return 0 if arch in ("transformer_xl", "xlnet") else 1  # [CLS] / <s> / ELMo's <bos> first


def word_tags(predicted: Sequence[int], labels: Sequence[int], words: Sequence[int], n_words: int,
              tag_names: Sequence[str]) -> list[str]:
    """One predicted tag per word of a sentence of ``n_words``: the predicted tag id at each
    labelled position (``labels`` != -100) goes to its word (``words``, from ``encode_tagged``);
    a word without a position (cut off, or no token of its own) is ``O``."""
    at = [int(p) for p, g in zip(predicted, labels) if int(g) != IGNORE_INDEX]
    if len(at) != len(words):
        raise FeatureError(f"{len(at)} tagged positions for {len(words)} tagged words")
    out = [OUTSIDE] * n_words
    for word, tag in zip(words, at):
        out[word] = tag_names[tag]
    return out


