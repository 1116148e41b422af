"""The finetune stage: one pretrained architecture on one downstream task."""

from __future__ import annotations

import math
from pathlib import Path

from ... import layout
from ...config import Params
from ..kind import CheckOutcome, CheckSpec, MlflowRun, StageKind, image, logged_losses, numbers, read_json_or_empty
from ..stage import Output, Stage, slug


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


def declare(ctx) -> None:
    """Per enabled architecture and task its family fits: the fine-tuning of the pretrained model
    and, with finetune.scratch_control, the same recipe from random weights (the control)."""
    from ...finetuning.generation.features import fits_family
    from ...finetuning.tasks import CORPUS_TASKS
    from ...objectives.registry import tokenizer_kind
    from ...config.recipes import recipe_param_keys, recipe_path

    params, rel = ctx.params, ctx.rel
    for arch, recipe in ctx.recipes.items():
        kind = tokenizer_kind(recipe.objective)
        recipe_file = rel(recipe_path(params, arch))
        tokenizer_out = rel(layout.tokenizer_dir(params, kind))
        pre_out = rel(layout.pretrain_dir(params, arch))
        finetune_recipe = tuple(recipe_param_keys(params, arch, "finetune", ctx.root))
        for task in params.finetune.tasks:
            family = ctx.families[task]
            if not fits_family(arch, family):  # e.g. an encoder on a generation task: no stage
                continue
            task_deps: list[str] = []
            task_upstream = [f"tokenizer_{kind}"]
            if task in CORPUS_TASKS:  # the corpus tasks read the corpus the tokenizers read
                task_deps.append(ctx.corpus if ctx.corpus_stage == "quality" else ctx.clean_out)
                task_upstream.append("quality" if ctx.corpus_stage == "quality" else "clean")
            elif not task.startswith("hf:"):
                task_deps.append(rel(task))
            augmenter = recipe.finetune.augment.model if recipe.finetune.augment else None
            if augmenter is not None:  # the masked LM that makes augmented examples is an input of both arms
                task_deps.append(rel(layout.pretrain_dir(params, augmenter)))
                if augmenter in params.train.architectures:
                    task_upstream.append(f"pretrain_{augmenter}")
            family_key = {"family": family} if family != "classification" else {}  # the group it shows in
            finetune_params = ("train.size", "train.seed", "train.finetune_max_steps", "train.log_every",
                               "finetune.max_length", "finetune.max_train_examples", "split")
            ctx.add(Stage(
                name=f"finetune_{arch}_{slug(layout.task_slug(task))}", kind="finetune",
                description=f"Fine-tune the pretrained {arch} on {task} ({recipe.finetune.mode if family == 'classification' else family}); "
                            "model, history.csv, metrics.json with the test scores of the task's family and its "
                            "baselines.",
                command=("finetune", arch, "--task", task),
                upstream=tuple(dict.fromkeys((f"pretrain_{arch}", *task_upstream))),
                deps=tuple(dict.fromkeys((pre_out, tokenizer_out, *task_deps))), params=finetune_params,
                outputs=(Output(rel.output(layout.finetune_dir(params, arch, task), "train.output")),),
                key={"arch": arch, "task": task, "init": "pretrained", **family_key},
                recipe=recipe_file, recipe_params=finetune_recipe,
            ))
            if params.finetune.scratch_control:
                ctx.add(Stage(
                    name=f"finetune_scratch_{arch}_{slug(layout.task_slug(task))}", kind="finetune",
                    description=f"The control: {arch} randomly initialised, fine-tuned on {task} with the same recipe "
                                "and budget as the pretrained one; what pretraining is worth is the difference.",
                    command=("finetune", arch, "--task", task, "--from-scratch"), upstream=tuple(task_upstream),
                    deps=(tokenizer_out, *task_deps), params=finetune_params,
                    outputs=(Output(rel.output(layout.finetune_scratch_dir(params, arch, task), "train.output")),),
                    key={"arch": arch, "task": task, "init": "scratch", **family_key},
                    recipe=recipe_file, recipe_params=finetune_recipe,
                ))


KIND = StageKind(
    declare=declare,
    name="finetune", record="metrics.json", group="finetuning",
    code=("src/lmforge/training", "src/lmforge/models", "src/lmforge/finetuning"),
    tools=frozenset({"pytorch", "mlflow"}),
    run=run, runner="lmforge.training.finetune:run_finetune", check=check, metadata=metadata, subprocess=True,
    checks=(CheckSpec("loss_finite", "every logged fine-tuning loss is finite"),),
)
