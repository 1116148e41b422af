"""The Dagster code location: ``dagster dev -m dagster_project.definitions`` (``make ui``).

The asset graph is built from ``params.yaml`` and ``pipelines/`` of the project folder
(``$LMFORGE_PROJECT``, else the current directory) when the code location loads: enable an
architecture or a task there and reload the location to see its assets.
"""

from __future__ import annotations

import os
from pathlib import Path

from dagster import Definitions, ExecutorDefinition, PipesSubprocessClient, in_process_executor, multiprocess_executor

from lmforge.config import Params, load_params
from lmforge.stages import StageGraph, build_stages

from .assets import build_assets, gpus_per_training
from .jobs import build_jobs, build_schedules
from .overrides import run_overrides
from .resources import DvcResource, MLflowResource, ParamsResource, RayResource, fixed_resource, project_root
from .sensors import new_raw_files_sensor


def build_definitions(root: str | os.PathLike | None = None, params_path: str | os.PathLike | None = None) -> Definitions:
    root = Path(root).resolve() if root else project_root()
    params_file = Path(params_path) if params_path else root / "params.yaml"
    params = load_params(params_file, run_overrides())
    graph: StageGraph = build_stages(params, root=root)
    assets, checks = build_assets(graph)
    jobs = build_jobs(graph, params)
    # the params file, the DVC program and the Ray cluster are the project's: no run can change them
    resources = {
        "params": fixed_resource(ParamsResource(root=str(root), path=str(params_file))),
        "mlflow": MLflowResource(),
        "dvc": fixed_resource(DvcResource()),
        "pipes_subprocess_client": PipesSubprocessClient(),
        "ray": fixed_resource(RayResource(address=os.environ.get("LMFORGE_RAY_ADDRESS", ""))),
    }
    return Definitions(assets=assets, asset_checks=checks, jobs=jobs, schedules=build_schedules(jobs, params),
                       sensors=[new_raw_files_sensor(jobs[0], params, root)], resources=resources,
                       executor=run_executor(params))


def run_executor(params: Params) -> ExecutorDefinition:
    """``orchestrate.executor``: every step in the run's process, or independent steps at once in
    processes of their own, at most ``max_concurrent`` (0: one per core) and at most
    ``training_slots`` trainings (the assets tagged ``lmforge/slot: training``)."""
    o = params.orchestrate
    if o.executor == "in_process":
        return in_process_executor
    from lmforge.slots import slot_count, visible_gpus

    slots = slot_count(o.training_slots, visible_gpus(), gpus_per_training(params), o.trainings_per_gpu)
    config = {"max_concurrent": o.max_concurrent or (os.cpu_count() or 1),
              "tag_concurrency_limits": [{"key": "lmforge/slot", "value": "training", "limit": slots}]}
    return multiprocess_executor.configured(config, name="lmforge_multiprocess")


defs = build_definitions()
