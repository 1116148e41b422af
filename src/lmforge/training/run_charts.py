"""A training run's pictures: its loss curves and, for a classifier, the test confusion matrix."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any


def draw_run_charts(out: Path, rows: list[dict[str, float]], title: str, log: Callable[[str], None], *,
                    baseline: float | None = None, confusion: dict[str, Any] | None = None) -> list[Path]:
    """The run's pictures in ``out`` (``loss.png``: loss with the unigram ``baseline``, learning
    rate, tokens per second; ``confusion.png`` from ``confusion``'s labels and matrix); the paths
    drawn. A chart that fails is logged and left out: the run's outputs are finished."""
    from functools import partial

    from ..charts import write_charts
    from ..charts.training import confusion as confusion_chart
    from ..charts.training import run_curves

    drawings = {"loss": partial(run_curves, rows, title, baseline)}
    if confusion is not None:
        drawings["confusion"] = partial(confusion_chart, confusion["labels"], confusion["matrix"], f"{title}: test split")
    return write_charts(out, drawings, log)
