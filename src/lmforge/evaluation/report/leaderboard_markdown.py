"""The leaderboard as Markdown: the table (numbers rounded, ✓/✗ for the comparisons, – where
unknown), the column meanings, and the "did pretraining learn?" flags; the rows are
``leaderboard.py``'s DataFrame."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .leaderboard import BOOLEAN_COLUMNS, COLUMNS, TABLE_COLUMNS, TEXT_COLUMNS, format_count, is_missing


def _cell(column: str, value: Any) -> str:
    if is_missing(value):
        return "–"
    if column in BOOLEAN_COLUMNS:
        return "✓" if bool(value) else "✗"
    if column in ("parameters", "pretrain_tokens", "pretrain_flops"):
        return format_count(float(value))
    if column == "pretrain_mfu":
        return f"{100 * float(value):.1f}%"
    if column == "pretrain_minutes":
        return f"{float(value):.1f}"
    if column == "steps":
        return f"{int(value):d}"
    if column == "perplexity":
        return f"{value:.4g}" if value < 1e6 else f"{value:.3e}"
    if isinstance(value, (int, float, np.number)):
        return f"{float(value):.3f}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def format_leaderboard(df: pd.DataFrame) -> str:
    """The leaderboard as a Markdown table (numbers rounded, ✓/✗ for the booleans, – where unknown)."""
    columns = [c for c in TABLE_COLUMNS if c in df.columns]
    columns += [c for c in df.columns if c not in columns and c != "unigram_bits_per_byte"]
    numeric = {c for c in columns if c not in TEXT_COLUMNS and c not in BOOLEAN_COLUMNS}
    lines = [
        "| " + " | ".join(columns) + " |",
        "|" + "|".join("---:" if c in numeric else (":---:" if c in BOOLEAN_COLUMNS else "---") for c in columns) + "|",
    ]
    for _, row in df.iterrows():
        lines.append("| " + " | ".join(_cell(c, row[c]) for c in columns) + " |")
    return "\n".join(lines) + "\n"


def _flags(df: pd.DataFrame) -> list[str]:
    """A line per architecture whose validation loss is not below its start or its unigram baseline
    (or was not measured)."""
    lines = []
    for _, row in df.iterrows():
        name = row["architecture"]
        if is_missing(row["val_loss"]):
            lines.append(f"- **{name}**: no validation loss recorded; learning cannot be checked.")
            continue
        problems = []
        if row["below_start"] is not pd.NA and not bool(row["below_start"]):
            problems.append(f"not below its start {row['loss_start']:.3f}")
        if row["below_unigram"] is not pd.NA and not bool(row["below_unigram"]):
            problems.append(f"not below its unigram baseline {row['unigram_loss']:.3f} "
                            "(the model does not yet use context)")
        if problems:
            lines.append(f"- **{name}**: validation loss {row['val_loss']:.3f} is " + " and ".join(problems) + ".")
    return lines


def leaderboard_markdown(df: pd.DataFrame) -> str:
    task = next((t for t in df["task"] if t), None) if "task" in df else None
    parts = [
        "# Leaderboard",
        "",
        f"{len(df)} architecture(s), each pretrained with its own objective and evaluated on the "
        "validation split; losses are cross entropies in nats per predicted token, so they compare "
        "across architectures only when objective and tokenizer match (bits_per_byte is the "
        "tokenizer-independent one for objectives that predict every token). "
        + (f"The downstream columns are for the fine-tuning task `{task}`. " if task else
           "No architecture was fine-tuned, so the downstream columns are empty. ")
        + "✓/✗ mark the comparisons, – an unknown value.",
        "",
        "Columns:",
        "",
        *[f"- `{c}`: {COLUMNS[c]}" for c in TABLE_COLUMNS if c in df.columns],
        "",
        format_leaderboard(df).rstrip("\n"),
        "",
        "## Did pretraining learn?",
        "",
    ]
    flags = _flags(df)
    parts.extend(flags if flags else ["Every architecture's validation loss is below its start and its unigram baseline."])
    return "\n".join(parts) + "\n"
