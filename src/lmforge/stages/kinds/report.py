"""The report stage: the leaderboard (CSV, Markdown, metrics.json) and its charts."""

from __future__ import annotations

from pathlib import Path

from ... import layout
from ...config import Params
from ..kind import Markdown, StageKind, image


def run(params: Params, stage, log) -> dict:
    from ...evaluation.report import load_evaluations, write_report

    evaluations = load_evaluations(layout.evaluations_dir(params), order=params.train.architectures)
    result = write_report(evaluations, layout.report_dir(params))
    return {"leaderboard": result["leaderboard"], "files": [str(f) for f in result["files"]]}


def summary(stage, result: dict) -> str:
    from ...evaluation.report import format_leaderboard

    return format_leaderboard(result["leaderboard"])


def metadata(stage, params: Params, out: Path) -> dict:
    meta: dict = {}
    board = out.parent / "leaderboard.md"
    if board.exists():
        meta["leaderboard"] = Markdown(board.read_text(encoding="utf-8"))
    for name in ("loss_curves", "bits_per_byte", "downstream"):
        chart = image(out.parent / f"{name}.png", name)
        if chart is not None:
            meta[name] = chart
    return meta


KIND = StageKind(
    name="report", group="evaluation",
    code=("src/lmforge/evaluation/report",),
    tools=frozenset({"pandas", "matplotlib"}),
    run=run, summary=summary, metadata=metadata,
)
