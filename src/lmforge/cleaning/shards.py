"""The clean stage's work shards: documents in and out of Parquet (with their global ordinal),
the counts a pass keeps per shard, and one resumable pass over a shard."""

from __future__ import annotations

import bisect
import json
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..artifacts import atomic_write_json
from ..corpus.document import SCHEMA, Document
from .storage import is_done, mark_done, write_parquet

WORK_SCHEMA = SCHEMA.append(pa.field("ordinal", pa.int64()))
_SAMPLE_CHARS = 2000


# Document lengths are counted in fixed bins (bytes of UTF-8 text), so the histogram costs the
# same memory whatever the corpus: bin i holds lengths in [LENGTH_BOUNDS[i], LENGTH_BOUNDS[i + 1]),
# the last bin every length from LENGTH_BOUNDS[-1] up.
LENGTH_BOUNDS: tuple[int, ...] = (0, *(1 << k for k in range(5, 21)))


class LengthHistogram:
    """Documents counted by their length in bytes, in the bins of :data:`LENGTH_BOUNDS`."""

    def __init__(self) -> None:
        self.counts = [0] * len(LENGTH_BOUNDS)

    def add(self, n_bytes: int) -> None:
        self.counts[bisect.bisect_right(LENGTH_BOUNDS, n_bytes) - 1] += 1

    def add_many(self, n_bytes: np.ndarray) -> None:
        """:meth:`add` for each of an array of lengths."""
        bins = np.searchsorted(np.array(LENGTH_BOUNDS), n_bytes, side="right") - 1
        for i, c in enumerate(np.bincount(bins, minlength=len(LENGTH_BOUNDS)).tolist()):
            self.counts[i] += c

    def add_counts(self, counts: list[int]) -> None:
        """Add another histogram's :meth:`to_list`."""
        self.counts = [a + b for a, b in zip(self.counts, counts, strict=True)]

    def to_list(self) -> list[int]:
        return list(self.counts)


def shard_name(i: int) -> str:
    return f"shard-{i:05d}"


# ``json.dumps(obj, sort_keys=True, ensure_ascii=False)`` builds this very encoder at every call
# (its other settings are json.dumps's defaults); one made once writes the same JSON.
_METADATA_ENCODER = json.JSONEncoder(sort_keys=True, ensure_ascii=False)


def docs_to_table(docs: list[Document], ordinals: list[int], schema: pa.Schema = WORK_SCHEMA,
                  metadata_json: list[str | None] | None = None) -> pa.Table:
    """``metadata_json``: where not None, a document's metadata as JSON, written as it is."""
    encode = _METADATA_ENCODER.encode

    def dumps(metadata: dict[str, Any]) -> str:
        return encode(metadata) if metadata else "{}"

    if metadata_json is None:
        meta = [dumps(d.metadata) for d in docs]
    else:
        meta = [m if m is not None else dumps(d.metadata) for d, m in zip(docs, metadata_json)]
    cols: dict[str, list[Any]] = {
        "id": [d.id for d in docs],
        "text": [d.text for d in docs],
        "url": [d.url for d in docs],
        "timestamp": [d.timestamp for d in docs],
        "source": [d.source for d in docs],
        "metadata": meta,
    }
    if "ordinal" in schema.names:
        cols["ordinal"] = ordinals
    return pa.Table.from_pydict(cols, schema=schema)


def _columns(table: pa.Table) -> dict[str, list[Any]]:
    return {name: table.column(name).to_pylist() for name in ("id", "text", "url", "timestamp", "source", "metadata", "ordinal")}


def table_to_docs(table: pa.Table) -> tuple[list[Document], list[int]]:
    c = _columns(table)
    loads = json.loads
    # "{}" (what this module writes for no metadata) is read as a new empty dict without the parser
    docs = [
        Document(id=i, text=t, url=u, timestamp=ts, source=src, metadata=loads(m) if m and m != "{}" else {})
        for i, t, u, ts, src, m in zip(c["id"], c["text"], c["url"], c["timestamp"], c["source"], c["metadata"])
    ]
    return docs, c["ordinal"]


def read_shard(wd: Path, phase: str, shard: int) -> tuple[list[Document], list[int]]:
    """The documents (and their ordinals) of ``shard`` as phase ``phase`` left them."""
    return table_to_docs(pq.read_table(wd / phase / f"{shard_name(shard)}.parquet"))


@dataclass
class ShardStats:
    """Counts of one shard in one phase; merged in shard order."""

    dropped: Counter = field(default_factory=Counter)  # reason -> documents
    dropped_bytes: Counter = field(default_factory=Counter)  # reason -> bytes (text when dropped)
    lines: Counter = field(default_factory=Counter)  # line:<reason> -> lines removed
    languages: Counter = field(default_factory=Counter)  # language ID's verdict -> documents it looked at
    languages_dropped: Counter = field(default_factory=Counter)  # ... of them dropped by the language rule
    samples: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def drop(self, reason: str, doc: Document, ordinal: int, keep_samples: int) -> None:
        self.dropped[reason] += 1
        self.dropped_bytes[reason] += len(doc.text.encode("utf-8"))
        bucket = self.samples.setdefault(reason, [])
        if len(bucket) < keep_samples:
            bucket.append({"id": doc.id, "ordinal": ordinal, "url": doc.url, "metadata": doc.metadata, "text": doc.text[:_SAMPLE_CHARS]})

    def to_dict(self) -> dict[str, Any]:
        return {"dropped": dict(self.dropped), "dropped_bytes": dict(self.dropped_bytes),
                "lines": dict(self.lines), "languages": dict(self.languages),
                "languages_dropped": dict(self.languages_dropped), "samples": self.samples}


