"""The report stage: the leaderboard (CSV, Markdown, metrics.json) and its charts."""

from __future__ import annotations

from pathlib import Path

from ... import layout
from ...config import Params
from ..kind import Markdown, StageKind, image
from ..stage import Output, Stage


def run(params: Params, stage, log) -> dict:
    from ...evaluation.report.stage import run_report

    return run_report(params, log=log)


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


def declare(ctx) -> None:
    """The report over every architecture's evaluation (none when no architecture is enabled)."""
    params, rel = ctx.params, ctx.rel
    if not ctx.recipes:
        return
    report = layout.report_dir(params)
    rel.output(report, "evaluate.output")
    ctx.add(Stage(
        name="report", kind="report",
        description="The leaderboard (CSV, Markdown, metrics.json) and charts: loss curves, bits per byte, "
                    "downstream accuracy against the baselines.",
        command=("report",), upstream=tuple(f"evaluate_{a}" for a in ctx.recipes),
        deps=tuple(rel(layout.evaluation_file(params, a)) for a in ctx.recipes),
        params=("train.architectures",),
        outputs=(Output(rel(report / "leaderboard.csv")), Output(rel(report / "leaderboard.md")),
                 # cached: data/ is git-ignored, so an uncached metrics file would be in neither git nor
                 # the cache, and `dvc exp show` / `dvc metrics diff` could not read it at other revisions
                 Output(rel(report / "metrics.json"), kind="metrics"),
                 Output(rel(report / "loss_curves.png"), kind="plots"),
                 Output(rel(report / "bits_per_byte.png"), kind="plots"),
                 Output(rel(report / "downstream.png"), kind="plots"),
                 Output(rel(report / "plots"))),
    ))


KIND = StageKind(
    declare=declare,
    name="report", group="evaluation",
    code=("src/lmforge/evaluation/report",),
    tools=frozenset({"pandas", "matplotlib"}),
    run=run, runner="lmforge.evaluation.report.stage:run_report", summary=summary, metadata=metadata,
)
