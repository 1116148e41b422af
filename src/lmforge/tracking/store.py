"""Where runs are stored: the tracking URI (``sqlite:///<root>/mlflow.db`` by default; MLflow 3
no longer accepts the file store), creating the sqlite store once, and the helpers that keep MLflow's
process-global URI and its chatter in check.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import threading
from collections.abc import Iterator
from pathlib import Path

import mlflow
from mlflow import MlflowClient

from ..artifacts import file_lock
from ..errors import ConfigError, LmforgeError
from ..redact import redact, redact_uri

__all__ = ["TrackingUnavailable", "artifact_location", "check_reachable", "default_tracking_uri",
           "ensure_tracking_store", "global_tracking_uri", "quiet_mlflow", "resolve_tracking_uri"]


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
            raise ConfigError(f"tracking URI {redact(uri)!r}: MLflow 3 no longer supports the file store; "
                              f"use a sqlite:/// URI (the default is {default_tracking_uri(root)!r})")
        return uri
    if uri.endswith(".db"):
        path = Path(uri).expanduser()
        return f"sqlite:///{(path if path.is_absolute() else Path(root).expanduser().resolve() / path).as_posix()}"
    raise ConfigError(f"tracking URI {redact(uri)!r}: expected sqlite:///..., http(s)://..., postgresql://..., "
                      f"databricks or a path ending in .db (MLflow 3 no longer supports the file store)")


def _sqlite_path(uri: str) -> Path | None:
    """The database file of a ``sqlite:///`` URI on disk, else None."""
    if not uri.startswith("sqlite:///"):
        return None
    path = uri[len("sqlite:///"):].split("?", 1)[0]
    if path in ("", ":memory:") or path.startswith("file:"):
        return None
    return Path(path)


class TrackingUnavailable(LmforgeError):
    """The tracking server does not answer."""


def check_reachable(uri: str, timeout: float) -> None:
    """An http(s) tracking server must answer its ``/health`` page within ``timeout`` seconds,
    else ``TrackingUnavailable`` naming the URI (before a stage does any work, instead of MLflow's
    minutes of retries). Other stores (sqlite, databases) are not checked here. A user and
    password in the URI are sent as HTTP basic auth, and never shown."""
    if not uri.startswith(("http://", "https://")):
        return
    import base64
    import urllib.error
    import urllib.parse
    import urllib.request

    shown = redact_uri(uri)
    parts = urllib.parse.urlsplit(uri)
    request = urllib.request.Request(f"{shown.rstrip('/')}/health")
    if parts.username is not None or parts.password is not None:  # urllib itself takes no user in a URL
        pair = f"{urllib.parse.unquote(parts.username or '')}:{urllib.parse.unquote(parts.password or '')}"
        request.add_header("Authorization", "Basic " + base64.b64encode(pair.encode()).decode("ascii"))
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            response.read(64)
    except urllib.error.HTTPError as exc:  # it answers: a proxy or an older server without /health
        if exc.code >= 500:
            raise TrackingUnavailable(f"tracking server {shown} answers {exc.code} {exc.reason}") from None
    except (OSError, ValueError) as exc:
        reason = redact(str(getattr(exc, "reason", None) or exc))
        raise TrackingUnavailable(f"tracking server {shown} does not answer within {timeout:g} s ({reason}); start it, "
                                  f"or set tracking.uri (or tracking.enabled=false)") from None


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


def artifact_location(uri: str, experiment: str) -> str | None:
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
def quiet_mlflow() -> Iterator[None]:
    """No artifact progress bars (unless asked for) and no warning that ``python_model`` is
    cloudpickled (``LmforgePyfunc`` holds no state: it pickles as a reference to its module)."""
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
def global_tracking_uri(uri: str) -> Iterator[None]:
    """Point MLflow's process-global tracking URI at ``uri`` for the duration, then restore it
    (including the ``MLFLOW_TRACKING_URI`` environment variable, which ``set_tracking_uri`` also
    writes). ``mlflow.pyfunc.log_model`` has no URI argument and the registry resolves ``models:/``
    sources through the global URI; everything else passes the URI explicitly."""
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
