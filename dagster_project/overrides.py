"""Parameter overrides for a whole Dagster run: ``python -m dagster_project.run --set KEY=VALUE``.

The run's ``--set`` items (as ``lmforge``'s commands take them, recipe values included) travel to
every process of the run in ``$LMFORGE_OVERRIDES`` (a JSON list): the code location that builds
the graph, the resource that loads the parameters for each step, the step processes of the
multiprocess executor and the training processes launched through Pipes. ``params.yaml`` is
never rewritten.
"""

from __future__ import annotations

import json
import os

from lmforge.errors import ConfigError

ENV = "LMFORGE_OVERRIDES"


def run_overrides() -> list[str]:
    """The ``--set`` items of the run this process belongs to (none outside such a run)."""
    raw = os.environ.get(ENV, "").strip()
    if not raw:
        return []
    try:
        items = json.loads(raw)
    except ValueError:
        items = None
    if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
        raise ConfigError(f"${ENV}: expected a JSON list of KEY=VALUE strings")
    return items


def export_overrides(items: list[str]) -> None:
    """Hand ``items`` to every process this one starts (and to this one's own loads)."""
    if items:
        os.environ[ENV] = json.dumps(list(items))
    else:
        os.environ.pop(ENV, None)
