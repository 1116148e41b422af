"""A model folder (``lmforge.models.folder``) logged to an MLflow run: an MLflow 3 ``LoggedModel``
in the run's experiment, linked to the run, holding the folder under the pyfunc wrapper and, with
a registered name, registered as a new version carrying alias ``candidate``."""

from __future__ import annotations

from pathlib import Path

import mlflow
import mlflow.pyfunc
from mlflow import MlflowClient
from mlflow.entities import LoggedModelOutput
from mlflow.entities.model_registry import ModelVersion

from ..models.folder import read_meta
from .pyfunc import LmforgePyfunc, pip_requirements, text_signature
from .registry import register_candidate
from .store import global_tracking_uri, quiet_mlflow


def log_model_folder(client: MlflowClient, uri: str, experiment_id: str, run_id: str, model_dir: Path, name: str,
                     registered_name: str | None) -> ModelVersion | None:
    """Log ``model_dir`` as the model ``name`` of run ``run_id`` in experiment ``experiment_id`` of the
    tracking server ``uri`` (what ``Tracker.log_model`` sends, now or from its spool); the registered
    ``ModelVersion``, or None without ``registered_name``."""
    meta = read_meta(model_dir)
    logged = client.create_logged_model(
        experiment_id=experiment_id, name=name, source_run_id=run_id,
        tags={"lmforge.preset": str(meta["preset"]), "lmforge.head": str(meta["head"])},
    )
    client.log_outputs(run_id, [LoggedModelOutput(logged.model_id, step=0)])
    # pyfunc.log_model has no URI argument: it writes through the global URI
    signature, example = text_signature(model_dir)  # a fine-tuned model takes texts
    with global_tracking_uri(uri), quiet_mlflow():
        mlflow.pyfunc.log_model(
            name=name, python_model=LmforgePyfunc(), artifacts={"model": str(model_dir)},
            pip_requirements=pip_requirements(), model_id=logged.model_id,
            signature=signature, input_example=example,
            metadata={"lmforge": {k: meta.get(k) for k in ("preset", "head", "num_labels", "lmforge_version")}},
        )
    if registered_name is None:
        return None
    return register_candidate(uri, registered_name, logged.model_id, run_id)
