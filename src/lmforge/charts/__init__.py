"""The stages' own pictures: PNG charts each stage draws from the figures it recorded, into its
output folder (shown by Dagster as asset metadata; logged to MLflow where the stage has a run).

One module per concern, each function returning PNG bytes from plain values (a stats.json, a
history) so that it can be tested without running anything:

- ``charts.corpus``: the clean stage (documents and bytes dropped per rule, document lengths
  before and after, languages seen, near-duplicate cluster sizes);
- ``charts.quality``: the quality stage (the classifier's scores of the held-out documents by
  class, and of the corpus with the part kept);
- ``charts.tokenizers``: a tokenizer's fertility and its vocabulary's token lengths;
- ``charts.mixture``: a token store's sources in its train split, before weighting, the target
  and realised shares (``tokenize.mixture``);
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
from typing import TYPE_CHECKING

from ..artifacts import atomic_write_bytes

if TYPE_CHECKING:
    from matplotlib.figure import Figure

DPI = 100
FIGSIZE = (7.0, 4.0)
WIDE = (11.0, 4.0)

_logger = logging.getLogger(__name__)

Drawing = Callable[[], bytes]


def subplots(nrows: int = 1, ncols: int = 1, *, figsize: tuple[float, float] = FIGSIZE, layout: str | None = None, **kwargs):
    """A figure and its axes as ``pyplot.subplots`` makes them (``kwargs``: sharex, squeeze,
    width_ratios, ...), without pyplot: no global figure registry to close, and no pyplot import
    (a third of a second) in every stage that draws. Drawn with Agg by :func:`png`. matplotlib is
    imported here, at the first drawing: a stage that hands its drawings to its workers does not
    load it at all."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize, layout=layout)
    return fig, fig.subplots(nrows, ncols, **kwargs)


def png(fig: Figure) -> bytes:
    """The figure as PNG bytes. No timestamp is written: the same figures give the same bytes,
    so an unchanged stage output stays unchanged for DVC."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI, metadata={"Software": None})
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
    written = []
    for name, draw in drawings.items():
        if draw is None:
            continue
        warning = write_chart(folder, name, draw)
        if warning is None:
            written.append(Path(folder) / f"{name}.png")
        else:
            log(warning)
    return written


def write_chart(folder: str | Path, name: str, draw: Drawing) -> str | None:
    """Draw one chart into ``folder/<name>.png``: None, or the warning line when the drawing
    raised (with its traceback on the ``lmforge.charts`` logger). Module-level, so that a stage
    can have its workers draw (a drawing is a ``functools.partial`` of a module's function)."""
    try:
        atomic_write_bytes(Path(folder) / f"{name}.png", draw())
    except Exception as exc:  # a chart is a view of outputs that are already complete
        _logger.warning("chart %s not drawn", name, exc_info=True)
        return f"warning: chart {name}.png not drawn: {type(exc).__name__}: {exc}"
    return None
