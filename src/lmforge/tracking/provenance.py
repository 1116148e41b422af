"""Where a run's inputs came from: the git commit, the DVC hash of each input path, and the run
tags that record them.
"""

from __future__ import annotations

import hashlib
import json
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


def _file_md5(path: Path) -> str:
    digest = hashlib.md5()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# DVC skips these folders when it hashes a directory; .dvcignore patterns are NOT applied here.
_DVC_SKIPPED_DIRS = {".git", ".hg", ".dvc"}


def _dir_md5(path: Path) -> str:
    """DVC 3's directory hash: the md5 of ``json.dumps(entries, sort_keys=True)`` where entries are
    ``{"md5": <file md5>, "relpath": <posix path>}`` for every file below, sorted by relpath, plus
    the suffix ``.dir`` (dvc-data's ``Tree.digest``). An approximation in two respects: ``.dvcignore``
    rules are not applied, and DVC 2's ``md5-dos2unix`` hashes (lock files without ``hash: md5``)
    are not reproduced — DVC 3 hashes raw bytes, as here."""
    entries = []
    for current, dirs, files in os.walk(path):
        dirs[:] = [d for d in dirs if d not in _DVC_SKIPPED_DIRS]
        for name in files:
            full = Path(current) / name
            entries.append({"md5": _file_md5(full), "relpath": full.relative_to(path).as_posix()})
    entries.sort(key=lambda entry: entry["relpath"])
    return hashlib.md5(json.dumps(entries, sort_keys=True).encode("utf-8")).hexdigest() + ".dir"


def dvc_hashes(paths: list[str | Path], root: str | Path = ".") -> dict[str, str]:
    """The DVC md5 of each input path, keyed by the path relative to ``root`` (posix; absolute
    when outside ``root``). Taken from ``<root>/dvc.lock`` when a stage records the path as an out,
    else from a ``<path>.dvc`` file, else computed the way DVC 3 does (a file: md5 of its bytes; a
    directory: see ``_dir_md5``). A missing path is omitted."""
    root_path = Path(root).expanduser().resolve()
    recorded = _recorded_outs(root_path)
    hashes: dict[str, str] = {}
    for path in paths:
        key = _relative_key(path, root_path)
        absolute = Path(path) if Path(path).is_absolute() else root_path / path
        if key in recorded:
            hashes[key] = recorded[key]
        elif not absolute.exists():
            continue
        elif (md5 := _dvc_file_md5(absolute)) is not None:
            hashes[key] = md5
        elif absolute.is_dir():
            hashes[key] = _dir_md5(absolute)
        else:
            hashes[key] = _file_md5(absolute)
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
