"""The finetune stage: one pretrained architecture on one downstream task."""

from __future__ import annotations

import math
from pathlib import Path

from ...config import Params
from ..kind import CheckOutcome, CheckSpec, MlflowRun, StageKind, image, logged_losses, numbers, read_json_or_empty


def run(params: Params, stage, log) -> dict:
    from ...training.finetune import run_finetune

    return run_finetune(params, stage.key["arch"], stage.key["task"], log=log,
                        from_scratch=stage.key.get("init") == "scratch")


def check(stage, params: Params, out: Path) -> list[CheckOutcome]:
    losses = logged_losses(out / "history.csv")
    bad = sum(not math.isfinite(x) for x in losses)
    return [CheckOutcome("loss_finite", bool(losses) and bad == 0,
                         f"{len(losses)} logged losses, {bad} not finite", metadata={"logged": len(losses), "not_finite": bad})]


def metadata(stage, params: Params, out: Path) -> dict:
    m = read_json_or_empty(out / "metrics.json")
    meta = {k: m[k] for k in ("steps", "seconds", "train_loss_first", "train_loss_last") if k in m}
    meta.update(numbers(m.get("test") or {}, "test/"))
    for name, b in (m.get("baselines") or {}).items():
        meta.update(numbers({k: b[k] for k in ("accuracy", "macro_f1", "f1") if k in b}, f"baseline/{name}/"))
    name = f"{stage.key.get('arch')} on {stage.key.get('task')}"
    for key, file, alt in (("loss_curve", "loss", f"{name} loss"), ("confusion", "confusion", f"{name} test confusion matrix")):
        chart = image(out / f"{file}.png", alt)
        if chart is not None:
            meta[key] = chart
    if m.get("mlflow_run_id"):
        meta["mlflow_run"] = MlflowRun(m["mlflow_run_id"])
    return meta


KIND = StageKind(
    name="finetune", record="metrics.json", group="finetuning",
    code=("src/lmforge/training", "src/lmforge/models", "src/lmforge/finetuning"),
    tools=frozenset({"pytorch", "mlflow"}),
    run=run, check=check, metadata=metadata, subprocess=True,
    checks=(CheckSpec("loss_finite", "every logged fine-tuning loss is finite"),),
)
