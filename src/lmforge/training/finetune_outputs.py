"""What a finished fine-tuning leaves: its ``metrics.json`` record (``finetune_metrics``) and the
files beside it, the model folder that predicts on its own, the history and charts, and their
copies in MLflow, the model registered there (``save_finetune_outputs``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import layout
from ..finetuning.eval_batches import ordered_batches
from ..finetuning.family import FamilyInputs
from ..models.registry import CLASSIFIER_HEADS
from .compute import compute_record, device_name, labelled_fraction
from .finetune_plan import FinetunePlan
from .run_charts import draw_run_charts
from .run import world_size


def finetune_metrics(plan: FinetunePlan, *, preset: str, steps: int, selection: Any, history: Any,
                     results: dict[str, Any], test_record: dict[str, Any], baselines: dict[str, dict],
                     budget: dict[str, Any], options: dict[str, Any], model: Any, device: Any, collate: Callable,
                     inputs: FamilyInputs, seconds: float, cpu_seconds: float, run_id: str | None) -> dict[str, Any]:
    """The run's record: its validation and test scores, the family's baselines on the same
    split, the selection, the budget and the compute it took."""
    task, select = plan.task, plan.select
    return {
        "architecture": plan.arch, "task": task.name, "family": task.family, "mode": plan.mode, "preset": preset,
        "init": plan.init,
        "metric": task.info.get("metric", "accuracy"),  # the task's own (GLUE's for a GLUE task)
        "steps": steps, "best_step": selection.best_step,
        f"best_validation_{select}": selection.best_value, "selection": selection.summary(),
        "budget": budget, "options": options,
        "train_loss_first": history.first("train/loss"), "train_loss_last": history.last("train/loss"),
        **results, **test_record,
        "baselines": baselines,
        "task_summary": task.summary(), "seconds": round(seconds, 1), "fingerprint": plan.fingerprint,
        "mlflow_run_id": run_id,
        # the output layer over the vocabulary runs only when the answer is written (text to text)
        "compute": compute_record(
            model, tokens=history.tokens, examples=steps * budget["global_batch"],
            seconds=seconds, cpu_seconds=cpu_seconds,
            predicted_fraction=(labelled_fraction(ordered_batches(inputs.encoded["train"][:256], collate))
                                if plan.mode == "text_to_text" else 0.0),
            device=device_name(device), devices=world_size()),
    }


def save_finetune_outputs(plan: FinetunePlan, staged: Path, metrics: dict[str, Any], *, model: Any, preset: str,
                          head: str, overrides: dict, inputs: FamilyInputs, history: Any, tracker: Any,
                          log: Callable[[str], None]) -> None:
    """The model folder, ``labels.json``, ``history.csv`` and the charts in ``staged``, logged to
    the run's tracker; the model registered unless this is the control (``metrics`` gains its
    ``registered_model``)."""
    from ..models.folder import save_model_dir

    params, task, arch = plan.params, plan.task, plan.arch
    # the task record (labels, input layout) also travels inside the model folder, so that
    # the folder alone predicts on new text (lmforge predict, the registered MLflow model)
    # a tagging or span QA model written as text is its family's ("mode"), not a text-to-text classifier
    (staged / "labels.json").write_text(json.dumps({"labels": task.label_names,
                                                     "mode": plan.family.saved_mode(plan.mode),
                                                     "targets": inputs.candidates,
                                                     "prefix": task.prefix, "pair": task.pair,
                                                     "max_length": params.finetune.max_length}, indent=2) + "\n",
                                        encoding="utf-8")
    model_dir = save_model_dir(model.cpu(), preset, head, overrides, staged / "model",
                               num_labels=inputs.num_labels if head in CLASSIFIER_HEADS else None,
                               extra_files={"tokenizer": plan.tok_dir, "task.json": staged / "labels.json"})
    history.write_csv(staged / "history.csv")
    charts = draw_run_charts(staged, history.rows, f"{arch} fine-tuning on {task.name} ({plan.init})", log,
                             confusion=metrics.get("test_confusion"))
    tracker.log_metrics({f"{split}/{k}": v for split in ("validation", "test") for k, v in metrics[split].items()
                         if isinstance(v, (int, float))})
    tracker.log_metrics({"best_step": metrics["best_step"],
                         f"validation/best_{plan.select}": metrics[f"best_validation_{plan.select}"]})
    for name, b in metrics["baselines"].items():
        tracker.log_metrics({f"baseline/{name}/{k}": v for k, v in b.items() if isinstance(v, (int, float))})
    tracker.log_artifact(staged / "history.csv")
    for chart in charts:
        tracker.log_artifact(chart)
    tracker.log_artifact(staged / "labels.json")
    if params.tracking.register_models and not plan.scratch:
        name = f"lmforge-{arch}-{layout.task_slug(task.name)}"
        version = tracker.log_model(model_dir, name="model", registered_name=name)
        metrics["registered_model"] = {"name": name, "version": str(version.version)} if version else None
