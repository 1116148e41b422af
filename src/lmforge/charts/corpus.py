"""The clean stage's pictures, from its ``stats.json``: what each rule dropped (documents and
bytes, as waterfalls from what was read to what was kept), document lengths before and after,
the languages language ID saw, the sizes of the near-duplicate clusters and the evaluation
examples decontamination found."""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

from . import FIGSIZE, WIDE, Drawing, empty, png, subplots

MAX_LANGUAGES = 12  # the most frequent; the rest are one "other" bar


def clean_charts(stats: dict[str, Any]) -> dict[str, Drawing | None]:
    """name -> drawing for every picture the stats hold figures for (``write_charts`` draws them)."""
    return {
        "drops": partial(drops, stats),
        "lengths": partial(lengths, stats) if (stats.get("length_histogram") or {}).get("documents_out") else None,
        "languages": partial(languages, stats) if stats.get("languages") is not None else None,
        "near_duplicates": partial(near_duplicates, stats) if stats.get("near_duplicate_clusters") is not None else None,
        "decontamination": partial(decontamination, stats) if stats.get("decontamination") is not None else None,
    }


def _waterfall(ax, start: tuple[str, float], steps: list[tuple[str, float]], end: tuple[str, float], unit: str,
               scale: float = 1.0) -> None:
    """Bars from ``start`` down through each step (a floating bar per amount removed) to ``end``."""
    names = [start[0], *(s[0] for s in steps), end[0]]
    level = start[1]
    bottoms, heights, colors = [0.0], [start[1]], ["tab:blue"]
    for _, amount in steps:
        level -= amount
        bottoms.append(level)
        heights.append(amount)
        colors.append("tab:red")
    bottoms.append(0.0)
    heights.append(end[1])
    colors.append("tab:green")
    x = np.arange(len(names))
    bars = ax.bar(x, np.array(heights) / scale, bottom=np.array(bottoms) / scale, color=colors, width=0.7)
    labels = [f"{h / scale:,.0f}" if scale == 1 else f"{h / scale:,.2f}" for h in heights]
    labels = [lab if i in (0, len(names) - 1) else f"-{lab}" for i, lab in enumerate(labels)]
    ax.bar_label(bars, labels=labels, fontsize="x-small", padding=2)
    for i in range(len(names) - 1):  # the running level, from one bar to the next
        top = (bottoms[i] + heights[i]) if i == 0 else bottoms[i]
        ax.plot([x[i] + 0.35, x[i + 1] - 0.35], [top / scale] * 2, color="0.5", linewidth=0.8)
    ax.set_xticks(x, names, rotation=35, ha="right", fontsize="small")
    ax.set_ylabel(unit)
    ax.set_ylim(0, start[1] / scale * 1.12 if start[1] else 1)
    ax.grid(True, axis="y", alpha=0.3)


def drops(stats: dict[str, Any]) -> bytes:
    """Documents and bytes: read, removed by each rule (largest first), kept."""
    dropped = {r: d for r, d in (stats.get("dropped") or {}).items() if d.get("documents")}
    order = sorted(dropped, key=lambda r: (-dropped[r]["documents"], r))
    fig, (docs_ax, bytes_ax) = subplots(1, 2, figsize=WIDE, layout="constrained")
    _waterfall(docs_ax, ("read", stats["documents_in"]), [(r, dropped[r]["documents"]) for r in order],
               ("kept", stats["documents_out"]), "documents")
    docs_ax.set_title(f"Documents: {stats['documents_out']:,} of {stats['documents_in']:,} kept "
                      f"({100 * stats['documents_out'] / max(stats['documents_in'], 1):.1f}%)", fontsize="medium")
    byte_steps = [(r, dropped[r]["bytes"]) for r in sorted(dropped, key=lambda r: (-dropped[r]["bytes"], r))]
    edited = stats["bytes_in"] - sum(b for _, b in byte_steps) - stats["bytes_out"]
    if edited > 0:  # lines removed from documents that were kept
        byte_steps.append(("removed lines", edited))
    mb = 1e6 if stats["bytes_in"] >= 1e6 else 1e3
    _waterfall(bytes_ax, ("read", stats["bytes_in"]), byte_steps, ("kept", stats["bytes_out"]),
               "MB" if mb == 1e6 else "kB", scale=mb)
    bytes_ax.set_title(f"Bytes: {100 * stats['bytes_out'] / max(stats['bytes_in'], 1):.1f}% kept", fontsize="medium")
    fig.suptitle("Clean: what each rule removed")
    return png(fig)


def _size(n: int) -> str:
    for unit, factor in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= factor:
            return f"{n / factor:g}{unit}"
    return f"{n}B"


def length_labels(bounds: list[int]) -> list[str]:
    """A label per length bin: ``<32B``, ``32B-64B``, ..., ``>=1MiB``."""
    labels = []
    for i, lo in enumerate(bounds):
        if i == len(bounds) - 1:
            labels.append(f">={_size(lo)}")
        elif lo == 0:
            labels.append(f"<{_size(bounds[1])}")
        else:
            labels.append(f"{_size(lo)}-{_size(bounds[i + 1])}")
    return labels


