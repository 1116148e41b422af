"""What a kind of stage is, in one place: the library code it runs, the function that runs it, the
summary the command line prints, the checks on what it wrote and the figures an orchestrator
shows. Each kind is defined once, in ``stages/kinds/<kind>.py``; the command line, the Dagster
assets and checks and the DVC view all read it from there.

Metadata is returned as plain values (numbers, strings) and the small types below, so that no
orchestrator is imported here; ``dagster_project/metadata.py`` turns them into Dagster's.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..artifacts import read_json
from ..config import Params

Log = Callable[[str], None]


@dataclass(frozen=True)
class CheckSpec:
    """A data-quality check on a stage's outputs, known before anything runs (an orchestrator
    declares it). A blocking check that fails stops the stages downstream of it."""

    name: str
    description: str
    blocking: bool = True
    severity: str = "error"  # error | warn


@dataclass
class CheckOutcome:
    name: str
    passed: bool
    description: str
    severity: str = "error"
    metadata: dict[str, Any] = field(default_factory=dict)


# ----------------------------------------------------------------------------- metadata values


@dataclass(frozen=True)
class Table:
    """Rows under a header (shown as a Markdown table)."""

    header: tuple[str, ...]
    rows: tuple[tuple, ...]


@dataclass(frozen=True)
class Markdown:
    text: str


@dataclass(frozen=True)
class Image:
    """A PNG the stage wrote."""

    path: Path
    alt: str


@dataclass(frozen=True)
class JsonValue:
    value: Any


@dataclass(frozen=True)
class MlflowRun:
    """A link to an MLflow run (the orchestrator knows the server's address)."""

    run_id: str


@dataclass(frozen=True)
class StageKind:
    """A kind of stage. The functions take the stage (``stages.graph.Stage``: its key names the
    architecture, tokenizer kind, objective or task), the parameters and its output folder."""

    name: str
    group: str                                   # where the orchestrator shows it
    code: tuple[str, ...]                        # the library code it runs, relative to the project root
    tools: frozenset[str]                        # what it is made with (Dagster's asset "kinds")
    run: Callable[[Params, Any, Log], dict]  # the library function, as the CLI and Dagster call it
    # the stage's runner, the library function ``run`` calls: ``run_<kind>`` in the package that
    # does the work, as "module:function" (e.g. "lmforge.cleaning.stage:run_clean")
    runner: str = ""
    summary: Callable[[Any, dict], str] | None = None  # what the CLI prints afterwards
    checks: tuple[CheckSpec, ...] = ()
    check: Callable[[Any, Params, Path], list[CheckOutcome]] | None = None
    metadata: Callable[[Any, Params, Path], dict[str, Any]] | None = None
    subprocess: bool = False                     # training: its own process (torchrun when devices > 1)
    # declares the kind's stages in the graph (``declare(ctx)``, ctx a ``stages.context.GraphContext``:
    # each stage's name, inputs, outputs, parameters, command and description)
    declare: Callable[[Any], None] | None = None
    # the file its finished output folder always holds (with the run's fingerprint): a folder
    # without it was not made by the stage and is not replaced (artifacts.check_output); None
    # for a stage that writes files rather than a folder it replaces whole
    record: str | None = None


# ----------------------------------------------------------------------------- helpers the kinds share


def read_record(path: Path) -> dict:
    """A stage's JSON record; missing is an error naming the file (checks report it as failed)."""
    if not path.exists():
        raise FileNotFoundError(f"{path}: missing (the stage did not write it)")
    return json.loads(path.read_text(encoding="utf-8"))


def read_json_or_empty(path: Path) -> dict:
    """A stage's JSON record for display: empty when missing or unreadable."""
    return read_json(path) or {}


def logged_losses(history: Path, column: str = "train/loss") -> list[float]:
    """The values of ``column`` in a training stage's ``history.csv``."""
    if not history.exists():
        raise FileNotFoundError(f"{history}: missing (the stage did not write it)")
    with open(history, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    return [float(r[column]) for r in rows if r.get(column) not in (None, "")]


def numbers(d: dict, prefix: str = "") -> dict[str, float]:
    """The numeric entries of ``d`` as floats, keys prefixed."""
    return {f"{prefix}{k}": float(v) for k, v in d.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


def image(path: Path, alt: str) -> Image | None:
    return Image(path, alt) if path.exists() else None


def charts(out: Path, names: dict[str, str]) -> dict[str, Image]:
    """The pictures ``<out>/<name>.png`` a stage drew (``lmforge.charts``), each under its name;
    those missing (nothing to draw, or a chart that failed and was logged) are left out."""
    found = {name: image(out / f"{name}.png", alt) for name, alt in names.items()}
    return {name: img for name, img in found.items() if img is not None}
