"""Resources of the Dagster view: the project's parameters, MLflow, DVC, and the Ray cluster.

Our own small MLflow resource (no ``dagster-mlflow``): the tracking URI the stages log to and
links to runs in the MLflow UI. The DVC resource records a materialized stage in ``dvc.lock``
(``dvc commit``), one process at a time.

What names a file to read, a program to run or a cluster to send work to (the params file, the
DVC executable, the Ray address) is fixed when the code location loads, from the project's own
folder and environment: those resources take no run configuration (``fixed_resource``), so a
launch from the UI's launchpad cannot point a run at another program, file or cluster; one
that tries is refused by Dagster's config check before anything runs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Callable

from dagster import ConfigurableResource, Failure, Field, ResourceDefinition, Shape

from lmforge.config import ConfigError, ExecutorConfig, Params, load_params
from lmforge.artifacts import file_lock

from .overrides import run_overrides


def project_root() -> Path:
    """The project folder: ``$LMFORGE_PROJECT``, else the current directory."""
    return Path(os.environ.get("LMFORGE_PROJECT") or ".").resolve()


def fixed_resource(value: object, description: str | None = None) -> ResourceDefinition:
    """``value`` as a resource that takes no run configuration: its config schema is an empty
    mapping, so a launch giving ``resources: {key: {config: {...}}}`` fails Dagster's config check
    (``DagsterInvalidConfigError``, naming the unexpected field) and the run does not start. An
    asset takes it as ``ResourceParam[type(value)]``."""
    return ResourceDefinition(resource_fn=lambda _: value, config_schema=Field(Shape({}), is_required=False),
                              description=description or type(value).__doc__)


class ParamsResource:
    """Reads and validates ``params.yaml`` with the run's ``--set`` items (``overrides``; a wrong
    key or type fails the run, naming the key)."""

    def __init__(self, root: str = "", path: str = "params.yaml") -> None:
        self.root = root
        self.path = path

    @property
    def project(self) -> Path:
        return Path(self.root).resolve() if self.root else project_root()

    @property
    def file(self) -> Path:
        p = Path(self.path)
        return p if p.is_absolute() else self.project / p

    def load(self) -> Params:
        try:
            return load_params(self.file, run_overrides())
        except ConfigError as exc:
            raise Failure(description=f"invalid parameters: {exc}") from None


class MLflowResource(ConfigurableResource):
    """Where the stages log (``params.tracking.uri``; null = ``sqlite:///<project>/mlflow.db``)
    and where a person reads it (``ui_url``: start it with ``mlflow ui --backend-store-uri ...``)."""

    ui_url: str = "http://127.0.0.1:5000"

    def tracking_uri(self, params: Params, root: Path) -> str:
        from lmforge.tracking import resolve_tracking_uri

        return resolve_tracking_uri(params.tracking.uri, root)

    def run_url(self, params: Params, root: Path, run_id: str | None) -> str | None:
        """A link to the run in the MLflow UI, or None when tracking is off or the run is unknown."""
        if not run_id or not params.tracking.enabled:
            return None
        try:
            from mlflow.tracking import MlflowClient

            experiment = MlflowClient(self.tracking_uri(params, root)).get_run(run_id).info.experiment_id
        except Exception:  # noqa: BLE001 - a missing link must not fail the materialization
            return None
        return f"{self.ui_url.rstrip('/')}/#/experiments/{experiment}/runs/{run_id}"


class DvcResource:
    """Records a stage Dagster materialized in ``dvc.lock`` (``dvc commit -f <stage>``), so
    ``dvc status`` stays clean and ``dvc repro`` has nothing to redo. DVC takes one operation
    per workspace at a time: commits are serialised through a lock file shared by every process
    of the project (a pool of one). ``executable``: the ``dvc`` program (default: the one beside
    this Python, else on ``PATH``)."""

    def __init__(self, enabled: bool = True, executable: str = "") -> None:
        self.enabled = enabled
        self.executable = executable

    def _dvc(self) -> str:
        if self.executable:
            return self.executable
        beside = Path(sys.executable).with_name("dvc")
        return str(beside) if beside.exists() else (shutil.which("dvc") or "dvc")

    def commit(self, root: Path, stage: str, stale: str | None, log: Callable[[str], None]) -> bool:
        """``dvc commit`` of ``stage``; returns whether dvc.lock was updated. ``stale``: why
        ``dvc.yaml`` does not describe the current graph (then nothing is committed)."""
        if not self.enabled:
            return False
        if not (root / ".dvc").is_dir():
            log(f"dvc: {root} is not a DVC project (no .dvc/); {stage} not recorded in dvc.lock")
            return False
        if stale:
            log(f"dvc: {stale}; {stage} not recorded in dvc.lock (run `lmforge dvc`)")
            return False
        lock = root / ".dvc" / "tmp" / "lmforge-commit.lock"
        lock.parent.mkdir(parents=True, exist_ok=True)
        with file_lock(lock):
            done = subprocess.run([self._dvc(), "commit", "--force", stage], cwd=root,
                                  capture_output=True, text=True)
        if done.returncode != 0:
            raise Failure(description=f"dvc commit {stage} failed: {(done.stderr or done.stdout).strip()}")
        log(f"dvc: {stage} recorded in dvc.lock")
        return True


class RayResource:
    """The Ray cluster the data stages (clean, tokenize) run on when ``executor.kind`` is ``ray``:
    ``address`` as ``ray.init`` takes it (``auto``, ``HOST:6379``, ``ray://HOST:10001``); empty:
    ``executor.ray_address`` of params.yaml. Set it with ``LMFORGE_RAY_ADDRESS`` in the
    environment of the code location (not from the launchpad); the stage connects, runs its
    units as Ray tasks, and disconnects."""

    def __init__(self, address: str = "") -> None:
        self.address = address

    def executor(self, params: Params) -> ExecutorConfig:
        cfg = params.executor
        if cfg.kind == "ray" and self.address:
            return cfg.model_copy(update={"ray_address": self.address})
        return cfg
