"""``lmforge pretrain <arch>``: pretrain one architecture on its objective, as its recipe says.

Writes ``<train.output>/<arch>/pretrain/``: ``model/`` (safetensors weights + the config to
rebuild it + the tokenizer), ``history.csv`` (loss, learning rate, tokens per second per logged
step), ``loss.png`` (those curves, the loss against the unigram baseline) and ``metrics.json``
(the intrinsic evaluation of ``evaluation/intrinsic.py`` on the validation split, with the first
and last training losses). It trains in an attempt folder beside it,
``<train.output>/<arch>/.pretrain.attempts/<fingerprint>/`` (``run.Attempt``): the checkpoints
(``last.ckpt``, ``best.ckpt``; a re-run with the same settings resumes from ``last.ckpt``, data
position included) and the output being written, which replaces the previous output only when
complete. One MLflow run per execution; the model is registered as ``lmforge-<arch>`` with the
alias ``candidate``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import lightning.pytorch as pl
import torch

from .. import layout
from ..artifacts import atomic_write_json, fingerprint, finished
from ..config import ConfigError, Params
from ..evaluation.intrinsic import evaluate_lm, target_counts, tokenizer_bytes_per_token
from ..models.registry import build_model
from ..tracking.factory import tracking_factory
from ..datasets.open import open_objective
from ..objectives.registry import tokenizer_kind
from .data import ObjectiveDataModule
from .budget import WallClockBudget
from .module import LMForgeModule
from .progress import TrainingProgress
from ..config.recipes import Recipe, load_recipe, recipe_path, size_recipe, unset_budget
from .compute import compute_record, device_name, labelled_fraction
from .phases import PhaseClock
from .run_charts import draw_run_charts
from .tokenizer_config import tokenizer_overrides
from .run import (History, build_trainer, check_trainable, evaluation_device, resolve_precision, start_attempt,
                  world_size)


def batch_size_for(params: Params, recipe: Recipe, per_device: int, ordered: bool) -> int:
    """Examples per device per micro-batch. For ordered streams (Transformer-XL's segments) the
    dataset's rows are the global batch and are split across devices."""
    if not ordered:
        return per_device
    rows = getattr(params.dataset, recipe.objective).batch_size
    world = world_size()
    if rows % world:
        raise ConfigError(f"dataset.{recipe.objective}.batch_size ({rows}) must be divisible by the number of processes ({world})")
    return rows // world


def run_pretrain(params: Params, arch: str, *, log: Callable[[str], None] = print, tracker_factory=None) -> dict[str, Any]:
    """Pretrain ``arch``; returns the metrics written to ``metrics.json``."""
    recipe = load_recipe(params, arch)
    size = size_recipe(params, recipe)
    optim = size.pretrain
    out_dir = layout.pretrain_dir(params, arch)
    kind = tokenizer_kind(recipe.objective)
    tok_dir = layout.tokenizer_dir(params, kind)
    store_manifest = layout.token_store_dir(params, kind) / "manifest.json"
    if not store_manifest.exists():
        raise ConfigError(f"{arch}: no token store at {store_manifest.parent}; run `lmforge tokenize` first")
    # what pretraining reads of the recipe, no more: a fine-tuning change leaves the pretrained model current
    read = {"architecture": arch, "objective": recipe.objective, "head": recipe.pretrain_head, "preset": size.preset,
            "model": size.model, "pretrain": size.pretrain.model_dump(mode="json", exclude=unset_budget(size.pretrain))}
    if size.pretrain_model:  # (absent from the fingerprint when unused: models pretrained before it stay current)
        read["pretrain_model"] = size.pretrain_model
    fp = fingerprint("pretrain", read,
                     getattr(params.dataset, recipe.objective).model_dump(mode="json"), params.dataset.seed,
                     params.train.seed, params.train.precision, store_manifest.read_text(encoding="utf-8"))
    prev = finished(out_dir / "metrics.json", fp)
    if prev is not None:
        log(f"pretrain {arch}: up to date")
        return prev

    make_tracker = tracker_factory or tracking_factory(params, log)  # an unreachable tracking server fails here, before any work
    if params.train.threads:
        torch.set_num_threads(params.train.threads)
    pl.seed_everything(params.train.seed, workers=True, verbose=False)
    train_obj = open_objective(params, recipe.objective, "train")
    val_obj = open_objective(params, recipe.objective, "validation")
    vocab = train_obj.vocab
    overrides = {**tokenizer_overrides(size.preset, vocab), **size.model}
    check_trainable(params.train, size.preset, recipe.pretrain_head, overrides,
                    f"{recipe_path(params, arch)}: sizes.{params.train.size}")  # before any weight is allocated
    # pretraining-only settings (e.g. no dropout) change no weight: the saved model records `overrides` alone
    model = build_model(size.preset, head=recipe.pretrain_head, **{**overrides, **size.pretrain_model})  # pretraining's own win
    ordered = bool(getattr(train_obj, "ordered", False))
    batch_size = batch_size_for(params, recipe, optim.batch_size, ordered)
    carry_memory = arch == "transformer_xl"
    budget = WallClockBudget(optim.budget_minutes) if optim.budget_minutes else None
    module = LMForgeModule(model, optim, carry_memory=carry_memory, compile=params.train.compile,
                           compile_mode=params.train.compile_mode,
                           finite_check_every=params.train.log_every * optim.accumulate_grad_batches, budget=budget)
    data = ObjectiveDataModule(train_obj, val_obj, batch_size=batch_size,
                               micro_steps=optim.max_steps * optim.accumulate_grad_batches, seed=params.dataset.seed,
                               pad_id=vocab.pad if vocab.pad is not None else 0, ordered=ordered,
                               num_workers=params.train.num_workers, eval_batches=optim.eval_batches,
                               micro_steps_done=lambda: module.micro_steps_done)
    attempt = start_attempt(out_dir, fp, log, restart=params.train.restart)
    resume = attempt.resume
    n_params = sum(p.numel() for p in model.parameters())
    phases = PhaseClock()
    first_batches = list(_train_batches(data, 50))  # the unigram baseline's counts and the predicted share
    counts = target_counts(first_batches, recipe.objective, vocab.size)
    predicted = labelled_fraction(first_batches)
    bytes_per_token = tokenizer_bytes_per_token(tok_dir)

    # the stage's own validation passes run on the device it trains on (on a CPU beside a GPU a base
    # model's pass took minutes), the model back on the CPU after each: the Trainer places it (and
    # builds the optimizer) as on a run without the first pass, and its teardown at the end of fit
    # leaves it on the CPU before the last
    device = evaluation_device(params.train)

    def intrinsic() -> dict[str, float]:
        model.to(device)
        try:
            return evaluate_lm(model, data.validation_loader(params.evaluate.validation_batches), recipe.objective,
                               vocab_size=vocab.size, unigram_counts=counts, bytes_per_token=bytes_per_token,
                               carry_memory=carry_memory, device=device, precision=resolve_precision(params.train))
        finally:
            model.cpu()

    # where the untrained model stands (the same initial weights on a resumed run: same seed)
    start = intrinsic() if data.val_data is not None else None
    phases.mark("baselines")  # the unigram counts from the first batches, the untrained model's validation

    from .. import tracking
    from ..models.folder import save_model_dir

    tracker = make_tracker(
        run_name=f"pretrain-{arch}",
        tags={**tracking.run_tags(commit=tracking.git_commit("."),
                                  inputs=tracking.dvc_hashes([tok_dir, store_manifest.parent, recipe_path(params, arch)]),
                                  recipe=f"{params.train.recipes}/{arch}.yaml"),
              "stage": "pretrain", "architecture": arch, "objective": recipe.objective})
    started, cpu_started = time.time(), time.process_time()
    with tracker:
        tracker.log_params({"architecture": arch, "objective": recipe.objective, "tokenizer": kind, "preset": size.preset,
                            "model": overrides, "optim": optim.model_dump(mode="json"), "parameters": n_params,
                            "train": params.train.model_dump(mode="json"),
                            "dataset": getattr(params.dataset, recipe.objective).model_dump(mode="json")})
        history = History(params.train.log_every, sink=tracker.log_metrics)
        callbacks = [history, TrainingProgress(f"pretrain {arch}", history, budget=budget), phases]
        trainer = build_trainer(params, optim, attempt.dir, callbacks + ([budget] if budget else []),
                                has_validation=data.val_data is not None)
        length = f"{optim.budget_minutes:g} minutes" if budget else f"{optim.max_steps} steps"
        log(f"pretrain {arch}: {size.preset} ({n_params / 1e6:.2f}M parameters), {recipe.objective} on {kind} tokens, "
            f"{length} x {batch_size * world_size()} examples" + (f", resuming from {resume}" if resume else ""))
        trainer.fit(module, datamodule=data, ckpt_path=str(resume) if resume else None, weights_only=True)
        if not trainer.is_global_zero:
            return {}
        # intrinsic evaluation on the whole validation split, against the unigram baseline of the train targets
        final = intrinsic()
        phases.mark("final_evaluation")
        metrics = {
            "architecture": arch, "objective": recipe.objective, "tokenizer": kind, "preset": size.preset,
            "parameters": n_params, "steps": trainer.global_step, "optim": optim.model_dump(mode="json"),
            "examples_seen": module.micro_steps_done * batch_size * world_size(),
            "train_loss_first": history.first("train/loss"), "train_loss_last": history.last("train/loss"),
            "validation": final, "validation_start": start, "seconds": round(time.time() - started, 1), "fingerprint": fp,
            "compute": compute_record(model, tokens=history.tokens, examples=module.micro_steps_done * batch_size * world_size(),
                                      seconds=time.time() - started, cpu_seconds=time.process_time() - cpu_started,
                                      predicted_fraction=predicted,
                                      device=device_name(device),
                                      devices=world_size()),
            "mlflow_run_id": tracker.run_id,
        }
        staged = attempt.staging  # the output, put in place of out_dir once complete
        model_dir = save_model_dir(model.cpu(), size.preset, recipe.pretrain_head, overrides, staged / "model",
                                   extra_files={"tokenizer": tok_dir})
        history.write_csv(staged / "history.csv")
        charts = draw_run_charts(staged, history.rows, f"{arch} pretraining ({recipe.objective})", log,
                                 baseline=final.get("unigram_loss"))
        tracker.log_metrics({f"final/{k}": v for k, v in final.items() if isinstance(v, (int, float))})
        tracker.log_artifact(staged / "history.csv")
        for chart in charts:
            tracker.log_artifact(chart)
        tracker.log_dict({"recipe": recipe.model_dump(mode="json"), "params": params.model_dump(mode="json")}, "resolved_config.json")
        tracker.log_artifact(tok_dir, "tokenizer")
        if params.tracking.register_models:
            version = tracker.log_model(model_dir, name="model", registered_name=f"lmforge-{arch}")
            metrics["registered_model"] = {"name": f"lmforge-{arch}", "version": str(version.version)} if version else None
        phases.mark("outputs")  # the model, the history, the charts, the tracker's copies
        metrics["timings"] = phases.summary()
        atomic_write_json(staged / "metrics.json", metrics)
        attempt.publish(params.train.keep_attempts, log)
    v = final
    log(f"pretrain {arch}: validation loss {start['loss'] if start else float('nan'):.3f} -> "
        f"{v['loss']:.3f} (unigram {v.get('unigram_loss', float('nan')):.3f}, uniform {v['uniform_loss']:.3f}), "
        f"accuracy {v['accuracy']:.3f} in {metrics['seconds']:.0f}s ({phases.describe()})")
    return metrics


def _train_batches(data: ObjectiveDataModule, n: int):
    """The first ``n`` training batches of epoch 0 (for the unigram baseline's counts)."""
    from torch.utils.data import DataLoader

    from .data import StreamSampler

    sampler = StreamSampler(len(data.train_data), data.batch_size, n, seed=data.seed, shuffle=not data.ordered)
    return DataLoader(data.train_data, batch_size=data.batch_size, sampler=sampler, collate_fn=data.collate)
