"""Where a training run's wall time goes: the phases of a pretraining or fine-tuning run, each
in seconds, kept in its metrics (``timings``) and named in its last log line, so a run that
took longer than its budget says where the rest went (building the first batches, Lightning's
set-up before the first step, the steps themselves, the final evaluation, writing the outputs).

The clock is the host's: a phase that ends with a read of the device (the final evaluation's
losses, the weights copied to the host to be saved) includes the device's queued work."""

from __future__ import annotations

import time
from typing import Callable

import lightning.pytorch as pl


class PhaseClock(pl.Callback):
    """``mark(name)`` ends the phase running since the last mark and names it; as a Lightning
    callback it also marks the set-up before the first step (``setup``), the first step
    (``first_step``: data loader start-up, the first kernels or a compilation) and the other
    steps (``training``), so ``fit`` is split without the caller's help."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self.last = clock()
        self.seconds: dict[str, float] = {}
        self._first_step_done = False

    def mark(self, name: str) -> float:
        now = self.clock()
        spent = now - self.last
        self.seconds[name] = self.seconds.get(name, 0.0) + spent
        self.last = now
        return spent

    def on_train_start(self, trainer, pl_module) -> None:
        self.mark("setup")

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if not self._first_step_done:
            self._first_step_done = True
            self.mark("first_step")

    def on_train_end(self, trainer, pl_module) -> None:
        self.mark("training")

    def summary(self) -> dict[str, float]:
        return {name: round(seconds, 1) for name, seconds in self.seconds.items()}

    def describe(self) -> str:
        """``setup 12s, first_step 3s, training 90s, ...``: the phases in the order they ran."""
        return ", ".join(f"{name} {seconds:.0f}s" for name, seconds in self.seconds.items())
