"""The dataset stage: one pretraining objective over its token store; its statistics (realised
mask / noise rates, span lengths, label balance) and, in static mode, epoch 0's examples."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from ... import layout
from ...config import ConfigError, Params
from ...datasets.rates import NOISE
from ..kind import CheckOutcome, CheckSpec, JsonValue, StageKind, charts, numbers, read_record, read_json_or_empty
from ..metrics import metrics_path
from ..stage import Output, Stage


def run(params: Params, stage, log) -> dict:
    from ...datasets.stage import run_dataset

    return run_dataset(params, stage.key["objective"], log=log)


def summary(stage, result: dict) -> str:
    lines = [f"dataset {result['objective']} ({result['tokenizer_kind']} tokens, {result['mode']} masking):"]
    for split, s in result["splits"].items():
        lines.append(f"  {split:10s} {s['examples_per_epoch']:8,} examples/epoch, mean input length {s['input_length']['mean']:.1f}, "
                     f"{s.get('labels_per_input_token', 0):.3f} labels per input token")
    return "\n".join(lines)


# objective -> (statistic in stats.json's train split, the configured value it should be near)
RATES: dict[str, tuple[str, Callable[[Any], float]]] = {name: (n.rate, n.configured_rate) for name, n in NOISE.items()}


def check(stage, params: Params, out: Path) -> list[CheckOutcome]:
    objective = stage.key["objective"]
    stats = read_record(out / "stats.json")
    train = stats["splits"].get("train", {})
    examples = int(train.get("examples_per_epoch", 0))
    meta: dict[str, Any] = {"examples_per_epoch": examples}
    ok = examples > 0
    parts = [f"{examples} train examples per epoch"]
    if objective in RATES:
        key, configured = RATES[objective]
        target = float(configured(getattr(params.dataset, objective)))
        realised = train.get(key)
        tol = params.checks.mask_rate_tolerance
        if realised is None:
            ok, parts = False, [*parts, f"stats.json has no {key}"]
        else:
            ok = ok and abs(float(realised) - target) <= tol
            parts.append(f"{key} {float(realised):.4f} vs configured {target:.4f} (tolerance {tol})")
            meta.update({key: float(realised), "configured": target, "tolerance": tol})
    return [CheckOutcome("objective_statistics", ok, "; ".join(parts), metadata=meta)]


def metadata(stage, params: Params, out: Path) -> dict:
    s = read_json_or_empty(out / "stats.json")
    meta: dict[str, Any] = numbers((s.get("splits") or {}).get("train", {}), "train/")
    if s.get("config"):
        meta["config"] = JsonValue(s["config"])
    objective = stage.key.get("objective", "")
    meta.update(charts(out, {"masking": f"{objective} realised noise against the configured",
                             "input_lengths": f"{objective} input lengths"}))
    return meta


def declare(ctx) -> None:
    """A dataset stage per objective in dataset.objectives and per objective a recipe trains on."""
    from ...objectives.registry import tokenizer_kind

    params, rel = ctx.params, ctx.rel
    objectives = list(params.dataset.objectives)
    for recipe in ctx.recipes.values():
        if recipe.objective not in objectives:
            objectives.append(recipe.objective)
    for objective in objectives:
        kind = tokenizer_kind(objective)
        if f"tokens_{kind}" not in ctx.stages:
            raise ConfigError(f"dataset.objectives: {objective!r} reads {kind} tokens, but {kind!r} is not in tokenizer.kinds")
        ctx.add(Stage(
            name=f"dataset_{objective}", kind="dataset",
            description=f"The {objective} objective over the {kind} token stores: stats.json (realised mask / noise "
                        "rates, span lengths, label balance, lengths); in static mode epoch 0's examples as Parquet.",
            command=("dataset", objective), upstream=(f"tokens_{kind}", f"tokenizer_{kind}"),
            deps=(rel(layout.token_store_dir(params, kind)), rel(layout.tokenizer_dir(params, kind))),
            params=(f"dataset.{objective}", "dataset.mode", "dataset.seed", "dataset.statistics_examples"),
            outputs=(Output(rel.output(layout.dataset_dir(params, objective), "dataset.output")),
                     Output(rel(metrics_path(layout.dataset_dir(params, objective))), kind="metrics")),
            key={"objective": objective},
        ))


KIND = StageKind(
    declare=declare,
    name="dataset", record="stats.json", group="datasets",
    code=("src/lmforge/datasets", "src/lmforge/objectives"),
    tools=frozenset({"python", "json"}),
    run=run, runner="lmforge.datasets.stage:run_dataset", summary=summary, check=check, metadata=metadata,
    checks=(CheckSpec("objective_statistics", "the realised mask / noise / target rate is within checks.mask_rate_tolerance "
                                              "of the configured one; the train split has examples"),),
)
