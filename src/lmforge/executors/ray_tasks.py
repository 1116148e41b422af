"""The Ray executor: each unit is a Ray task on the cluster ``executor.ray_address`` names (or
on a Ray instance started on this machine for the stage).

A task whose worker process dies (killed, out of memory, its node lost) is run again by Ray up
to ``executor.max_retries`` times; the units write their files atomically and mark them done
last, so a rerun writes the same bytes. A unit that raises (bad input) is not retried: the
phase stops with that unit's own error, as on the local executor.

A Ray instance started here (no ``executor.ray_address``) serves this machine only: every one of
its servers (GCS, raylet, object manager, agents, workers) listens on the loopback address, and
no dashboard is started (``local_ray_options``).
"""

from __future__ import annotations

import contextlib
import math
import os
import socket
import time
from collections.abc import Callable, Iterator
from typing import Any

from ..config import ExecutorConfig
from ..errors import LmforgeError
from ..progress import Progress
from .base import PhaseReport, phase_name, timed_call


class RayUnavailable(LmforgeError, RuntimeError):
    """Ray is not installed, or the cluster cannot be reached."""


def _import_ray():
    try:
        import ray
    except ImportError:
        raise RayUnavailable("executor.kind: ray needs Ray; install it with pip install 'lmforge[ray]'") from None
    return ray


def ray_unit(threads: int, fn: Callable[..., Any], *args: Any) -> tuple[Any, str, str, float]:
    """``timed_call`` in a Ray worker, naming the Ray node (several nodes may share a host).
    ``threads``: the CPUs the task holds. Ray limits OpenMP to them; the Rust thread pools (the
    tokenizers' encoding) read ``RAYON_NUM_THREADS`` instead, and without it each task would
    start one thread per core of its node, oversubscribing a node that runs several tasks."""
    import ray

    os.environ.setdefault("RAYON_NUM_THREADS", str(threads))
    result, _, worker, seconds = timed_call(fn, *args)
    return result, f"node {ray.get_runtime_context().get_node_id()[:8]}", worker, seconds


LOOPBACK = "127.0.0.1"
# Ray's switch for a single-machine instance (its default on macOS and Windows): the node's
# address is the loopback one and Ray's servers bind to it rather than to every interface
SINGLE_MACHINE_VARIABLE = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


def local_ray_options(cpus: int) -> dict[str, Any]:
    """``ray.init`` options of the Ray instance a stage starts for itself: a new one (``local``: not
    a cluster ``RAY_ADDRESS`` may name), on the loopback address, no dashboard, ``cpus`` CPUs."""
    return {"address": "local", "num_cpus": cpus, "_node_ip_address": LOOPBACK, "include_dashboard": False,
            "dashboard_host": LOOPBACK}


@contextlib.contextmanager
def loopback_only(ray) -> Iterator[None]:
    """While a local instance starts: Ray's single-machine mode, read by this process (the
    constant Ray took from the environment when imported) and by the servers it starts (the
    environment they inherit). Both are put back afterwards, so a later connection to a cluster
    from this process is left as Ray would make it."""
    from ray._private import ray_constants

    saved_env, saved_flag = os.environ.get(SINGLE_MACHINE_VARIABLE), ray_constants.ENABLE_RAY_CLUSTER
    os.environ[SINGLE_MACHINE_VARIABLE] = "0"
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = saved_flag
        if saved_env is None:
            os.environ.pop(SINGLE_MACHINE_VARIABLE, None)
        else:
            os.environ[SINGLE_MACHINE_VARIABLE] = saved_env


def check_reachable(address: str | None, timeout: float = 5.0) -> None:
    """Fail at once, naming the address, where nothing listens at ``HOST:PORT`` (Ray itself would
    retry for minutes). ``None``, ``auto`` and ``ray://`` addresses are left to Ray."""
    if not address or address == "auto" or "://" in address:
        return
    host, _, port = address.rpartition(":")
    host = host.strip("[]")  # [::1]:6379
    if not host or not port.isdigit():
        raise RayUnavailable(f"executor.ray_address: {address!r} is not HOST:PORT, 'auto' or ray://HOST:PORT")
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as exc:
        raise RayUnavailable(f"executor.ray_address: no Ray cluster answers at {address} ({exc.strerror or exc}); "
                             "start one with `ray start --head` or correct the address") from None


