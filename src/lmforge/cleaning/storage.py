"""The clean stage's work files: Parquet shards and NumPy arrays written atomically, verified
completion markers, and records partitioned on disk so that the cross-document passes (dedup)
work one partition at a time."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..artifacts import atomic_write_bytes, atomic_write_json, read_json, sha256_file


def write_parquet(path: Path, table: pa.Table) -> None:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd", row_group_size=4096)
    atomic_write_bytes(path, sink.getvalue().to_pybytes())


def save_npy(path: Path, array: np.ndarray) -> None:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    atomic_write_bytes(path, buffer.getvalue())


# ----------------------------------------------------------------------------- completion markers


def mark_done(outputs: list[Path], marker: Path, extra: dict[str, Any] | None = None) -> None:
    """Record that ``outputs`` are complete, with their checksums; written last, atomically."""
    atomic_write_json(
        marker, {"outputs": {p.name: sha256_file(p) for p in outputs}, **(extra or {})}
    )


def is_done(marker: Path) -> dict[str, Any] | None:
    """The marker's content if it and every output it lists are intact, else None."""
    info = read_json(marker)
    if info is None:
        return None
    try:
        for name, digest in info["outputs"].items():
            p = marker.parent / name
            if not p.exists() or sha256_file(p) != digest:
                return None
    except (KeyError, AttributeError, OSError):
        return None
    return info


# ----------------------------------------------------------------------------- partitioned records


def save_partitioned(path: Path, records: np.ndarray, part: np.ndarray, n_parts: int) -> None:
    """Save ``records`` grouped by partition id, with offsets so one partition reads alone."""
    order = np.argsort(part, kind="stable")
    records = records[order]
    offsets = np.searchsorted(part[order], np.arange(n_parts + 1)).astype(np.int64)
    save_npy(path.with_suffix(".offsets.npy"), offsets)
    save_npy(path, records)


def load_partition(paths: list[Path], index: int, dtype: np.dtype) -> np.ndarray:
    """Concatenate partition ``index`` of every file in ``paths`` (in the given order)."""
    chunks = []
    for p in paths:
        offsets = np.load(p.with_suffix(".offsets.npy"))
        lo, hi = int(offsets[index]), int(offsets[index + 1])
        if hi > lo:
            chunks.append(np.array(np.load(p, mmap_mode="r")[lo:hi]))
    if not chunks:
        return np.zeros(0, dtype=dtype)
    return np.concatenate(chunks)
