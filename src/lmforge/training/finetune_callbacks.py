"""Model selection during fine-tuning: the task's metric on the validation split every
``eval_every`` steps, the best weights kept and restored at the end, early stopping.

``transformers``' ``eval_strategy="steps"`` + ``load_best_model_at_end`` +
``metric_for_best_model`` + ``EarlyStoppingCallback`` in one Lightning callback. The metric is
computed by the caller's ``evaluate(model, device)`` (the same prediction code as the final
evaluation), after Lightning's validation loop at the same cadence. A strictly better value
replaces the best (so on ties the earlier step wins); its weights go to a safetensors file next
to the checkpoints, so a resumed run keeps its best. The test split is never looked at here.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch
from torch import nn

Evaluate = Callable[[nn.Module, Any], dict[str, float]]


def save_weights(model: nn.Module, path: Path) -> None:
    """Every tensor of ``model``'s state under its own name, copied to the CPU. (safetensors'
    ``save_model`` refuses tensors that are views into a larger buffer, as an LSTM's weights are
    on a GPU, where cuDNN packs them into one; tied weights are simply written once per name.)"""
    from safetensors.torch import save_file

    save_file({k: v.detach().to("cpu", copy=True).contiguous() for k, v in model.state_dict().items()}, str(path))


def load_weights(model: nn.Module, path: Path) -> None:
    """The weights :func:`save_weights` wrote, every name required, copied into ``model`` where it is."""
    from safetensors.torch import load_file

    model.load_state_dict(load_file(str(path)), strict=True)


class BestOnValidation(pl.Callback):
    """Evaluate ``metric`` (higher is better) after every validation pass (every ``every``
    optimizer steps); keep the best weights in ``weights_dir`` (``best-step-<k>.safetensors``);
    stop after ``patience`` evaluations without improvement (None: never). Call :meth:`finish`
    after ``trainer.fit``: it scores the last step if no pass did, and puts the best weights back
    into the model.

    Resuming: Lightning saves a checkpoint before the validation pass of the same step and skips
    that pass when it resumes there, so the pass is made up on ``on_train_start`` (the restored
    weights are the ones it would have seen). The weights file of the best a checkpoint records
    is kept until a later checkpoint records another, so every checkpoint finds its best."""

    def __init__(self, evaluate: Evaluate, metric: str, weights_dir: str | Path, *, every: int,
                 patience: int | None = None, history=None, log: Callable[[str], None] | None = None):
        self.evaluate = evaluate
        self.metric = metric
        self.weights_dir = Path(weights_dir)
        self.every = every
        self.patience = patience
        self.history = history
        self.say = log
        self.best_step: int | None = None
        self.best_value = -math.inf
        self.bad_evaluations = 0
        self.last_step: int | None = None
        self.evaluations: list[dict[str, float]] = []
        self.stopped_early = False
        self._checkpointed_best: int | None = None  # the best_step the latest checkpoint holds

    def weights_file(self, step: int) -> Path:
        return self.weights_dir / f"best-step-{step}.safetensors"

    # ------------------------------------------------------------------ the evaluations

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        step = trainer.global_step
        if step and step % self.every == 0 and step != self.last_step:
            self._evaluate(trainer, pl_module)

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not trainer.sanity_checking and trainer.global_step != self.last_step:
            self._evaluate(trainer, pl_module)

    def _evaluate(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        scores = self.evaluate(pl_module.model, pl_module.device) if trainer.is_global_zero else None
        scores = trainer.strategy.broadcast(scores, src=0)  # every rank takes rank 0's decision
        self._record(trainer.global_step, scores, pl_module.model, rank_zero=trainer.is_global_zero)
        if self.patience is not None and self.bad_evaluations >= self.patience:
            trainer.should_stop = True
            self.stopped_early = True
            self._say(f"early stop at step {trainer.global_step}: no better validation {self.metric} in "
                      f"{self.patience} evaluations (best {self.best_value:.4f} at step {self.best_step})")

    def _record(self, step: int, scores: dict[str, float], model: nn.Module, *, rank_zero: bool) -> None:
        if self.metric not in scores:
            raise KeyError(f"the validation scores have no {self.metric!r} (they have {sorted(scores)})")
        value = float(scores[self.metric])
        self.last_step = step
        self.evaluations.append({"step": step, **{k: float(v) for k, v in scores.items()}})
        improved = value > self.best_value
        if improved:
            self.best_step, self.best_value, self.bad_evaluations = step, value, 0
            if rank_zero:  # the weights files and the history are rank 0's
                self._save(model, step)
        else:
            self.bad_evaluations += 1
        if self.history is not None and rank_zero:
            self.history.merge(step, {f"validation/{k}": float(v) for k, v in scores.items() if k != "examples"})
        self._say(f"step {step}: validation {self.metric} {value:.4f}" + (" (best)" if improved else
                                                                          f" (best {self.best_value:.4f} at step {self.best_step})"))

    def _save(self, model: nn.Module, step: int) -> None:
        self.weights_dir.mkdir(parents=True, exist_ok=True)
        path = self.weights_file(step)
        tmp = path.with_name(path.name + ".tmp")
        save_weights(model, tmp)
        tmp.replace(path)
        self._prune(keep={step, self._checkpointed_best})

    def _prune(self, keep: set[int | None]) -> None:
        for old in self.weights_dir.glob("best-step-*.safetensors"):
            if int(old.name.removeprefix("best-step-").removesuffix(".safetensors")) not in keep:
                old.unlink(missing_ok=True)

    def finish(self, trainer: pl.Trainer, pl_module: pl.LightningModule, device: torch.device) -> None:
        """After ``fit`` (rank 0): score the last step on ``device`` (where the model now is) if
        no evaluation did, then load the best weights into the model (and drop the other weights
        files)."""
        step = trainer.global_step
        if step != self.last_step:
            self._record(step, self.evaluate(pl_module.model, device), pl_module.model, rank_zero=True)
        path = self.weights_file(self.best_step) if self.best_step is not None else None
        if path is None or not path.exists():
            raise RuntimeError(f"no weights of the best validation step ({self.best_step}) in {self.weights_dir}")
        if self.best_step != step:
            load_weights(pl_module.model, path)
            self._say(f"restored the weights of step {self.best_step} (validation {self.metric} {self.best_value:.4f})")
        self._prune(keep={self.best_step})

    def summary(self) -> dict[str, Any]:
        return {"metric": self.metric, "best_step": self.best_step, "best_value": self.best_value,
                "evaluations": len(self.evaluations), "patience": self.patience, "stopped_early": self.stopped_early}

    def _say(self, message: str) -> None:
        if self.say is not None:
            self.say(message)

    # ------------------------------------------------------------------ resume

    def state_dict(self) -> dict[str, Any]:  # called when a checkpoint is saved
        self._checkpointed_best = self.best_step
        return {"best_step": self.best_step, "best_value": self.best_value, "bad_evaluations": self.bad_evaluations,
                "last_step": self.last_step, "evaluations": self.evaluations, "stopped_early": self.stopped_early}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.best_step = state.get("best_step")
        self.best_value = float(state.get("best_value", -math.inf))
        self.bad_evaluations = int(state.get("bad_evaluations", 0))
        self.last_step = state.get("last_step")
        self.evaluations = list(state.get("evaluations", []))
        self.stopped_early = bool(state.get("stopped_early", False))
        self._checkpointed_best = self.best_step
