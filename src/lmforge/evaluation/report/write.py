"""``write_report``: the leaderboard (CSV, Markdown), metrics.json, the charts and the loss
tables, each written atomically (a temporary file in the same folder, then ``os.replace``), so an
interrupted run never leaves a half-written report behind."""

from __future__ import annotations

import json
import logging
import os
import re
from pathlib import Path
from typing import Any

import pandas as pd

from ...artifacts import atomic_write_bytes
from . import charts
from .leaderboard import leaderboard, leaderboard_metrics, lookup
from .leaderboard_markdown import leaderboard_markdown
from .tasks import task_tables_markdown

log = logging.getLogger(__name__)


def _resolve(path: Any, root: Path) -> Path | None:
    if not path:
        return None
    path = Path(str(path))
    return path if path.is_absolute() else root / path


def read_history(path: Path | None) -> pd.DataFrame | None:
    """A history CSV, one row per step (rows of the same step merged, empty cells NaN), or None
    when there is none."""
    if path is None or not path.is_file():
        if path is not None:
            log.warning("history %s not found; left out of the loss plots", path)
        return None
    try:
        df = pd.read_csv(path)
    except (OSError, ValueError) as exc:  # EmptyDataError and ParserError are ValueErrors
        log.warning("history %s unreadable (%s); left out of the loss plots", path, exc)
        return None
    if "step" not in df.columns:
        log.warning("history %s has no step column; left out of the loss plots", path)
        return None
    df = df.apply(pd.to_numeric, errors="coerce").dropna(subset=["step"])
    # training and validation log separate rows at the same step: merge them
    return df.groupby("step", sort=True).first().reset_index()


def loss_table(history: pd.DataFrame | None) -> pd.DataFrame | None:
    """step, train_loss[, val_loss, lr, tokens_per_second]: the rows with a train loss."""
    if history is None or "train/loss" not in history.columns:
        return None
    table = pd.DataFrame({"step": history["step"].astype("int64"), "train_loss": history["train/loss"]})
    for column, name in (("val/loss", "val_loss"), ("lr", "lr"), ("tokens_per_second", "tokens_per_second")):
        if column in history.columns and history[column].notna().any():
            table[name] = history[column]
    return table[table["train_loss"].notna()].reset_index(drop=True)


def _safe_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name) or "_"


def _samples_section(evaluations: list[dict]) -> str:
    """The pretrained models' samples (the evaluate stage's), as a Markdown section."""
    from ...inference.samples import samples_markdown

    table = samples_markdown({str(e.get("architecture")): e.get("samples") or [] for e in evaluations})
    return f"\n## What the pretrained models write\n\nGreedy, from fixed prompts (`lmforge.inference.samples`).\n\n{table}" \
        if table else ""


def write_report(evaluations: list[dict], output_dir: str | os.PathLike, task: str | None = None,
                 root: str | os.PathLike = ".") -> dict[str, Any]:
    """Write the leaderboard (CSV, Markdown), metrics.json, the plots and ``plots/loss_<arch>.csv``
    into ``output_dir``; history paths are resolved against ``root`` unless absolute.

    Returns ``{"leaderboard": DataFrame, "files": [Path, ...]}``."""
    output_dir = Path(output_dir)
    root = Path(root)
    df = leaderboard(evaluations, task=task)
    names = [str(e.get("architecture")) for e in evaluations]
    histories = {name: read_history(_resolve(lookup(e, "pretrain", "history"), root))
                 for name, e in zip(names, evaluations)}

    files = [
        atomic_write_bytes(output_dir / "leaderboard.csv", df.to_csv(index=False).encode("utf-8")),
        atomic_write_bytes(output_dir / "leaderboard.md", (leaderboard_markdown(df) + task_tables_markdown(evaluations)
                                                           + _samples_section(evaluations)).encode("utf-8")),
        atomic_write_bytes(output_dir / "metrics.json",
                      (json.dumps(leaderboard_metrics(df), indent=2, ensure_ascii=False) + "\n").encode("utf-8")),
        atomic_write_bytes(output_dir / "loss_curves.png", charts.loss_curves(names, histories)),
        atomic_write_bytes(output_dir / "bits_per_byte.png", charts.bits_per_byte(df)),
        atomic_write_bytes(output_dir / "downstream.png", charts.downstream(df)),
    ]
    for name in names:
        table = loss_table(histories.get(name))
        if table is None:
            continue
        files.append(atomic_write_bytes(output_dir / "plots" / f"loss_{_safe_name(name)}.csv",
                                   table.to_csv(index=False).encode("utf-8")))
    return {"leaderboard": df, "files": files}
