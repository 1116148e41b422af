"""Train / validation / test assignment by a stable hash of the document id.

A document's split depends only on its id and the salt, so adding documents to a corpus never
moves an existing document to another split.
"""

from __future__ import annotations

import xxhash

from .config import SplitConfig

SPLITS = ("train", "validation", "test")


def split_of(doc_id: str, cfg: SplitConfig) -> str:
    u = xxhash.xxh64_intdigest(f"{cfg.salt}\x00{doc_id}".encode("utf-8")) / 2**64
    if u < cfg.test:
        return "test"
    if u < cfg.test + cfg.validation:
        return "validation"
    return "train"
