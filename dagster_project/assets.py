"""One Dagster asset per stage of lmforge's stage graph, and the asset checks its kinds declare (lmforge.stages.kinds).

Data stages run in the Dagster process (the library function the CLI also calls). Training
stages run as their own process through Dagster Pipes (under torchrun when train.devices > 1),
or, where ``orchestrate.training_process`` says so (``auto``: one process on the CPU), in the
Dagster process like the data stages, which spares each stage the start-up of a new Python with
torch and Lightning; never a multi-process ``trainer.fit`` inside Dagster. After a stage
materializes, its DVC lock entry is updated.
"""

from __future__ import annotations

import os
import sys
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Iterator

from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetKey,
    AssetsDefinition,
    Failure,
    MaterializeResult,
    MetadataValue,
    PipesSubprocessClient,
    ResourceParam,
    asset,
    asset_check,
)

from lmforge.config import Params
from lmforge.slots import slot_count, slot_gpus, training_slot, visible_gpus
from lmforge.stages import KINDS, CheckSpec, Stage, StageGraph, dvc_yaml, missing_param_keys, run_checks

from .launch import summary_metadata
from .metadata import stage_metadata
from .resources import DvcResource, MLflowResource, ParamsResource, RayResource

HERE = Path(__file__).resolve().parent

@contextmanager
def in_project(root: Path, run_id: str | None) -> Iterator[None]:
    """Run a stage as the CLI would: from the project folder, with the Dagster run id visible
    to the MLflow tags."""
    cwd, old = Path.cwd(), os.environ.get("DAGSTER_RUN_ID")
    os.chdir(root)
    if run_id:
        os.environ["DAGSTER_RUN_ID"] = run_id
    try:
        yield
    finally:
        os.chdir(cwd)
        if old is None:
            os.environ.pop("DAGSTER_RUN_ID", None)
        else:
            os.environ["DAGSTER_RUN_ID"] = old


def launch_command(stage: Stage, params: Params, params_file: Path) -> list[str]:
    """The subprocess a training asset runs: the stage under torchrun when train.devices > 1."""
    entry = ["-m", "dagster_project.launch", stage.name, "--params", str(params_file)]
    devices = params.train.devices
    if params.train.num_nodes > 1:
        raise Failure(description=f"{stage.name}: train.num_nodes={params.train.num_nodes}; Dagster launches one node. "
                                  f"Run `{stage.cli}` under srun / torchrun on each node instead (docs/TRAINING.md, 'Many GPUs, many nodes').")
    if isinstance(devices, int) and devices > 1:
        return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={devices}", *entry]
    return [sys.executable, *entry]


def trains_in_process(params: Params) -> bool:
    """Whether a training stage runs inside the Dagster process rather than a Pipes subprocess
    (``orchestrate.training_process``); ``auto``: when one process trains on the CPU (no GPU
    visible, or ``train.accelerator: cpu``)."""
    choice, train = params.orchestrate.training_process, params.train
    one_process = train.num_nodes == 1 and train.devices in (1, "auto")
    if choice == "in_process":
        if not one_process:
            raise Failure(description=f"orchestrate.training_process=in_process trains in one process; train.devices="
                                      f"{train.devices}, train.num_nodes={train.num_nodes} need training_process: subprocess")
        return True
    if choice == "subprocess" or not one_process:
        return False
    import torch

    accelerator_visible = torch.cuda.is_available() or torch.backends.mps.is_available()
    return train.accelerator == "cpu" or (train.accelerator == "auto" and not accelerator_visible)


def _stale_reason(graph: StageGraph, params_file: Path) -> str | None:
    path = graph.root / "dvc.yaml"
    if not path.exists():
        return "no dvc.yaml in the project"
    missing = missing_param_keys(graph, params_file)
    if missing:
        return f"{params_file.name} does not spell out {', '.join(missing)}, which DVC reads from the file"
    try:
        current = dvc_yaml(graph)
    except Exception as exc:  # noqa: BLE001 - e.g. outputs outside the project: DVC cannot describe them
        return str(exc)
    return None if path.read_text(encoding="utf-8") == current else "dvc.yaml does not match params.yaml and the recipes"


# the stages whose units run on ``executor`` (this machine's processes or a Ray cluster)
EXECUTOR_KINDS = frozenset({"clean", "tokens"})


def gpus_per_training(params: Params) -> int:
    """The GPUs one training takes: ``train.devices`` when it names a count, else one."""
    devices = params.train.devices
    return devices if isinstance(devices, int) and devices > 0 else 1


def execution_metadata(result) -> dict:
    """Where a data stage's units ran (``executor``) and each phase's units, time and workers."""
    execution = result.get("execution") if isinstance(result, dict) else None
    if not execution:
        return {}
    rows = ["| phase | units | s | unit s (sum) | unit s (max) | worker processes | where |", "|" + "---|" * 7]
    for name, ph in execution["phases"].items():
        rows.append(f"| {name} | {ph['units']} | {ph['seconds']} | {ph['unit_seconds_total']} | {ph['unit_seconds_max']} "
                    f"| {ph['worker_processes']} | {', '.join(ph['hosts'])} |")
    cluster = execution.get("cluster") or {}
    return {"executor": execution["executor"], "executor_nodes": int(cluster.get("nodes", 1)),
            "executor_cpus": float(cluster.get("cpus", 0)), "executor_phases": MetadataValue.md("\n".join(rows))}


