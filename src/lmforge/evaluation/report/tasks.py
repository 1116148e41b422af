"""The report's downstream tables: one per fine-tuning task, grouped by task family, each on
the family's own headline metric (``finetuning.headline``: accuracy or GLUE's metric for
classification, Pearson's correlation for regression, entity F1 for tagging, SQuAD's F1 for span
QA, ROUGE-L / BLEU / exact match for generation) beside the family's baselines and the from-scratch control."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from ...finetuning.headline import HEADLINES, baseline_headlines, control_headline, family_of, headline, headline_metric
from .leaderboard import lookup, tasks


def task_frame(evaluations: list[dict], task: str) -> pd.DataFrame:
    """One row per architecture fine-tuned on ``task``: the score, each baseline's, the
    control's, the transfer gain and whether the score beats each."""
    rows = []
    for evaluation in evaluations:
        result = lookup(evaluation, "finetune", task)
        if not isinstance(result, dict):
            continue
        score = headline(result)
        control = control_headline(result)
        row: dict[str, Any] = {"architecture": str(evaluation.get("architecture")), "family": family_of(result),
                               "metric": headline_metric(result), "score": score}
        for name, value in baseline_headlines(result).items():
            row[name] = value
            row[f"beats_{name}"] = None if score is None else score > value
        row["scratch"] = control
        row["transfer_gain"] = None if score is None or control is None else score - control
        row["beats_scratch"] = None if score is None or control is None else score > control
        rows.append(row)
    return pd.DataFrame(rows)


def _cell(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, (bool, np.bool_)):
        return "✓" if value else "✗"
    if isinstance(value, (float, np.floating)):
        return f"{value:+.3f}" if value < 0 else f"{value:.3f}"
    return str(value)


def task_tables_markdown(evaluations: list[dict]) -> str:
    """A Markdown section with a table per task (families in ``HEADLINES`` order), or "" when
    nothing was fine-tuned."""
    frames = [(t, task_frame(evaluations, t)) for t in tasks(evaluations)]
    frames = [(t, f) for t, f in frames if len(f)]
    if not frames:
        return ""
    order = list(HEADLINES)
    frames.sort(key=lambda tf: order.index(tf[1]["family"].iloc[0]) if tf[1]["family"].iloc[0] in order else len(order))
    parts = ["", "## Downstream tasks", "",
             "Each task on its family's metric on the test split (classification: accuracy, or GLUE's metric; "
             "regression: Pearson correlation; tagging: entity F1, seqeval's; span QA: SQuAD's token F1; generation: "
             "ROUGE-L, BLEU or exact match by kind), beside the family's baselines (majority class and bag of words; "
             "the training mean and a bag-of-words ridge regression; each word's most frequent training tag; the "
             "sliding window of most question words; the lead sentence and the copied input) and the same "
             "architecture fine-tuned from scratch.", ""]
    for task, frame in frames:
        family, metric = frame["family"].iloc[0], frame["metric"].iloc[0]
        columns = [c for c in frame.columns if c not in ("family", "metric")]
        parts += [f"### `{task}` ({family}, {metric})", "",
                  "| " + " | ".join(columns) + " |", "|" + "|".join("---" if c == "architecture" else "---:" for c in columns) + "|"]
        for _, row in frame.iterrows():
            parts.append("| " + " | ".join(_cell(row[c]) for c in columns) + " |")
        parts.append("")
    return "\n".join(parts)
