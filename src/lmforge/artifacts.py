"""What every stage does with its outputs: the "up to date?" fingerprint, the record a finished
stage leaves, the check that an output replaces only what its writer made, a staged folder
renamed into place only when complete, atomic file writes and a lock shared by the processes of
one machine.

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
from .errors import ConfigError


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


class UnsafeOutput(ConfigError):
    """An output path that would replace or hold what its writer did not make: one of its
    inputs, the project folder, the home folder, the file system root, or a folder of something
    else's files."""


def _forms(path: str | os.PathLike) -> set[Path]:
    """``path`` made absolute as written (``..`` folded) and with its links resolved."""
    absolute = Path(os.path.abspath(path))
    try:
        resolved = absolute.resolve()
    except (OSError, RuntimeError):  # a link loop: the path as written
        resolved = absolute
    return {absolute, resolved}


def _holds(outer: set[Path], inner: set[Path]) -> str | None:
    """"is" when a form of ``outer`` is a form of ``inner``, "holds" when it is a folder above
    one, else None."""
    if outer & inner:
        return "is"
    if any(i.is_relative_to(o) for o in outer for i in inner):
        return "holds"
    return None


def _is_input_path(spec: Any) -> bool:
    """Inputs that name a local path (not a URI, the embedded corpus, a dataset hub name or stdin)."""
    text = str(spec)
    return bool(text) and text not in ("-", "stdlib") and not text.startswith("hf:") and "://" not in text


def check_output(path: str | os.PathLike, *, inputs: Any = (), record: str | None = None, force: bool = False,
                 root: str | os.PathLike | None = ".", what: str = "output") -> Path:
    """Refuse, before anything is written, moved or deleted, an output ``path`` that would replace
    or hold what its writer did not make: the guard every stage and command that writes calls.

    Refused whatever ``force`` says: a ``path`` that is or holds one of ``inputs`` (files and
    folders; URIs and names are left out), the project folder ``root`` (None: no project
    folder, as for ``lmforge init``), the home folder or the file system root. With ``record``
    (the writer's output is a folder it replaces whole, and ``record`` the file its finished
    output always holds, e.g. ``stats.json``): an existing ``path`` that is not a folder, or a
    non-empty folder without a readable ``record`` naming its fingerprint, unless ``force``.
    Returns ``path``; raises :class:`UnsafeOutput` (one line) otherwise."""
    out = Path(path)
    forms = _forms(out)
    protected = [("the file system root", Path(os.path.abspath(out)).anchor)]
    if root is not None:
        protected.append(("the project folder", root))
    with contextlib.suppress(RuntimeError, KeyError, OSError):  # no home folder known: nothing to protect there
        protected.append(("the home folder", Path.home()))
    for name, place in protected:
        relation = _holds(forms, _forms(place))
        if relation is not None:
            where = "" if relation == "is" else f" ({Path(os.path.abspath(place))})"
            raise UnsafeOutput(f"{what} {out}: refused: it {relation} {name}{where}; write to a folder of its own")
    for spec in inputs or ():
        if spec is None or not _is_input_path(spec):
            continue
        relation = _holds(forms, _forms(spec))
        if relation is not None:
            raise UnsafeOutput(f"{what} {out}: refused: it {relation} the input {spec} (an output replaces what is "
                               "there); write it apart from its inputs")
    if record is not None and not force and (out.exists() or out.is_symlink()):
        if not out.is_dir():
            raise UnsafeOutput(f"{what} {out}: refused: it is a file, not a folder this stage wrote; remove it, "
                               "choose another output, or pass --force to replace it")
        finished_here = read_json(out / record)
        if finished_here is None or "fingerprint" not in finished_here:
            try:
                empty = next(out.iterdir(), None) is None
            except OSError as exc:
                raise UnsafeOutput(f"{what} {out}: refused: cannot list it ({exc.strerror})") from None
            if not empty:
                raise UnsafeOutput(f"{what} {out}: refused: the folder is not empty and holds no {record} of a "
                                   "finished run of this stage, so this stage did not make it; choose another "
                                   "output, empty it, or pass --force to replace it")
    return out


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
