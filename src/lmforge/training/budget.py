"""A training budget in wall-clock minutes (``budget_minutes`` of a recipe's pretraining, or
``train.budget_minutes`` for every recipe): the run stops at the first optimizer step that ends
past the budget, and the learning-rate schedule decays over the budget's time rather than over a
step count, so that it reaches its floor (zero by default) where training stops.

The clock counts the seconds since training started (validation passes included: they are part
of what the budget buys), plus those of the run it resumes (kept in the checkpoint). On several
processes rank 0's clock is broadcast at every optimizer step, so that every rank takes the same
learning rate and stops at the same step.
"""

from __future__ import annotations

import time
from typing import Callable

import lightning.pytorch as pl


class WallClockBudget(pl.Callback):
    """Stops training at the first optimizer step ending past ``minutes``; :meth:`progress` is the
    fraction of the budget used at the last optimizer step (what the schedule reads)."""

    def __init__(self, minutes: float, clock: Callable[[], float] = time.monotonic):
        if minutes <= 0:
            raise ValueError("budget_minutes must be positive")
        self.seconds = 60.0 * float(minutes)
        self.clock = clock
        self.before = 0.0            # seconds spent by the runs this one resumes
        self.started: float | None = None
        self.used = 0.0              # seconds at the last optimizer step (rank 0's)
        self.warmup_end: float | None = None  # the fraction used when the warmup ended

    # ---------------------------------------------------------------- what the schedule reads

    def progress(self) -> float:
        """The fraction of the budget used at the last optimizer step (may pass 1 at the end)."""
        return self.used / self.seconds

    def decay_progress(self) -> float:
        """Where the decay stands, from 0 (the warmup just ended) to 1 (the budget is spent)."""
        if self.warmup_end is None:
            self.warmup_end = min(self.progress(), 0.999)
        return min(1.0, max(0.0, (self.progress() - self.warmup_end) / (1.0 - self.warmup_end)))

    def elapsed(self) -> float:
        return self.before + (self.clock() - self.started if self.started is not None else 0.0)

    # ---------------------------------------------------------------- the hooks

    def on_train_start(self, trainer, pl_module) -> None:
        self.started = self.clock()

    def on_before_optimizer_step(self, trainer, pl_module, optimizer) -> None:
        # before the step: the scheduler that runs right after it reads the fresh fraction, so the
        # last step leaves the learning rate at the schedule's floor
        used = trainer.strategy.broadcast(self.elapsed(), src=0)
        self.used = float(used)
        if self.used >= self.seconds:
            trainer.should_stop = True
            # Lightning validates once more when a run is asked to stop (for early stopping); the
            # stages evaluate the final weights themselves, over more batches, so that pass only
            # spent time past the budget (on a CPU, a base model's 20 batches took 75 s)
            trainer.limit_val_batches = 0

    def state_dict(self) -> dict:
        return {"seconds_used": self.elapsed(), "warmup_end": self.warmup_end}

    def load_state_dict(self, state_dict: dict) -> None:
        self.before = float(state_dict.get("seconds_used", 0.0))
        self.used = self.before
        self.warmup_end = state_dict.get("warmup_end")
