"""The ``Tracker``: one MLflow run (params, per-step metrics, artifacts, tags, models) through an
explicit client; a no-op object when disabled or off rank 0, so callers never branch.
"""

from __future__ import annotations

import os
import posixpath
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mlflow import MlflowClient
from mlflow.entities import Metric, Param, RunStatus, RunTag
from mlflow.entities.model_registry import ModelVersion
from mlflow.exceptions import MlflowException

from ..config import TrackingConfig
from ..ranks import is_rank_zero
from ..redact import redact, redact_data, redact_log_records, redact_uri
from .keys import MAX_PARAM_LENGTH, MAX_TAG_LENGTH, safe_key
from .model_logging import log_model_folder
from .spool import Spool
from .store import TrackingUnavailable, artifact_location, check_reachable, ensure_tracking_store, resolve_tracking_uri
from .values import as_float, flatten_params

__all__ = ["Tracker", "is_rank_zero"]


class Tracker:
    """One MLflow run; a no-op object when disabled or not on rank 0 (so callers never branch).

    ``with Tracker(uri, "pretrain", "gpt-tiny-clm", tags=run_tags(...)) as tracker: ...`` creates the
    experiment if needed and starts the run on entry, and ends it FINISHED, or FAILED when an
    exception passes through (the exception is re-raised). ``start()`` / ``end(status)`` do the same
    without a ``with`` block. Everything goes through an explicit ``MlflowClient(uri)``: the
    process-global MLflow state (active run, tracking URI) is left alone, except briefly inside
    ``log_model``.

    An http(s) server that stops answering during the run does not stop it: each call is kept in
    a spool on disk (``spool.Spool`` in ``spool_dir``, files copied) and the server is asked again
    every ``retry_seconds``; when it answers, the spool is sent and logging goes on. What is still
    spooled when the run ends is sent by ``lmforge tracking sync``. ``log`` hears about both.
    """

    def __init__(self, uri: str | None, experiment: str, run_name: str, tags: dict[str, str] | None = None,
                 enabled: bool = True, *, spool_dir: str | Path | None = None, retry_seconds: float = 30.0,
                 timeout_seconds: float = 5.0, log: Callable[[str], None] | None = None,
                 system_metrics_seconds: float | None = None) -> None:
        self.enabled = bool(enabled) and is_rank_zero()
        self.uri: str | None = resolve_tracking_uri(uri) if self.enabled else None
        # what is shown and kept (logs, spool lines, links): the URI without its user and password
        self.shown_uri: str | None = redact_uri(self.uri)
        if self.shown_uri != self.uri:  # MLflow's own warnings name the URL they called ...
            redact_log_records()
            # ... and it prints a finished run's link, from the URI it was given, on stdout
            os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")
        self.experiment = experiment
        self.run_name = run_name
        self.run_id: str | None = None
        self.experiment_id: str | None = None
        self._initial_tags = {safe_key(k): redact(str(v))[:MAX_TAG_LENGTH]
                              for k, v in (tags or {}).items() if v is not None}
        self._client: MlflowClient | None = None
        self.spool_dir = Path(spool_dir if spool_dir is not None else TrackingConfig.model_fields["spool_dir"].default)
        self.retry_seconds = retry_seconds
        self.timeout_seconds = timeout_seconds
        self.log = log or (lambda message: None)
        self._spool: Spool | None = None
        self.system_metrics_seconds = system_metrics_seconds
        self._monitor = None
        self._offline_since: float | None = None
        self._next_try = 0.0
        if self.enabled and self.uri.startswith(("http://", "https://")):
            # a call to a server that went away fails in seconds (and is spooled), not after minutes of retries
            for variable, value in (("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2"), ("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "1"),
                                    ("MLFLOW_HTTP_REQUEST_TIMEOUT", "15")):
                os.environ.setdefault(variable, value)

    @classmethod
    def resume(cls, uri: str, run_id: str, experiment_id: str | None) -> "Tracker":
        """A tracker of an existing run (to send a spool to it)."""
        tracker = cls(uri, "", "")
        tracker.run_id, tracker.experiment_id = run_id, experiment_id
        return tracker

    # -- lifecycle

    @property
    def client(self) -> MlflowClient | None:
        """The ``MlflowClient`` of this run's store (None when disabled)."""
        if self.enabled and self._client is None:
            self._client = MlflowClient(self.uri)
        return self._client

    @property
    def active(self) -> bool:
        return self.enabled and self.run_id is not None

    @property
    def offline(self) -> bool:
        """Whether calls are being spooled (the server stopped answering)."""
        return self._offline_since is not None

    @property
    def url(self) -> str | None:
        """The run's page in the MLflow UI when the URI is an http(s) server, else None."""
        if not self.active or not self.uri.startswith(("http://", "https://")):
            return None
        return f"{self.shown_uri.rstrip('/')}/#/experiments/{self.experiment_id}/runs/{self.run_id}"

    def start(self) -> "Tracker":
        if not self.enabled or self.run_id is not None:
            return self
        from mlflow.tracking.context.registry import resolve_tags

        ensure_tracking_store(self.uri)
        self.experiment_id = self._experiment_id()
        tags = {k: v[:MAX_TAG_LENGTH] for k, v in resolve_tags(self._initial_tags).items()}
        run = self.client.create_run(self.experiment_id, run_name=self.run_name, tags=tags)
        self.run_id = run.info.run_id
        if self.system_metrics_seconds:
            import logging

            from mlflow.system_metrics.system_metrics_monitor import SystemMetricsMonitor

            if os.environ.get("LMFORGE_VERBOSITY") != "verbose":  # its start and stop lines are not the stage's news
                logging.getLogger("mlflow.system_metrics").setLevel(logging.WARNING)

            # a thread sampling CPU, memory, disk, network (and GPUs with pynvml) into system/* metrics
            self._monitor = SystemMetricsMonitor(self.run_id, sampling_interval=self.system_metrics_seconds,
                                                 tracking_uri=self.uri)
            self._monitor.start()
        return self

    def end(self, status: str = "FINISHED") -> None:
        if not self.active:
            return
        if self._monitor is not None:
            self._monitor.finish()
            self._monitor = None
        self._send({"op": "terminate", "status": status})
        if self.offline:
            self._try_again(force=True)
        if self.offline:
            self.log(f"tracking: the server {self.shown_uri} is still away; {len(self._spool)} records of run "
                     f"{self.run_id} wait in {self._spool.file}: `lmforge tracking sync` sends them")

    def _experiment_id(self) -> str:
        client = self.client
        experiment = client.get_experiment_by_name(self.experiment)
        if experiment is None:
            try:
                return client.create_experiment(self.experiment,
                                                artifact_location=artifact_location(self.uri, self.experiment))
            except MlflowException as exc:  # another process created it meanwhile
                if exc.error_code != "RESOURCE_ALREADY_EXISTS":
                    raise
                experiment = client.get_experiment_by_name(self.experiment)
        if experiment.lifecycle_stage == "deleted":
            client.restore_experiment(experiment.experiment_id)
        return experiment.experiment_id

    def __enter__(self) -> "Tracker":
        return self.start()

    def __exit__(self, exc_type, exc, tb) -> bool:
        if self.active:
            if exc_type is None:
                self.end(RunStatus.to_string(RunStatus.FINISHED))
            else:
                try:
                    self.set_tags({"lmforge.error": f"{exc_type.__name__}: {exc}"})
                finally:
                    self.end(RunStatus.to_string(RunStatus.FAILED))
        return False

    def _run(self) -> str | None:
        """The run id, None when disabled; an error when enabled but not started."""
        if not self.enabled:
            return None
        if self.run_id is None:
            raise RuntimeError("Tracker not started: use `with Tracker(...) as tracker:` or tracker.start()")
        return self.run_id

    # -- sending, or spooling while the server is away

    def _send(self, record: dict) -> Any:
        """Apply ``record`` now (its result), or spool it while the server does not answer (None).
        Errors of a server that answers are raised as they are."""
        if self.offline and not self._try_again():
            self._keep(record)
            return None
        try:
            return self.apply(record)
        except Exception:
            if not self.uri.startswith(("http://", "https://")) or self._answers():
                raise
        self._offline_since = time.time()
        self._next_try = time.time() + self.retry_seconds
        self._spool = self._spool or Spool(self.spool_dir, self.shown_uri, self.run_id, self.experiment_id)
        self.log(f"tracking: the server {self.shown_uri} does not answer; run {self.run_id} goes on and keeps its "
                 f"records in {self._spool.file} until it is back")
        self._keep(record)
        return None

    def _answers(self) -> bool:
        try:
            check_reachable(self.uri, self.timeout_seconds)
        except TrackingUnavailable:
            return False
        return True

    def _keep(self, record: dict) -> None:
        for key in ("path", "model_dir"):  # the file may change or move before it is sent: a copy
            if record.get(key):
                record = {**record, key: self._spool.keep(record[key])}
        self._spool.add(record)

    def _try_again(self, force: bool = False) -> bool:
        """While offline: when it is time (or ``force``), ask the server and, when it answers, send
        the spool; whether the tracker is online again."""
        if not force and time.time() < self._next_try:
            return False
        self._next_try = time.time() + self.retry_seconds
        if not self._answers():
            return False
        try:
            n = self._spool.send(self.apply)
        except Exception:  # it went away again while sending: the rest stays spooled
            return False
        self.log(f"tracking: the server {self.shown_uri} is back after {time.time() - self._offline_since:.0f} s; "
                 f"sent the {n} records kept meanwhile")
        self._offline_since = None
        return True

    def apply(self, record: dict) -> Any:
        """Make the MLflow call ``record`` describes (what ``_send`` and a spool's replay do); a
        model's registered version, else None."""
        run_id, op = self.run_id, record["op"]
        client = self.client
        if op == "batch":
            client.log_batch(run_id, metrics=[Metric(*m) for m in record.get("metrics", [])],
                             params=[Param(*p) for p in record.get("params", [])],
                             tags=[RunTag(*t) for t in record.get("tags", [])])
        elif op == "artifacts":
            client.log_artifacts(run_id, record["path"], artifact_path=record["artifact_path"])
        elif op == "artifact":
            client.log_artifact(run_id, record["path"], artifact_path=record["artifact_path"])
        elif op == "dict":
            client.log_dict(run_id, record["data"], record["name"])
        elif op == "model":
            return log_model_folder(client, self.uri, self.experiment_id, run_id, Path(record["model_dir"]), record["name"],
                                    record["registered_name"])
        elif op == "terminate":
            client.set_terminated(run_id, status=record["status"])
        else:
            raise ValueError(f"unknown tracking record {op!r}")

    # -- logging

    def log_params(self, params: dict) -> None:
        """Log ``params`` (nested dicts flattened to dotted keys; values stringified, a URI's user
        and password removed, and cut to MLflow's 6000 characters) in batches. MLflow params are
        immutable: logging a key again with a different value raises ``MlflowException``."""
        if self._run() is None:
            return
        batch = [[safe_key(k), redact(str(v))[:MAX_PARAM_LENGTH]] for k, v in flatten_params(params).items()]
        if batch:
            self._send({"op": "batch", "params": batch})

    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None:
        """Log numeric ``metrics`` at ``step`` (0 when None). NaN and infinities are logged as
        such; non-numeric values (None, strings, tensors of several elements) are skipped."""
        if self._run() is None:
            return
        timestamp = int(time.time() * 1000)
        batch = []
        for key, value in metrics.items():
            number = as_float(value)
            if number is not None:
                batch.append([safe_key(key), number, timestamp, int(step or 0)])
        if batch:
            self._send({"op": "batch", "metrics": batch})

    def log_artifact(self, path: str | Path, artifact_path: str | None = None) -> None:
        """Upload a file or a directory: it lands at ``<artifact_path>/<its name>`` either way."""
        if self._run() is None:
            return
        path = Path(path)
        if path.is_dir():
            destination = posixpath.join(artifact_path, path.name) if artifact_path else path.name
            self._send({"op": "artifacts", "path": str(path), "artifact_path": destination})
        elif path.is_file():
            self._send({"op": "artifact", "path": str(path), "artifact_path": artifact_path})
        else:
            raise FileNotFoundError(f"no file or directory {path}")

    def log_dict(self, data: dict, name: str) -> None:
        """Write ``data`` as the artifact ``name`` (JSON, or YAML for a .yaml/.yml name), a URI's
        user and password removed from its strings."""
        if self._run() is None:
            return
        self._send({"op": "dict", "data": redact_data(data), "name": name})

    def set_tags(self, tags: dict) -> None:
        """Set run tags (values stringified, a URI's user and password removed, cut to MLflow's
        8000 characters; None skipped)."""
        if self._run() is None:
            return
        batch = [[safe_key(k), redact(str(v))[:MAX_TAG_LENGTH]] for k, v in tags.items() if v is not None]
        if batch:
            self._send({"op": "batch", "tags": batch})

    def log_model(self, model_dir: str | Path, name: str = "model",
                  registered_name: str | None = None) -> ModelVersion | None:
        """Log a folder written by ``lmforge.models.folder.save_model_dir`` as an MLflow pyfunc model
        of this run and, with ``registered_name``, register it as a new version carrying alias
        ``candidate`` (``registry.register_candidate``).

        Fast by construction: explicit pip requirements (no import scanning), no signature or input
        example inferred (a fine-tuned model's are given: ``pyfunc.text_signature``). The MLflow 3
        ``LoggedModel`` is created here, in this run's experiment and linked to this run, so no
        fluent active run is needed; the version is registered with this run's id. Returns the ``ModelVersion`` (None when not registered,
        disabled, or spooled while the server is away: it is registered when the spool is sent)."""
        if self._run() is None:
            return None
        return self._send({"op": "model", "model_dir": str(model_dir), "name": name, "registered_name": registered_name})
