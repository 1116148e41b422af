"""A token store's weighted mixture, from its manifest's ``mixture``: each source's share of the
train tokens before weighting, the share ``tokenize.mixture`` asks for and the share it got."""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

from . import Drawing, empty, png, subplots

_SHOWN = 20  # sources drawn at most (the largest after weighting)


def mixture_charts(kind: str, mixture: dict[str, dict[str, Any]]) -> dict[str, Drawing | None]:
    return {"mixture": partial(shares, kind, mixture) if mixture else None}


def shares(kind: str, mixture: dict[str, dict[str, Any]]) -> bytes:
    """Horizontal bars per source: share before, target share, realised share of the train tokens."""
    rows = sorted(mixture.items(), key=lambda kv: (-kv[1]["tokens_after"], kv[0]))[:_SHOWN]
    fig, ax = subplots(figsize=(8.0, 1.2 + 0.7 * max(len(rows), 1)), layout="constrained")
    if not rows:
        empty(ax, "no sources")
        return png(fig)
    y = np.arange(len(rows))
    height = 0.27
    series = (("share_before", "before weighting", "0.6"), ("target_share", "target", "tab:orange"),
              ("realised_share", "realised", "tab:blue"))
    for i, (key, label, color) in enumerate(series):
        values = [e[key] for _, e in rows]
        bars = ax.barh(y + (i - 1) * height, values, height=height, color=color, label=label)
        ax.bar_label(bars, labels=[f"{v:.1%}" for v in values], fontsize="x-small", padding=2)
    labels = []
    for name, e in rows:
        rule = f"x{e['weight']:g}" + ("" if e["max_tokens"] is None else f", cap {e['max_tokens']:,}")
        labels.append(f"{name if len(name) <= 32 else '…' + name[-31:]}\n({rule})")
    ax.set_yticks(y, labels, fontsize="small")
    ax.invert_yaxis()
    ax.set_xlim(0, min(1.0, max(max(e[k] for _, e in rows) for k, _, _ in series) * 1.25 + 0.02))
    ax.set_xlabel("share of the train split's tokens")
    total = sum(e["tokens_after"] for e in mixture.values())
    ax.set_title(f"{kind} token store: train split by source ({total:,} tokens after weighting)")
    ax.grid(True, axis="x", alpha=0.3)
    fig.legend(fontsize="small", loc="outside lower center", ncols=3)
    return png(fig)
