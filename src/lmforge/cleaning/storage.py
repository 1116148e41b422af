"""Crash-safe files for the clean stage: atomic writes, verified completion markers, and
records partitioned on disk so global steps (dedup) work one partition at a time."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _tmp(path: Path) -> Path:
    return path.with_name(f".{path.name}.tmp-{os.getpid()}")


def atomic_write_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _tmp(path)
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def atomic_write_json(path: Path, obj: Any) -> None:
    atomic_write_bytes(path, (json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8"))


def write_parquet(path: Path, table: pa.Table) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _tmp(path)
    pq.write_table(table, tmp, compression="zstd", row_group_size=4096)
    os.replace(tmp, path)


def save_npy(path: Path, array: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _tmp(path)
    with open(tmp, "wb") as fh:
        np.save(fh, array, allow_pickle=False)
    os.replace(tmp, path)


# ----------------------------------------------------------------------------- completion markers


def mark_done(outputs: list[Path], marker: Path, extra: dict[str, Any] | None = None) -> None:
    """Record that ``outputs`` are complete, with their checksums; written last, atomically."""
    atomic_write_json(
        marker, {"outputs": {p.name: sha256_file(p) for p in outputs}, **(extra or {})}
    )


def is_done(marker: Path) -> dict[str, Any] | None:
    """The marker's content if it and every output it lists are intact, else None."""
    if not marker.exists():
        return None
    try:
        info = json.loads(marker.read_text(encoding="utf-8"))
        for name, digest in info["outputs"].items():
            p = marker.parent / name
            if not p.exists() or sha256_file(p) != digest:
                return None
    except (ValueError, KeyError, OSError):
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
