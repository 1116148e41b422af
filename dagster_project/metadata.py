"""What the Dagster UI shows for each materialized stage: the figures its kind reads from the files
the stage wrote (``lmforge.stages.kinds``), turned into Dagster's metadata values: tables and
Markdown, images inline, links to MLflow runs."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any, Callable

from dagster import MetadataValue

from lmforge.config import Params
from lmforge.stages import KINDS, Stage
from lmforge.stages.kind import Image, JsonValue, Markdown, MlflowRun, Table


def _image(value: Image) -> MetadataValue:
    data = base64.b64encode(value.path.read_bytes()).decode("ascii")
    return MetadataValue.md(f"![{value.alt}](data:image/png;base64,{data})")


def _table(value: Table) -> MetadataValue:
    lines = ["| " + " | ".join(value.header) + " |", "|" + "---|" * len(value.header)]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in value.rows]
    return MetadataValue.md("\n".join(lines))


def to_dagster(value: Any, run_url: Callable[[str | None], str | None]) -> Any:
    """One metadata value as Dagster shows it; None where there is nothing to show."""
    if isinstance(value, Table):
        return _table(value)
    if isinstance(value, Markdown):
        return MetadataValue.md(value.text)
    if isinstance(value, Image):
        return _image(value)
    if isinstance(value, JsonValue):
        return MetadataValue.json(value.value)
    if isinstance(value, MlflowRun):
        url = run_url(value.run_id)
        return MetadataValue.url(url) if url else None
    return value


def stage_metadata(stage: Stage, params: Params, root: Path, run_url) -> dict[str, Any]:
    """Metadata of ``stage``'s materialization; ``run_url(run_id)`` links an MLflow run."""
    out = stage.output_under(root)
    meta: dict[str, Any] = {"path": MetadataValue.path(str(out)), "command": stage.cli}
    describe = KINDS[stage.kind].metadata
    for key, value in (describe(stage, params, out) if describe else {}).items():
        shown = to_dagster(value, run_url)
        if shown is not None:
            meta[key] = shown
    return meta
