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

Each family's inputs, head, scorer, baselines and closing log line are its room's
(``finetuning/<family>/``, listed in ``finetuning/families.py``); ``run_finetune`` drives them all
through ``finetuning.family.Family``: the run is planned and checked first (``finetune_plan.py``),
its model built (``finetune_model.py``), trained here, and its outputs written
(``finetune_outputs.py``).

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
import time
from collections.abc import Callable
from typing import Any

import lightning.pytorch as pl
import numpy as np
import torch

from ..artifacts import atomic_write_json, finished
from ..config import Params
from ..config.recipes import resolve_finetune_budget
from ..finetuning import features
from ..finetuning.family import FamilyInputs
from ..finetuning.tasks import Task
from ..tracking.factory import tracking_factory
from . import param_groups
from .data import ObjectiveDataModule
from .finetune_callbacks import BestOnValidation
from .finetune_model import build_finetune_model, head_model, warm_start
from .finetune_outputs import finetune_metrics, save_finetune_outputs
from .finetune_plan import FinetunePlan, plan_finetune
from .module import LMForgeModule, balanced_class_weights
from .phases import PhaseClock
from .progress import TrainingProgress
from .run import History, build_trainer, check_trainable, evaluation_device, start_attempt, world_size


class ExampleList:
    """Encoded examples in the ``Objective`` shape the data module reads (``example(i, rng)``)."""

    def __init__(self, examples: list[dict[str, np.ndarray]]):
        self.examples = examples

    def __len__(self) -> int:
        return len(self.examples)

    def example(self, index: int, rng=None) -> dict[str, np.ndarray]:
        return self.examples[index]


def run_finetune(params: Params, arch: str, task_spec: str, *, from_scratch: bool = False,
                 log: Callable[[str], None] = print, tracker_factory=None) -> dict[str, Any]:
    """Fine-tune ``arch`` on ``task_spec`` (``from_scratch``: the randomly initialised control);
    returns the metrics written to ``metrics.json``."""
    plan = plan_finetune(params, arch, task_spec, from_scratch)
    task, family, ft, tok_dir = plan.task, plan.family, plan.ft, plan.tok_dir
    prev = finished(plan.out_dir / "metrics.json", plan.fingerprint)
    if prev is not None:
        log(f"finetune {arch} on {task.name} ({plan.init}): up to date")
        return prev
    make_tracker = tracker_factory or tracking_factory(params, log)  # an unreachable tracking server fails here, before any work
    if params.train.threads:
        torch.set_num_threads(params.train.threads)
    pl.seed_everything(params.train.seed, workers=True, verbose=False)
    inputs = family.encode(augmented(plan, log), arch, tok_dir, params.finetune.max_length, plan.mode)
    optim = resolve_finetune_budget(plan.size.finetune, len(inputs.encoded["train"]), world_size())
    model, preset, overrides, head = initial_model(plan, inputs, log)
    frozen = param_groups.freeze(model, ft.freeze)
    model.train()  # a loaded model comes in eval mode, and Lightning trains in the mode it finds (dropout off)
    weighted = family.weighted_labels(inputs, ft)  # per class, or per tag (finetune.class_weights, tag_weights)
    class_weights = None if weighted is None else balanced_class_weights(weighted, inputs.num_labels)
    module = LMForgeModule(model, optim, class_weights=class_weights, layer_decay=ft.layer_decay,
                           finite_check_every=params.train.log_every * optim.accumulate_grad_batches)
    data = data_module(plan, inputs, optim, module)
    attempt = start_attempt(plan.out_dir, plan.fingerprint, log, restart=params.train.restart)
    budget = {"max_steps": optim.max_steps, "epochs": plan.size.finetune.epochs, "warmup_steps": optim.warmup_steps,
              "train_examples": len(inputs.encoded["train"]),
              "global_batch": optim.batch_size * optim.accumulate_grad_batches * world_size()}
    options = {"metric": plan.select, "patience": ft.patience, "class_weights": None if class_weights is None
               else [round(float(w), 6) for w in class_weights], "layer_decay": ft.layer_decay, "frozen": len(frozen)}
    validation_scorer = family.scorer(inputs, task, "validation", arch, tok_dir, data.collate)
    tracker = open_tracker(plan, make_tracker)
    started, cpu_started = time.time(), time.process_time()
    phases = PhaseClock()
    every = min(optim.eval_every, optim.max_steps)
    with tracker:
        tracker.log_params({"architecture": arch, "task": task.name, "mode": plan.mode, "preset": preset,
                            "init": plan.init, "optim": optim.model_dump(mode="json"),
                            "finetune": ft.model_dump(mode="json"), "budget": budget, "task_summary": task.summary()})
        history = History(params.train.log_every, sink=tracker.log_metrics)
        selection = BestOnValidation(validation_scorer, plan.select, attempt.checkpoints, every=every,
                                     patience=ft.patience, history=history, log=log)
        progress = TrainingProgress(f"finetune {arch} on {task.name} ({plan.init})", history)
        trainer = build_trainer(params, optim, attempt.dir, [history, selection, progress, phases], has_validation=True,
                                best_on_loss=False)
        epochs = f" ({plan.size.finetune.epochs:g} epochs)" if plan.size.finetune.epochs else ""
        log(f"finetune {arch} on {task.name} ({plan.mode}, {plan.init}): {len(inputs.encoded['train'])} training "
            f"examples, {optim.max_steps} steps{epochs} x {budget['global_batch']}, validation {plan.select} every "
            f"{every} steps" + (f", resuming from {attempt.resume}" if attempt.resume else ""))
        trainer.fit(module, datamodule=data, ckpt_path=str(attempt.resume) if attempt.resume else None,
                    weights_only=True)
        if not trainer.is_global_zero:
            return {}
        # scored on the device it trained on: Lightning's teardown at the end of fit has moved the
        # model to the CPU
        device = evaluation_device(params.train)
        model.to(device)
        selection.finish(trainer, module, device)  # the best validation weights, before the test split is scored
        phases.mark("best_weights")
        results = {"validation": validation_scorer(model, device)}
        results["test"], test_record = family.score_test(inputs, task, arch, tok_dir, data.collate, model,
                                                         device)  # classification: its confusion matrix too
        phases.mark("scoring")
        baselines = family.baselines(task, params.train.seed)
        phases.mark("baselines")  # the task's own baselines, fitted here (bag of words: a logistic regression)
        metrics = finetune_metrics(plan, preset=preset, steps=trainer.global_step, selection=selection,
                                   history=history, results=results, test_record=test_record, baselines=baselines,
                                   budget=budget, options=options, model=model, device=device,
                                   collate=data.collate, inputs=inputs, seconds=time.time() - started,
                                   cpu_seconds=time.process_time() - cpu_started, run_id=tracker.run_id)
        model.cpu()
        save_finetune_outputs(plan, attempt.staging, metrics, model=model, preset=preset, head=head,
                              overrides=overrides, inputs=inputs, history=history, tracker=tracker, log=log)
        phases.mark("outputs")
        metrics["timings"] = phases.summary()
        atomic_write_json(attempt.staging / "metrics.json", metrics)
        attempt.publish(params.train.keep_attempts, log)
    log(f"finetune {arch} on {task.name} ({plan.init}): best validation {family.select_prefix}{plan.select} "
        f"{selection.best_value:.3f} at step {selection.best_step} of {trainer.global_step}; "
        f"{family.summary(metrics, plan.select)} in {metrics['seconds']:.0f}s ({phases.describe()})")
    return metrics


