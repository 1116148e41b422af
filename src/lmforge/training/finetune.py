"""``lmforge finetune <arch> --task <task>``: fine-tune a pretrained model on a downstream task.

Starts from ``<train.output>/<arch>/pretrain/model`` (safetensors; never unpickled). The task's
family (``finetuning.tasks.FAMILIES``) decides the head:

- classification: encoder models, GPT, Transformer-XL, XLNet and ELMo get their
  sequence-classification head (the input layouts of ``finetuning/features.py``: GPT-1's
  start/delimiter/extract transformation, XLNet's trailing ``<cls>``, ELMo's frozen biLM with a
  learned scalar mix); T5, BART and Switch are fine-tuned text to text (the label word is the
  target) and evaluated by scoring each label's target sequence (rank classification);
- regression: every architecture's sequence head with one output (mean squared error);
- tagging and span QA: the tagging or span head (``models/token_classification.py``) of every
  architecture whose recipe fine-tunes with heads (``mode: classification``); those whose recipe
  says ``text_to_text`` (T5, BART, Switch) write the entities or the answer as text instead;
- generation: BART, T5 and Switch sequence to sequence, GPT as a conditional LM.

Each family's inputs, scorer, baselines and closing log line are its room's (``finetuning/<family>/``,
listed in ``finetuning/families.py``); ``run_finetune`` drives them all through ``finetuning.family.Family``.

Model selection is on the recipe's ``finetune.metric`` for classification, on the family's own
metric otherwise (``load_task``'s ``task.info["metric"]``); the baselines are the family's
(``finetuning.headline`` names the one number each is judged on).

Writes ``<train.output>/<arch>/<task>/``: ``model/``, ``history.csv``, ``loss.png``,
``metrics.json`` (validation and test scores with the family's baselines on the same split; a
classification task's test confusion matrix too, drawn as ``confusion.png``), trained in an
attempt folder beside it that holds
the checkpoints and replaces the output only when complete (``run.Attempt``). Registered as
``lmforge-<arch>-<task>`` (alias ``candidate``); ``lmforge evaluate`` decides whether it becomes
``champion``.

The budget is the recipe's ``max_steps`` or ``epochs`` (``recipes.resolve_finetune_budget``),
a task family's own where the recipe's ``finetune_families`` gives one.
Every ``eval_every`` steps the whole validation split is scored by the family's scorer on the
selected metric; the weights of the best evaluation are restored before the test split is
scored, and ``patience`` stops a run that no longer improves (``finetune_callbacks.py``).

``from_scratch`` (``lmforge finetune --from-scratch``; a stage of its own while
``finetune.scratch_control`` is on) is the control
that says whether pretraining paid: the same architecture, head and config, randomly
initialised with the run's seed and trained with the same recipe and budget, written to
``<train.output>/<arch>/<task>-scratch/`` and never registered.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import numpy as np
import torch

from .. import layout
from ..artifacts import atomic_write_json, fingerprint, finished, sha256_file
from ..config import ConfigError, Params
from ..finetuning import features
from ..finetuning.eval_batches import ordered_batches
from ..finetuning.families import family_for
from ..finetuning.tasks import load_task
from ..models.registry import ARCHITECTURES, CLASSIFIER_HEADS, build_model, preset_config
from ..objectives.base import Vocab
from ..tokenizer_kinds import ARCHITECTURE_TOKENIZER
from . import param_groups
from .data import ObjectiveDataModule
from .finetune_callbacks import BestOnValidation
from .module import LMForgeModule, balanced_class_weights
from .progress import TrainingProgress
from .pretrain import draw_run_charts, tokenizer_overrides, tracking_factory
from .recipes import (FinetuneRecipe, Recipe, SizeRecipe, load_recipe, recipe_path, resolve_finetune_budget, size_recipe,
                      unset_budget)
from .compute import compute_record, device_name, labelled_fraction
from .phases import PhaseClock
from .run import History, build_trainer, check_trainable, start_attempt, world_size
from .warm_start import reinit_top_layers, shrink_and_perturb

class ExampleList:
    """Encoded examples in the ``Objective`` shape the data module reads (``example(i, rng)``)."""

    def __init__(self, examples: list[dict[str, np.ndarray]]):
        self.examples = examples

    def __len__(self) -> int:
        return len(self.examples)

    def example(self, index: int, rng=None) -> dict[str, np.ndarray]:
        return self.examples[index]


def model_spec(pretrained_dir: Path, recipe: Recipe, size: SizeRecipe, tok_dir: Path) -> tuple[str, dict, str]:
    """(preset, config overrides, seq2seq head) of the pretrained model: from its
    ``lmforge_model.json``, or, when there is none, as pretraining would build it (the recipe's
    preset and overrides, the tokenizer's vocabulary and special ids)."""
    meta_path = pretrained_dir / "lmforge_model.json"
    if meta_path.exists():
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        return meta["preset"], dict(meta["config_overrides"]), meta["head"]
    overrides = {**tokenizer_overrides(size.preset, Vocab.from_tokenizer(tok_dir)), **size.model}
    return size.preset, overrides, recipe.pretrain_head


def head_model(arch: str, mode: str, preset: str, overrides: dict, seq2seq_head: str, num_labels: int, *,
               lm_coef: float = 0.0, freeze: bool = False, pooling: str = "default") -> tuple[torch.nn.Module, dict, str]:
    """The fine-tuning model, randomly initialised: (model, config overrides, head). Text to
    text keeps the pretraining head; the others get their classification head, reading the
    sequence as ``pooling`` says (``default``: the architecture's own)."""
    if mode == "text_to_text":
        return build_model(preset, head=seq2seq_head, **overrides), overrides, seq2seq_head
    if arch == "elmo":
        overrides = {**overrides, "freeze_bilm": freeze}
    if mode in ("tagging", "span_qa"):  # every position scored: the pooling does not apply
        config = preset_config(preset, **overrides)
        head = "token_classification" if mode == "tagging" else "span_extraction"
        return ARCHITECTURES[arch].heads[head](config, num_labels=num_labels), overrides, head
    if mode == "regression":
        mode = "classification"  # the sequence head with one output (num_labels 1: mean squared error)
    if pooling != "default" and arch != "elmo":  # ELMo's classifier averages its mixed layers already
        if "classifier_pooling" not in {f.name for f in dataclasses.fields(preset_config(preset))}:
            raise ConfigError(f"{arch}: the finetune pooling {pooling!r} is not available for this architecture")
        overrides = {**overrides, "classifier_pooling": pooling}
    config = preset_config(preset, **overrides)
    cls = ARCHITECTURES[arch].heads["classification"]
    model = cls(config, num_labels=num_labels, lm_coef=lm_coef) if arch == "gpt" else cls(config, num_labels=num_labels)
    return model, overrides, "classification"


def warm_start_unused(ft: FinetuneRecipe, scratch: bool) -> set[str]:
    """The warm-start options a fingerprint leaves out: all of them for the control (they change
    nothing there), and those left at their defaults (runs made before they existed stay current)."""
    keys = {"shrink_perturb": None, "reinit_top_layers": 0}
    return {k for k, default in keys.items() if scratch or getattr(ft, k) == default}


def warm_start(model: torch.nn.Module, fresh: torch.nn.Module, ft: FinetuneRecipe) -> str:
    """Apply the recipe's ``reinit_top_layers`` then ``shrink_perturb`` to the pretrained ``model``
    (``fresh``: the control's initial model); what was done, in words."""
    done = []
    if ft.reinit_top_layers:
        names = reinit_top_layers(model, fresh, ft.reinit_top_layers)
        done.append(f"the top {ft.reinit_top_layers} layer(s) re-initialised ({len(names)} tensors)")
    if ft.shrink_perturb is not None:
        shrink, perturb = ft.shrink_perturb
        shrink_and_perturb(model, fresh, shrink, perturb)
        done.append(f"weights shrunk x{shrink:g} and perturbed by x{perturb:g} of the control's initialisation")
    return "warm start: " + "; ".join(done)


def build_finetune_model(pretrained_dir: Path, arch: str, mode: str, num_labels: int, *, lm_coef: float = 0.0,
                         freeze: bool = False, pooling: str = "default") -> tuple[torch.nn.Module, str, dict, str]:
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
    model, overrides, head = head_model(arch, mode, preset, overrides, meta["head"], num_labels, lm_coef=lm_coef,
                                        freeze=freeze, pooling=pooling)
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
    return model, preset, overrides, head


def run_finetune(params: Params, arch: str, task_spec: str, *, from_scratch: bool = False,
                 log: Callable[[str], None] = print, tracker_factory=None) -> dict[str, Any]:
    """Fine-tune ``arch`` on ``task_spec`` (``from_scratch``: the randomly initialised control);
    returns the metrics written to ``metrics.json``."""
    scratch = from_scratch
    init = "scratch" if scratch else "pretrained"
    recipe = load_recipe(params, arch)
    size = size_recipe(params, recipe)
    ft = recipe.finetune
    pretrained_dir = layout.pretrained_model_dir(params, arch)
    out_dir = (layout.finetune_scratch_dir if scratch else layout.finetune_dir)(params, arch, task_spec)
    tok_dir = layout.tokenizer_dir(params, ARCHITECTURE_TOKENIZER[arch])
    pretrained_weights = pretrained_dir / "model.safetensors"
    if scratch:
        preset, overrides, seq2seq_head = model_spec(pretrained_dir, recipe, size, tok_dir)
        source: Any = {"preset": preset, "config_overrides": overrides, "head": seq2seq_head}
    elif not pretrained_weights.exists():
        raise ConfigError(f"{arch}: no pretrained model in {pretrained_dir}; run `lmforge pretrain {arch}` first")
    else:
        source = sha256_file(pretrained_weights)
    task = load_task(task_spec, params, seed=params.train.seed, max_train=params.finetune.max_train_examples)
    family = family_for(task, ft.mode)  # its inputs, scorer, baselines and summary (finetuning/families.py)
    size = size_recipe(params, recipe, task.family)  # the family's own budget where the recipe gives one
    family.check(task, arch, ft, recipe_path(params, arch))
    mode = family.mode(ft.mode)
    select = family.select(task, ft)  # the metric model selection follows
    augmenter = None
    if ft.augment is not None:  # the masked LM that makes the new examples is an input too
        augmenter = layout.pretrained_model_dir(params, ft.augment.model)
        if not (augmenter / "model.safetensors").exists():
            raise ConfigError(f"{arch}: augmentation needs the pretrained {ft.augment.model} in {augmenter}; "
                              f"run `lmforge pretrain {ft.augment.model}` first")
    fp = fingerprint("finetune", init, task_spec, task.summary(), ft.model_dump(mode="json", exclude=warm_start_unused(ft, scratch)),
                     size.finetune.model_dump(mode="json", exclude=unset_budget(size.finetune)),
                     params.finetune.max_length, params.train.seed, source,
                     *([sha256_file(augmenter / "model.safetensors")] if augmenter else []))
    prev = finished(out_dir / "metrics.json", fp)
    if prev is not None:
        log(f"finetune {arch} on {task.name} ({init}): up to date")
        return prev

    make_tracker = tracker_factory or tracking_factory(params, log)  # an unreachable tracking server fails here, before any work
    if params.train.threads:
        torch.set_num_threads(params.train.threads)
    pl.seed_everything(params.train.seed, workers=True, verbose=False)
    trained_on = task  # the task the model trains on; the baselines and the summary keep the task's own examples
    if augmenter is not None:
        from ..inference.augment import augment
        from ..inference.loading import load

        made = augment(task.splits["train"], load(augmenter), ft.augment.copies, ft.augment.rate, seed=params.train.seed)
        log(f"finetune {arch} on {task.name}: {len(made)} augmented training examples from {ft.augment.model}'s masked LM")
        trained_on = dataclasses.replace(task, splits={**task.splits, "train": [*task.splits["train"], *made]})
    inputs = family.encode(trained_on, arch, tok_dir, params.finetune.max_length, mode)
    encoded, num_labels, model_mode = inputs.encoded, inputs.num_labels, inputs.model_mode
    optim = resolve_finetune_budget(size.finetune, len(encoded["train"]), world_size())
    pad = features.pad_id(arch, tok_dir)
    if scratch:
        check_trainable(params.train, preset, seq2seq_head, overrides,
                        f"{recipe_path(params, arch)}: sizes.{params.train.size}")  # before any weight is allocated
        torch.manual_seed(params.train.seed)
        model, overrides, head = head_model(arch, model_mode, preset, overrides, seq2seq_head, num_labels,
                                            lm_coef=ft.lm_coef, freeze=ft.freeze_pretrained, pooling=ft.pooling)
    else:
        model, preset, overrides, head = build_finetune_model(pretrained_dir, arch, model_mode, num_labels,
                                                              lm_coef=ft.lm_coef, freeze=ft.freeze_pretrained,
                                                              pooling=ft.pooling)
        if ft.shrink_perturb is not None or ft.reinit_top_layers:
            torch.manual_seed(params.train.seed)  # the from-scratch control's very initialisation
            fresh, _, _ = head_model(arch, model_mode, preset, overrides, head, num_labels, lm_coef=ft.lm_coef,
                                     freeze=ft.freeze_pretrained, pooling=ft.pooling)
            log(warm_start(model, fresh, ft))
    frozen = param_groups.freeze(model, ft.freeze)
    model.train()  # a loaded model comes in eval mode, and Lightning trains in the mode it finds (dropout off)
    weighted = family.weighted_labels(inputs, ft)  # per class, or per tag (finetune.class_weights, tag_weights)
    class_weights = None if weighted is None else balanced_class_weights(weighted, num_labels)
    module = LMForgeModule(model, optim, class_weights=class_weights, layer_decay=ft.layer_decay,
                           finite_check_every=params.train.log_every * optim.accumulate_grad_batches)
    data = ObjectiveDataModule(ExampleList(encoded["train"]), ExampleList(encoded["validation"]),
                               batch_size=optim.batch_size, micro_steps=optim.max_steps * optim.accumulate_grad_batches,
                               seed=params.train.seed, pad_id=pad, ordered=False, num_workers=params.train.num_workers,
                               eval_batches=optim.eval_batches, micro_steps_done=lambda: module.micro_steps_done)
    data.collate = lambda examples: features.collate(examples, pad)  # type: ignore[method-assign]
    attempt = start_attempt(out_dir, fp, log, restart=params.train.restart)
    resume = attempt.resume
    staged = attempt.staging  # the output, put in place of out_dir once complete
    slug = layout.task_slug(task.name)
    budget = {"max_steps": optim.max_steps, "epochs": size.finetune.epochs, "warmup_steps": optim.warmup_steps,
              "train_examples": len(encoded["train"]),
              "global_batch": optim.batch_size * optim.accumulate_grad_batches * world_size()}
    options = {"metric": select, "patience": ft.patience, "class_weights": None if class_weights is None
               else [round(float(w), 6) for w in class_weights], "layer_decay": ft.layer_decay, "frozen": len(frozen)}
    validation_scorer = family.scorer(inputs, task, "validation", arch, tok_dir, data.collate)

    from .. import tracking
    from ..models.folder import save_model_dir

    tracker = make_tracker(
        run_name=f"finetune-{arch}-{slug}" + ("-scratch" if scratch else ""),
        tags={**tracking.run_tags(commit=tracking.git_commit("."),
                                  inputs=tracking.dvc_hashes([tok_dir] if scratch else [pretrained_dir, tok_dir]),
                                  recipe=f"{params.train.recipes}/{arch}.yaml"),
              "stage": "finetune", "architecture": arch, "task": task.name, "init": init})
    started, cpu_started = time.time(), time.process_time()
    phases = PhaseClock()
    with tracker:
        tracker.log_params({"architecture": arch, "task": task.name, "mode": mode, "preset": preset, "init": init,
                            "optim": optim.model_dump(mode="json"), "finetune": ft.model_dump(mode="json"),
                            "budget": budget, "task_summary": task.summary()})
        history = History(params.train.log_every, sink=tracker.log_metrics)
        selection = BestOnValidation(validation_scorer, select, attempt.checkpoints,
                                     every=min(optim.eval_every, optim.max_steps), patience=ft.patience,
                                     history=history, log=log)
        progress = TrainingProgress(f"finetune {arch} on {task.name} ({init})", history)
        trainer = build_trainer(params, optim, attempt.dir, [history, selection, progress, phases], has_validation=True,
                                best_on_loss=False)
        epochs = f" ({size.finetune.epochs:g} epochs)" if size.finetune.epochs else ""
        log(f"finetune {arch} on {task.name} ({mode}, {init}): {len(encoded['train'])} training examples, "
            f"{optim.max_steps} steps{epochs} x {budget['global_batch']}, validation {select} every "
            f"{min(optim.eval_every, optim.max_steps)} steps" + (f", resuming from {resume}" if resume else ""))
        trainer.fit(module, datamodule=data, ckpt_path=str(resume) if resume else None, weights_only=True)
        if not trainer.is_global_zero:
            return {}
        selection.finish(trainer, module)  # the best validation weights, before the test split is scored
        phases.mark("best_weights")
        results = {"validation": validation_scorer(model, module.device)}
        results["test"], test_record = family.score_test(inputs, task, arch, tok_dir, data.collate, model,
                                                         module.device)  # classification: its confusion matrix too
        phases.mark("scoring")
        baseline_scores = family.baselines(task, params.train.seed)
        phases.mark("baselines")  # the task's own baselines, fitted here (bag of words: a logistic regression)
        metrics = {
            "architecture": arch, "task": task.name, "family": task.family, "mode": mode, "preset": preset, "init": init,
            "metric": task.info.get("metric", "accuracy"),  # the task's own (GLUE's for a GLUE task)
            "steps": trainer.global_step, "best_step": selection.best_step,
            f"best_validation_{select}": selection.best_value, "selection": selection.summary(),
            "budget": budget, "options": options,
            "train_loss_first": history.first("train/loss"), "train_loss_last": history.last("train/loss"),
            **results, **test_record,
            "baselines": baseline_scores,
            "task_summary": task.summary(), "seconds": round(time.time() - started, 1), "fingerprint": fp,
            "mlflow_run_id": tracker.run_id,
            # the output layer over the vocabulary runs only when the answer is written (text to text)
            "compute": compute_record(
                model, tokens=history.tokens, examples=trainer.global_step * budget["global_batch"],
                seconds=time.time() - started, cpu_seconds=time.process_time() - cpu_started,
                predicted_fraction=(labelled_fraction(ordered_batches(encoded["train"][:256], data.collate))
                                    if mode == "text_to_text" else 0.0),
                device=device_name(module.device), devices=world_size()),
        }
        # the task record (labels, input layout) also travels inside the model folder, so that
        # the folder alone predicts on new text (lmforge predict, the registered MLflow model)
        # a tagging or span QA model written as text is its family's ("mode"), not a text-to-text classifier
        (staged / "labels.json").write_text(json.dumps({"labels": task.label_names,
                                                         "mode": family.saved_mode(mode), "targets": inputs.candidates,
                                                         "prefix": task.prefix, "pair": task.pair,
                                                         "max_length": params.finetune.max_length}, indent=2) + "\n",
                                            encoding="utf-8")
        model_dir = save_model_dir(model.cpu(), preset, head, overrides, staged / "model",
                                   num_labels=num_labels if head in CLASSIFIER_HEADS else None,
                                   extra_files={"tokenizer": tok_dir, "task.json": staged / "labels.json"})
        history.write_csv(staged / "history.csv")
        charts = draw_run_charts(staged, history.rows, f"{arch} fine-tuning on {task.name} ({init})", log,
                                 confusion=test_record.get("test_confusion"))
        tracker.log_metrics({f"{split}/{k}": v for split in ("validation", "test") for k, v in results[split].items()
                             if isinstance(v, (int, float))})
        tracker.log_metrics({"best_step": selection.best_step, f"validation/best_{select}": selection.best_value})
        for name, b in metrics["baselines"].items():
            tracker.log_metrics({f"baseline/{name}/{k}": v for k, v in b.items() if isinstance(v, (int, float))})
        tracker.log_artifact(staged / "history.csv")
        for chart in charts:
            tracker.log_artifact(chart)
        tracker.log_artifact(staged / "labels.json")
        if params.tracking.register_models and not scratch:
            name = f"lmforge-{arch}-{slug}"
            version = tracker.log_model(model_dir, name="model", registered_name=name)
            metrics["registered_model"] = {"name": name, "version": str(version.version)} if version else None
        phases.mark("outputs")
        metrics["timings"] = phases.summary()
        atomic_write_json(staged / "metrics.json", metrics)
        attempt.publish(params.train.keep_attempts, log)
    log(f"finetune {arch} on {task.name} ({init}): best validation {family.select_prefix}{select} "
        f"{selection.best_value:.3f} at step {selection.best_step} of {trainer.global_step}; "
        f"{family.summary(metrics, select)} in {metrics['seconds']:.0f}s ({phases.describe()})")
    return metrics
