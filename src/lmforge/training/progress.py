"""The training stages' progress: optimizer steps done of the run's total (seconds of its
wall-clock budget under ``budget_minutes``), their rate, the time left, the last logged training
loss and the tokens per second, through ``lmforge.progress`` (a bar on a terminal, a line every
``every`` seconds elsewhere). On rank 0 only; a resumed run starts from its step and counts its
rate from there."""

from __future__ import annotations

import time
from typing import TextIO

import lightning.pytorch as pl

from ..progress import Progress
from .run import History


class TrainingProgress(pl.Callback):
    def __init__(self, label: str, history: History | None = None, *, every: float = 10.0, stream: TextIO | None = None,
                 budget=None):
        self.label, self.history, self.every, self.stream = label, history, every, stream
        self.budget = budget  # a WallClockBudget: progress in seconds of it, not in steps
        self.progress: Progress | None = None
        self.tokens = 0
        self.started = 0.0
        self.step = 0

    def on_train_start(self, trainer, pl_module) -> None:
        if trainer.is_global_zero and self.budget is not None:
            self.progress = Progress(round(self.budget.seconds), self.label, "s", initial=round(self.budget.used),
                                     stream=self.stream, every=self.every)
            self.step = trainer.global_step
            self.started = time.monotonic()
        elif trainer.is_global_zero and trainer.max_steps and trainer.max_steps > 0:
            self.progress = Progress(trainer.max_steps, self.label, "steps", initial=trainer.global_step,
                                     stream=self.stream, every=self.every)
            self.started = time.monotonic()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if self.progress is None:
            return
        ids = batch.get("input_ids") if isinstance(batch, dict) else None
        if ids is not None:
            self.tokens += ids.numel() * trainer.world_size  # shapes only: no read of the device
        step = trainer.global_step
        if step == (self.step if self.budget is not None else self.progress.done):  # still accumulating gradients
            return
        parts = []
        if self.budget is not None:
            self.step = step
            parts.append(f"step {step}")
        loss = self.history.last("train/loss") if self.history is not None else None
        if loss is not None:
            parts.append(f"loss {loss:.3f}")
        if self.tokens:
            parts.append(f"{self.tokens / max(time.monotonic() - self.started, 1e-9):,.0f} tokens/s")
        done = min(round(self.budget.used), self.progress.total) if self.budget is not None else step
        self.progress.update(done, ", ".join(parts) or None)

    def on_train_end(self, trainer, pl_module) -> None:
        if self.progress is not None:
            self.progress.close()
            self.progress = None

    def on_exception(self, trainer, pl_module, exception) -> None:
        if self.progress is not None:
            self.progress.close(finished=False)
            self.progress = None
