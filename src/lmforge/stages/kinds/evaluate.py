"""The evaluate stage: an architecture's intrinsic and downstream results gathered, logged, and
the registry's champion alias moved only on improvement."""

from __future__ import annotations

from pathlib import Path

from ... import layout
from ...config import Params
from ...evaluation.report.leaderboard import PLATEAU_NATS, on_plateau, short_of_time_to_pay
from ...finetuning.headline import baseline_headlines, headline, headline_metric
from ...evaluation.stage import transfer_gain
from ..kind import CheckOutcome, CheckSpec, Markdown, StageKind, numbers, read_record, read_json_or_empty
from ..stage import Output, Stage


def run(params: Params, stage, log) -> dict:
    from ...evaluation.stage import run_evaluate

    arch = stage.key["arch"]
    return run_evaluate(params, [arch], log=log)[arch]


def check(stage, params: Params, out: Path) -> list[CheckOutcome]:
    ev = read_record(out)
    v = (ev.get("pretrain") or {}).get("validation") or {}
    loss, unigram = v.get("loss"), v.get("unigram_loss")
    intrinsic = loss is not None and unigram is not None and loss < unigram
    tasks = {}  # task -> (its headline metric, the model's value, the first baseline's name and value)
    for task, ft in (ev.get("finetune") or {}).items():
        first = next(iter(baseline_headlines(ft).items()), (None, None))
        tasks[task] = (headline_metric(ft), headline(ft), *first)
    downstream = bool(tasks) and all(a is not None and m is not None and a > m for _, a, _, m in tasks.values())
    gains = {task: transfer_gain(ft) for task, ft in (ev.get("finetune") or {}).items()}
    gains = {task: g for task, g in gains.items() if g is not None}
    short = (f"too short to pay: the pretraining ended {unigram - loss:.3f} nats under its unigram baseline (within "
             f"{PLATEAU_NATS:g}), where fine-tuning starts worse than random weights; no finding. "
             if on_plateau(loss, unigram) else "")
    if not short and (reason := short_of_time_to_pay(ev)):
        short = f"too short to pay: {reason}; no finding. "
    return [
        CheckOutcome("beats_unigram_baseline", intrinsic,
                     f"validation loss {loss} vs unigram baseline {unigram}" if loss is not None else "no validation loss",
                     metadata={"validation_loss": loss, "unigram_loss": unigram}),
        CheckOutcome("beats_majority_baseline", downstream,
                     "; ".join(f"{t}: {metric} {a} vs {name} {m}" for t, (metric, a, name, m) in tasks.items())
                     or "no fine-tuned task",
                     severity="warn", metadata={f"{t}_{metric}": a for t, (metric, a, _, _) in tasks.items()}),
        CheckOutcome("beats_scratch_control", bool(gains) and all(g > 0 for g in gains.values()),
                     short + "; ".join(f"{t}: transfer gain {g:+.3f} (pretrained minus from scratch)"
                                       for t, g in gains.items())
                     if gains else "no from-scratch control was fine-tuned",
                     severity="warn", metadata={f"{t}_transfer_gain": g for t, g in gains.items()}),
    ]


def metadata(stage, params: Params, out: Path) -> dict:
    ev = read_json_or_empty(out)
    meta: dict = numbers((ev.get("pretrain") or {}).get("validation") or {}, "validation/")
    for task, ft in (ev.get("finetune") or {}).items():
        gain = transfer_gain(ft)
        if gain is not None:
            meta[f"transfer_gain/{task}"] = gain
    for name, p in (ev.get("promotion") or {}).items():
        meta[f"registry/{name}"] = f"v{p['version']} {p['metric']}={p['value']:.4f} " + (
            "-> champion" if p["champion"] else "(champion unchanged)")
    harness = ev.get("harness") or {}
    if harness.get("not_applicable"):
        meta["harness"] = f"not applicable: {harness['not_applicable']}"
    if harness.get("scored_by"):
        meta["harness/scored_by"] = harness["scored_by"]
    for task, reason in (harness.get("skipped") or {}).items():
        meta[f"harness/{task}/skipped"] = reason
    for name in ("pretrained", "untrained"):
        for task, scores in (harness.get(name) or {}).items():
            meta.update(numbers(scores, f"harness/{task}/{name}/"))
    if ev.get("samples"):
        from ...inference.samples import samples_markdown

        meta["samples"] = Markdown(samples_markdown({stage.key["arch"]: ev["samples"]}))
    return meta


def declare(ctx) -> None:
    """An evaluate stage per enabled architecture, over its pretraining and fine-tunings; the
    zero-shot harness's built-in task reads the corpus's held-out documents, a YAML task its file."""
    params, rel = ctx.params, ctx.rel
    harness_deps = tuple(rel(t) for t in params.evaluate.harness if t.endswith((".yaml", ".yml")))
    harness_upstream: tuple[str, ...] = ()
    if "docstring_next" in params.evaluate.harness:
        harness_deps = (ctx.corpus, *harness_deps)
        harness_upstream = (ctx.corpus_stage,) if ctx.corpus_stage else ()
    harness_params = ("evaluate.harness", "evaluate.harness_questions", "train.seed") if params.evaluate.harness else ()
    from ...config.recipes import recipe_param_keys, recipe_path

    for arch in ctx.recipes:
        # the recipe's measured time to pay, where it gives one (the leaderboard's "too short to pay")
        recipe_keys = tuple(recipe_param_keys(params, arch, "evaluate", ctx.root))
        pre_out = rel(layout.pretrain_dir(params, arch))
        finetuned = [(s.name, s.paths[0]) for s in ctx.declared("finetune", arch=arch)]
        ctx.add(Stage(
            name=f"evaluate_{arch}", kind="evaluate",
            description=f"Gather {arch}'s intrinsic (validation loss, bits per byte, unigram baseline) and downstream "
                        "results, log them to MLflow, move the registry's champion alias only on improvement.",
            command=("evaluate", arch), upstream=(f"pretrain_{arch}", *(n for n, _ in finetuned), *harness_upstream),
            deps=(pre_out, *(o for _, o in finetuned), *harness_deps),
            params=("finetune.tasks", "finetune.scratch_control", "tracking.promotion_metric", *harness_params),
            outputs=(Output(rel(layout.evaluation_file(params, arch))),),
            key={"arch": arch},
            recipe=rel(recipe_path(params, arch)) if recipe_keys else "", recipe_params=recipe_keys,
        ))


KIND = StageKind(
    declare=declare,
    name="evaluate", group="evaluation",
    code=("src/lmforge/evaluation/stage.py", "src/lmforge/inference/samples.py", "src/lmforge/evaluation/zero_shot.py",
          "src/lmforge/evaluation/harness.py", "src/lmforge/evaluation/harness_task.py",
          "src/lmforge/evaluation/lm_eval_run.py", "src/lmforge/evaluation/lm_eval_model.py"),
    tools=frozenset({"mlflow", "json"}),
    run=run, runner="lmforge.evaluation.stage:run_evaluate", check=check, metadata=metadata,
    checks=(
        CheckSpec("beats_unigram_baseline", "validation loss below the unigram baseline of the objective's targets",
                  blocking=False),
        CheckSpec("beats_majority_baseline", "on every task, the test headline above the family's first baseline "
                                             "(classification: the majority class; regression: the training mean; "
                                             "tagging: the most frequent tag; span QA: the sliding window; generation: "
                                             "the lead sentence)",
                  blocking=False, severity="warn"),
        CheckSpec("beats_scratch_control", "the pretrained model's test headline above its from-scratch control's on "
                                           "every task (a positive transfer gain)", blocking=False, severity="warn"),
    ),
)
