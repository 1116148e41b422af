"""The local executor: a pool of spawned processes on this machine, or this process alone."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import get_context
from typing import Any

from ..progress import Progress
from .base import PhaseReport, timed_call


class LocalExecutor:
    """``processes`` > 0: units run in a pool of that many spawned processes (started at the
    first phase, kept for the next); 0: each unit runs in this process, in order."""

    name = "local"

    def __init__(self, processes: int):
        self.processes = processes
        self.pool: ProcessPoolExecutor | None = None
        self.phases: list[PhaseReport] = []
        self.cluster = {"nodes": 1, "cpus": max(1, processes)}

    def map(self, fn: Callable[..., Any], args: list[tuple], label: str) -> list[Any]:
        report = PhaseReport(label, units=len(args))
        self.phases.append(report)
        t0 = time.perf_counter()
        results: list[Any] = [None] * len(args)
        with Progress(len(args), label, "units") as bar:
            if self.processes == 0:
                for i, a in enumerate(args):
                    results[i] = self._record(report, timed_call(fn, *a))
                    bar.update(i + 1)
            else:
                if self.pool is None:
                    self.pool = ProcessPoolExecutor(max_workers=self.processes, mp_context=get_context("spawn"))
                futures = {self.pool.submit(timed_call, fn, *a): i for i, a in enumerate(args)}
                try:
                    for n, fut in enumerate(as_completed(futures), 1):
                        results[futures[fut]] = self._record(report, fut.result())
                        bar.update(n)
                except BaseException:
                    for fut in futures:
                        fut.cancel()
                    raise
        report.seconds = time.perf_counter() - t0
        return results

    @staticmethod
    def _record(report: PhaseReport, outcome: tuple[Any, str, str, float]) -> Any:
        result, host, worker, seconds = outcome
        report.unit_seconds.append(seconds)
        report.workers.add(worker)
        report.hosts.add(host)
        return result

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(cancel_futures=True)
            self.pool = None
