"""ELMo's character encoding (the bilm scheme).

Each token becomes ``max_characters`` ids: beginning-of-word, the token's UTF-8 bytes (0-255,
cut to fit), end-of-word, then padding. The sentence markers are tokens of their own whose only
character is beginning- or end-of-sentence. Ids 256..260 are the five markers, so the character
vocabulary has 261 entries.

A leaf module (numpy only), shared by the char tokenizer, the objectives' padding and the
fine-tuning inputs.
"""

from __future__ import annotations

import numpy as np

BOS_CHAR, EOS_CHAR, BOW_CHAR, EOW_CHAR, PAD_CHAR = 256, 257, 258, 259, 260
CHAR_VOCAB_SIZE = 261


def encode_word(word: str, max_characters: int) -> np.ndarray:
    """Character ids of one word: [bow, bytes..., eow, pad, ...] (bytes cut to max - 2)."""
    ids = np.full(max_characters, PAD_CHAR, dtype=np.uint16)
    data = word.encode("utf-8")[: max_characters - 2]
    ids[0] = BOW_CHAR
    ids[1 : 1 + len(data)] = np.frombuffer(data, dtype=np.uint8)
    ids[1 + len(data)] = EOW_CHAR
    return ids


def marker(char_id: int, max_characters: int) -> np.ndarray:
    """A sentence marker token: [bow, bos|eos, eow, pad, ...]."""
    ids = np.full(max_characters, PAD_CHAR, dtype=np.uint16)
    ids[:3] = (BOW_CHAR, char_id, EOW_CHAR)
    return ids


def char_table(vocab: list[str], max_characters: int, bos: str, eos: str) -> np.ndarray:
    """(vocab_size, max_characters) character ids of every word-vocabulary entry, so a batch of
    word ids becomes character ids by indexing. ``bos``/``eos`` get the sentence markers."""
    table = np.stack([encode_word(w, max_characters) for w in vocab]) if vocab else np.zeros((0, max_characters), np.uint16)
    index = {w: i for i, w in enumerate(vocab)}
    table[index[bos]] = marker(BOS_CHAR, max_characters)
    table[index[eos]] = marker(EOS_CHAR, max_characters)
    return table
