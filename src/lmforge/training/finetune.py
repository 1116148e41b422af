"""``lmforge finetune <arch> --task <task>``: fine-tune a pretrained model on a downstream task.

Starts from ``<train.output>/<arch>/pretrain/model`` (safetensors; never unpickled). Encoder
models, GPT, Transformer-XL, XLNet and ELMo get their sequence-classification head (the input
layouts of ``finetuning/features.py``: GPT-1's start/delimiter/extract transformation, XLNet's
trailing ``<cls>``, ELMo's frozen biLM with a learned scalar mix); T5, BART and Switch are
fine-tuned text to text (the label word is the target) and evaluated by scoring each label's
target sequence (rank classification: the label the model finds most likely wins).

Writes ``<train.output>/<arch>/<task>/``: ``model/``, ``history.csv``, ``loss.png``,
``metrics.json`` (validation and test accuracy / macro-F1 with the majority-class and
bag-of-words baselines of the same split). Registered as ``lmforge-<arch>-<task>`` (alias
``candidate``); ``lmforge evaluate`` decides whether it becomes ``champion``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import numpy as np
import torch
import torch.nn.functional as F

from .. import layout
from ..artifacts import atomic_write_json, fingerprint, finished, sha256_file
from ..config import ConfigError, Params
from ..finetuning import baselines, features
from ..finetuning.tasks import load_task
from ..models.registry import ARCHITECTURES, preset_config
from ..objectives.base import IGNORE_INDEX
from ..tokenizer_kinds import ARCHITECTURE_TOKENIZER
from .data import ObjectiveDataModule
from .module import LMForgeModule
from .pretrain import plot_history, tracking_factory
from .recipes import load_recipe, size_recipe
from .run import History, build_trainer, prepare_checkpoints, world_size


class ExampleList:
    """Encoded examples in the ``Objective`` shape the data module reads (``example(i, rng)``)."""

    def __init__(self, examples: list[dict[str, np.ndarray]]):
        self.examples = examples

    def __len__(self) -> int:
        return len(self.examples)

    def example(self, index: int, rng=None) -> dict[str, np.ndarray]:
        return self.examples[index]


def build_finetune_model(pretrained_dir: Path, arch: str, mode: str, num_labels: int, *, lm_coef: float = 0.0,
                         freeze: bool = False) -> tuple[torch.nn.Module, str, dict, str]:
    """The fine-tuning model with the pretrained weights: (model, preset, config overrides, head)."""
    from ..models.folder import load_model_dir

    meta_path = pretrained_dir / "lmforge_model.json"
    if not meta_path.exists():
        raise ConfigError(f"{arch}: no pretrained model in {pretrained_dir}; run `lmforge pretrain {arch}` first")
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    pretrained = load_model_dir(pretrained_dir)
    preset, overrides = meta["preset"], dict(meta["config_overrides"])
    if mode == "text_to_text":
        return pretrained, preset, overrides, meta["head"]
    if arch == "elmo":
        overrides["freeze_bilm"] = freeze
    config = preset_config(preset, **overrides)
    cls = ARCHITECTURES[arch].heads["classification"]
    model = cls(config, num_labels=num_labels, lm_coef=lm_coef) if arch == "gpt" else cls(config, num_labels=num_labels)
    # The heads share the backbone's parameter names; the pretraining head's own weights (the
    # LM softmax, NSP) are left behind and the classifier's are new. A shared name with another
    # shape, or a model that would be mostly new, means the checkpoint is not this backbone.
    source, target = pretrained.state_dict(), model.state_dict()
    shared = sorted(set(source) & set(target))
    mismatched = [k for k in shared if source[k].shape != target[k].shape]
    if mismatched:
        raise ConfigError(f"{arch}: pretrained weights have other shapes than the fine-tuning model, e.g. {mismatched[:5]}")
    loaded_values = sum(target[k].numel() for k in shared)
    if loaded_values < 0.5 * sum(v.numel() for v in target.values()):
        raise ConfigError(f"{arch}: the pretrained weights cover only {loaded_values} of the fine-tuning model's values")
    model.load_state_dict({k: source[k] for k in shared}, strict=False)
    return model, preset, overrides, "classification"


@torch.no_grad()
def predict(model: torch.nn.Module, batches, mode: str, candidates: dict[int, list[int]] | None = None,
            device="cpu") -> tuple[list[int], list[int]]:
    """(predicted class ids, gold class ids). Text-to-text: each candidate target sequence is
    scored by its summed token log-likelihood and the most likely label is predicted."""
    was_training = model.training
    model.eval()
    preds: list[int] = []
    gold: list[int] = []
    try:
        for batch in batches:
            batch = {k: v.to(device) for k, v in batch.items()}
            if mode == "classification":
                logits = model(**{k: v for k, v in batch.items() if k != "labels"}).logits
                preds += logits.argmax(-1).tolist()
                gold += batch["labels"].tolist()
                continue
            B = batch["input_ids"].shape[0]
            gold += _gold_from_targets(batch["labels"], candidates)
            scores = torch.empty(B, len(candidates), device=device)
            for j, (cid, target) in enumerate(sorted(candidates.items())):
                labels = torch.tensor(target, device=device).expand(B, -1)
                logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], labels=labels).logits
                nll = F.cross_entropy(logits.float().transpose(1, 2), labels, reduction="none").sum(-1)
                scores[:, j] = -nll
            order = sorted(candidates)
            preds += [order[i] for i in scores.argmax(-1).tolist()]
    finally:
        model.train(was_training)
    return preds, gold


def _gold_from_targets(labels: torch.Tensor, candidates: dict[int, list[int]]) -> list[int]:
    out = []
    by_target = {tuple(t): cid for cid, t in candidates.items()}
    for row in labels.tolist():
        key = tuple(x for x in row if x != IGNORE_INDEX)
        if key not in by_target:
            raise ValueError(f"a target sequence {key} is not one of the label targets")
        out.append(by_target[key])
    return out


def run_finetune(params: Params, arch: str, task_spec: str, *, log: Callable[[str], None] = print,
                 tracker_factory=None) -> dict[str, Any]:
    """Fine-tune ``arch`` on ``task_spec``; returns the metrics written to ``metrics.json``."""
    recipe = load_recipe(params, arch)
    size = size_recipe(params, recipe)
    optim = size.finetune
    mode = recipe.finetune.mode
    pretrained_dir = layout.pretrained_model_dir(params, arch)
    out_dir = layout.finetune_dir(params, arch, task_spec)
    tok_dir = layout.tokenizer_dir(params, ARCHITECTURE_TOKENIZER[arch])
    pretrained_meta = pretrained_dir / "model.safetensors"
    if not pretrained_meta.exists():
        raise ConfigError(f"{arch}: no pretrained model in {pretrained_dir}; run `lmforge pretrain {arch}` first")
    task = load_task(task_spec, params, seed=params.train.seed, max_train=params.finetune.max_train_examples)
    fp = fingerprint("finetune", task_spec, task.summary(), recipe.finetune.model_dump(mode="json"),
                     optim.model_dump(mode="json"), params.finetune.max_length, params.train.seed,
                     sha256_file(pretrained_meta))
    prev = finished(out_dir / "metrics.json", fp)
    if prev is not None:
        log(f"finetune {arch} on {task.name}: up to date")
        return prev

    if params.train.threads:
        torch.set_num_threads(params.train.threads)
    pl.seed_everything(params.train.seed, workers=True, verbose=False)
    label_ids = {name: i for i, name in enumerate(task.label_names)}
    encoded = {split: features.encode_split(task, split, arch, tok_dir, params.finetune.max_length, label_ids, mode=mode)
               for split in ("train", "validation", "test")}
    pad = features.pad_id(arch, tok_dir)
    model, preset, overrides, head = build_finetune_model(
        pretrained_dir, arch, mode, len(task.label_names), lm_coef=recipe.finetune.lm_coef,
        freeze=recipe.finetune.freeze_pretrained)
    candidates = None
    if mode == "text_to_text":
        targets = features.label_token_ids(task, arch, tok_dir)
        candidates = {label_ids[name]: ids for name, ids in targets.items()}
    module = LMForgeModule(model, optim)
    data = ObjectiveDataModule(ExampleList(encoded["train"]), ExampleList(encoded["validation"]),
                               batch_size=optim.batch_size, micro_steps=optim.max_steps * optim.accumulate_grad_batches,
                               seed=params.train.seed, pad_id=pad, ordered=False, num_workers=params.train.num_workers,
                               eval_batches=optim.eval_batches, micro_steps_done=lambda: module.micro_steps_done)
    data.collate = lambda examples: features.collate(examples, pad)  # type: ignore[method-assign]
    resume = prepare_checkpoints(out_dir, fp, log)
    slug = layout.task_slug(task.name)

    from .. import tracking
    from ..models.folder import save_model_dir

    tracker = (tracker_factory or tracking_factory(params))(
        run_name=f"finetune-{arch}-{slug}",
        tags={**tracking.run_tags(commit=tracking.git_commit("."),
                                  inputs=tracking.dvc_hashes([pretrained_dir, tok_dir]),
                                  recipe=f"{params.train.recipes}/{arch}.yaml"),
              "stage": "finetune", "architecture": arch, "task": task.name})
    started = time.time()
    with tracker:
        tracker.log_params({"architecture": arch, "task": task.name, "mode": mode, "preset": preset,
                            "optim": optim.model_dump(mode="json"), "finetune": recipe.finetune.model_dump(mode="json"),
                            "task_summary": task.summary()})
        history = History(params.train.log_every, sink=tracker.log_metrics)
        trainer = build_trainer(params, optim, out_dir, [history], has_validation=True)
        log(f"finetune {arch} on {task.name} ({mode}): {len(encoded['train'])} training examples, "
            f"{optim.max_steps} steps x {optim.batch_size * world_size()}" + (f", resuming from {resume}" if resume else ""))
        trainer.fit(module, datamodule=data, ckpt_path=str(resume) if resume else None, weights_only=True)
        if not trainer.is_global_zero:
            return {}
        results: dict[str, Any] = {}
        for split in ("validation", "test"):
            loader = torch.utils.data.DataLoader(ExampleList(encoded[split]).examples, batch_size=64, shuffle=False,
                                                 collate_fn=data.collate)
            preds, gold = predict(model, loader, mode, candidates, device=module.device)
            names = task.label_names
            p, g = [names[i] for i in preds], [names[i] for i in gold]
            results[split] = {"accuracy": baselines.accuracy(p, g), "macro_f1": baselines.macro_f1(p, g, names),
                              "examples": len(g)}
        metrics = {
            "architecture": arch, "task": task.name, "mode": mode, "preset": preset, "steps": trainer.global_step,
            "train_loss_first": history.first("train/loss"), "train_loss_last": history.last("train/loss"),
            **results,
            "baselines": {"majority": baselines.majority_baseline(task), "bag_of_words": baselines.bag_of_words_baseline(task, seed=params.train.seed)},
            "task_summary": task.summary(), "seconds": round(time.time() - started, 1), "fingerprint": fp,
            "mlflow_run_id": tracker.run_id,
        }
        model_dir = save_model_dir(model.cpu(), preset, head, overrides, out_dir / "model",
                                   num_labels=len(task.label_names) if head == "classification" else None,
                                   extra_files={"tokenizer": tok_dir})
        (out_dir / "labels.json").write_text(json.dumps({"labels": task.label_names, "mode": mode,
                                                         "targets": candidates}, indent=2) + "\n", encoding="utf-8")
        history.write_csv(out_dir / "history.csv")
        plot_history(history.rows, out_dir / "loss.png", f"{arch} fine-tuning on {task.name}")
        tracker.log_metrics({f"{split}/{k}": v for split in ("validation", "test") for k, v in results[split].items()})
        for name, b in metrics["baselines"].items():
            tracker.log_metrics({f"baseline/{name}/{k}": v for k, v in b.items() if isinstance(v, (int, float))})
        tracker.log_artifact(out_dir / "history.csv")
        tracker.log_artifact(out_dir / "loss.png")
        tracker.log_artifact(out_dir / "labels.json")
        if params.tracking.register_models:
            name = f"lmforge-{arch}-{slug}"
            version = tracker.log_model(model_dir, name="model", registered_name=name)
            metrics["registered_model"] = {"name": name, "version": str(version.version)} if version else None
        atomic_write_json(out_dir / "metrics.json", metrics)
    t = metrics["test"]
    log(f"finetune {arch} on {task.name}: test accuracy {t['accuracy']:.3f}, macro-F1 {t['macro_f1']:.3f} "
        f"(majority {metrics['baselines']['majority']['accuracy']:.3f}, bag of words "
        f"{metrics['baselines']['bag_of_words']['accuracy']:.3f}) in {metrics['seconds']:.0f}s")
    return metrics
