"""The jobs and the schedule: the whole pipeline, retraining every architecture or one, and the
weekly retraining."""

from __future__ import annotations

from dagster import AssetSelection, DefaultScheduleStatus, ScheduleDefinition, define_asset_job

from lmforge.config import Params
from lmforge.stages import StageGraph


def build_jobs(graph: StageGraph, params: Params) -> list:
    """``full_pipeline``; with an architecture enabled, ``retrain_all`` and ``retrain_<arch>``."""
    max_runtime = {"dagster/max_runtime": int(params.orchestrate.max_runtime_hours * 3600)}
    training = AssetSelection.groups("pretraining")
    jobs = [define_asset_job("full_pipeline", selection=AssetSelection.all(), tags=max_runtime,
                             description="Every stage, from the raw corpus to the leaderboard.")]
    pretrain = graph.of_kind("pretrain")
    if pretrain:
        jobs.append(define_asset_job("retrain_all", selection=training.upstream() | training.downstream(), tags=max_runtime,
                                     description="Retrain every enabled architecture (and whatever feeds or follows it)."))
    for s in pretrain:
        arch = s.key["arch"]
        jobs.append(define_asset_job(f"retrain_{arch}", selection=AssetSelection.assets(s.name).downstream(),
                                     tags=max_runtime, description=f"Pretrain {arch} again, then fine-tune, evaluate, report."))
    return jobs


def build_schedules(jobs: list, params: Params) -> list[ScheduleDefinition]:
    """``weekly_retrain`` of ``retrain_all`` on ``orchestrate.retrain_cron``, when that job exists."""
    retrain_all = next((j for j in jobs if j.name == "retrain_all"), None)
    if retrain_all is None:
        return []
    return [ScheduleDefinition(
        name="weekly_retrain", job=retrain_all,
        cron_schedule=params.orchestrate.retrain_cron, execution_timezone=params.orchestrate.timezone,
        default_status=DefaultScheduleStatus.RUNNING,
        description="Retrains the enabled architectures weekly (the Dagster daemon runs it; `make ui` starts one).")]
