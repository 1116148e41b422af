"""Where a run's inputs came from: the git commit, the DVC hash of each input path, and the run
tags that record them.
"""

from __future__ import annotations

import contextlib
import logging
import os
import posixpath
import subprocess
from pathlib import Path

__all__ = ["dvc_hashes", "git_commit", "run_tags"]

logger = logging.getLogger(__name__)


def git_commit(path: str | Path = ".") -> str | None:
    """HEAD's sha of the repository holding ``path``, with ``-dirty`` when tracked files have
    uncommitted changes (untracked files do not count, as in ``git describe --dirty``). None outside
    a repository or without git; never raises."""
    def git(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", "--no-optional-locks", "-C", str(path), *args],
                              capture_output=True, text=True, timeout=30, check=False)
    try:
        head = git("rev-parse", "--verify", "HEAD")
        if head.returncode != 0:
            return None
        sha = head.stdout.strip()
        status = git("status", "--porcelain", "--untracked-files=no")
        if status.returncode == 0 and status.stdout.strip():
            sha += "-dirty"
        return sha or None
    except Exception:  # no git binary, timeout, unreadable path...
        return None


def _relative_key(path: str | Path, root: Path) -> str:
    """``path`` as a posix path relative to ``root`` when inside it (how dvc.lock names paths),
    else absolute."""
    p = Path(path)
    absolute = (p if p.is_absolute() else root / p).resolve()
    try:
        return absolute.relative_to(root).as_posix()
    except ValueError:
        return absolute.as_posix()


def _recorded_outs(root: Path) -> dict[str, str]:
    """path -> md5 of every out recorded in ``<root>/dvc.lock`` (``stages.*.outs``)."""
    import yaml

    lock = root / "dvc.lock"
    if not lock.is_file():
        return {}
    try:
        data = yaml.safe_load(lock.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        logger.warning("unreadable %s: %s", lock, exc)
        return {}
    recorded: dict[str, str] = {}
    stages = data.get("stages") if isinstance(data, dict) else None
    for stage in (stages or {}).values():
        for out in (stage or {}).get("outs") or []:
            if isinstance(out, dict) and out.get("path") and out.get("md5"):
                recorded[posixpath.normpath(str(out["path"]))] = str(out["md5"])
    return recorded


def _dvc_file_md5(path: Path) -> str | None:
    """The md5 a ``<path>.dvc`` file (``dvc add``) records for ``path``, if any."""
    import yaml

    dvc_file = path.with_name(path.name + ".dvc")
    if not dvc_file.is_file():
        return None
    try:
        data = yaml.safe_load(dvc_file.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError):
        return None
    outs = data.get("outs") if isinstance(data, dict) else None
    for out in outs or []:
        if isinstance(out, dict) and posixpath.normpath(str(out.get("path", ""))) == path.name and out.get("md5"):
            return str(out["md5"])
    return None


def _dvc_md5(path: Path, ignore_root: Path) -> str | None:
    """The md5 DVC itself computes for ``path`` (dvc-data's ``build``, what ``dvc add`` and
    ``dvc.lock`` record): a file's md5, or a folder's ``<md5>.dir`` with the ``.dvcignore`` rules
    under ``ignore_root`` applied. None for a folder DVC refuses to hash (one holding a
    ``.dvcignore``)."""
    from dvc.ignore import DvcIgnoreFilter
    from dvc_data.hashfile.build import IgnoreInCollectedDirError, build
    from dvc_data.hashfile.db import HashFileDB
    from dvc_objects.fs import LocalFileSystem, MemoryFileSystem

    fs = LocalFileSystem()
    ignore = DvcIgnoreFilter(fs, os.fspath(ignore_root)) if path.is_dir() else None
    staging = HashFileDB(MemoryFileSystem(), "lmforge-dvc-hashes")  # dry run: nothing is written to it
    try:
        _, meta, obj = build(staging, os.fspath(path), fs, "md5", dry_run=True, ignore=ignore)
    except IgnoreInCollectedDirError as exc:
        logger.warning("no DVC hash for %s: %s", path, exc)
        return None
    if meta.isdir:  # the folder's listing stays in DVC's in-memory filesystem otherwise
        with contextlib.suppress(OSError):
            obj.fs.rm_file(obj.path)
    return obj.hash_info.value


def dvc_hashes(paths: list[str | Path], root: str | Path = ".") -> dict[str, str]:
    """The DVC md5 of each input path, keyed by the path relative to ``root`` (posix; absolute
    when outside ``root``). Taken from ``<root>/dvc.lock`` when a stage records the path as an out,
    else from a ``<path>.dvc`` file, else computed by DVC's own code (``_dvc_md5``; the
    ``.dvcignore`` rules of ``root``, or of a folder outside it, apply). A missing path is
    omitted. DVC is imported only when something has to be computed."""
    root_path = Path(root).expanduser().resolve()
    recorded = _recorded_outs(root_path)
    hashes: dict[str, str] = {}
    for path in paths:
        key = _relative_key(path, root_path)
        absolute = Path(os.path.abspath(path if Path(path).is_absolute() else root_path / path))
        if key in recorded:
            hashes[key] = recorded[key]
        elif not absolute.exists():
            continue
        elif (md5 := _dvc_file_md5(absolute)) is not None:
            hashes[key] = md5
        elif (md5 := _dvc_md5(absolute, root_path if absolute.is_relative_to(root_path) else absolute)) is not None:
            hashes[key] = md5
    return hashes


def run_tags(*, commit: str | None, inputs: dict[str, str], recipe: str | None,
             dagster_run_id: str | None = None, extra: dict | None = None) -> dict[str, str]:
    """The provenance tags of a run: ``git_commit``, ``dvc.<input path>`` (its md5), ``recipe``,
    ``dagster_run_id`` (from ``DAGSTER_RUN_ID`` when not given) and ``extra``. Unknown (None)
    values are left out."""
    tags: dict[str, str] = {}
    if commit:
        tags["git_commit"] = commit
    for path, md5 in (inputs or {}).items():
        tags[f"dvc.{path}"] = str(md5)
    if recipe:
        tags["recipe"] = str(recipe)
    dagster = dagster_run_id or os.environ.get("DAGSTER_RUN_ID")
    if dagster:
        tags["dagster_run_id"] = str(dagster)
    for key, value in (extra or {}).items():
        if value is not None:
            tags[str(key)] = str(value)
    return tags
