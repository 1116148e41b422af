"""Where each artifact lives, from ``params.yaml``: one function per artifact, used by the stage
graph (its outputs and dependencies) and by the stages that write and read them. Paths are as
configured: relative to the project folder unless absolute."""

from __future__ import annotations

import re
from pathlib import Path

from .config import ConfigError, Params


def clean_dir(params: Params) -> Path:
    """The clean stage's output: Parquet shards, stats.json, dropped samples."""
    return Path(params.clean.output)


def quality_dir(params: Params) -> Path:
    """The quality stage's output (when ``quality.enabled``): the kept shards with their scores,
    stats.json, the classifier and samples of kept and dropped documents."""
    return Path(params.quality.output)


def corpus_dir(params: Params) -> Path:
    """The clean corpus the tokenizers, token stores and corpus tasks read: ``tokenizer.input``
    when set, else the quality stage's output when it is enabled, else the clean stage's."""
    if params.tokenizer.input:
        return Path(params.tokenizer.input)
    return quality_dir(params) if params.quality.enabled else clean_dir(params)


def tokenizer_dir(params: Params, kind: str) -> Path:
    return Path(params.tokenizer.output) / kind


def token_store_dir(params: Params, kind: str) -> Path:
    return Path(params.tokenize.output) / kind


def dataset_dir(params: Params, objective: str) -> Path:
    return Path(params.dataset.output) / objective


def architecture_dir(params: Params, arch: str) -> Path:
    """Everything trained for ``arch``: ``pretrain/`` and one folder per fine-tuning task."""
    return Path(params.train.output) / arch


def pretrain_dir(params: Params, arch: str) -> Path:
    return architecture_dir(params, arch) / "pretrain"


def pretrained_model_dir(params: Params, arch: str) -> Path:
    """The pretrained model folder fine-tuning starts from."""
    return pretrain_dir(params, arch) / "model"


def task_slug(task_name: str) -> str:
    """A file- and registry-safe name: ``hf:glue/sst2`` -> ``glue-sst2``; a local folder is
    named by its last component (``/data/tasks/sentiment`` -> ``sentiment``)."""
    name = task_name.removeprefix("hf:") if task_name.startswith("hf:") else Path(task_name).name or task_name
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-") or "task"
    if slug.strip(".") == "":  # "." or "..": the task's folder would be its architecture's or above
        raise ConfigError(f"task {task_name!r}: its name ({slug!r}) is no folder name; name the task folder itself")
    return slug


def finetune_dir(params: Params, arch: str, task_name: str) -> Path:
    """Where fine-tuning ``arch`` on ``task_name`` writes: ``<train.output>/<arch>/<task slug>``."""
    return architecture_dir(params, arch) / task_slug(task_name)


def finetune_scratch_dir(params: Params, arch: str, task_name: str) -> Path:
    """The from-scratch control of ``finetune_dir`` (same architecture and recipe, random
    initialisation): ``<train.output>/<arch>/<task slug>-scratch``."""
    return architecture_dir(params, arch) / f"{task_slug(task_name)}-scratch"


def report_dir(params: Params) -> Path:
    """The leaderboard, its charts and metrics.json."""
    return Path(params.evaluate.output)


def evaluations_dir(params: Params) -> Path:
    return report_dir(params) / "evaluation"


def evaluation_file(params: Params, arch: str) -> Path:
    """The evaluate stage's record of ``arch``."""
    return evaluations_dir(params) / f"{arch}.json"
