"""Training slots: the machine's GPUs dealt out to trainings that run at once.

A slot is ``train.devices`` GPUs (one GPU when ``devices`` is ``auto``), or the CPU on a machine
without one. A training holds its slot's lock (``<project>/.lmforge/slots/training-<i>.lock``,
an OS lock the system drops if its holder dies) for as long as it runs and sees only that
slot's GPUs, so two trainings never share a GPU, whichever runs or processes started them,
unless ``orchestrate.trainings_per_gpu`` says how many may (small models that leave most of a
large GPU idle): slots ``share * k`` to ``share * k + share - 1`` then hold the same GPUs.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from filelock import FileLock, Timeout


def visible_gpus() -> list[str]:
    """The GPUs this process may use: ``CUDA_VISIBLE_DEVICES`` where set, else every CUDA device."""
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        return [d.strip() for d in listed.split(",") if d.strip()]
    import torch

    return [str(i) for i in range(torch.cuda.device_count())]


def slot_count(configured: int, gpus: list[str], per_training: int, share: int = 1) -> int:
    """``configured`` slots, or (0) as many as the GPUs hold (``share`` trainings on each), at least one."""
    if configured:
        return configured
    return max(1, len(gpus) // max(1, per_training) * max(1, share))


def slot_gpus(slot: int, gpus: list[str], per_training: int, share: int = 1) -> list[str]:
    """The GPUs of ``slot`` (none without GPUs); ``share`` consecutive slots hold the same GPUs."""
    group = slot // max(1, share)
    return gpus[group * per_training:(group + 1) * per_training]


@contextlib.contextmanager
def training_slot(root: Path, slots: int, log: Callable[[str], None] = print, poll: float = 1.0) -> Iterator[int]:
    """Hold the first free of ``slots`` slots while the block runs; wait while every one is held."""
    folder = root / ".lmforge" / "slots"
    folder.mkdir(parents=True, exist_ok=True)
    said = False
    while True:
        for i in range(slots):
            lock = FileLock(str(folder / f"training-{i}.lock"))
            try:
                lock.acquire(timeout=0)
            except Timeout:
                continue
            try:
                yield i
            finally:
                lock.release()
            return
        if not said:
            log(f"every training slot ({slots}) is taken; waiting for one")
            said = True
        time.sleep(poll)
