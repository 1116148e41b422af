"""One LightningModule for every (architecture, objective) pair and for fine-tuning.

The model is any ``lmforge.models`` module: it takes the batch dict as keyword arguments and
returns ``.loss`` (already including what the family adds: NSP/SOP, Switch's load-balancing and
router z-loss, GPT-1's auxiliary LM in fine-tuning) and ``.aux``; every scalar ``*_loss`` in
``aux`` is logged on its own. Models that return memories (Transformer-XL) get them back on the
next step; the memories are detached by the model and carried in the checkpoint, so a resumed
run continues with the same context.

Fine-tuning options: ``class_weights`` replaces the head's cross entropy by the weighted one
(:func:`weighted_classification_loss`), ``layer_decay`` gives each depth its own learning rate
(``param_groups.optimizer_groups``).
"""

from __future__ import annotations

import math

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch import nn

from .param_groups import optimizer_groups
from ..config.recipes import OptimConfig
from ..errors import LmforgeError


class NonFiniteLossError(LmforgeError, RuntimeError):
    """The loss became NaN or infinite: the run stops, naming the step."""


def lr_lambda(optim: OptimConfig, budget=None):
    """Multiplier of the peak learning rate at optimizer step ``step`` (0-based). With a
    wall-clock ``budget`` (:class:`~lmforge.training.budget.WallClockBudget`) the decay after the
    warmup follows the budget's time used instead of the steps, reaching its floor when it is spent."""
    warmup, total, floor = optim.warmup_steps, optim.max_steps, optim.min_lr_ratio

    def factor(step: int) -> float:
        if warmup and step < warmup:
            return (step + 1) / warmup
        if optim.schedule == "constant":
            return 1.0
        if budget is not None:
            progress = budget.decay_progress()
        else:
            progress = min(1.0, (step - warmup) / max(1, total - warmup))
        if optim.schedule == "linear":
            return floor + (1.0 - floor) * (1.0 - progress)
        return floor + (1.0 - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))

    return factor


def balanced_class_weights(labels, num_classes: int) -> torch.Tensor:
    """``n / (k x count_c)`` per class ``c`` (scikit-learn's ``balanced``) from the training
    labels; a class with no training example gets 1 (it is never a target, so never weighed)."""
    counts = torch.bincount(torch.as_tensor(labels, dtype=torch.long).reshape(-1), minlength=num_classes).double()
    weights = counts.sum() / (num_classes * counts)
    return torch.where(counts > 0, weights, torch.ones_like(weights)).float()


# the names the heads give their task loss in ``aux`` when ``loss`` adds more (GPT's auxiliary
# LM, Switch's router losses)
_TASK_LOSS_NAMES = ("cls_loss", "classification_loss", "tagging_loss")


def weighted_classification_loss(out, labels: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """``F.cross_entropy(logits, labels, weight=weights)`` (the weighted mean: sum of w_y x
    loss / sum of w_y) over the labelled rows (a tagger's every labelled position; -100 is not
    one), plus whatever the head adds to its task loss (GPT-1's ``lm_coef`` x LM loss, Switch's
    router losses), unchanged."""
    logits = out.logits.float()
    loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), labels.reshape(-1), weight=weights.to(logits.device))
    task = next((out.aux[k] for k in _TASK_LOSS_NAMES if k in out.aux), None)
    return loss if task is None else loss + (out.loss - task)


