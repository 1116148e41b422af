"""What every stage does with its outputs: the "up to date?" fingerprint, the record a finished
stage leaves, a staged folder renamed into place only when complete, atomic file writes and a
lock shared by the processes of one machine.

A stage writes its output folder in a temporary sibling (:func:`staged_dir`) and swaps it in at
the end, so a reader sees the old output or the new one, never half of one, and an interrupted
stage leaves the finished output of the previous run where it was.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from . import __version__


def fingerprint(*items: Any) -> str:
    """A hash of lmforge's version and ``items`` (JSON-able settings, checksums of inputs): a
    stage whose fingerprint matches its finished output's has nothing to do."""
    return hashlib.sha256(json.dumps([__version__, *items], sort_keys=True, default=str).encode()).hexdigest()


def read_json(path: str | os.PathLike) -> dict[str, Any] | None:
    """The JSON object in ``path``, or None when it is missing or not a readable object."""
    try:
        value = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def finished(record: str | os.PathLike, fp: str, intact: Callable[[dict[str, Any]], bool] | None = None) -> dict[str, Any] | None:
    """The record (``stats.json``, ``metrics.json``, ``manifest.json``) a finished stage with
    fingerprint ``fp`` left, or None: nothing finished there, other settings, or its files no
    longer what the record says (``intact(record)`` false)."""
    prev = read_json(record)
    if prev is None or prev.get("fingerprint") != fp:
        return None
    if intact is not None and not intact(prev):
        return None
    return prev


def _sibling(path: Path, tag: str) -> Path:
    return path.with_name(f".{path.name}.{tag}-{os.getpid()}")


def replace_dir(src: Path, dst: Path) -> None:
    """Move the complete folder ``src`` to ``dst``; an existing ``dst`` is moved aside first and
    removed only once ``src`` is in place."""
    old = None
    if dst.exists():
        old = _sibling(dst, "old")
        if old.exists():
            shutil.rmtree(old)
        os.replace(dst, old)
    os.replace(src, dst)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


@contextlib.contextmanager
def staged_dir(out: str | os.PathLike) -> Iterator[Path]:
    """A fresh temporary folder beside ``out`` to write the stage's output in. When the block
    ends normally it replaces ``out``; when it raises, it is removed and ``out`` is untouched."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = _sibling(out, "tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    replace_dir(tmp, out)


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` through a uniquely named temporary sibling and a rename (never
    half a file, whoever else writes beside it)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike, obj: Any) -> Path:
    """``obj`` as indented JSON with sorted keys (the form every stage's record takes)."""
    return atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def sha256_file(path: str | os.PathLike) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


@contextlib.contextmanager
def file_lock(path: str | os.PathLike) -> Iterator[None]:
    """An exclusive lock on ``path`` shared by every process on the machine (no-op off POSIX)."""
    try:
        import fcntl
    except ImportError:  # not POSIX: no cross-process lock
        yield
        return
    with open(path, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
