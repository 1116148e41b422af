"""Experiment tracking and the model registry, on MLflow 3.

* ``Tracker``: one MLflow run (params, per-step metrics, artifacts, tags, models); a no-op object
  when disabled or off rank 0, so callers never branch.
* ``Tracker.log_model``: a model folder (``lmforge.models.folder``) as an MLflow pyfunc model (``LmforgePyfunc``), optionally
  registered with alias ``candidate``; ``promote_if_better`` moves alias ``champion``;
  ``load_registered_model`` loads ``models:/<name>@<alias>`` straight from the safetensors file.
* Provenance: ``git_commit``, ``dvc_hashes`` and ``run_tags``.

The default store is ``sqlite:///<root>/mlflow.db`` (MLflow 3 no longer accepts the file store),
with artifacts next to it in ``<root>/mlartifacts``. Registry stages are deprecated in MLflow 3:
this module uses aliases only.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import math
import numbers
import os
import posixpath
import re
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import mlflow
import mlflow.pyfunc
import pandas as pd
import torch
from mlflow import MlflowClient
from mlflow.entities import LoggedModelOutput, Metric, Param, RunStatus, RunTag
from mlflow.entities.model_registry import ModelVersion
from mlflow.exceptions import MlflowException

from .errors import ConfigError
from .models.folder import META_FILE, load_model_dir, read_meta

__all__ = [
    "LmforgePyfunc", "Tracker", "default_tracking_uri", "dvc_hashes", "ensure_tracking_store", "git_commit",
    "is_rank_zero", "load_registered_model", "promote_if_better", "resolve_tracking_uri", "run_tags",
]

logger = logging.getLogger(__name__)

CANDIDATE_ALIAS = "candidate"
CHAMPION_ALIAS = "champion"
MAX_PARAM_LENGTH = 6000  # MLflow's limit on a param value
MAX_TAG_LENGTH = 8000  # ... and on a tag value
MAX_KEY_LENGTH = 250  # ... and on a param, metric or tag key


# ----------------------------------------------------------------------------- URIs and the store


def default_tracking_uri(root: str | Path = ".") -> str:
    """``sqlite:///<absolute root>/mlflow.db``: MLflow 3 refuses the plain file store."""
    return f"sqlite:///{(Path(root).expanduser().resolve() / 'mlflow.db').as_posix()}"


_PASS_THROUGH = re.compile(r"^(https?|postgres(ql)?(\+\w+)?|mysql(\+\w+)?|mssql(\+\w+)?|databricks(-uc)?)(://|$)")


def resolve_tracking_uri(uri: str | None, root: str | Path = ".") -> str:
    """The tracking URI to use: ``None`` or ``""`` -> ``default_tracking_uri(root)``; a relative
    ``sqlite:///path`` (or a bare ``*.db`` path) -> made absolute against ``root``; http(s),
    postgresql, mysql, mssql and databricks URIs pass through unchanged. ``file:`` URIs and other bare
    paths are a ``ConfigError``: MLflow 3 no longer offers the file store."""
    if not uri:
        return default_tracking_uri(root)
    uri = str(uri).strip()
    if uri.startswith("sqlite:"):
        if not uri.startswith("sqlite:///"):
            return uri  # "sqlite://" (in memory) or an unusual form: left to SQLAlchemy
        path = uri[len("sqlite:///"):]
        if path in ("", ":memory:") or path.startswith("file:"):
            return uri
        if not Path(path).is_absolute():  # sqlite:///rel.db is relative, sqlite:////abs.db absolute
            return f"sqlite:///{(Path(root).expanduser() / path).resolve().as_posix()}"
        return uri
    if _PASS_THROUGH.match(uri) or "://" in uri:
        if uri.startswith("file:"):
            raise ConfigError(f"tracking URI {uri!r}: MLflow 3 no longer supports the file store; "
                              f"use a sqlite:/// URI (the default is {default_tracking_uri(root)!r})")
        return uri
    if uri.endswith(".db"):
        path = Path(uri).expanduser()
        return f"sqlite:///{(path if path.is_absolute() else Path(root).expanduser().resolve() / path).as_posix()}"
    raise ConfigError(f"tracking URI {uri!r}: expected sqlite:///..., http(s)://..., postgresql://..., "
                      f"databricks or a path ending in .db (MLflow 3 no longer supports the file store)")


