"""Experiment tracking and the model registry, on MLflow 3.

``store``: tracking URIs and the sqlite store; ``tracker``: the ``Tracker`` (one run), with
``values`` (parameters flattened, metric values as floats) and ``model_logging`` (a model folder
logged to a run); ``spool``: what a run keeps while its server is away, and ``sync``: sending it
later (``lmforge tracking sync``); ``provenance``: git commit, DVC hashes, run tags;
``registry``: candidate / champion aliases and loading a registered model; ``pyfunc``: the
pyfunc wrapper; ``keys``: MLflow's key rules.
Model folders themselves live in ``lmforge.models.folder``.
"""

from __future__ import annotations

from .provenance import dvc_hashes, git_commit, run_tags
from .pyfunc import LmforgePyfunc
from .registry import load_registered_model, promote_if_better
from .store import TrackingUnavailable, check_reachable, default_tracking_uri, ensure_tracking_store, resolve_tracking_uri
from .tracker import Tracker, is_rank_zero

__all__ = [
    "LmforgePyfunc", "Tracker", "TrackingUnavailable", "check_reachable", "default_tracking_uri", "dvc_hashes", "ensure_tracking_store",
    "git_commit", "is_rank_zero", "load_registered_model", "promote_if_better", "resolve_tracking_uri", "run_tags",
]
