"""Where the data stages run their units of work (a shard, a partition): this machine's
process pool, or Ray tasks on a cluster (``executor.kind`` in params.yaml).

A stage hands the executor a module-level function and one argument tuple per unit; each unit
reads and writes files under folders every worker sees (the stage's work folder), so the two
executors run the very same functions and write the same bytes. ``open_executor`` is the one
entry point.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from ..config import ExecutorConfig
from .base import Executor, PhaseReport
from .local import LocalExecutor

__all__ = ["Executor", "PhaseReport", "LocalExecutor", "open_executor"]


@contextlib.contextmanager
def open_executor(cfg: ExecutorConfig, processes: int, log: Callable[[str], None] = print) -> Iterator[Executor]:
    """The executor ``cfg`` names. ``processes``: the local pool's size (0: run each unit in this
    process), and the CPUs of a Ray instance started here when ``cfg.ray_address`` is null."""
    if cfg.kind == "ray":
        from .ray_tasks import RayExecutor

        executor: Executor = RayExecutor(cfg, processes, log)
    else:
        executor = LocalExecutor(processes)
    try:
        yield executor
    finally:
        executor.close()