def asset_pool(stage: Stage) -> str:
    """The Dagster concurrency pool of a stage's asset: one per asset, limited to one step at a
    time by the instance (``concurrency.pools.default_limit: 1`` in dagster.yaml), so two runs
    never materialize the same asset at once; the output lock (``lmforge.locks``) backs it up
    for anything that runs the stage outside Dagster."""
    return f"lmforge/{stage.name}"


def stage_asset(stage: Stage, graph: StageGraph, max_runtime_s: int) -> AssetsDefinition:
    root = graph.root
    tags = {"lmforge/stage": stage.kind}
    if stage.key.get("arch"):
        tags["lmforge/architecture"] = stage.key["arch"]
    # a training: its run time limit, and the tag the multiprocess executor counts against training_slots
    op_tags = {"dagster/max_runtime": max_runtime_s, "lmforge/slot": "training"} if stage.subprocess else None

    @asset(
        name=stage.name,
        group_name=stage.group,
        deps=[AssetKey(u) for u in stage.upstream],
        description=f"{stage.description}\n\nCommand: `{stage.cli}` (DVC stage `{stage.name}`).",
        kinds=set(KINDS[stage.kind].tools),
        code_version=graph.code_version(stage),
        tags=tags,
        op_tags=op_tags,
        pool=asset_pool(stage),
        metadata={"outputs": ", ".join(stage.paths), "dvc_stage": stage.name,
                  "params": ", ".join([*stage.params, *(f"{stage.recipe}:{k}" for k in stage.recipe_params)])},
    )
    def _materialize(context, params: ResourceParam[ParamsResource], mlflow: MLflowResource,
                     dvc: ResourceParam[DvcResource], ray: ResourceParam[RayResource],
                     pipes_subprocess_client: PipesSubprocessClient) -> MaterializeResult:
        p = params.load()
        if stage.kind in EXECUTOR_KINDS:
            p = p.model_copy(update={"executor": ray.executor(p)})
        reported: dict = {}
        with ExitStack() as stack:
            env = {}
            launched = stage.subprocess and not trains_in_process(p)
            if stage.subprocess:  # a training holds a slot: its own GPUs, never another training's
                gpus, per = visible_gpus(), gpus_per_training(p)
                share = p.orchestrate.trainings_per_gpu
                slots = slot_count(p.orchestrate.training_slots, gpus, per, share)
                if gpus and -(-slots // share) * per > len(gpus):
                    raise Failure(description=f"orchestrate.training_slots={slots} x train.devices={per} needs "
                                              f"{-(-slots // share) * per} GPUs with trainings_per_gpu={share}; "
                                              f"{len(gpus)} are visible")
                slot = stack.enter_context(training_slot(root, slots, context.log.info))
                reported["training_slot"] = slot
                mine = slot_gpus(slot, gpus, per, share)
                if mine and launched:  # (a training in this process sees what the process sees)
                    env["CUDA_VISIBLE_DEVICES"] = reported["gpus"] = ",".join(mine)
            if launched:
                env = {**os.environ, **env, "DAGSTER_RUN_ID": context.run.run_id,
                       "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE.parent), os.environ.get("PYTHONPATH")]))}
                invocation = pipes_subprocess_client.run(context=context, command=launch_command(stage, p, params.file),
                                                         env=env, cwd=str(root))
                for result in invocation.get_results():
                    reported.update({f"reported/{k}": v for k, v in (getattr(result, "metadata", None) or {}).items()})
            else:
                with in_project(root, context.run.run_id):
                    result = stage.run(p, context.log.info)
                if stage.subprocess:  # the figures a launched process reports through Pipes
                    reported.update({f"reported/{k}": v for k, v in summary_metadata(result).items()})
                reported.update(execution_metadata(result))
        meta = stage_metadata(stage, p, root, lambda run_id: mlflow.run_url(p, root, run_id))
        meta.update(reported)
        if p.orchestrate.dvc_commit:
            meta["dvc_lock_updated"] = dvc.commit(root, stage.name, _stale_reason(graph, params.file), context.log.info)
        return MaterializeResult(metadata=meta)

    return _materialize


def stage_check(stage: Stage, graph: StageGraph, spec: CheckSpec):
    """The asset check ``spec`` of ``stage``: the check of the stage's kind on the files it wrote."""

    @asset_check(asset=AssetKey(stage.name), name=spec.name, description=spec.description, blocking=spec.blocking)
    def _check(params: ResourceParam[ParamsResource]) -> AssetCheckResult:
        p = params.load()
        outcome = next(o for o in run_checks(stage, p, graph.root) if o.name == spec.name)
        severity = AssetCheckSeverity.WARN if outcome.severity == "warn" else AssetCheckSeverity.ERROR
        return AssetCheckResult(passed=bool(outcome.passed), severity=severity, description=outcome.description,
                                metadata={k: v for k, v in outcome.metadata.items() if v is not None})

    return _check


def build_assets(graph: StageGraph) -> tuple[list[AssetsDefinition], list]:
    max_runtime = int(graph.params.orchestrate.max_runtime_hours * 3600)
    assets = [stage_asset(s, graph, max_runtime) for s in graph]
    checks = [stage_check(s, graph, spec) for s in graph for spec in KINDS[s.kind].checks]
    return assets, checks
