"""Reading the clean stage's output (its Parquet shards, in a stable order) for the stages after it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq

from ..config import Params
from ..layout import corpus_dir


def clean_shards(params: Params) -> dict[str, str] | None:
    """The clean output's shard checksums (from its stats.json): what a later stage depends on."""
    stats = corpus_dir(params) / "stats.json"
    if not stats.exists():
        return None
    return json.loads(stats.read_text(encoding="utf-8")).get("shards")


def iter_clean(directory: Path, batch_size: int = 1000) -> Iterator[tuple[str, str]]:
    """(id, text) of every kept document, shard by shard, streaming."""
    shards = sorted(directory.glob("shard-*.parquet"))
    for shard in shards:
        pf = pq.ParquetFile(shard)
        for batch in pf.iter_batches(batch_size=batch_size, columns=["id", "text"]):
            yield from zip(batch.column("id").to_pylist(), batch.column("text").to_pylist())
