"""The quality stage's picture, from its ``stats.json``: how the classifier's scores separate the
held-out reference documents from the held-out corpus documents (what its validation accuracy
measures), and the whole corpus's scores with the part the filter keeps."""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

from . import WIDE, Drawing, empty, png, subplots


def quality_charts(stats: dict[str, Any]) -> dict[str, Drawing | None]:
    """name -> drawing (``write_charts`` draws them)."""
    return {"scores": partial(scores, stats) if stats.get("score_histogram") else None}


def scores(stats: dict[str, Any]) -> bytes:
    """Left: the held-out documents' scores by class. Right: every corpus document's score, the
    kept ones in green, the lowest kept score marked."""
    h = stats["score_histogram"]
    bounds = np.array(h["bounds"], dtype=float)
    width = np.diff(bounds)
    left = bounds[:-1]
    fig, (held_ax, corpus_ax) = subplots(1, 2, figsize=WIDE, layout="constrained")
    ref, cor = np.array(h["held_out_reference"], dtype=float), np.array(h["held_out_corpus"], dtype=float)
    if ref.sum() and cor.sum():  # each as a share of its class: the classes may differ in size
        held_ax.bar(left, ref / ref.sum(), width=width, align="edge", alpha=0.6, color="tab:green", label="reference")
        held_ax.bar(left, cor / cor.sum(), width=width, align="edge", alpha=0.6, color="tab:red", label="corpus")
        v = stats["classifier"]["validation"]
        held_ax.set_title(f"held out: accuracy {v['accuracy']:.3f}, AUC {v['auc']:.3f}", fontsize="medium")
        held_ax.set_xlabel("score (probability of reference-like)")
        held_ax.set_ylabel("share of the class's documents")
        held_ax.legend(fontsize="small")
        held_ax.grid(True, axis="y", alpha=0.3)
    else:
        empty(held_ax, "no held-out documents")
    total = np.array(h["corpus"], dtype=float)
    kept = np.array(h["kept"], dtype=float)
    if total.sum():
        corpus_ax.bar(left, total - kept, width=width, align="edge", bottom=kept, color="tab:red", alpha=0.7,
                      label=f"dropped ({stats['documents_in'] - stats['documents_out']:,})")
        corpus_ax.bar(left, kept, width=width, align="edge", color="tab:green", alpha=0.7,
                      label=f"kept ({stats['documents_out']:,})")
        if stats.get("cut_score") is not None:
            corpus_ax.axvline(stats["cut_score"], color="0.2", linestyle="--", linewidth=1,
                              label=f"lowest kept score {stats['cut_score']:.3f}")
        corpus_ax.set_yscale("symlog", linthresh=1)
        corpus_ax.set_title("the corpus's documents", fontsize="medium")
        corpus_ax.set_xlabel("score (probability of reference-like)")
        corpus_ax.set_ylabel("documents")
        corpus_ax.legend(fontsize="small")
        corpus_ax.grid(True, axis="y", alpha=0.3)
    else:
        empty(corpus_ax, "no documents")
    return png(fig)
