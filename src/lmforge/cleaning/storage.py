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
        offsets, (data_dtype, data_start) = _partition_layout(p)
        lo, hi = int(offsets[index]), int(offsets[index + 1])
        if hi > lo:
            chunk = np.empty(hi - lo, dtype=data_dtype)
            with open(p, "rb") as fh:
                fh.seek(data_start + lo * data_dtype.itemsize)
                if fh.readinto(memoryview(chunk).cast("B")) != chunk.nbytes:
                    raise OSError(f"{p}: shorter than its header says")
            chunks.append(chunk)
    if not chunks:
        return np.zeros(0, dtype=dtype)
    return np.concatenate(chunks)


# A reduce unit reads one partition of every map file, so a process running many units reads
# the same headers and offsets again and again: they are kept, per file version (a rewritten
# file is a new inode: the work files are written atomically).
_LAYOUTS: dict[str, tuple[tuple[int, int, int], np.ndarray, tuple[np.dtype, int]]] = {}


def _partition_layout(path: Path) -> tuple[np.ndarray, tuple[np.dtype, int]]:
    """The partition offsets of a file :func:`save_partitioned` wrote, and its records' dtype
    and where they start in the file."""
    off_path = path.with_suffix(".offsets.npy")
    st, st_off = path.stat(), off_path.stat()
    key = (st.st_ino, st.st_size, st.st_mtime_ns, st_off.st_ino, st_off.st_size, st_off.st_mtime_ns)
    hit = _LAYOUTS.get(str(path))
    if hit is not None and hit[0] == key:
        return hit[1], hit[2]
    offsets = np.load(off_path)
    with open(path, "rb") as fh:
        version = np.lib.format.read_magic(fh)
        read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, _fortran, data_dtype = read_header(fh)
        data_start = fh.tell()
    if len(shape) != 1 or data_dtype.hasobject:
        raise ValueError(f"{path}: not a one-dimensional record array")
    if len(_LAYOUTS) > 4096:
        _LAYOUTS.clear()
    _LAYOUTS[str(path)] = (key, offsets, (data_dtype, data_start))
    return offsets, (data_dtype, data_start)
