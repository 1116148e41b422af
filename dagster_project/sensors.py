"""The ``new_raw_files`` sensor: starts a job when raw files land in (or change in) the watched
input folders."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from dagster import DefaultSensorStatus, RunRequest, SensorEvaluationContext, SkipReason, sensor

from lmforge.config import Params


def watched_folders(params: Params, root: Path) -> list[Path]:
    """The folders the sensor watches: ``orchestrate.watch``, else the folders in clean.inputs."""
    items = params.orchestrate.watch if params.orchestrate.watch is not None else [
        i for i in params.clean.inputs if i != "stdlib" and not i.startswith("hf:")]
    folders = []
    for item in items:
        p = Path(item)
        p = p if p.is_absolute() else root / p
        if p.is_dir() or item in (params.orchestrate.watch or []):
            folders.append(p)
    return folders


def snapshot(folders: list[Path]) -> dict[str, list[int]]:
    """Every file under the folders with its size and modification time."""
    files = {}
    for folder in folders:
        if not folder.is_dir():
            continue
        for f in sorted(folder.rglob("*")):
            if f.is_file() and not f.name.startswith("."):
                st = f.stat()
                files[str(f)] = [st.st_size, st.st_mtime_ns]
    return files


def new_raw_files_sensor(job, params: Params, root: Path):
    """The sensor over :func:`watched_folders`, running ``job``."""
    folders = watched_folders(params, root)

    @sensor(job=job, minimum_interval_seconds=params.orchestrate.sensor_interval_seconds,
            default_status=DefaultSensorStatus.RUNNING,
            description="Starts the full pipeline when new or changed raw files land in the watched input folders "
                        f"({', '.join(map(str, folders)) or 'none configured: add a folder to clean.inputs or orchestrate.watch'}).")
    def new_raw_files(context: SensorEvaluationContext):
        if not folders:
            return SkipReason("no input folder to watch: add one to clean.inputs or orchestrate.watch")
        now = snapshot(folders)
        before = json.loads(context.cursor) if context.cursor else None
        context.update_cursor(json.dumps(now))
        if before is None:
            return SkipReason(f"first look: {len(now)} files recorded; later arrivals start the pipeline")
        new = sorted(f for f, sig in now.items() if before.get(f) != sig)
        if not new:
            return SkipReason("no new raw files")
        return RunRequest(run_key="raw-" + hashlib.sha256(json.dumps(now, sort_keys=True).encode()).hexdigest()[:16],
                          tags={"lmforge/new_files": str(len(new))})

    return new_raw_files
