"""The MLflow ``Tracker`` a stage's runs are logged with, built from ``params.tracking``."""

from __future__ import annotations

from collections.abc import Callable

from ..config import Params
from ..ranks import is_rank_zero
from .store import check_reachable, ensure_tracking_store, resolve_tracking_uri
from .tracker import Tracker


def tracking_factory(params: Params, log: Callable[[str], None] | None = None):
    """A function building the stage's MLflow ``Tracker`` from ``params.tracking`` (rank 0 only).
    An http(s) server that does not answer within ``tracking.timeout_seconds`` is a
    ``TrackingUnavailable`` error now, before the stage does anything."""
    uri = resolve_tracking_uri(params.tracking.uri)
    enabled = params.tracking.enabled and is_rank_zero()
    if enabled:  # here, when the stage starts: not after it has trained
        check_reachable(uri, params.tracking.timeout_seconds)

    def make(run_name: str, tags: dict[str, str]):
        if enabled:
            ensure_tracking_store(uri)
        t = params.tracking
        return Tracker(uri, t.experiment, run_name, tags=tags, enabled=enabled, spool_dir=t.spool_dir,
                       retry_seconds=t.retry_seconds, timeout_seconds=t.timeout_seconds, log=log,
                       system_metrics_seconds=t.system_metrics_seconds)

    return make