class RayExecutor:
    name = "ray"

    def __init__(self, cfg: ExecutorConfig, local_cpus: int, log: Callable[[str], None] = print):
        ray = self.ray = _import_ray()
        self.cfg = cfg
        self.phases: list[PhaseReport] = []
        # a connection this process already had (a notebook's, a caller's ray.init) is used as it
        # is, and left open; executor.ray_address is then not consulted
        self.owns_connection = not ray.is_initialized()
        if self.owns_connection:
            options: dict[str, Any] = {"address": cfg.ray_address, "include_dashboard": False,
                                       "log_to_driver": False, "configure_logging": False}
            check_reachable(cfg.ray_address)
            local = cfg.ray_address is None
            if local:  # a Ray instance of this stage, for this machine only
                options.update(local_ray_options(local_cpus if local_cpus > 0 else (os.cpu_count() or 1)))
            try:
                with loopback_only(ray) if local else contextlib.nullcontext():
                    ray.init(**options)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                where = cfg.ray_address or "a new local instance"
                raise RayUnavailable(f"executor.ray_address: cannot connect to Ray at {where}: "
                                     f"{str(exc).strip().splitlines()[0]}") from None
        try:
            resources = ray.cluster_resources()
        except BaseException:
            self.close()
            raise
        self.cluster = {"nodes": len([n for n in ray.nodes() if n.get("Alive")]), "cpus": resources.get("CPU", 0)}
        log(f"ray: {self.cluster['nodes']} node(s), {self.cluster['cpus']:g} CPUs; "
            f"{cfg.cpus_per_task:g} CPU per task, up to {cfg.max_retries} retries")
        self.task = ray.remote(ray_unit)

    def map(self, fn: Callable[..., Any], args: list[tuple], label: str) -> list[Any]:
        ray = self.ray
        report = PhaseReport(label, units=len(args))
        self.phases.append(report)
        t0 = time.perf_counter()
        # SPREAD (Ray Data's default for its tasks too): the units are independent and meet only
        # through the shared folder, so they go round the nodes; Ray's default packs them onto the
        # driver's node first, where a phase of short units can run whole before any spills over.
        task = self.task.options(name=f"lmforge.{phase_name(fn).replace(' ', '_')}", num_cpus=self.cfg.cpus_per_task,
                                 max_retries=self.cfg.max_retries, retry_exceptions=False, scheduling_strategy="SPREAD")
        threads = max(1, math.ceil(self.cfg.cpus_per_task))
        refs = [task.remote(threads, fn, *a) for a in args]
        index = {ref: i for i, ref in enumerate(refs)}
        results: list[Any] = [None] * len(refs)
        pending = list(refs)
        with Progress(len(refs), label, "units") as bar:
            try:
                while pending:
                    ready, pending = ray.wait(pending, num_returns=1)
                    for ref in ready:
                        result, host, worker, seconds = self._get(ref, label)
                        results[index[ref]] = result
                        report.unit_seconds.append(seconds)
                        report.workers.add(worker)
                        report.hosts.add(host)
                    bar.update(len(refs) - len(pending))
            except BaseException:
                for ref in pending:
                    ray.cancel(ref)
                raise
        report.seconds = time.perf_counter() - t0
        return results

    def _get(self, ref, label: str):
        ray = self.ray
        try:
            return ray.get(ref)
        except ray.exceptions.RayTaskError as exc:  # the unit raised: its own error, one line
            cause = exc.cause if isinstance(exc.cause, BaseException) else None
            if cause is not None:
                cause.add_note(f"raised in a Ray worker:\n{exc}")  # the remote traceback, for a traceback's reader
                raise cause from None
            raise
        except (ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError, ray.exceptions.OutOfMemoryError) as exc:
            raise LmforgeError(f"{label}: a unit's worker died {self.cfg.max_retries + 1} times "
                               f"(executor.max_retries: {self.cfg.max_retries}): {type(exc).__name__}") from None
        except ray.exceptions.RayError as exc:  # lost objects, a dead raylet, a cancelled task
            raise LmforgeError(f"{label}: Ray could not run a unit: {type(exc).__name__}: "
                               f"{str(exc).strip().splitlines()[0] if str(exc).strip() else ''}") from None

    def close(self) -> None:
        if self.owns_connection and self.ray.is_initialized():
            self.ray.shutdown()
