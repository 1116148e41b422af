"""The report's charts (matplotlib, Agg backend), each returned as PNG bytes: pretraining loss
curves, bits per byte against the unigram baseline, downstream accuracy against the baselines."""

from __future__ import annotations

import matplotlib
import numpy as np
import pandas as pd

from ...charts import empty, png, subplots  # the stages' drawing helpers (Agg backend, reproducible PNG bytes)

FIGSIZE = (9.0, 5.0)


def loss_curves(names: list[str], histories: dict[str, pd.DataFrame | None]) -> bytes:
    fig, ax = subplots(figsize=FIGSIZE, layout="constrained")
    colors = matplotlib.colormaps["tab10"]
    plotted = False
    for i, name in enumerate(names):
        history = histories.get(name)
        if history is None:
            continue
        color = colors(i % 10)
        if "train/loss" in history.columns:
            train = history[history["train/loss"].notna()]
            if len(train):
                ax.plot(train["step"], train["train/loss"], color=color, linewidth=1.5, label=f"{name} train")
                plotted = True
        if "val/loss" in history.columns:
            val = history[history["val/loss"].notna()]
            if len(val):
                ax.plot(val["step"], val["val/loss"], color=color, linestyle=":", marker="o", markersize=4,
                        linewidth=1.5, label=f"{name} validation")
                plotted = True
    if plotted:
        ax.set_xlabel("optimizer step")
        ax.set_ylabel("loss (nats per predicted token)")
        ax.set_title("Pretraining loss")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small", ncol=2 if len(names) > 5 else 1)
    else:
        empty(ax, "no training history found")
    return png(fig)


def bits_per_byte(df: pd.DataFrame) -> bytes:
    fig, ax = subplots(figsize=FIGSIZE, layout="constrained")
    if len(df) and (df["bits_per_byte"].notna().any() or df["unigram_bits_per_byte"].notna().any()):
        x = np.arange(len(df))
        width = 0.38
        model = ax.bar(x - width / 2, df["bits_per_byte"].to_numpy(float), width, label="model", color="tab:blue")
        unigram = ax.bar(x + width / 2, df["unigram_bits_per_byte"].to_numpy(float), width,
                         label="unigram baseline", color="tab:gray")
        for bars, values in ((model, df["bits_per_byte"]), (unigram, df["unigram_bits_per_byte"])):
            ax.bar_label(bars, labels=_labels(values.to_numpy(float)), fontsize="x-small", padding=2)
        ax.set_xticks(x, df["architecture"], rotation=30, ha="right")
        ax.set_xlim(-0.6, len(df) - 0.4)
        ax.set_ylabel("bits per byte (lower is better)")
        ax.set_title("Validation bits per byte: model vs unigram baseline")
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend()
    else:
        empty(ax, "no bits-per-byte measured")
    return png(fig)


def _labels(values: np.ndarray) -> list[str]:
    return ["" if np.isnan(v) else f"{v:.2f}" for v in values]


def _uniform(values: np.ndarray) -> bool:
    known = values[~np.isnan(values)]
    return len(known) > 0 and np.allclose(known, known[0], rtol=0, atol=1e-9)


def downstream(df: pd.DataFrame) -> bytes:
    fig, ax = subplots(figsize=FIGSIZE, layout="constrained")
    task = next((t for t in df["task"] if t), None) if len(df) else None
    accuracy = df["task_accuracy"].to_numpy(float)
    if task is None or not np.any(~np.isnan(accuracy)):
        empty(ax, "no fine-tuned task")
        return png(fig)
    x = np.arange(len(df))
    width = 0.6
    scratch = df["scratch_accuracy"].to_numpy(float) if "scratch_accuracy" in df else np.full(len(df), np.nan)
    if np.any(~np.isnan(scratch)):  # pretrained and its from-scratch control side by side
        half = width / 2
        bars = ax.bar(x - half / 2, accuracy, half, color="tab:blue", label="pretrained, fine-tuned")
        control = ax.bar(x + half / 2, scratch, half, color="tab:gray", label="from scratch, same recipe")
        ax.bar_label(control, labels=_labels(scratch), fontsize="xx-small", padding=2)
    else:
        bars = ax.bar(x, accuracy, width, color="tab:blue", label="fine-tuned")
    ax.bar_label(bars, labels=_labels(accuracy), fontsize="x-small", padding=2)
    for position in x[np.isnan(accuracy)]:
        ax.text(position, 0.02, "not\nfine-tuned", ha="center", va="bottom", color="0.4", fontsize="small")
    for column, label, color, style in (("majority_accuracy", "majority baseline", "tab:red", "--"),
                                        ("bow_accuracy", "bag-of-words baseline", "tab:green", "-.")):
        values = df[column].to_numpy(float)
        if np.all(np.isnan(values)):
            continue
        if _uniform(values):
            ax.axhline(values[~np.isnan(values)][0], color=color, linestyle=style, linewidth=1.5, label=label)
        else:  # baselines differ per architecture (different encodings): one segment per bar
            known = ~np.isnan(values)
            ax.hlines(values[known], x[known] - width / 2, x[known] + width / 2, colors=color,
                      linestyles=style, linewidth=2, label=label)
    ax.set_xticks(x, df["architecture"], rotation=30, ha="right")
    ax.set_xlim(-0.6, len(df) - 0.4)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("accuracy")
    ax.set_title(f"Downstream accuracy on {task}")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize="small")
    return png(fig)