class LMForgeModule(pl.LightningModule):
    """Trains ``model`` on batches of an objective (or a fine-tuning task)."""

    def __init__(self, model: nn.Module, optim: OptimConfig, *, carry_memory: bool = False, compile: bool = False,
                 compile_mode: str = "default", class_weights: torch.Tensor | None = None,
                 layer_decay: float | None = None, finite_check_every: int = 1, budget=None):
        super().__init__()
        self.model = model
        self.optim = optim
        self.carry_memory = carry_memory
        self.class_weights = class_weights
        self.layer_decay = layer_decay
        self.finite_check_every = max(1, int(finite_check_every))
        self.budget = budget  # a WallClockBudget: the schedule decays over its time
        self.micro_steps_done = 0  # micro-batches consumed: where the data stream resumes
        self.mems: list[torch.Tensor] | None = None
        self.val_mems: list[torch.Tensor] | None = None
        # the losses not yet checked: (optimizer step, micro-batch, loss), read together
        self._unchecked: list[tuple[int, int, torch.Tensor]] = []
        # a plain attribute, not a registered submodule: the weights are saved once, under "model."
        compiled = torch.compile(model, mode=None if compile_mode == "default" else compile_mode) if compile else model
        object.__setattr__(self, "_forward", compiled)

    def forward(self, **batch):
        return self._forward(**batch)

    def _step(self, batch: dict[str, torch.Tensor], mems: list[torch.Tensor] | None):
        if self.carry_memory and mems is not None and mems[0].shape[0] == batch["input_ids"].shape[0]:
            batch = {**batch, "mems": mems}
        out = self(**batch)
        new_mems = out.aux.get("mems") if self.carry_memory else None
        return out, new_mems

    @property
    def _bar_shown(self) -> bool:
        """Whether a progress bar shows the losses. Lightning reads a progress-bar metric on the
        host after every step (a GPU synchronisation that leaves the GPU idle while the next
        batch is fetched), so the loss goes to the bar only when there is one."""
        return self._trainer is not None and self.trainer.progress_bar_callback is not None

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        self.micro_steps_done += 1
        out, self.mems = self._step(batch, self.mems)
        loss = out.loss if self.class_weights is None else weighted_classification_loss(out, batch["labels"],
                                                                                        self.class_weights)
        # a copy: under CUDA graphs the step's own output is overwritten by the next replay
        self._unchecked.append((self.global_step, self.micro_steps_done, loss.detach().clone()))
        if self.micro_steps_done % self.finite_check_every == 0:
            self.check_finite()
        size = next(iter(batch.values())).shape[0]
        self.log("train/loss", loss.detach(), prog_bar=self._bar_shown, batch_size=size)
        for name, value in out.aux.items():
            if name.endswith("_loss") and torch.is_tensor(value) and value.ndim == 0:
                self.log(f"train/{name}", value.detach(), batch_size=size)
        return loss

    def check_finite(self) -> None:
        """Raise :class:`NonFiniteLossError` naming the first unchecked step whose loss is not
        finite. Each check reads the device once (it waits for the GPU), so the losses are checked
        together every ``finite_check_every`` micro-batches (the history reads them as often),
        before a checkpoint is written and when training ends: a non-finite loss stops the run
        within that many steps, and no checkpoint or output holds its weights."""
        if not self._unchecked:
            return
        pending, self._unchecked = self._unchecked, []
        values = torch.stack([loss.float().reshape(()) for _, _, loss in pending]).tolist()
        for (step, micro, _), value in zip(pending, values):
            if not math.isfinite(value):
                raise NonFiniteLossError(
                    f"the training loss is {value} at step {step} (micro-batch {micro}); "
                    "stopping. Lower the learning rate, enable gradient clipping, or check the data.")

    def on_train_end(self) -> None:
        self.check_finite()

    def on_validation_epoch_start(self) -> None:
        self.check_finite()
        self.val_mems = None

    def validation_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        out, self.val_mems = self._step(batch, self.val_mems)
        size = next(iter(batch.values())).shape[0]
        if out.loss is not None:
            self.log("val/loss", out.loss, prog_bar=self._bar_shown, batch_size=size, sync_dist=True)
        for name, value in out.aux.items():
            if name.endswith("_loss") and torch.is_tensor(value) and value.ndim == 0:
                self.log(f"val/{name}", value, batch_size=size, sync_dist=True)

    def configure_optimizers(self):
        o = self.optim
        fused = torch.cuda.is_available() and self.device.type == "cuda"
        groups = optimizer_groups(self.model, o.weight_decay, o.learning_rate, self.layer_decay)
        optimizer = torch.optim.AdamW(groups, lr=o.learning_rate, betas=o.betas, eps=o.eps, fused=fused or None)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda(o, self.budget))
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}

    def configure_gradient_clipping(self, optimizer, gradient_clip_val=None, gradient_clip_algorithm=None) -> None:
        """Clip the global gradient norm. Lightning's own clipping refuses two set-ups this
        project trains with on a GPU: a fused optimizer under bf16-mixed (its guard is for fp16's
        loss scaler, which bf16 has not) and FSDP (no norm clipping in its FSDP plugin). Without a
        scaler the gradients are clipped here, under FSDP by FSDP's own sharded-norm clip; fp16
        with its scaler, and clipping by value, stay with Lightning."""
        if not gradient_clip_val:
            return
        if gradient_clip_algorithm not in (None, "norm") or getattr(self.trainer.precision_plugin, "scaler", None) is not None:
            self.clip_gradients(optimizer, gradient_clip_val, gradient_clip_algorithm)
            return
        from torch.distributed.fsdp import FullyShardedDataParallel

        wrapped = self.trainer.strategy.model
        if isinstance(wrapped, FullyShardedDataParallel):
            wrapped.clip_grad_norm_(gradient_clip_val)
        else:
            params = [p for group in optimizer.param_groups for p in group["params"]]
            torch.nn.utils.clip_grad_norm_(params, gradient_clip_val)

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        self.check_finite()
        checkpoint["lmforge"] = {
            "micro_steps_done": self.micro_steps_done,
            "torch_rng": torch.get_rng_state(),
            "mems": [m.detach().cpu() for m in self.mems] if self.mems is not None else None,
        }

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        state = checkpoint.get("lmforge") or {}
        self.micro_steps_done = int(state.get("micro_steps_done", 0))
        if state.get("torch_rng") is not None:
            torch.set_rng_state(state["torch_rng"])
        mems = state.get("mems")
        self.mems = [m.to(self.device) for m in mems] if mems is not None else None
