"""Data-quality checks on what each stage wrote, with the bounds of ``params.checks``.

Each kind of stage declares its checks (``stages/kinds/<kind>.py``), known before anything runs,
so an orchestrator can declare them; :func:`run_checks` evaluates them on the stage's outputs on
disk. A *blocking* check that fails should stop the stages downstream of it (Dagster's blocking
asset checks do); a check with severity ``warn`` reports without blocking.
"""

from __future__ import annotations

from pathlib import Path

from ..config import Params
from .graph import Stage
from .kind import CheckOutcome, CheckSpec
from .kinds import KINDS

CHECKS: dict[str, list[CheckSpec]] = {name: list(kind.checks) for name, kind in KINDS.items()}


def run_checks(stage: Stage, params: Params, root: str | Path = ".") -> list[CheckOutcome]:
    """Evaluate the checks of the stage's kind on its outputs under ``root``. A missing or
    unreadable output fails every check of the stage with the reason, rather than raising."""
    kind = KINDS[stage.kind]
    if kind.check is None:
        return []
    out = stage.output_under(root)
    try:
        return kind.check(stage, params, out)
    except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:
        return [CheckOutcome(spec.name, False, f"could not read the stage's output: {exc}", spec.severity)
                for spec in kind.checks]