def merge_stats(paths: Iterable[Path], keep_samples: int) -> ShardStats:
    """The per-shard stats files in ``paths``, added up in the given order."""
    total = ShardStats()
    for p in paths:
        d = json.loads(p.read_text(encoding="utf-8"))
        total.dropped.update(d["dropped"])
        total.dropped_bytes.update(d["dropped_bytes"])
        total.lines.update(d["lines"])
        total.languages.update(d.get("languages", {}))  # absent from the work of an earlier version
        total.languages_dropped.update(d.get("languages_dropped", {}))
        for reason, items in d["samples"].items():
            bucket = total.samples.setdefault(reason, [])
            bucket.extend(items[: max(0, keep_samples - len(bucket))])
    return total


def kept_counts(table: pa.Table) -> dict[str, Any]:
    """The documents of a shard, their bytes of text and its length histogram: what the stage
    reports of its output, counted where the shard is written rather than read again."""
    sizes = pc.binary_length(table.column("text")).to_numpy().astype(np.int64)  # UTF-8 bytes of each text
    lengths = LengthHistogram()
    lengths.add_many(sizes)
    return {"documents": table.num_rows, "bytes": int(sizes.sum()), "lengths": lengths.to_list()}


def source_counts(table: pa.Table) -> dict[str, dict[str, int]]:
    """A shard's documents and bytes of text per ``source`` (the names ``tokenize.mixture`` weights)."""
    if not table.num_rows:
        return {}
    sizes = pa.table({"source": pc.fill_null(table.column("source"), ""), "bytes": pc.binary_length(table.column("text"))})
    grouped = sizes.group_by("source").aggregate([("bytes", "count"), ("bytes", "sum")]).to_pydict()
    return {s: {"documents": int(n), "bytes": int(b)}
            for s, n, b in sorted(zip(grouped["source"], grouped["bytes_count"], grouped["bytes_sum"]))}


Decide = Callable[[Document, int, ShardStats], "str | None"]


def rewrite_shard(wd: Path, src: str, dst: str, shard: int, keep_samples: int, decide: Decide, schema: pa.Schema = WORK_SCHEMA,
                  adds_metadata_only: bool = False) -> bool:
    """One pass over a shard: ``decide`` may rewrite a document's text and returns a drop
    reason or None. Kept documents, the shard's stats and its completion marker are written
    to ``dst``. A dropped document is counted (and sampled) with the text it came in with.
    False when the shard was already done.

    ``adds_metadata_only``: ``decide`` neither reads a document's metadata nor changes what is
    there, it may only add keys; and ``src`` is a phase this module wrote (its metadata JSON
    is what ``json.dumps(..., sort_keys=True)`` makes of a dict ``json.loads`` made, which
    the same load and dump give back unchanged). The metadata is then parsed only for the
    documents that ``decide`` adds to or drops, and the others keep their JSON as it is."""
    out = wd / dst / f"{shard_name(shard)}.parquet"
    marker = out.with_suffix(".done")
    if is_done(marker):
        return False
    if not adds_metadata_only:
        docs, ordinals = read_shard(wd, src, shard)
        raw: list[str | None] = [None] * len(docs)
    else:
        c = _columns(pq.read_table(wd / src / f"{shard_name(shard)}.parquet"))
        docs = [Document(id=i, text=t, url=u, timestamp=ts, source=s, metadata={})
                for i, t, u, ts, s in zip(c["id"], c["text"], c["url"], c["timestamp"], c["source"])]
        ordinals, raw = c["ordinal"], c["metadata"]
    stats = ShardStats()
    kept, kept_ord, kept_meta = [], [], []
    for doc, o, m in zip(docs, ordinals, raw):
        original = doc.text
        reason = decide(doc, o, stats)
        if adds_metadata_only and (reason is not None or doc.metadata):
            doc.metadata = {**(json.loads(m) if m else {}), **doc.metadata}  # as if it had been there all along
            m = None
        if reason is not None:
            doc.text = original
            stats.drop(reason, doc, o, keep_samples)
            continue
        kept.append(doc)
        kept_ord.append(o)
        kept_meta.append(m if m else None)  # JSON to write as it is (an empty one is written as "{}")
    table = docs_to_table(kept, kept_ord, schema, kept_meta)
    write_parquet(out, table)
    stats_path = out.with_suffix(".stats.json")
    atomic_write_json(stats_path, {**stats.to_dict(), "kept": {**kept_counts(table), "sources": source_counts(table)}})
    mark_done([out, stats_path], marker)
    return True
