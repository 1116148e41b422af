"""The stages' own pictures: PNG charts each stage draws from the figures it recorded, into its
output folder (shown by Dagster as asset metadata; logged to MLflow where the stage has a run).

One module per concern, each function returning PNG bytes from plain values (a stats.json, a
history) so that it can be tested without running anything:

- ``charts.corpus``: the clean stage (documents and bytes dropped per rule, document lengths
  before and after, languages seen, near-duplicate cluster sizes);
- ``charts.tokenizers``: a tokenizer's fertility and its vocabulary's token lengths;
- ``charts.datasets``: an objective's realised mask / noise rate and span lengths against the
  configured ones, and its input lengths;
- ``charts.training``: a run's loss (with the unigram baseline), learning rate and tokens per
  second; a fine-tuned model's confusion matrix on the test split.

(The report's comparison charts are ``evaluation/report/charts.py``.) :func:`write_charts` writes
a set of them: each atomically, and a chart that fails is logged and skipped, so that a drawing
error never costs the stage the outputs it has finished.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Callable
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from ..artifacts import atomic_write_bytes  # noqa: E402

DPI = 100
FIGSIZE = (7.0, 4.0)
WIDE = (11.0, 4.0)

_logger = logging.getLogger(__name__)

Drawing = Callable[[], bytes]


def png(fig) -> bytes:
    """The figure as PNG bytes (closed afterwards). No timestamp is written: the same figures
    give the same bytes, so an unchanged stage output stays unchanged for DVC."""
    buffer = io.BytesIO()
    try:
        fig.savefig(buffer, format="png", dpi=DPI, metadata={"Software": None})
    finally:
        plt.close(fig)
    return buffer.getvalue()


def empty(ax, message: str) -> None:
    """An axis that says what is missing instead of showing nothing."""
    ax.text(0.5, 0.5, message, ha="center", va="center", transform=ax.transAxes, color="0.4")
    ax.set_xticks([])
    ax.set_yticks([])


def write_charts(folder: str | Path, drawings: dict[str, Drawing | None], log: Callable[[str], None] = print) -> list[Path]:
    """Draw each ``name -> drawing`` (None: nothing to draw) into ``folder/<name>.png``; the
    paths written. A drawing that raises is reported through ``log`` (and the ``lmforge.charts``
    logger, with its traceback) and skipped: the stage's other outputs stand."""
    folder = Path(folder)
    written = []
    for name, draw in drawings.items():
        if draw is None:
            continue
        try:
            data = draw()
            written.append(atomic_write_bytes(folder / f"{name}.png", data))
        except Exception as exc:  # a chart is a view of outputs that are already complete
            _logger.warning("chart %s not drawn", name, exc_info=True)
            log(f"warning: chart {name}.png not drawn: {type(exc).__name__}: {exc}")
    return written
