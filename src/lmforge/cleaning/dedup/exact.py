"""Exact-content hashes of documents, for dedup against earlier clean outputs
(``dedup/prior.py``): 128 bits of the lightly normalised text, and the records that partition
them by hash so that one partition is matched at a time."""

from __future__ import annotations

import unicodedata
from pathlib import Path

import numpy as np
import xxhash

from ..storage import save_partitioned

EXACT_HASH = "xxh3_128"
EXACT_TEXT = "unicode NFC, each run of whitespace one space, no leading or trailing space, UTF-8"

# an exact hash with where its document is: this run's ordinal, or a prior's (index, shard, row)
EXACT_DTYPE = np.dtype([("lo", "<u8"), ("hi", "<u8"), ("ordinal", "<i8"), ("shard", "<i4"), ("row", "<i4")])


def exact_text(text: str) -> bytes:
    """The text an exact hash is of: NFC, whitespace runs as one space, stripped, UTF-8. Case,
    punctuation and digits count (near dedup is the looser match)."""
    if not text.isascii():
        text = unicodedata.normalize("NFC", text)
    return " ".join(text.split()).encode("utf-8")


def exact_hashes(texts: list[str]) -> np.ndarray:
    """(texts, 2) uint64: the low and high halves of XXH3-128 of :func:`exact_text`."""
    digests = [xxhash.xxh3_128_intdigest(exact_text(t)) for t in texts]
    out = np.empty((len(texts), 2), dtype=np.uint64)
    out[:, 0] = [h & 0xFFFFFFFFFFFFFFFF for h in digests]
    out[:, 1] = [h >> 64 for h in digests]
    return out


def exact_records(hashes: np.ndarray, ordinal: np.ndarray, shard: int | np.ndarray, row: np.ndarray) -> np.ndarray:
    recs = np.zeros(hashes.shape[0], dtype=EXACT_DTYPE)
    recs["lo"], recs["hi"] = hashes[:, 0], hashes[:, 1]
    recs["ordinal"], recs["shard"], recs["row"] = ordinal, shard, row
    return recs


def save_exact_partitioned(path: Path, recs: np.ndarray, n_parts: int) -> None:
    save_partitioned(path, recs, (recs["lo"] % np.uint64(n_parts)).astype(np.int64), n_parts)
