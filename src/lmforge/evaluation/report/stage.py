"""The report stage's runner: every architecture's evaluation read in ``train.architectures``'
order and the report written into ``layout.report_dir`` (``write_report``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ... import layout
from ...config import Params
from .leaderboard import load_evaluations
from .write import write_report


def run_report(params: Params, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Write the project's report; ``{"leaderboard": DataFrame, "files": [str, ...]}``."""
    evaluations = load_evaluations(layout.evaluations_dir(params), order=params.train.architectures)
    result = write_report(evaluations, layout.report_dir(params))
    return {"leaderboard": result["leaderboard"], "files": [str(f) for f in result["files"]]}
