"""What ``python -m dagster_project.run`` (``make run``) prints when it ends: each step's wall
time, slowest first, the leaderboard's headline columns when the report stage wrote one, and
where to look next. Dagster's own events stay in the instance (the UI shows them); the console
shows the stages' lines only."""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path

# the leaderboard columns the closing summary shows, in this order
HEADLINE = ("architecture", "task", "task_accuracy", "scratch_accuracy", "transfer_gain", "transfer",
            "harness_acc", "harness_floor_acc")


def step_seconds(entries: Iterable) -> dict[str, float]:
    """Wall seconds of each step, from the run's event log entries (``instance.all_logs``):
    its first STEP_START to its STEP_SUCCESS or STEP_FAILURE."""
    started: dict[str, float] = {}
    took: dict[str, float] = {}
    for entry in entries:
        event = getattr(entry, "dagster_event", None)
        if event is None or not event.step_key:
            continue
        kind = event.event_type_value
        if kind == "STEP_START":
            started.setdefault(event.step_key, entry.timestamp)
        elif kind in ("STEP_SUCCESS", "STEP_FAILURE") and event.step_key in started:
            took[event.step_key] = entry.timestamp - started[event.step_key]
    return took


def clock(seconds: float) -> str:
    """``1 min 05 s`` / ``42 s``."""
    seconds = int(round(seconds))
    return f"{seconds // 60} min {seconds % 60:02d} s" if seconds >= 60 else f"{seconds} s"


def step_lines(took: dict[str, float], shown: int = 8) -> list[str]:
    """The slowest ``shown`` steps and the sum of all of them (steps may overlap in time)."""
    if not took:
        return []
    slowest = sorted(took.items(), key=lambda kv: -kv[1])[:shown]
    return [f"steps: {len(took)}, {clock(sum(took.values()))} of step time; the slowest: "
            + ", ".join(f"{name} {clock(s)}" for name, s in slowest)]


def _cell(value) -> str:
    if isinstance(value, float):
        return "" if math.isnan(value) else f"{value:.3f}"
    return "" if value is None else str(value)


def leaderboard_lines(report: Path) -> list[str]:
    """The headline columns of ``report/leaderboard.csv``, one row per architecture and task, as a
    plain-text table; nothing when there is no leaderboard."""
    csv = report / "leaderboard.csv"
    if not csv.is_file():
        return []
    import pandas as pd

    df = pd.read_csv(csv)
    columns = [c for c in HEADLINE if c in df.columns]
    if df.empty or not columns:
        return []
    rows = [columns] + [[_cell(v) for v in row] for row in df[columns].itertuples(index=False, name=None)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(columns))]
    table = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in rows]
    return [f"leaderboard ({csv.with_suffix('.md')}; every column explained there):", *("  " + t for t in table)]


def closing_lines(project: Path, report: Path | None, took: dict[str, float], wall: float) -> list[str]:
    """Everything printed after the run's one-line verdict."""
    lines = [f"wall time: {clock(wall)}", *step_lines(took)]
    if report is not None:
        lines += leaderboard_lines(report if report.is_absolute() else project / report)
    lines += ["look at it: `make ui` (Dagster: assets, checks, runs), "
              f"`mlflow ui --backend-store-uri sqlite:///{project / 'mlflow.db'}` (runs, models), "
              "`lmforge status` (what is stale)"]
    return lines
