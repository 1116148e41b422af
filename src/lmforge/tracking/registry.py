"""The model registry: registering a logged model as a new version with alias ``candidate``,
the promotion gate that moves alias ``champion``, and loading a registered model back. Registry
stages are deprecated in MLflow 3: aliases only.
"""

from __future__ import annotations

import logging
import math
import tempfile
from pathlib import Path

import mlflow
import torch
from mlflow import MlflowClient
from mlflow.entities.model_registry import ModelVersion
from mlflow.exceptions import MlflowException

from ..models.folder import META_FILE, load_model_dir
from .keys import safe_key
from .store import global_tracking_uri, quiet_mlflow, resolve_tracking_uri

__all__ = ["CANDIDATE_ALIAS", "CHAMPION_ALIAS", "load_registered_model", "promote_if_better", "register_candidate"]

logger = logging.getLogger(__name__)

CANDIDATE_ALIAS = "candidate"
CHAMPION_ALIAS = "champion"


def register_candidate(uri: str, name: str, model_id: str, run_id: str) -> ModelVersion:
    """Register the logged model ``model_id`` of run ``run_id`` as a new version of ``name``
    (created when missing) and point alias ``candidate`` at it. Runs with MLflow's global URI
    pointed at ``uri``: the registry resolves the ``models:/`` source through it."""
    uri = resolve_tracking_uri(uri)
    client = MlflowClient(uri)
    with global_tracking_uri(uri), quiet_mlflow():
        try:
            client.create_registered_model(name)
        except MlflowException as exc:  # a later version (or another process got there first)
            if exc.error_code not in ("RESOURCE_ALREADY_EXISTS", "ALREADY_EXISTS"):
                raise
        version = client.create_model_version(name, source=f"models:/{model_id}", run_id=run_id, model_id=model_id)
    client.set_registered_model_alias(name, CANDIDATE_ALIAS, version.version)
    return client.get_model_version(name, version.version)


def load_registered_model(uri: str, name: str, alias: str = CHAMPION_ALIAS) -> torch.nn.Module:
    """The model registered as ``models:/<name>@<alias>``: its artifacts are downloaded and the
    lmforge directory inside is loaded with ``load_model_dir`` (no pickle, no pyfunc)."""
    from mlflow.models import Model

    uri = resolve_tracking_uri(uri)
    client = MlflowClient(uri)
    version = client.get_model_version_by_alias(name, alias)
    # resolved here rather than downloading "models:/name@alias": MLflow 3 looks such URIs up through
    # the process-global URI whatever tracking_uri says
    location = client.get_model_version_download_uri(name, version.version)
    with tempfile.TemporaryDirectory(prefix="lmforge-model-") as tmp, global_tracking_uri(uri), quiet_mlflow():
        local = Path(mlflow.artifacts.download_artifacts(artifact_uri=location, dst_path=tmp,
                                                         tracking_uri=uri, registry_uri=uri))
        model_dir = None
        if (local / "MLmodel").is_file():
            artifacts = Model.load(str(local / "MLmodel")).flavors.get("python_function", {}).get("artifacts", {})
            relative = (artifacts.get("model") or {}).get("path")
            model_dir = local / relative if relative else None
        if model_dir is None or not (model_dir / META_FILE).is_file():
            found = sorted(local.rglob(META_FILE))
            if not found:
                raise FileNotFoundError(f"models:/{name}@{alias} holds no lmforge model directory")
            model_dir = found[0].parent
        return load_model_dir(model_dir)


def promote_if_better(uri: str, name: str, version: str | int, metric: str, value: float,
                      higher_is_better: bool = True) -> bool:
    """The promotion gate. Records ``value`` as tag ``eval.<metric>`` on version ``version`` of
    registered model ``name``; moves alias ``champion`` to it when there is no champion yet or when
    ``value`` strictly beats the champion's recorded ``eval.<metric>``, and returns whether it did.
    Ties, NaN values, the champion itself and a champion without a recorded value (which cannot be
    compared) never move the alias. Read-compare-set is not atomic: run one gate at a time per
    registered model."""
    client = MlflowClient(resolve_tracking_uri(uri))
    version, value = str(version), float(value)
    tag = f"eval.{safe_key(metric)}"
    client.set_model_version_tag(name, version, tag, repr(value))
    if math.isnan(value):
        logger.warning("%s v%s: %s is NaN; not promoted", name, version, metric)
        return False
    champion = client.get_registered_model(name).aliases.get(CHAMPION_ALIAS)
    if champion is not None:
        if str(champion) == version:
            return False
        recorded = client.get_model_version(name, str(champion)).tags.get(tag)
        try:
            best = float(recorded)
        except (TypeError, ValueError):
            logger.warning("%s: champion v%s has no %s recorded; not replacing it", name, champion, tag)
            return False
        if not math.isnan(best) and not (value > best if higher_is_better else value < best):
            return False
    client.set_registered_model_alias(name, CHAMPION_ALIAS, version)
    return True
