"""A tokenizer's pictures, from its ``metrics.json``: how many tokens a word of the held-out text
takes (fertility), and how long the vocabulary's entries are."""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

from . import FIGSIZE, Drawing, empty, png, subplots


def tokenizer_charts(metrics: dict[str, Any]) -> dict[str, Drawing | None]:
    return {
        "fertility": partial(fertility, metrics) if metrics.get("fertility") else None,
        "token_lengths": partial(token_lengths, metrics) if metrics.get("vocab_token_lengths") else None,
    }


def _open_labels(n: int) -> list[str]:
    """Bin labels 0, 1, ..., n-2 and "n-1+" (the last bin holds the rest)."""
    return [str(k) for k in range(n - 1)] + [f"{n - 1}+"]


def fertility(metrics: dict[str, Any]) -> bytes:
    """Words by the number of tokens each is split into, as shares of the words counted."""
    f = metrics["fertility"]
    counts = np.array(f["counts"], dtype=float)
    fig, ax = subplots(figsize=FIGSIZE, layout="constrained")
    if not counts.sum():
        empty(ax, "no words measured")
        return png(fig)
    share = counts / counts.sum()
    x = np.arange(len(counts))
    bars = ax.bar(x, share, color="tab:blue", width=0.7)
    ax.bar_label(bars, labels=[f"{v:.1%}" if v else "" for v in share], fontsize="x-small", padding=2)
    mean = float((np.arange(len(counts)) * counts).sum() / counts.sum())  # the last bin at its lower bound
    ax.axvline(mean, color="tab:red", linestyle="--", linewidth=1.2, label=f"mean {mean:.2f} tokens per word")
    ax.set_xticks(x, _open_labels(len(counts)))
    ax.set_xlabel("tokens per word")
    ax.set_ylabel("share of words")
    ax.set_ylim(0, min(1.0, share.max() * 1.2))
    ax.set_title(f"{metrics.get('kind', 'tokenizer')} fertility: {int(f['words']):,} words of "
                 f"{int(f['documents']):,} held-out documents")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize="small")
    return png(fig)


def token_lengths(metrics: dict[str, Any]) -> bytes:
    """The vocabulary's entries (special tokens left out) by length."""
    v = metrics["vocab_token_lengths"]
    counts = np.array(v["counts"], dtype=float)
    fig, ax = subplots(figsize=FIGSIZE, layout="constrained")
    if not counts.sum():
        empty(ax, "empty vocabulary")
        return png(fig)
    x = np.arange(len(counts))
    ax.bar(x, counts, color="tab:green", width=0.7)
    ax.set_xticks(x, _open_labels(len(counts)), fontsize="small")
    ax.set_xlabel(f"entry length ({v['unit']}; word-boundary and continuation marks left out)")
    ax.set_ylabel("vocabulary entries")
    ax.set_title(f"{metrics.get('kind', 'tokenizer')} vocabulary: {int(counts.sum()):,} entries by length")
    ax.grid(True, axis="y", alpha=0.3)
    return png(fig)
