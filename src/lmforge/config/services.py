"""The sections of ``params.yaml`` about where and how the stages run rather than what they
compute: ``executor`` (a process pool or Ray for the data stages), ``tracking`` (MLflow),
``checks`` (the data-quality bounds after each stage) and ``orchestrate`` (Dagster)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ..schema import StrictModel as _Strict


class ExecutorConfig(_Strict):
    """Where the data stages (clean, tokenize) run their shards and partitions. Either way the
    output is the same, byte for byte, so the choice is not one of the stages' parameters."""

    kind: Literal["local", "ray"] = Field(
        "local", description="local: this machine's process pool; ray: Ray tasks on a cluster")
    ray_address: str | None = Field(
        None, description="null: a Ray instance started on this machine for the stage; 'auto': the cluster this "
                          "machine joined with `ray start`; 'HOST:6379' or 'ray://HOST:10001'")
    cpus_per_task: float = Field(1.0, gt=0, description="CPUs Ray reserves for each task")
    max_retries: int = Field(3, ge=0, description="times Ray runs a task again after its worker process died")


class TrackingConfig(_Strict):
    """MLflow. ``uri: null`` is the embedded default, sqlite:///<project>/mlflow.db."""

    enabled: bool = True
    uri: str | None = None
    experiment: str = "lmforge"
    register_models: bool = Field(True, description="register trained models (lmforge-<arch>, lmforge-<arch>-<task>)")
    promotion_metric: str = Field("accuracy", description="fine-tuning metric the champion alias is gated on")
    timeout_seconds: float = Field(5.0, gt=0, description="an http(s) tracking server must answer within this at the "
                                                          "start of a training stage")
    spool_dir: str = Field("data/tracking-spool", description="where a run keeps what it could not send while the "
                                                              "server was away (`lmforge tracking sync` sends it)")
    retry_seconds: float = Field(30.0, gt=0, description="while the server is away, ask it again this often")
    system_metrics_seconds: float | None = Field(
        10.0, gt=0, description="training runs log CPU, memory, disk and network use (GPU with pynvml) as system/* "
                                "metrics this often (MLflow's system metrics); null: not at all")


class ChecksConfig(_Strict):
    """Bounds of the data-quality checks run after each stage (Dagster asset checks; also
    ``lmforge check``). A failed blocking check stops the stages downstream of it."""

    clean_min_documents: int = Field(100, ge=1, description="documents the clean corpus must keep at least")
    clean_min_kept_fraction: float = Field(0.05, ge=0, le=1, description="documents kept / documents read, at least")
    clean_max_reason_fraction: float = Field(0.8, gt=0, le=1, description="no single drop reason removes more than this fraction of the documents read")
    quality_min_accuracy: float = Field(0.6, ge=0, le=1, description="the quality classifier's balanced accuracy on its held-out documents, at least (0.5 is chance); a warning")
    tokenizer_max_unknown_rate: float = Field(0.01, ge=0, le=1, description="subword tokenizers: unknown tokens per token on the validation split, at most")
    char_max_unknown_rate: float = Field(0.1, ge=0, le=1, description="ELMo's char tokenizer: words outside its output vocabulary, at most (its inputs are characters, never unknown)")
    mask_rate_tolerance: float = Field(0.02, gt=0, le=1, description="|realised - configured| mask / noise rate, at most")
    loss_min_drop: float = Field(0.0, ge=0, description="training loss: last logged below first by more than this (nats)")


class OrchestrateConfig(_Strict):
    """Dagster: the weekly retraining schedule, the new-input sensor, run limits."""

    retrain_cron: str = Field("0 3 * * 1", description="cron of the schedule that retrains the enabled architectures (Monday 03:00)")
    timezone: str = "UTC"
    sensor_interval_seconds: int = Field(60, ge=5, description="how often the sensor looks for new raw files")
    watch: list[str] | None = Field(None, description="folders the sensor watches for new raw files (null: the folders in clean.inputs)")
    max_runtime_hours: float = Field(24.0, gt=0, description="dagster/max_runtime of the training jobs")
    dvc_commit: bool = Field(True, description="record each materialized stage in dvc.lock (dvc commit)")
    training_process: Literal["auto", "subprocess", "in_process"] = Field(
        "auto", description="where Dagster runs a training stage: its own process through Pipes (subprocess), "
                            "the Dagster process (in_process: one process, no start-up per stage), or auto: "
                            "in_process when it trains in one process on the CPU, else subprocess")
    on_locked: Literal["fail", "wait"] = Field(
        "fail", description="a stage whose output another process is writing (<output>.lock): fail at once "
                            "naming the holder, or wait for it")
    executor: Literal["in_process", "multiprocess"] = Field(
        "in_process", description="how a Dagster run executes its steps: one after another in the run's process "
                                  "(in_process), or independent steps at once, each in a process of its own (multiprocess)")
    max_concurrent: int = Field(0, ge=0, description="multiprocess: steps running at once (0: one per CPU core)")
    training_slots: int = Field(
        0, ge=0, description="trainings running at once, each on a slot of its own (its GPUs: train.devices of them): "
                             "0 = as many as the visible GPUs hold, 1 on a machine without a GPU")
    trainings_per_gpu: int = Field(
        1, ge=1, description="trainings that may share one slot's GPUs at once (small models on a large GPU); "
                             "1: a GPU is never shared")