def augmented(plan: FinetunePlan, log: Callable[[str], None]) -> Task:
    """The task the model trains on: the planned task, with the recipe's augmented training
    examples added (the baselines and the summary keep the task's own examples)."""
    if plan.augmenter is None:
        return plan.task
    from ..inference.augment import augment
    from ..inference.loading import load

    task, aug = plan.task, plan.ft.augment
    made = augment(task.splits["train"], load(plan.augmenter), aug.copies, aug.rate, seed=plan.params.train.seed)
    log(f"finetune {plan.arch} on {task.name}: {len(made)} augmented training examples from {aug.model}'s masked LM")
    return dataclasses.replace(task, splits={**task.splits, "train": [*task.splits["train"], *made]})


def initial_model(plan: FinetunePlan, inputs: FamilyInputs,
                  log: Callable[[str], None]) -> tuple[torch.nn.Module, str, dict, str]:
    """The model training starts from, under the family's head: (model, preset, config overrides,
    head). The control is initialised from the run's seed; the pretrained model gets the recipe's
    warm start, from the control's very initialisation."""
    params, arch, ft = plan.params, plan.arch, plan.ft
    options = {"lm_coef": ft.lm_coef, "freeze": ft.freeze_pretrained, "pooling": ft.pooling}
    if plan.scratch:
        preset, overrides, seq2seq_head = plan.spec
        check_trainable(params.train, preset, seq2seq_head, overrides,
                        f"{plan.recipe_file}: sizes.{params.train.size}")  # before any weight is allocated
        torch.manual_seed(params.train.seed)
        model, overrides, head = head_model(arch, inputs.head, preset, overrides, seq2seq_head, inputs.num_labels,
                                            **options)
        return model, preset, overrides, head
    model, preset, overrides, head = build_finetune_model(plan.pretrained_dir, arch, inputs.head, inputs.num_labels,
                                                          **options)
    if ft.shrink_perturb is not None or ft.reinit_top_layers:
        torch.manual_seed(params.train.seed)  # the from-scratch control's very initialisation
        fresh, _, _ = head_model(arch, inputs.head, preset, overrides, head, inputs.num_labels, **options)
        log(warm_start(model, fresh, ft))
    return model, preset, overrides, head


def data_module(plan: FinetunePlan, inputs: FamilyInputs, optim: Any, module: LMForgeModule) -> ObjectiveDataModule:
    """The encoded training and validation splits as Lightning's data module, in the run's seeded order."""
    params = plan.params
    pad = features.pad_id(plan.arch, plan.tok_dir)
    data = ObjectiveDataModule(ExampleList(inputs.encoded["train"]), ExampleList(inputs.encoded["validation"]),
                               batch_size=optim.batch_size, micro_steps=optim.max_steps * optim.accumulate_grad_batches,
                               seed=params.train.seed, pad_id=pad, ordered=False, num_workers=params.train.num_workers,
                               eval_batches=optim.eval_batches, micro_steps_done=lambda: module.micro_steps_done)
    data.collate = lambda examples: features.collate(examples, pad)  # type: ignore[method-assign]
    return data


def open_tracker(plan: FinetunePlan, make_tracker: Callable) -> Any:
    """The run's tracker (MLflow), its name and tags saying what it trained from."""
    from .. import layout, tracking

    params, arch = plan.params, plan.arch
    inputs = [plan.tok_dir] if plan.scratch else [plan.pretrained_dir, plan.tok_dir]
    return make_tracker(
        run_name=f"finetune-{arch}-{layout.task_slug(plan.task.name)}" + ("-scratch" if plan.scratch else ""),
        tags={**tracking.run_tags(commit=tracking.git_commit("."), inputs=tracking.dvc_hashes(inputs),
                                  recipe=f"{params.train.recipes}/{arch}.yaml"),
              "stage": "finetune", "architecture": arch, "task": plan.task.name, "init": plan.init})
