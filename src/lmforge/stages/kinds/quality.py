"""The quality stage (optional, ``quality.enabled``): a classifier trained on a reference set against
the clean corpus scores every clean document; the most reference-like are kept."""

from __future__ import annotations

from pathlib import Path

from ...config import Params
from ..kind import CheckOutcome, CheckSpec, JsonValue, StageKind, Table, charts, read_json_or_empty, read_record
from ..metrics import metrics_path
from ..stage import Output, Stage


def run(params: Params, stage, log) -> dict:
    from ...cleaning.quality_stage import run_quality

    result = run_quality(params, log=log)
    return {"stats": result.stats, "seconds": result.seconds, "skipped": result.skipped}


def summary(stage, result: dict) -> str:
    s, seconds, skipped = result["stats"], result["seconds"], result["skipped"]
    v = s["classifier"]["validation"]
    rule = s["rule"]
    how = f"top {rule['keep_fraction']:g}" if "keep_fraction" in rule else f"score >= {rule['threshold']:g}"
    lines = [
        f"quality -> {s['params']['output']}" + (" (up to date, nothing to do)" if skipped else f" in {seconds:.1f}s"),
        f"  classifier (held out): accuracy {v['accuracy']:.3f} (chance {v['chance_accuracy']:.3f}), "
        f"balanced {v['balanced_accuracy']:.3f}, AUC {v['auc']:.3f}",
        f"  documents: {s['documents_in']} in, {s['documents_out']} kept ({how}"
        + (f", lowest kept score {s['cut_score']:.3f}" if s.get("cut_score") is not None else "") + ")",
        f"  bytes:     {s['bytes_in']} in, {s['bytes_out']} kept ({100 * s['bytes_kept_fraction']:.1f}%)",
    ]
    return "\n".join(lines)


def check(stage, params: Params, out: Path) -> list[CheckOutcome]:
    c = params.checks
    s = read_record(out / "stats.json")
    v = s["classifier"]["validation"]
    n_out = s["documents_out"]
    return [
        CheckOutcome("not_empty", n_out >= c.clean_min_documents,
                     f"{n_out} documents kept (at least checks.clean_min_documents = {c.clean_min_documents} required)",
                     metadata={"documents_out": n_out, "documents_in": s["documents_in"]}),
        CheckOutcome("classifier_accuracy", v["balanced_accuracy"] >= c.quality_min_accuracy,
                     f"held-out balanced accuracy {v['balanced_accuracy']:.3f} (at least {c.quality_min_accuracy:.3f}; "
                     f"0.5 is chance), AUC {v['auc']:.3f}" + ("" if v["balanced_accuracy"] >= c.quality_min_accuracy else
                     ": the classifier barely tells the reference from the corpus, so its ranking is close to random"),
                     severity="warn", metadata={"balanced_accuracy": v["balanced_accuracy"], "accuracy": v["accuracy"],
                                                "auc": v["auc"], "chance_accuracy": v["chance_accuracy"]}),
    ]


def metadata(stage, params: Params, out: Path) -> dict:
    s = read_json_or_empty(out / "stats.json")
    if not s:
        return {}
    cl = s["classifier"]
    v = cl["validation"]
    features = cl.get("top_features") or {}
    return {
        "documents_in": s["documents_in"], "documents_out": s["documents_out"],
        "kept_fraction": float(s["documents_kept_fraction"]), "bytes_out": s["bytes_out"],
        "validation_accuracy": float(v["accuracy"]), "validation_balanced_accuracy": float(v["balanced_accuracy"]),
        "validation_auc": float(v["auc"]), "chance_accuracy": float(v["chance_accuracy"]),
        "cut_score": s.get("cut_score"),
        "sklearn_version": cl.get("sklearn_version", ""),
        "score_quantiles": JsonValue(s.get("score_quantiles") or {}),
        "top_features": Table(("towards reference", "weight", "towards corpus", "weight"), tuple(
            (*(r or ("", "")), *(c or ("", ""))) for r, c in
            zip(features.get("reference", []), features.get("corpus", [])))),
        **charts(out, CHARTS),
    }


# the picture the stage draws (charts/quality.py): file stem -> what it shows
CHARTS = {"scores": "the classifier's scores: held-out reference and corpus documents; the corpus, kept and dropped"}


def declare(ctx) -> None:
    """The optional quality filter: when enabled, the stages after it read its output instead of clean's."""
    if ctx.quality_out is None:
        return
    params, rel = ctx.params, ctx.rel
    reference_inputs = [rel(i) for i in params.quality.reference if i != "stdlib" and not i.startswith("hf:")
                        and "://" not in i]
    ctx.add(Stage(
        name="quality", kind="quality",
        description="A classifier (hashed word 1-2 grams, logistic regression: fastText's model family) trained on "
                    "quality.reference against the clean corpus scores each clean document; the top "
                    "quality.keep_fraction are kept as Parquet shards with their scores, beside the model, its "
                    "held-out accuracy and AUC, and samples of kept and dropped documents.",
        command=("quality",), upstream=("clean",), deps=(ctx.clean_out, *reference_inputs),
        params=("quality",), outputs=(Output(ctx.quality_out), Output(rel(metrics_path(ctx.quality_out)), kind="metrics")),
    ))


KIND = StageKind(
    declare=declare,
    name="quality", record="stats.json", group="corpus",
    code=("src/lmforge/cleaning/quality.py", "src/lmforge/cleaning/quality_stage.py", "src/lmforge/corpus"),
    tools=frozenset({"python", "sklearn", "parquet"}),
    run=run, runner="lmforge.cleaning.quality_stage:run_quality", summary=summary, check=check, metadata=metadata,
    checks=(
        CheckSpec("not_empty", "the filtered corpus keeps at least checks.clean_min_documents documents"),
        CheckSpec("classifier_accuracy", "the classifier's balanced accuracy on its held-out documents >= "
                                         "checks.quality_min_accuracy (0.5 is chance): a warning, the filter is kept",
                  blocking=False, severity="warn"),
    ),
)
