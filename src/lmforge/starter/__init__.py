"""The starter project ``lmforge init`` writes into a new folder: ``params.yaml`` (every
parameter at its default, commented) and ``pipelines/`` (one recipe per architecture). The
repository's own ``params.yaml`` and ``pipelines/`` are this project, kept equal by a test."""

from __future__ import annotations

import shutil
from importlib.resources import files
from pathlib import Path

from ..artifacts import check_output
from ..errors import ConfigError


def folder() -> Path:
    """The packaged starter project."""
    return Path(str(files("lmforge").joinpath("starter")))


def init_project(dest: str | Path, force: bool = False) -> list[Path]:
    """Write the starter ``params.yaml`` and ``pipelines/`` into ``dest`` (created if missing);
    returns what was written. Refuses to overwrite a file that is there unless ``force``: a
    project's own settings are never replaced silently; and the home folder and the file system
    root, which are nobody's project (``artifacts.check_output``), even with ``force``."""
    dest = Path(dest)
    check_output(dest, root=None, what="init folder")  # the folder is the project: no project folder to protect
    if dest.exists() and not dest.is_dir():
        raise ConfigError(f"{dest}: not a folder")
    source = folder()
    planned = [(source / "params.yaml", dest / "params.yaml")]
    planned += [(f, dest / "pipelines" / f.name) for f in sorted((source / "pipelines").iterdir()) if f.is_file()]
    there = [d for _, d in planned if d.exists()]
    if there and not force:
        raise ConfigError(f"{there[0]} exists (and {len(there) - 1} more of the starter's files): "
                          "not overwritten; use --force to replace them with the starter's")
    written = []
    for src, dst in planned:
        dst.parent.mkdir(parents=True, exist_ok=True)
        tmp = dst.with_name(f".{dst.name}.tmp")
        shutil.copyfile(src, tmp)
        tmp.replace(dst)
        written.append(dst)
    return written
