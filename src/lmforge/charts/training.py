"""A training run's pictures: its curves from the history (``loss.png``: the training and
validation loss with the unigram baseline, the learning rate and the tokens per second against
the optimizer step) and a fine-tuned classifier's confusion matrix on the test split
(``confusion.png``)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from . import empty, png, subplots


def _points(rows: Sequence[dict], key: str) -> tuple[list[float], list[float]]:
    pts = [(r["step"], r[key]) for r in rows if r.get(key) not in (None, "")]
    return ([p[0] for p in pts], [p[1] for p in pts]) if pts else ([], [])


def run_curves(rows: Sequence[dict], title: str, baseline: float | None = None) -> bytes:
    """The loss (training and validation; the unigram baseline as a horizontal line), and below
    it the learning rate and the tokens per second where the history holds them."""
    extra = [key for key in ("lr", "tokens_per_second") if any(r.get(key) not in (None, "") for r in rows)]
    heights = [3.0] + [1.3] * len(extra)
    fig, axes = subplots(len(heights), 1, figsize=(7.0, 3.5 + 1.6 * len(extra)), sharex=True,
                             layout="constrained", height_ratios=heights, squeeze=False)
    loss_ax = axes[0][0]
    plotted = False
    for key, label in (("train/loss", "train"), ("val/loss", "validation")):
        steps, values = _points(rows, key)
        if steps:
            loss_ax.plot(steps, values, marker="." if key.startswith("val") else None, label=label)
            plotted = True
    if baseline is not None:
        loss_ax.axhline(baseline, color="grey", linestyle="--", linewidth=1, label=f"unigram baseline ({baseline:.3f})")
    if not plotted and baseline is None:
        empty(loss_ax, "no loss logged")
    else:
        loss_ax.legend(fontsize="small")
    loss_ax.set_ylabel("loss (nats)")
    loss_ax.set_title(title)
    loss_ax.grid(True, alpha=0.3)
    for ax, key in zip((a[0] for a in axes[1:]), extra):
        steps, values = _points(rows, key)
        if key == "lr":
            ax.plot(steps, values, color="tab:green")
            ax.set_ylabel("learning rate")
            ax.ticklabel_format(axis="y", style="sci", scilimits=(-2, 3))
        else:
            ax.plot(steps, values, color="tab:purple", marker=".")
            ax.set_ylabel("tokens / s")
        ax.grid(True, alpha=0.3)
    axes[-1][0].set_xlabel("optimizer step")
    return png(fig)


def confusion_matrix(predicted: Sequence[int], gold: Sequence[int], n_labels: int) -> list[list[int]]:
    """Counts: row = gold label, column = predicted label."""
    matrix = np.zeros((n_labels, n_labels), dtype=np.int64)
    np.add.at(matrix, (np.asarray(gold, dtype=np.int64), np.asarray(predicted, dtype=np.int64)), 1)
    return matrix.tolist()


def confusion(labels: Sequence[str], matrix: Sequence[Sequence[int]], title: str) -> bytes:
    """The confusion matrix as a heat map: counts in the cells, colour by the share of the gold
    label's examples (each row sums to 1), so that a rare class reads as clearly as a common one."""
    m = np.asarray(matrix, dtype=float)
    n = len(labels)
    size = min(4.0 + 0.45 * n, 14.0)
    fig, ax = subplots(figsize=(size + 1.2, size), layout="constrained")
    if not m.size or not m.sum():
        empty(ax, "no test predictions")
        return png(fig)
    share = m / np.maximum(m.sum(axis=1, keepdims=True), 1)
    image = ax.imshow(share, cmap="Blues", vmin=0, vmax=1)
    if n <= 30:
        for i in range(n):
            for j in range(n):
                ax.text(j, i, f"{int(m[i, j])}", ha="center", va="center", fontsize="small" if n <= 12 else "xx-small",
                        color="white" if share[i, j] > 0.6 else "black")
    ticks = np.arange(n)
    ax.set_xticks(ticks, labels, rotation=45 if n > 4 else 0, ha="right" if n > 4 else "center")
    ax.set_yticks(ticks, labels)
    ax.set_xlabel("predicted label")
    ax.set_ylabel("gold label")
    accuracy = np.trace(m) / m.sum()
    ax.set_title(f"{title}\naccuracy {accuracy:.3f} on {int(m.sum())} test examples", fontsize="medium")
    fig.colorbar(image, ax=ax, label="share of the gold label's examples", shrink=0.8)
    return png(fig)
