"""What every executor does: run one function over many argument tuples, return the results in
the order of the tuples, and keep a report of each phase (units, seconds, workers)."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass
class PhaseReport:
    """One phase of a stage (one function over its units), as the executor ran it."""

    name: str
    units: int = 0
    seconds: float = 0.0  # wall clock of the phase
    unit_seconds: list[float] = field(default_factory=list)  # each unit's own time, where it ran
    workers: set[str] = field(default_factory=set)  # host:pid of the processes that ran units
    hosts: set[str] = field(default_factory=set)  # where they ran: host names, or Ray nodes

    def to_dict(self) -> dict[str, Any]:
        times = sorted(self.unit_seconds)
        return {"units": self.units, "seconds": round(self.seconds, 3),
                "unit_seconds_total": round(sum(times), 3),
                "unit_seconds_max": round(times[-1], 3) if times else 0.0,
                "unit_seconds_median": round(times[len(times) // 2], 3) if times else 0.0,
                "worker_processes": len(self.workers), "hosts": sorted(self.hosts)}


def timed_call(fn: Callable[..., Any], *args: Any) -> tuple[Any, str, str, float]:
    """Run one unit where it was sent: its result, the host and process that ran it, its time."""
    t0 = time.perf_counter()
    result = fn(*args)
    host = socket.gethostname()
    return result, host, f"{host}:{os.getpid()}", time.perf_counter() - t0


class Executor(Protocol):
    name: str
    phases: list[PhaseReport]
    cluster: dict[str, float]  # nodes and CPUs it runs on

    def map(self, fn: Callable[..., Any], args: list[tuple], label: str) -> list[Any]:
        """``fn(*a)`` for every ``a`` in ``args``, results in the same order; the first unit that
        raises stops the phase with its own error."""
        ...

    def close(self) -> None: ...


def phase_name(fn: Callable[..., Any]) -> str:
    return fn.__name__.strip("_").replace("_", " ")


def run_phase(executor: Executor, fn: Callable[..., bool], args: list[tuple], stage: str, log: Callable[[str], None]) -> None:
    """One phase of ``stage``: ``fn`` over every unit, each returning False when its output was
    already there (a resumed run), which is logged."""
    done = executor.map(fn, args, f"{stage}: {phase_name(fn)}")
    if not all(done):
        log(f"{phase_name(fn)}: {done.count(False)} of {len(done)} units already done, reused")


def execution_report(executor: Executor) -> dict[str, Any]:
    """What a stage records of where it ran: the executor, its cluster (nodes, CPUs) and each
    phase's report."""
    return {"executor": executor.name, "cluster": dict(executor.cluster),
            "phases": {r.name: r.to_dict() for r in executor.phases}}