def _sqlite_path(uri: str) -> Path | None:
    """The database file of a ``sqlite:///`` URI on disk, else None."""
    if not uri.startswith("sqlite:///"):
        return None
    path = uri[len("sqlite:///"):].split("?", 1)[0]
    if path in ("", ":memory:") or path.startswith("file:"):
        return None
    return Path(path)


_ENSURED: set[str] = set()
_ENSURE_LOCK = threading.Lock()


def ensure_tracking_store(uri: str) -> None:
    """Create the sqlite database (and its folder) once, before any run starts, so that concurrent
    training processes do not race on creating the schema. A no-op for other URIs; idempotent,
    and free the second time in a process (MLflow caches the store per URI, so a first call in a
    new process costs what the first client would have anyway). Creation is serialised across
    processes by a lock file next to the database (POSIX)."""
    uri = resolve_tracking_uri(uri)
    db = _sqlite_path(uri)
    if db is None or uri in _ENSURED:
        return
    with _ENSURE_LOCK:
        if uri in _ENSURED:
            return
        db.parent.mkdir(parents=True, exist_ok=True)
        with file_lock(db.with_name(db.name + ".lock")):
            MlflowClient(uri).search_experiments(max_results=1)  # creates / migrates the schema
        _ENSURED.add(uri)


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive lock on ``path`` shared by every process on the machine (no-op off POSIX)."""
    try:
        import fcntl
    except ImportError:  # not POSIX: no cross-process lock
        yield
        return
    with open(path, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _artifact_location(uri: str, experiment: str) -> str | None:
    """For a sqlite store, ``<db folder>/mlartifacts/<experiment>``: left to itself MLflow would put
    artifacts in ``./mlruns`` of whatever the working directory is. None (the server decides)
    otherwise."""
    db = _sqlite_path(uri)
    if db is None:
        return None
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", experiment).strip("._") or "experiment"
    return (db.resolve().parent / "mlartifacts" / slug).as_uri()


_URI_LOCK = threading.RLock()


class _DropMessages(logging.Filter):
    def __init__(self, *fragments: str) -> None:
        super().__init__()
        self.fragments = fragments

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not any(fragment in message for fragment in self.fragments)


@contextlib.contextmanager
def _quiet_mlflow() -> Iterator[None]:
    """No artifact progress bars (unless asked for) and no warning that ``python_model`` is
    cloudpickled (``LmforgePyfunc`` holds no state: it pickles as a reference to this module)."""
    variable = "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"
    previous = os.environ.get(variable)
    if previous is None:
        os.environ[variable] = "false"
    pyfunc_logger = logging.getLogger("mlflow.pyfunc")
    drop = _DropMessages("serialized using CloudPickle")
    pyfunc_logger.addFilter(drop)
    try:
        yield
    finally:
        pyfunc_logger.removeFilter(drop)
        if previous is None:
            os.environ.pop(variable, None)


@contextlib.contextmanager
def _global_tracking_uri(uri: str) -> Iterator[None]:
    """Point MLflow's process-global tracking URI at ``uri`` for the duration, then restore it
    (including the ``MLFLOW_TRACKING_URI`` environment variable, which ``set_tracking_uri`` also
    writes). ``mlflow.pyfunc.log_model`` has no URI argument; everything else here passes the URI
    explicitly."""
    with _URI_LOCK:
        env = os.environ.get("MLFLOW_TRACKING_URI")
        previous = mlflow.get_tracking_uri() if mlflow.tracking.is_tracking_uri_set() else None
        mlflow.set_tracking_uri(uri)
        try:
            yield
        finally:
            mlflow.set_tracking_uri(previous)
            if env is None:
                os.environ.pop("MLFLOW_TRACKING_URI", None)
            else:
                os.environ["MLFLOW_TRACKING_URI"] = env


# ----------------------------------------------------------------------------- provenance


def is_rank_zero() -> bool:
    """True on global rank 0 or outside distributed training: the first of ``RANK``,
    ``SLURM_PROCID`` and ``LOCAL_RANK`` that is set decides (global ranks first)."""
    for var in ("RANK", "SLURM_PROCID", "LOCAL_RANK"):
        value = os.environ.get(var, "").strip()
        if value:
            try:
                return int(value) == 0
            except ValueError:
                continue
    return True


def git_commit(path: str | Path = ".") -> str | None:
    """HEAD's sha of the repository holding ``path``, with ``-dirty`` when tracked files have
    uncommitted changes (untracked files do not count, as in ``git describe --dirty``). None outside
    a repository or without git; never raises."""
    def git(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", "--no-optional-locks", "-C", str(path), *args],
                              capture_output=True, text=True, timeout=30, check=False)
    try:
        head = git("rev-parse", "--verify", "HEAD")
        if head.returncode != 0:
            return None
        sha = head.stdout.strip()
        status = git("status", "--porcelain", "--untracked-files=no")
        if status.returncode == 0 and status.stdout.strip():
            sha += "-dirty"
        return sha or None
    except Exception:  # no git binary, timeout, unreadable path...
        return None


def _relative_key(path: str | Path, root: Path) -> str:
    """``path`` as a posix path relative to ``root`` when inside it (how dvc.lock names paths),
    else absolute."""
    p = Path(path)
    absolute = (p if p.is_absolute() else root / p).resolve()
    try:
        return absolute.relative_to(root).as_posix()
    except ValueError:
        return absolute.as_posix()


def _recorded_outs(root: Path) -> dict[str, str]:
    """path -> md5 of every out recorded in ``<root>/dvc.lock`` (``stages.*.outs``)."""
    import yaml

    lock = root / "dvc.lock"
    if not lock.is_file():
        return {}
    try:
        data = yaml.safe_load(lock.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        logger.warning("unreadable %s: %s", lock, exc)
        return {}
    recorded: dict[str, str] = {}
    stages = data.get("stages") if isinstance(data, dict) else None
    for stage in (stages or {}).values():
        for out in (stage or {}).get("outs") or []:
            if isinstance(out, dict) and out.get("path") and out.get("md5"):
                recorded[posixpath.normpath(str(out["path"]))] = str(out["md5"])
    return recorded


def _dvc_file_md5(path: Path) -> str | None:
    """The md5 a ``<path>.dvc`` file (``dvc add``) records for ``path``, if any."""
    import yaml

    dvc_file = path.with_name(path.name + ".dvc")
    if not dvc_file.is_file():
        return None
    try:
        data = yaml.safe_load(dvc_file.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError):
        return None
    outs = data.get("outs") if isinstance(data, dict) else None
    for out in outs or []:
        if isinstance(out, dict) and posixpath.normpath(str(out.get("path", ""))) == path.name and out.get("md5"):
            return str(out["md5"])
    return None


def _file_md5(path: Path) -> str:
    digest = hashlib.md5()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# DVC skips these folders when it hashes a directory; .dvcignore patterns are NOT applied here.
_DVC_SKIPPED_DIRS = {".git", ".hg", ".dvc"}


def _dir_md5(path: Path) -> str:
    """DVC 3's directory hash: the md5 of ``json.dumps(entries, sort_keys=True)`` where entries are
    ``{"md5": <file md5>, "relpath": <posix path>}`` for every file below, sorted by relpath, plus
    the suffix ``.dir`` (dvc-data's ``Tree.digest``). An approximation in two respects: ``.dvcignore``
    rules are not applied, and DVC 2's ``md5-dos2unix`` hashes (lock files without ``hash: md5``)
    are not reproduced — DVC 3 hashes raw bytes, as here."""
    entries = []
    for current, dirs, files in os.walk(path):
        dirs[:] = [d for d in dirs if d not in _DVC_SKIPPED_DIRS]
        for name in files:
            full = Path(current) / name
            entries.append({"md5": _file_md5(full), "relpath": full.relative_to(path).as_posix()})
    entries.sort(key=lambda entry: entry["relpath"])
    return hashlib.md5(json.dumps(entries, sort_keys=True).encode("utf-8")).hexdigest() + ".dir"


def dvc_hashes(paths: list[str | Path], root: str | Path = ".") -> dict[str, str]:
    """The DVC md5 of each input path, keyed by the path relative to ``root`` (posix; absolute
    when outside ``root``). Taken from ``<root>/dvc.lock`` when a stage records the path as an out,
    else from a ``<path>.dvc`` file, else computed the way DVC 3 does (a file: md5 of its bytes; a
    directory: see ``_dir_md5``). A missing path is omitted."""
    root_path = Path(root).expanduser().resolve()
    recorded = _recorded_outs(root_path)
    hashes: dict[str, str] = {}
    for path in paths:
        key = _relative_key(path, root_path)
        absolute = Path(path) if Path(path).is_absolute() else root_path / path
        if key in recorded:
            hashes[key] = recorded[key]
        elif not absolute.exists():
            continue
        elif (md5 := _dvc_file_md5(absolute)) is not None:
            hashes[key] = md5
        elif absolute.is_dir():
            hashes[key] = _dir_md5(absolute)
        else:
            hashes[key] = _file_md5(absolute)
    return hashes


def run_tags(*, commit: str | None, inputs: dict[str, str], recipe: str | None,
             dagster_run_id: str | None = None, extra: dict | None = None) -> dict[str, str]:
    """The provenance tags of a run: ``git_commit``, ``dvc.<input path>`` (its md5), ``recipe``,
    ``dagster_run_id`` (from ``DAGSTER_RUN_ID`` when not given) and ``extra``. Unknown (None)
    values are left out."""
    tags: dict[str, str] = {}
    if commit:
        tags["git_commit"] = commit
    for path, md5 in (inputs or {}).items():
        tags[f"dvc.{path}"] = str(md5)
    if recipe:
        tags["recipe"] = str(recipe)
    dagster = dagster_run_id or os.environ.get("DAGSTER_RUN_ID")
    if dagster:
        tags["dagster_run_id"] = str(dagster)
    for key, value in (extra or {}).items():
        if value is not None:
            tags[str(key)] = str(value)
    return tags


# ----------------------------------------------------------------------------- the tracker


def _safe_key(key: Any) -> str:
    """A valid MLflow key: characters other than alphanumerics, ``_ - . / :`` and space become
    ``_``; empty, ``.`` and ``..`` path segments are dropped or neutralised; at most 250 chars."""
    text = re.sub(r"[^/\w.\- :]", "_", str(key))
    parts = ["__" if part == ".." else part for part in text.split("/") if part not in ("", ".")]
    return ("/".join(parts) or "_")[:MAX_KEY_LENGTH]


def _flatten(params: Any, prefix: str = "") -> dict[str, Any]:
    """Nested mappings (and dataclasses / pydantic models) flattened to dotted keys."""
    if dataclasses.is_dataclass(params) and not isinstance(params, type):
        params = {f.name: getattr(params, f.name) for f in dataclasses.fields(params)}
    elif hasattr(params, "model_dump") and callable(params.model_dump) and not isinstance(params, type):
        params = params.model_dump()
    flat: dict[str, Any] = {}
    for key, value in params.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        nested = isinstance(value, Mapping) or (dataclasses.is_dataclass(value) and not isinstance(value, type)) \
            or (hasattr(value, "model_dump") and not isinstance(value, type))
        if nested and (not isinstance(value, Mapping) or value):
            flat.update(_flatten(value, name))
        else:
            flat[name] = value
    return flat


def _as_float(value: Any) -> float | None:
    """A metric value as a float, or None when it is not a number (strings, None, tensors of more
    than one element...). NaN and infinities are kept."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, numbers.Real):
        return float(value)
    if isinstance(value, torch.Tensor):
        return float(value.detach().item()) if value.numel() == 1 and not value.is_complex() else None
    item = getattr(value, "item", None)  # numpy 0-d arrays and scalars
    if callable(item) and getattr(value, "size", None) == 1:
        try:
            scalar = item()
        except (TypeError, ValueError):
            return None
        return float(scalar) if isinstance(scalar, numbers.Real) else None
    return None


class Tracker:
    """One MLflow run; a no-op object when disabled or not on rank 0 (so callers never branch).

    ``with Tracker(uri, "pretrain", "gpt-tiny-clm", tags=run_tags(...)) as tracker: ...`` creates the
    experiment if needed and starts the run on entry, and ends it FINISHED, or FAILED when an
    exception passes through (the exception is re-raised). ``start()`` / ``end(status)`` do the same
    without a ``with`` block. Everything goes through an explicit ``MlflowClient(uri)``: the
    process-global MLflow state (active run, tracking URI) is left alone, except briefly inside
    ``log_model``.
    """

    def __init__(self, uri: str | None, experiment: str, run_name: str, tags: dict[str, str] | None = None,
                 enabled: bool = True) -> None:
        self.enabled = bool(enabled) and is_rank_zero()
        self.uri: str | None = resolve_tracking_uri(uri) if self.enabled else None
        self.experiment = experiment
        self.run_name = run_name
        self.run_id: str | None = None
        self.experiment_id: str | None = None
        self._initial_tags = {_safe_key(k): str(v)[:MAX_TAG_LENGTH] for k, v in (tags or {}).items() if v is not None}
        self._client: MlflowClient | None = None

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
    def url(self) -> str | None:
        """The run's page in the MLflow UI when the URI is an http(s) server, else None."""
        if not self.active or not self.uri.startswith(("http://", "https://")):
            return None
        return f"{self.uri.rstrip('/')}/#/experiments/{self.experiment_id}/runs/{self.run_id}"

    def start(self) -> "Tracker":
        if not self.enabled or self.run_id is not None:
            return self
        from mlflow.tracking.context.registry import resolve_tags

        ensure_tracking_store(self.uri)
        self.experiment_id = self._experiment_id()
        tags = {k: v[:MAX_TAG_LENGTH] for k, v in resolve_tags(self._initial_tags).items()}
        run = self.client.create_run(self.experiment_id, run_name=self.run_name, tags=tags)
        self.run_id = run.info.run_id
        return self

    def end(self, status: str = "FINISHED") -> None:
        if self.active:
            self.client.set_terminated(self.run_id, status=status)

    def _experiment_id(self) -> str:
        client = self.client
        experiment = client.get_experiment_by_name(self.experiment)
        if experiment is None:
            try:
                return client.create_experiment(self.experiment,
                                                artifact_location=_artifact_location(self.uri, self.experiment))
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

    # -- logging

    def log_params(self, params: dict) -> None:
        """Log ``params`` (nested dicts flattened to dotted keys; values stringified and cut to
        MLflow's 6000 characters) in batches. MLflow params are immutable: logging a key again
        with a different value raises ``MlflowException``."""
        if (run_id := self._run()) is None:
            return
        flat = _flatten(params)
        batch = [Param(_safe_key(k), str(v)[:MAX_PARAM_LENGTH]) for k, v in flat.items()]
        if batch:
            self.client.log_batch(run_id, params=batch)

    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None:
        """Log numeric ``metrics`` at ``step`` (0 when None). NaN and infinities are logged as
        such; non-numeric values (None, strings, tensors of several elements) are skipped."""
        if (run_id := self._run()) is None:
            return
        timestamp = int(time.time() * 1000)
        batch = []
        for key, value in metrics.items():
            number = _as_float(value)
            if number is not None:
                batch.append(Metric(_safe_key(key), number, timestamp, int(step or 0)))
        if batch:
            self.client.log_batch(run_id, metrics=batch)

    def log_artifact(self, path: str | Path, artifact_path: str | None = None) -> None:
        """Upload a file or a directory: it lands at ``<artifact_path>/<its name>`` either way."""
        if (run_id := self._run()) is None:
            return
        path = Path(path)
        if path.is_dir():
            destination = posixpath.join(artifact_path, path.name) if artifact_path else path.name
            self.client.log_artifacts(run_id, str(path), artifact_path=destination)
        elif path.is_file():
            self.client.log_artifact(run_id, str(path), artifact_path=artifact_path)
        else:
            raise FileNotFoundError(f"no file or directory {path}")

    def log_dict(self, data: dict, name: str) -> None:
        """Write ``data`` as the artifact ``name`` (JSON, or YAML for a .yaml/.yml name)."""
        if (run_id := self._run()) is None:
            return
        self.client.log_dict(run_id, data, name)

    def set_tags(self, tags: dict) -> None:
        """Set run tags (values stringified, cut to MLflow's 8000 characters; None skipped)."""
        if (run_id := self._run()) is None:
            return
        batch = [RunTag(_safe_key(k), str(v)[:MAX_TAG_LENGTH]) for k, v in tags.items() if v is not None]
        if batch:
            self.client.log_batch(run_id, tags=batch)

    def log_model(self, model_dir: str | Path, name: str = "model",
                  registered_name: str | None = None) -> ModelVersion | None:
        """Log a directory written by ``save_model_dir`` as an MLflow pyfunc model of this run and,
        with ``registered_name``, register it as a new version carrying alias ``candidate``.

        Fast by construction: explicit pip requirements (no import scanning), no signature or input
        example (no inference). The MLflow 3 ``LoggedModel`` is created here, in this run's
        experiment and linked to this run, so no fluent active run is needed; the version is
        registered through the client with this run's id. Returns the ``ModelVersion`` (None when
        not registered or disabled)."""
        if (run_id := self._run()) is None:
            return None
        model_dir = Path(model_dir)
        meta = read_meta(model_dir)
        client = self.client
        logged = client.create_logged_model(
            experiment_id=self.experiment_id, name=name, source_run_id=run_id,
            tags={"lmforge.preset": str(meta["preset"]), "lmforge.head": str(meta["head"])},
        )
        client.log_outputs(run_id, [LoggedModelOutput(logged.model_id, step=0)])
        # pyfunc.log_model writes through the global URI, and the registry resolves a models:/ source
        # through it too: both run with the global URI pointed at this store
        with _global_tracking_uri(self.uri), _quiet_mlflow():
            mlflow.pyfunc.log_model(
                name=name, python_model=LmforgePyfunc(), artifacts={"model": str(model_dir)},
                pip_requirements=_pip_requirements(), model_id=logged.model_id,
                metadata={"lmforge": {k: meta.get(k) for k in ("preset", "head", "num_labels", "lmforge_version")}},
            )
            if registered_name is None:
                return None
            try:
                client.create_registered_model(registered_name)
            except MlflowException as exc:  # a later version (or another process got there first)
                if exc.error_code not in ("RESOURCE_ALREADY_EXISTS", "ALREADY_EXISTS"):
                    raise
            version = client.create_model_version(registered_name, source=f"models:/{logged.model_id}",
                                                  run_id=run_id, model_id=logged.model_id)
        client.set_registered_model_alias(registered_name, CANDIDATE_ALIAS, version.version)
        return client.get_model_version(registered_name, version.version)


def _pip_requirements() -> list[str]:
    """What the pyfunc model needs, pinned to this environment; lmforge itself (not on PyPI) must
    be installed where the model is served (``env_manager="local"``)."""
    from importlib.metadata import PackageNotFoundError, version

    requirements = [f"mlflow=={mlflow.__version__}", f"torch=={torch.__version__.split('+')[0]}"]
    for package in ("safetensors", "numpy", "pandas"):
        try:
            requirements.append(f"{package}=={version(package)}")
        except PackageNotFoundError:
            requirements.append(package)
    return requirements


# ----------------------------------------------------------------------------- pyfunc and the registry


def _as_batch_tensor(name: str, column: Any) -> torch.Tensor:
    import numpy as np

    if hasattr(column, "tolist"):
        column = column.tolist()
    try:
        array = np.asarray([np.asarray(row) for row in column] if isinstance(column, list) else column)
    except ValueError as exc:
        raise ValueError(f"{name!r}: rows differ in length; pad them (and pass an attention_mask)") from exc
    if array.dtype == object:
        raise ValueError(f"{name!r}: rows differ in length; pad them (and pass an attention_mask)")
    if array.ndim == 1:  # one example given as a flat list
        array = array[None]
    tensor = torch.from_numpy(np.ascontiguousarray(array))
    return tensor.long() if not tensor.is_floating_point() else tensor


class LmforgePyfunc(mlflow.pyfunc.PythonModel):
    """An lmforge model directory behind MLflow's pyfunc interface.

    ``predict`` takes a pandas DataFrame, or a dict, whose columns are arguments of the model's
    ``forward`` (``input_ids``, optionally ``attention_mask``, ``token_type_ids``,
    ``decoder_input_ids``...), one row per example, each cell a list of ids; rows must be padded to
    one length. It returns the main head's logits as a float32 numpy array, e.g. (batch, length,
    vocab) for a language model or (batch, num_labels) for a classifier (the hidden states for a
    model without logits). Example: ``predict(None, {"input_ids": [[5, 8, 13], [2, 3, 4]]})``.
    """

    def load_context(self, context) -> None:
        self.model = load_model_dir(context.artifacts["model"])

    # The pd.DataFrame hint is one MLflow infers no schema from: no input validation or conversion,
    # no signature inference at logging, and no warning about a missing hint. Dicts work too.
    def predict(self, context, model_input: pd.DataFrame, params: dict[str, Any] | None = None):
        if hasattr(model_input, "columns"):  # pandas DataFrame
            columns = {str(c): model_input[c] for c in model_input.columns}
        elif isinstance(model_input, Mapping):
            columns = dict(model_input)
        else:
            columns = {"input_ids": model_input}
        batch = {name: _as_batch_tensor(name, column) for name, column in columns.items()}
        with torch.inference_mode():
            output = self.model(**batch)
        logits = getattr(output, "logits", output)
        if logits is None:
            logits = output.hidden_states
        return logits.float().cpu().numpy()


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
    with tempfile.TemporaryDirectory(prefix="lmforge-model-") as tmp, _global_tracking_uri(uri), _quiet_mlflow():
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
    tag = f"eval.{_safe_key(metric)}"
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
