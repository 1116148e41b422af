"""The report's numbers: the evaluate stage's ``<arch>.json`` files read back, the leaderboard
DataFrame and metrics.json (its Markdown is ``leaderboard_markdown.py``). Any part of an
evaluation may be missing or null: its cells are then empty."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

# What the transfer column calls paying (one seed: no spread to exceed), and how close to its
# unigram baseline a pretraining may end and still be "on the plateau" (BENCHMARKS.md, "Time to pay":
# BERT's runs that ended 0.10-0.14 nats under it fine-tuned 19-31 points below their controls)
PAYS_POINTS = 3.0
PLATEAU_NATS = 0.25

# Column -> meaning, in table order; the Markdown header paragraph is built from it.
COLUMNS: dict[str, str] = {
    "architecture": "model family",
    "objective": "pretraining objective",
    "tokenizer": "tokenizer",
    "parameters": "trainable parameters",
    "steps": "pretraining optimizer steps",
    "pretrain_tokens": "input positions the pretraining trained on (padding included)",
    "pretrain_flops": "model FLOPs of the pretraining (6 N plus attention, the output layer at the predicted positions)",
    "pretrain_minutes": "processor minutes of the pretraining: CPU time on a CPU, wall time x GPUs on a GPU",
    "pretrain_mfu": "model FLOPs utilisation of the pretraining against the GPU's bf16 peak (none on a CPU)",
    "loss_start": "validation loss of the untrained model (the same measurement as val_loss); else the first train loss",
    "val_loss": "validation loss after pretraining (nats per predicted token)",
    "unigram_loss": "validation loss of a context-free unigram predictor (the baseline to beat)",
    "uniform_loss": "ln(vocabulary size), the loss of a uniform guess",
    "below_start": "val_loss < loss_start",
    "below_unigram": "val_loss < unigram_loss",
    "perplexity": "exp(val_loss)",
    "bits_per_byte": "validation loss in bits per UTF-8 byte of the predicted text",
    "unigram_bits_per_byte": "the unigram baseline in bits per byte",
    "token_accuracy": "share of predicted tokens (next / masked / span tokens) whose argmax is right",
    "task": "the fine-tuning task of the columns that follow",
    "task_accuracy": "fine-tuned accuracy on the task's test split (validation if no test)",
    "task_macro_f1": "fine-tuned macro-averaged F1 on the same split",
    "task_metric": "the task's own metric (GLUE's for a GLUE task: mcc for CoLA, f1 for MRPC and QQP; accuracy for other "
                   "classification; pearson for regression, entity f1 for tagging, SQuAD f1 for span QA, rougeL / bleu / "
                   "exact_match for generation)",
    "task_score": "fine-tuned task_metric on the same split",
    "majority_accuracy": "accuracy of always predicting the most frequent class",
    "bow_accuracy": "accuracy of a bag-of-words classifier",
    "scratch_accuracy": "the control: the same architecture fine-tuned from random initialisation with the same recipe and budget",
    "transfer_gain": "task_accuracy - scratch_accuracy: what pretraining is worth on the task",
    "beats_majority": "task_accuracy > majority_accuracy",
    "beats_bow": "task_accuracy > bow_accuracy",
    "beats_scratch": "task_accuracy > scratch_accuracy",
    "transfer": f"pays: transfer_gain at least {PAYS_POINTS:g} points; too short to pay: the pretraining ended within "
                f"{PLATEAU_NATS:g} nats of unigram_loss, where an encoder still reads little of its input and starts "
                "fine-tuning worse than random weights (BENCHMARKS.md, \"Time to pay\"), or had fewer CPU-minutes than "
                "its recipe's measured time to pay (time_to_pay): its gain is no finding; else no gain",
    "transfer_cost": "what the gain cost: transfer_gain in points for the pretraining's tokens, FLOPs and minutes",
    "harness_task": "the zero-shot task (evaluate.harness, the first listed) of the two columns that follow; "
                    "'not applicable' where the scorer does not read the architecture",
    "harness_acc": "the pretrained model's zero-shot accuracy on it (acc, lm-eval's definition)",
    "harness_floor_acc": "the same architecture's with random weights (train.seed): the floor to beat",
}
BOOLEAN_COLUMNS = ("below_start", "below_unigram", "beats_majority", "beats_bow", "beats_scratch")
TEXT_COLUMNS = ("architecture", "objective", "tokenizer", "task", "task_metric", "transfer", "transfer_cost",
                "harness_task")
# Columns of the Markdown table (unigram_bits_per_byte stays in the CSV and the plot only).
TABLE_COLUMNS = [c for c in COLUMNS if c not in ("unigram_bits_per_byte",)]


# ----------------------------------------------------------------------------- loading


def load_evaluations(directory: str | os.PathLike, order: Sequence[str] | None = None) -> list[dict]:
    """Every ``<arch>.json`` of ``directory`` (the ``evaluation`` folder itself, or the evaluate
    stage's output folder containing it), sorted by architecture name, or in the order of
    ``order`` when given (architectures it does not name follow, sorted by name)."""
    directory = Path(directory)
    if not directory.is_dir():
        raise FileNotFoundError(f"evaluation directory not found: {directory}")
    files = sorted(directory.glob("*.json"))
    if not files and (directory / "evaluation").is_dir():
        directory = directory / "evaluation"
        files = sorted(directory.glob("*.json"))
    if not files:
        raise ValueError(f"no evaluation JSON files (<architecture>.json) in {directory}")
    evaluations = []
    for path in files:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise ValueError(f"cannot read evaluation {path}: {exc}") from exc
        if not isinstance(data, dict):
            raise ValueError(f"evaluation {path} is not a JSON object")
        data.setdefault("architecture", path.stem)
        if not data["architecture"]:
            data["architecture"] = path.stem
        evaluations.append(data)
    rank = {name: i for i, name in enumerate(order or [])}
    evaluations.sort(key=lambda e: (rank.get(str(e["architecture"]), len(rank)), str(e["architecture"])))
    return evaluations


# ----------------------------------------------------------------------------- the table


def lookup(mapping: Any, *keys: str) -> Any:
    """``mapping[k1][k2]...``, or None where any level is missing, null or not a mapping."""
    for key in keys:
        if not isinstance(mapping, dict):
            return None
        mapping = mapping.get(key)
    return mapping


def _number(value: Any) -> float:
    if value is None or isinstance(value, bool):
        return math.nan
    try:
        number = float(value)
    except (TypeError, ValueError):
        return math.nan
    return number if math.isfinite(number) else math.nan


def _less(a: float, b: float) -> Any:
    """a < b, or pd.NA when either is unknown."""
    return pd.NA if math.isnan(a) or math.isnan(b) else bool(a < b)


def is_missing(value: Any) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def format_count(value: float) -> str:
    for size, suffix in ((1e15, "P"), (1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= size:
            return f"{value / size:.3g}{suffix}"
    return f"{value:.0f}"


def tasks(evaluations: Iterable[dict]) -> list[str]:
    """The fine-tuning tasks found, in order of first appearance."""
    found: list[str] = []
    for evaluation in evaluations:
        finetune = evaluation.get("finetune")
        if isinstance(finetune, dict):
            found.extend(t for t in finetune if t not in found)
    return found


def _task_row(evaluation: dict, task: str | None) -> dict[str, Any]:
    result = lookup(evaluation, "finetune", task) if task else None
    metrics = lookup(result, "test") or lookup(result, "validation")
    accuracy = _number(lookup(metrics, "accuracy"))
    majority = _number(lookup(result, "baselines", "majority", "accuracy"))
    bow = _number(lookup(result, "baselines", "bag_of_words", "accuracy"))
    scratch_metrics = lookup(result, "scratch", "test") or lookup(result, "scratch", "validation")
    scratch = _number(lookup(scratch_metrics, "accuracy"))
    metric = lookup(result, "metric") or "accuracy"
    return {
        "task": task,
        "task_accuracy": accuracy,
        "task_macro_f1": _number(lookup(metrics, "macro_f1")),
        "task_metric": metric if result is not None else None,
        "task_score": _number(lookup(metrics, metric)),
        "majority_accuracy": majority,
        "bow_accuracy": bow,
        "scratch_accuracy": scratch,
        "transfer_gain": accuracy - scratch,
        "beats_majority": _less(majority, accuracy),
        "beats_bow": _less(bow, accuracy),
        "beats_scratch": _less(scratch, accuracy),
    }


def on_plateau(val_loss: float | None, unigram: float | None) -> bool:
    """Whether a pretraining ended within :data:`PLATEAU_NATS` of its unigram baseline (False
    when either loss is unknown)."""
    known = all(v is not None and not math.isnan(v) for v in (val_loss, unigram))
    return known and val_loss > unigram - PLATEAU_NATS


def transfer_verdict(gain: float, val_loss: float, unigram: float, short: str | None = None) -> str | None:
    """``pays`` (a gain of at least :data:`PAYS_POINTS` points), ``too short to pay`` (the
    pretraining ended within :data:`PLATEAU_NATS` of its unigram baseline, or ``short`` says why
    its recipe's measured time to pay was not reached: :func:`short_of_time_to_pay`) or ``no
    gain``; None without a control."""
    if math.isnan(gain):
        return None
    if 100 * gain >= PAYS_POINTS:
        return "pays"
    if on_plateau(val_loss, unigram) or short:
        return "too short to pay"
    return "no gain"


def short_of_time_to_pay(evaluation: dict) -> str | None:
    """Why the pretraining of an evaluation was shorter than its recipe's transfer curve says it
    takes to pay (``time_to_pay``, measured in minutes of one CPU core), or None: no curve, a
    pretraining on a GPU (its minutes are not the curve's), or long enough."""
    from ...config.recipes import TimeToPay

    ttp, compute = evaluation.get("time_to_pay"), lookup(evaluation, "pretrain", "compute")
    if not isinstance(ttp, dict) or not isinstance(compute, dict) or compute.get("device") not in (None, "cpu"):
        return None
    minutes = _compute_row(compute)["pretrain_minutes"]
    return None if math.isnan(minutes) else TimeToPay.model_validate(ttp).short_of(minutes)


def _compute_row(compute: Any) -> dict[str, float]:
    """The pretraining's compute columns from its ``compute`` record (training.compute); NaN without one."""
    if not isinstance(compute, dict):
        return {"pretrain_tokens": math.nan, "pretrain_flops": math.nan, "pretrain_minutes": math.nan, "pretrain_mfu": math.nan}
    gpu = compute.get("device") not in (None, "cpu")
    seconds = _number(compute.get("seconds")) * (compute.get("devices") or 1) if gpu else _number(compute.get("cpu_seconds"))
    return {"pretrain_tokens": _number(compute.get("tokens")), "pretrain_flops": _number(compute.get("flops")),
            "pretrain_minutes": seconds / 60, "pretrain_mfu": _number(compute.get("mfu"))}


def _harness_row(harness: Any) -> dict[str, Any]:
    """The first zero-shot task's accuracy, pretrained and untrained (evaluation.zero_shot's record)."""
    if not isinstance(harness, dict) or not harness.get("tasks"):
        return {"harness_task": None, "harness_acc": math.nan, "harness_floor_acc": math.nan}
    if harness.get("not_applicable"):
        return {"harness_task": "not applicable", "harness_acc": math.nan, "harness_floor_acc": math.nan}
    if harness.get("skipped") and not harness.get("pretrained"):
        return {"harness_task": "skipped", "harness_acc": math.nan, "harness_floor_acc": math.nan}
    task = next(iter(harness.get("pretrained") or {}), None)
    return {"harness_task": task, "harness_acc": _number(lookup(harness, "pretrained", task, "acc")) if task else math.nan,
            "harness_floor_acc": _number(lookup(harness, "untrained", task, "acc")) if task else math.nan}


def compute_cost(compute: Any) -> str | None:
    """"12M tokens, 1.3P FLOP, 13.0 CPU-minutes" (None without a record): processor minutes on a
    CPU, GPU-minutes (wall time x GPUs) on GPUs."""
    if not isinstance(compute, dict):
        return None
    minutes = _compute_row(compute)["pretrain_minutes"]
    unit = "CPU" if compute.get("device") in (None, "cpu") else "GPU"
    return (f"{format_count(_number(compute.get('tokens')))} tokens, {format_count(_number(compute.get('flops')))} FLOP, "
            f"{minutes:.1f} {unit}-minutes")


def transfer_cost(gain: float, compute: Any) -> str | None:
    """"+9.6 points for 12M tokens, 1.3P FLOP, 13.0 CPU-minutes" (None without a gain or a record)."""
    cost = compute_cost(compute)
    return None if is_missing(gain) or cost is None else f"{100 * gain:+.1f} points for {cost}"


def leaderboard(evaluations: list[dict], task: str | None = None) -> pd.DataFrame:
    """One row per architecture (in the order given) with the columns of :data:`COLUMNS`.

    ``task`` picks the fine-tuning task of the downstream columns; by default the first task found.
    Booleans are pandas' nullable ``boolean``: <NA> where an input is missing."""
    available = tasks(evaluations)
    if task is None:
        task = available[0] if available else None
    elif available and task not in available:
        raise ValueError(f"task {task!r} is in no evaluation; tasks found: {', '.join(available)}")
    rows = []
    for evaluation in evaluations:
        validation = lookup(evaluation, "pretrain", "validation")
        # the untrained model's validation loss: the same measurement as val_loss (the first train
        # loss may add auxiliary terms such as NSP, or sum ELMo's two directions)
        start = lookup(evaluation, "pretrain", "validation_start", "loss")
        loss_start = _number(start if start is not None else lookup(evaluation, "pretrain", "train_loss_first"))
        val_loss = _number(lookup(validation, "loss"))
        unigram = _number(lookup(validation, "unigram_loss"))
        rows.append({
            "architecture": str(evaluation.get("architecture")),
            "objective": evaluation.get("objective"),
            "tokenizer": evaluation.get("tokenizer"),
            "parameters": _number(evaluation.get("parameters")),
            "steps": _number(lookup(evaluation, "pretrain", "steps")),
            **_compute_row(lookup(evaluation, "pretrain", "compute")),
            "loss_start": loss_start,
            "val_loss": val_loss,
            "unigram_loss": unigram,
            "uniform_loss": _number(lookup(validation, "uniform_loss")),
            "below_start": _less(val_loss, loss_start),
            "below_unigram": _less(val_loss, unigram),
            "perplexity": _number(lookup(validation, "perplexity")),
            "bits_per_byte": _number(lookup(validation, "bits_per_byte")),
            "unigram_bits_per_byte": _number(lookup(validation, "unigram_bits_per_byte")),
            "token_accuracy": _number(lookup(validation, "accuracy")),
            **_task_row(evaluation, task),
        })
        rows[-1]["transfer"] = transfer_verdict(rows[-1]["transfer_gain"], val_loss, unigram,
                                                short_of_time_to_pay(evaluation))
        rows[-1]["transfer_cost"] = transfer_cost(rows[-1]["transfer_gain"], lookup(evaluation, "pretrain", "compute"))
        rows[-1].update(_harness_row(evaluation.get("harness")))
    df = pd.DataFrame(rows, columns=list(COLUMNS))
    for column in COLUMNS:
        if column in BOOLEAN_COLUMNS:
            df[column] = df[column].astype("boolean")
        elif column in TEXT_COLUMNS:
            df[column] = df[column].astype(object).where(df[column].notna(), None)
        else:
            df[column] = pd.to_numeric(df[column], errors="coerce").astype("float64")
    for column in ("parameters", "steps", "pretrain_tokens"):
        df[column] = df[column].round().astype("Int64")
    return df


# ----------------------------------------------------------------------------- metrics.json


def leaderboard_metrics(df: pd.DataFrame) -> dict[str, Any]:
    metrics: dict[str, Any] = {}
    for _, row in df.iterrows():
        flat: dict[str, float | int] = {}
        for column in df.columns:
            value = row[column]
            if column in TEXT_COLUMNS or is_missing(value):
                continue
            if column in BOOLEAN_COLUMNS:
                flat[column] = int(bool(value))
            elif column in ("parameters", "steps"):
                flat[column] = int(value)
            else:
                flat[column] = float(value)
        metrics[str(row["architecture"])] = flat

    def count(column: str) -> int:
        return int(df[column].fillna(False).astype(bool).sum()) if len(df) else 0

    if "summary" in metrics:
        raise ValueError("an architecture named 'summary' collides with the metrics summary")
    metrics["summary"] = {
        "architectures": len(df),
        "finetuned": int(df["task_accuracy"].notna().sum()),
        **{column: count(column) for column in BOOLEAN_COLUMNS},
    }
    return metrics
