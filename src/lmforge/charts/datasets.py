"""An objective dataset's pictures, from its ``stats.json``: the realised mask / noise rate and
the span lengths drawn against the configured ones (``masking.png``), and the input lengths of
each split (``input_lengths.png``)."""

from __future__ import annotations

import math
from functools import partial
from typing import Any

import numpy as np

from . import FIGSIZE, WIDE, Drawing, empty, png, subplots


def dataset_charts(summary: dict[str, Any], noise_figures: dict[str, Any] | None = None,
                   tolerance: float | None = None) -> dict[str, Drawing | None]:
    """``summary``: the dataset's stats.json; ``noise_figures``: ``datasets.rates.Noise.figures``
    of its train split (None: the objective does not noise its input)."""
    objective = summary.get("objective", "dataset")
    return {
        "input_lengths": partial(input_lengths, objective, summary.get("splits") or {}),
        "masking": partial(noise, objective, **noise_figures, tolerance=tolerance) if noise_figures else None,
    }


def _key_order(key: str) -> float:
    """Sort key of a histogram label: "3", "<16", ">10", ">=4096"."""
    key = str(key)
    for prefix, shift in ((">=", 0.5), (">", 1.0), ("<", -0.5)):
        if key.startswith(prefix):
            return float(key[len(prefix):]) + shift
    return float(key)


def noise(objective: str, *, rate_name: str, realised: float | None, configured: float, spans: dict | None,
          span_unit: str, realised_mean: float | None, configured_mean: float | None, configured_label: str,
          configured_spans: dict | None = None, tolerance: float | None = None) -> bytes:
    """Left: the realised rate beside the configured one (with the check's tolerance band).
    Right: the span-length distribution (shares of spans) with the realised and configured means."""
    fig, (rate_ax, span_ax) = subplots(1, 2, figsize=WIDE, layout="constrained", width_ratios=(1, 2.2))
    values = [configured, realised if realised is not None else math.nan]
    bars = rate_ax.bar([0, 1], values, color=["tab:gray", "tab:blue"], width=0.6)
    rate_ax.bar_label(bars, labels=[f"{v:.4f}" if not math.isnan(v) else "not measured" for v in values],
                      fontsize="small", padding=2)
    if tolerance is not None:
        rate_ax.axhspan(configured - tolerance, configured + tolerance, color="tab:green", alpha=0.15,
                        label=f"check: within ±{tolerance:g}")
        rate_ax.legend(fontsize="x-small", loc="upper center")
    rate_ax.set_xticks([0, 1], ["configured", "realised"])
    rate_ax.set_ylim(0, max(v for v in values if not math.isnan(v)) * 1.45 or 1)
    rate_ax.set_ylabel(rate_name.replace("_", " "))
    rate_ax.set_title(f"{rate_name.replace('_', ' ')} (train split)", fontsize="medium")
    rate_ax.grid(True, axis="y", alpha=0.3)

    if spans:
        keys = sorted(spans, key=_key_order)
        counts = np.array([float(spans[k]) for k in keys])
        share = counts / counts.sum() if counts.sum() else counts
        positions = np.array([_key_order(k) for k in keys])
        span_ax.bar(positions, share, width=0.8, color="tab:blue", label="realised spans")
        span_ax.set_xticks(positions, keys, fontsize="small" if len(keys) < 25 else "xx-small")
        span_ax.set_ylabel("share of spans")
    if configured_spans:  # the distribution the configuration draws span lengths from
        keys = sorted(configured_spans, key=_key_order)
        span_ax.plot([_key_order(k) for k in keys], [configured_spans[k] for k in keys], color="tab:red", marker="o",
                     markersize=3, linewidth=1, label="configured distribution")
        span_ax.set_ylabel("share of spans")
    if not spans and not configured_spans and realised_mean is None and configured_mean is None:
        empty(span_ax, "no span lengths measured")
    if realised_mean is not None:
        span_ax.axvline(float(realised_mean), color="tab:blue", linestyle=":", linewidth=1.5,
                        label=f"realised mean {float(realised_mean):.2f}")
    if configured_mean is not None:
        span_ax.axvline(configured_mean, color="tab:red", linestyle="--", linewidth=1.5,
                        label=f"{configured_label} {configured_mean:g}")
    if spans or realised_mean is not None or configured_mean is not None:
        span_ax.set_xlabel(f"span length ({span_unit})")
        span_ax.set_title("noised span lengths (train split)", fontsize="medium")
        span_ax.grid(True, axis="y", alpha=0.3)
        span_ax.legend(fontsize="small")
        if not spans and not configured_spans:
            span_ax.set_yticks([])
            span_ax.set_xlim(0, 2 * max(float(v) for v in (realised_mean, configured_mean) if v is not None) + 1)
    fig.suptitle(f"{objective}: realised noise against the configuration")
    return png(fig)


def input_lengths(objective: str, splits: dict[str, dict]) -> bytes:
    """Examples by input length, per split (the stage's length bins)."""
    fig, ax = subplots(figsize=FIGSIZE, layout="constrained")
    hists = {split: s.get("input_length_histogram") or {} for split, s in splits.items()}
    keys = sorted({k for h in hists.values() for k in h}, key=_key_order)
    if not keys:
        empty(ax, "no examples measured")
        return png(fig)
    x = np.arange(len(keys))
    width = 0.8 / max(len(hists), 1)
    for i, (split, h) in enumerate(hists.items()):
        total = sum(h.values()) or 1
        ax.bar(x + (i - (len(hists) - 1) / 2) * width, [h.get(k, 0) / total for k in keys], width,
               label=f"{split} ({sum(h.values()):,} measured)")
    ax.set_xticks(x, keys)
    ax.set_xlabel("input length (tokens)")
    ax.set_ylabel("share of examples")
    ax.set_title(f"{objective}: input lengths")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize="small")
    return png(fig)
