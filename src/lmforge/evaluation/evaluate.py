"""``lmforge evaluate``: gather each architecture's measured numbers, gate promotions, log them.

The numbers themselves are measured where the model is at hand, on splits no training step
saw: the intrinsic evaluation at the end of pretraining (validation split of the objective,
against its unigram baseline), the downstream evaluation at the end of fine-tuning (the task's
test split, against the majority-class and bag-of-words baselines). This stage writes one
``<evaluate.output>/evaluation/<arch>.json`` per architecture (what the leaderboard reads),
logs an MLflow run per architecture, and applies the promotion gate: a registered model's
``champion`` alias moves to the new version only when it beats the current champion on the
recipe's metric (fine-tuned models: ``tracking.promotion_metric`` on the test split, higher is
better; pretrained models: validation loss, lower is better).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..config import Params
from ..artifacts import atomic_write_json


def _read(path: Path) -> dict | None:
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


def gather(params: Params, arch: str) -> dict[str, Any]:
    from ..training.recipes import finetune_dir

    root = Path(params.train.output) / arch
    pre = _read(root / "pretrain" / "metrics.json")
    if pre is None:
        raise FileNotFoundError(f"{arch}: no {root / 'pretrain' / 'metrics.json'}; run `lmforge pretrain {arch}` first")
    out: dict[str, Any] = {k: pre.get(k) for k in ("architecture", "objective", "tokenizer", "preset", "parameters")}
    out["pretrain"] = {k: pre.get(k) for k in ("steps", "train_loss_first", "train_loss_last", "seconds", "mlflow_run_id",
                                                "validation", "validation_start", "registered_model")}
    out["pretrain"]["history"] = str(root / "pretrain" / "history.csv")
    out["finetune"] = {}
    for task in params.finetune.tasks:
        d = finetune_dir(params, arch, task)
        ft = _read(d / "metrics.json")
        if ft is None:
            continue
        entry = {k: ft.get(k) for k in ("mode", "steps", "seconds", "test", "validation", "baselines", "mlflow_run_id",
                                         "registered_model", "train_loss_first", "train_loss_last")}
        entry["history"] = str(d / "history.csv")
        out["finetune"][ft["task"]] = entry
    return out


def run_evaluate(params: Params, archs: list[str] | None = None, *, log: Callable[[str], None] = print,
                 tracker_factory=None) -> dict[str, dict]:
    from .. import tracking
    from ..training.pretrain import tracking_factory

    factory = tracker_factory or tracking_factory(params)
    uri = tracking.resolve_tracking_uri(params.tracking.uri)
    out_dir = Path(params.evaluate.output) / "evaluation"
    out_dir.mkdir(parents=True, exist_ok=True)
    results = {}
    for arch in archs or params.train.architectures:
        ev = gather(params, arch)
        ev["promotion"] = {}
        with factory(run_name=f"evaluate-{arch}", tags={"stage": "evaluate", "architecture": arch,
                                                         **tracking.run_tags(commit=tracking.git_commit("."), inputs={},
                                                                             recipe=f"{params.train.recipes}/{arch}.yaml")}) as tracker:
            v = ev["pretrain"]["validation"] or {}
            tracker.log_metrics({f"pretrain/{k}": x for k, x in v.items() if isinstance(x, (int, float))})
            gates = []
            reg = ev["pretrain"].get("registered_model")
            if reg and "loss" in v:
                gates.append((reg, "validation_loss", v["loss"], False))
            for task, ft in ev["finetune"].items():
                metric = params.tracking.promotion_metric
                tracker.log_metrics({f"{task}/test/{k}": x for k, x in (ft.get("test") or {}).items()})
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
        atomic_write_json(out_dir / f"{arch}.json", ev)
        results[arch] = ev
    return results
