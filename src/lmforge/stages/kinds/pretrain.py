"""The pretrain stage: one architecture on its objective with Lightning, as its recipe says."""

from __future__ import annotations

import math
from pathlib import Path

from ... import layout
from ...config import Params
from ..kind import CheckOutcome, CheckSpec, MlflowRun, StageKind, image, logged_losses, numbers, read_json_or_empty
from ..stage import Output, Stage


def run(params: Params, stage, log) -> dict:
    from ...training.pretrain import run_pretrain

    return run_pretrain(params, stage.key["arch"], log=log)


def check(stage, params: Params, out: Path) -> list[CheckOutcome]:
    losses = logged_losses(out / "history.csv")
    finite = bool(losses) and all(math.isfinite(x) for x in losses)
    drop = params.checks.loss_min_drop
    decreasing = finite and losses[-1] < losses[0] - drop
    desc = (f"{len(losses)} logged losses, first {losses[0]:.4f}, last {losses[-1]:.4f}" if losses else "no logged loss")
    if not finite and losses:
        desc += f"; {sum(not math.isfinite(x) for x in losses)} not finite"
    return [CheckOutcome("loss_finite_and_decreasing", decreasing, desc,
                         metadata={"first": losses[0] if losses else None, "last": losses[-1] if losses else None,
                                   "min_drop": drop})]


def metadata(stage, params: Params, out: Path) -> dict:
    m = read_json_or_empty(out / "metrics.json")
    v, v0 = m.get("validation") or {}, m.get("validation_start") or {}
    meta = {k: m[k] for k in ("parameters", "steps", "seconds", "train_loss_first", "train_loss_last") if k in m}
    meta.update(numbers(v, "validation/"))
    if "loss" in v0:
        meta["validation/loss_at_start"] = float(v0["loss"])
    loss_curve = image(out / "loss.png", f"{stage.key.get('arch')} loss")
    if loss_curve is not None:
        meta["loss_curve"] = loss_curve
    if m.get("mlflow_run_id"):
        meta["mlflow_run"] = MlflowRun(m["mlflow_run_id"])
    return meta


def declare(ctx) -> None:
    """A pretraining stage per enabled architecture, on its recipe's objective."""
    from ...objectives.registry import tokenizer_kind
    from ...config.recipes import recipe_param_keys, recipe_path

    params, rel = ctx.params, ctx.rel
    for arch, recipe in ctx.recipes.items():
        kind = tokenizer_kind(recipe.objective)
        recipe_file = rel(recipe_path(params, arch))
        ctx.add(Stage(
            name=f"pretrain_{arch}", kind="pretrain",
            description=f"Pretrain {arch} ({recipe.objective} on {kind} tokens, recipe {recipe_file}) with Lightning; "
                        "the model (safetensors), history.csv, loss.png, metrics.json (the checkpoints stay in the "
                        "attempt folder beside it); an MLflow run.",
            command=("pretrain", arch),
            upstream=(f"dataset_{recipe.objective}", f"tokens_{kind}", f"tokenizer_{kind}"),
            deps=(rel(layout.dataset_dir(params, recipe.objective)), rel(layout.token_store_dir(params, kind)),
                  rel(layout.tokenizer_dir(params, kind))),
            params=(f"dataset.{recipe.objective}", "dataset.seed", "train.size", "train.seed", "train.precision",
                    "train.max_steps", "train.log_every", "evaluate.validation_batches"),
            outputs=(Output(rel.output(layout.pretrain_dir(params, arch), "train.output")),),
            key={"arch": arch, "objective": recipe.objective, "kind": kind},
            recipe=recipe_file, recipe_params=tuple(recipe_param_keys(params, arch, "pretrain", ctx.root)),
        ))


KIND = StageKind(
    declare=declare,
    name="pretrain", record="metrics.json", group="pretraining",
    code=("src/lmforge/training", "src/lmforge/models", "src/lmforge/datasets", "src/lmforge/objectives",
          "src/lmforge/evaluation/intrinsic.py"),
    tools=frozenset({"pytorch", "mlflow"}),
    run=run, runner="lmforge.training.pretrain:run_pretrain", check=check, metadata=metadata, subprocess=True,
    checks=(CheckSpec("loss_finite_and_decreasing", "every logged training loss is finite and the last is below the first "
                                                    "by more than checks.loss_min_drop"),),
)