def lengths(stats: dict[str, Any]) -> bytes:
    """Documents by length in bytes, read and kept, in the stage's fixed bins."""
    h = stats["length_histogram"]
    out = np.array(h["documents_out"], dtype=float)
    before = np.array(h["documents_in"], dtype=float) if h.get("documents_in") else None
    both = out + (before if before is not None else 0)
    used = np.flatnonzero(both)
    fig, ax = subplots(figsize=FIGSIZE, layout="constrained")
    if not len(used):
        empty(ax, "no documents")
        return png(fig)
    lo, hi = max(used[0] - 1, 0), min(used[-1] + 2, len(both))  # the bins in use and one empty either side
    x = np.arange(hi - lo)
    width = 0.4 if before is not None else 0.7
    if before is not None:
        ax.bar(x - width / 2, before[lo:hi], width, color="tab:gray", label=f"read ({int(before.sum()):,})")
    ax.bar(x + (width / 2 if before is not None else 0), out[lo:hi], width, color="tab:blue",
           label=f"kept ({int(out.sum()):,})")
    ax.set_xticks(x, length_labels(h["lower_bounds"])[lo:hi], rotation=35, ha="right", fontsize="small")
    ax.set_xlabel("document length (UTF-8 bytes)")
    ax.set_ylabel("documents")
    ax.set_title("Document lengths before and after cleaning")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend()
    return png(fig)


def languages(stats: dict[str, Any]) -> bytes:
    """Language ID's verdicts, most frequent first: kept by the language rule and dropped by it."""
    seen = stats["languages"].get("seen") or {}
    dropped = stats["languages"].get("dropped") or {}
    fig, ax = subplots(figsize=FIGSIZE, layout="constrained")
    if not seen:
        empty(ax, "language ID looked at no document")
        return png(fig)
    order = sorted(seen, key=lambda k: (-seen[k], k))
    names, rest = order[:MAX_LANGUAGES], order[MAX_LANGUAGES:]
    totals = [seen[k] for k in names]
    drops_ = [dropped.get(k, 0) for k in names]
    if rest:
        names.append(f"other ({len(rest)})")
        totals.append(sum(seen[k] for k in rest))
        drops_.append(sum(dropped.get(k, 0) for k in rest))
    y = np.arange(len(names))[::-1]
    kept = np.array(totals) - np.array(drops_)
    ax.barh(y, kept, color="tab:blue", label="passed the language rule")
    ax.barh(y, drops_, left=kept, color="tab:red", label="dropped by it")
    for yi, total in zip(y, totals):
        ax.text(total, yi, f" {total:,}", va="center", fontsize="x-small")
    ax.set_yticks(y, names)
    ax.set_xlabel("documents")
    ax.set_xlim(0, max(totals) * 1.15)
    ax.set_title(f"Languages seen by language ID ({sum(seen.values()):,} documents)")
    ax.grid(True, axis="x", alpha=0.3)
    ax.legend(fontsize="small", loc="lower right")
    return png(fig)


def near_duplicates(stats: dict[str, Any]) -> bytes:
    """How many near-duplicate clusters have each size (a kept document and its dropped copies)."""
    clusters = {int(k): int(v) for k, v in (stats.get("near_duplicate_clusters") or {}).items()}
    fig, ax = subplots(figsize=FIGSIZE, layout="constrained")
    if not clusters:
        empty(ax, "no near-duplicates found")
        return png(fig)
    sizes = sorted(clusters)
    x = np.arange(len(sizes))
    bars = ax.bar(x, [clusters[s] for s in sizes], color="tab:purple", width=0.7)
    ax.bar_label(bars, fontsize="x-small", padding=2)
    ax.set_xticks(x, [str(s) for s in sizes], fontsize="small")
    ax.set_xlabel("cluster size (documents)")
    ax.set_ylabel("clusters")
    if max(clusters.values()) / max(min(clusters.values()), 1) > 100:
        ax.set_yscale("log")
    dropped = sum((s - 1) * n for s, n in clusters.items())
    ax.set_title(f"Near-duplicate clusters: {sum(clusters.values()):,} clusters, {dropped:,} documents dropped")
    ax.grid(True, axis="y", alpha=0.3)
    return png(fig)


def decontamination(stats: dict[str, Any]) -> bytes:
    """Per task and split: the evaluation examples that shared a run of words with a training
    document before decontamination, and after."""
    summary = stats["decontamination"]
    rows = [(f"{t}\n{s}", c) for t, v in summary["tasks"].items() if "skipped" not in v for s, c in v.items()]
    fig, ax = subplots(figsize=FIGSIZE, layout="constrained")
    if not rows:
        empty(ax, "no evaluation task to report on")
        return png(fig)
    x = np.arange(len(rows))
    for offset, i, label, color in ((-0.2, 1, "before", "tab:red"), (0.2, 2, "after", "tab:green")):
        share = [100 * c[i] / max(c[0], 1) for _, c in rows]
        bars = ax.bar(x + offset, share, width=0.4, color=color, label=label)
        ax.bar_label(bars, labels=[f"{c[i]}/{c[0]}" for _, c in rows], fontsize="x-small", padding=2)
    ax.set_xticks(x, [r[0] for r in rows], fontsize="small")
    ax.set_ylabel("examples in the training documents (%)")
    ax.set_ylim(0, max(5.0, 1.2 * max(100 * c[1] / max(c[0], 1) for _, c in rows)))
    ax.set_title(f"Decontamination: {summary['training_documents_overlapping']:,} training documents removed")
    ax.legend(fontsize="small")
    ax.grid(True, axis="y", alpha=0.3)
    return png(fig)
