"""``lmforge evaluate``: gather each architecture's pretraining and fine-tuning numbers into
``<evaluate.output>/evaluation/<arch>.json`` (what the report reads), log an MLflow run per
architecture and apply the promotion gate: a registered model's ``champion`` alias moves to a new
version only when it beats the champion on the recipe's metric (fine-tuned: the test split's
``tracking.promotion_metric``, higher is better; pretrained: validation loss, lower is better).
The numbers themselves are measured at the end of pretraining and of fine-tuning; the samples
(what the pretrained model writes for fixed prompts, ``inference.samples``) and, when
``evaluate.harness`` lists tasks, the zero-shot harness scores (``evaluation.zero_shot``, under
``harness``) are made here (``evaluation/zero_shot.py``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import layout
from ..config import Params
from ..artifacts import atomic_write_json
from ..finetuning.headline import control_headline, family_of, headline, headline_metric
from ..progress import Progress


def _read(path: Path) -> dict | None:
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


def gather(params: Params, arch: str) -> dict[str, Any]:
    root = layout.architecture_dir(params, arch)
    pre = _read(root / "pretrain" / "metrics.json")
    if pre is None:
        raise FileNotFoundError(f"{arch}: no {root / 'pretrain' / 'metrics.json'}; run `lmforge pretrain {arch}` first")
    out: dict[str, Any] = {k: pre.get(k) for k in ("architecture", "objective", "tokenizer", "preset", "parameters")}
    out["pretrain"] = {k: pre.get(k) for k in ("steps", "train_loss_first", "train_loss_last", "seconds", "mlflow_run_id",
                                                "validation", "validation_start", "registered_model", "compute")}
    out["pretrain"]["history"] = str(root / "pretrain" / "history.csv")
    out["time_to_pay"] = recipe_time_to_pay(params, arch)
    out["finetune"] = {}
    for task in params.finetune.tasks:
        d = layout.finetune_dir(params, arch, task)
        ft = _read(d / "metrics.json")
        if ft is None:
            continue
        entry = {k: ft.get(k) for k in ("family", "mode", "metric", "steps", "seconds", "test", "validation", "baselines", "mlflow_run_id",
                                         "registered_model", "train_loss_first", "train_loss_last")}
        entry["history"] = str(d / "history.csv")
        scratch = _read(layout.finetune_scratch_dir(params, arch, task) / "metrics.json")
        if scratch is not None:  # the control: the same recipe from random initialisation
            entry["scratch"] = {k: scratch.get(k) for k in ("steps", "seconds", "test", "validation", "best_step")}
        out["finetune"][ft["task"]] = entry
    return out


def recipe_time_to_pay(params: Params, arch: str) -> dict[str, Any] | None:
    """What the transfer curve of ``arch``'s recipe (size ``train.size``) measured, or None where
    the recipe gives no ``time_to_pay``."""
    from ..config.recipes import load_recipe

    ttp = load_recipe(params, arch).sizes[params.train.size].time_to_pay
    return None if ttp is None else ttp.model_dump(mode="json")


def pretrained_samples(params: Params, arch: str) -> list[dict[str, str]]:
    """What the pretrained model of ``arch`` writes for the fixed prompts (``inference.samples``)."""
    from ..inference.loading import load
    from ..inference.samples import samples

    return samples(load(layout.pretrained_model_dir(params, arch)))


def transfer_gain(finetuned: dict[str, Any]) -> float | None:
    """The pretrained model's test headline (the task family's metric, ``finetuning.headline``:
    accuracy or GLUE's metric, Pearson, entity F1, SQuAD F1, ROUGE-L / BLEU / exact match) minus
    its from-scratch control's, when both exist."""
    ours, control = headline(finetuned), control_headline(finetuned)
    return None if ours is None or control is None else ours - control


def _numbers(scores: dict | None, prefix: str) -> dict[str, float]:
    """The numeric scores (a tagging task's per-type table is not an MLflow metric)."""
    return {f"{prefix}{k}": x for k, x in (scores or {}).items() if isinstance(x, (int, float)) and not isinstance(x, bool)}


def run_evaluate(params: Params, archs: list[str] | None = None, *, log: Callable[[str], None] = print,
                 tracker_factory=None) -> dict[str, dict]:
    from .. import tracking
    from ..tracking.factory import tracking_factory

    factory = tracker_factory or tracking_factory(params, log)
    uri = tracking.resolve_tracking_uri(params.tracking.uri)
    out_dir = layout.evaluations_dir(params)
    out_dir.mkdir(parents=True, exist_ok=True)
    results = {}
    archs = list(archs or params.train.architectures)
    with Progress(len(archs), "evaluate", "architectures") as progress:
        for done, arch in enumerate(archs):
            progress.update(done, arch)
            ev = gather(params, arch)
            ev["samples"] = pretrained_samples(params, arch)
            if params.evaluate.harness:  # zero-shot tasks (lm-eval's, where the eval extra is installed)
                from .zero_shot import harness_scores

                ev["harness"] = harness_scores(params, arch, log=log)
            ev["promotion"] = {}
            with factory(run_name=f"evaluate-{arch}", tags={"stage": "evaluate", "architecture": arch,
                                                             **tracking.run_tags(commit=tracking.git_commit("."), inputs={},
                                                                                 recipe=f"{params.train.recipes}/{arch}.yaml")}) as tracker:
                v = ev["pretrain"]["validation"] or {}
                tracker.log_metrics({f"pretrain/{k}": x for k, x in v.items() if isinstance(x, (int, float))})
                for name in ("pretrained", "untrained"):
                    for task, scores in (ev.get("harness") or {}).get(name, {}).items():
                        tracker.log_metrics(_numbers(scores, f"harness/{task}/{name}/"))
                gates = []
                reg = ev["pretrain"].get("registered_model")
                if reg and "loss" in v:
                    gates.append((reg, "validation_loss", v["loss"], False))
                for task, ft in ev["finetune"].items():
                    # the recipe's promotion metric for a classification task, the family's headline otherwise
                    metric = params.tracking.promotion_metric if family_of(ft) == "classification" else headline_metric(ft)
                    tracker.log_metrics(_numbers(ft.get("test"), f"{task}/test/"))
                    gain = transfer_gain(ft)
                    if gain is not None:
                        tracker.log_metrics(_numbers(ft["scratch"].get("test"), f"{task}/scratch/test/"))
                        tracker.log_metrics({f"{task}/transfer_gain": gain})
                    reg = ft.get("registered_model")
                    if reg and ft.get("test") and metric in ft["test"]:
                        gates.append((reg, f"test_{metric}", ft["test"][metric], True))
                if params.tracking.enabled and params.tracking.register_models:
                    for reg, metric, value, higher in gates:
                        promoted = tracking.promote_if_better(uri, reg["name"], reg["version"], metric, value, higher_is_better=higher)
                        ev["promotion"][reg["name"]] = {"version": reg["version"], "metric": metric, "value": value,
                                                        "champion": promoted}
                        log(f"evaluate {arch}: {reg['name']} v{reg['version']} {metric}={value:.4f} -> "
                            + ("champion" if promoted else "champion unchanged (not better)"))
                tracker.log_dict(ev, f"evaluation_{arch}.json")
                if ev["samples"]:
                    tracker.log_dict(ev["samples"], f"samples_{arch}.json")
            atomic_write_json(out_dir / f"{arch}.json", ev)
            results[arch] = ev
        progress.update(len(archs), "")
    return results
