"""The Dagster code location: ``dagster dev -m dagster_project.definitions`` (``make ui``).

The asset graph is built from ``params.yaml`` and ``pipelines/`` of the project folder
(``$LMFORGE_PROJECT``, else the current directory) when the code location loads: enable an
architecture or a task there and reload the location to see its assets.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from dagster import (
    AssetSelection,
    DefaultScheduleStatus,
    DefaultSensorStatus,
    Definitions,
    PipesSubprocessClient,
    RunRequest,
    ScheduleDefinition,
    SensorEvaluationContext,
    SkipReason,
    define_asset_job,
    in_process_executor,
    sensor,
)

from lmforge.config import Params, load_params
from lmforge.stages import StageGraph, build_stages

from .assets import build_assets
from .resources import DvcResource, MLflowResource, ParamsResource, project_root


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


def build_definitions(root: str | os.PathLike | None = None, params_path: str | os.PathLike | None = None) -> Definitions:
    root = Path(root).resolve() if root else project_root()
    params_file = Path(params_path) if params_path else root / "params.yaml"
    params = load_params(params_file)
    graph: StageGraph = build_stages(params, root=root)
    assets, checks = build_assets(graph)
    max_runtime = {"dagster/max_runtime": int(params.orchestrate.max_runtime_hours * 3600)}

    everything = AssetSelection.all()
    training = AssetSelection.groups("pretraining")
    jobs = [define_asset_job("full_pipeline", selection=everything, tags=max_runtime,
                             description="Every stage, from the raw corpus to the leaderboard.")]
    if any(s.kind == "pretrain" for s in graph):
        jobs.append(define_asset_job("retrain_all", selection=training.upstream() | training.downstream(), tags=max_runtime,
                                     description="Retrain every enabled architecture (and whatever feeds or follows it)."))
    for s in graph:
        if s.kind == "pretrain":
            arch = s.key["arch"]
            jobs.append(define_asset_job(f"retrain_{arch}", selection=AssetSelection.assets(s.name).downstream(),
                                         tags=max_runtime, description=f"Pretrain {arch} again, then fine-tune, evaluate, report."))
    schedules = []
    if any(j.name == "retrain_all" for j in jobs):
        schedules.append(ScheduleDefinition(
            name="weekly_retrain", job=next(j for j in jobs if j.name == "retrain_all"),
            cron_schedule=params.orchestrate.retrain_cron, execution_timezone=params.orchestrate.timezone,
            default_status=DefaultScheduleStatus.RUNNING,
            description="Retrains the enabled architectures weekly (the Dagster daemon runs it; `make ui` starts one)."))

    folders = watched_folders(params, root)

    @sensor(job=jobs[0], minimum_interval_seconds=params.orchestrate.sensor_interval_seconds,
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

    resources = {
        "params": ParamsResource(root=str(root), path=str(params_file)),
        "mlflow": MLflowResource(),
        "dvc": DvcResource(),
        "pipes_subprocess_client": PipesSubprocessClient(),
    }
    return Definitions(assets=assets, asset_checks=checks, jobs=jobs, schedules=schedules, sensors=[new_raw_files],
                       resources=resources, executor=in_process_executor)


defs = build_definitions()
