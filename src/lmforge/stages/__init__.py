"""The stage graph: every stage of the pipeline, built from ``params.yaml`` and the recipes in
``pipelines/``, with its two views (``dvc.yaml`` and the Dagster asset graph) and its checks.
Nothing here imports Dagster or DVC."""

from .checks import CHECKS, run_checks
from .dvc import dvc_stages, dvc_yaml, missing_param_keys, write_dvc_yaml
from .graph import Output, Stage, StageGraph, build_stages
from .kind import CheckOutcome, CheckSpec, StageKind
from .kinds import GROUPS, KINDS

__all__ = [
    "CHECKS", "GROUPS", "KINDS", "CheckOutcome", "CheckSpec", "Output", "Stage", "StageGraph", "StageKind",
    "build_stages", "dvc_stages", "dvc_yaml", "missing_param_keys", "run_checks", "write_dvc_yaml",
]
