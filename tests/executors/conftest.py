"""A real Ray cluster on this machine for the executor tests: a head and a second node, one CPU
each, started as processes (``ray start --block``) and stopped after the module's tests."""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="the Ray executor tests need Ray: pip install -e '.[ray]'")

RAY = str(Path(sys.executable).with_name("ray"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _node_ports() -> list[str]:
    """The ports of one node's own servers, chosen free here, so that two clusters (two test
    workers) never reach for the same fixed default."""
    return [f"--dashboard-agent-listen-port={_free_port()}", f"--dashboard-agent-grpc-port={_free_port()}",
            f"--metrics-export-port={_free_port()}", f"--runtime-env-agent-port={_free_port()}"]


class Cluster:
    def __init__(self) -> None:
        self.port = _free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.temp = tempfile.mkdtemp(prefix="lmr", dir="/tmp")  # short: Ray's socket paths must fit 107 bytes
        # a token for this cluster alone (Ray's token authentication), in every process that talks to it
        self.env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(16),
                    "RAY_USAGE_STATS_ENABLED": "0"}
        self.procs: list[subprocess.Popen] = []

    def _start(self, *args: str) -> None:
        log = open(Path(self.temp) / f"node{len(self.procs)}.log", "wb")
        self.procs.append(subprocess.Popen([RAY, "start", "--block", "--num-cpus=1", "--node-ip-address=127.0.0.1",
                                            "--disable-usage-stats", *_node_ports(), *args],
                                           env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True))

    def start(self) -> None:
        self._start("--head", f"--port={self.port}", "--include-dashboard=false", f"--temp-dir={self.temp}",
                    f"--ray-client-server-port={_free_port()}")
        if not self._joined(1):
            self._fail(1)
        # On a loaded machine the second raylet can miss Ray's fixed 30 s registration window
        # (`ray start` then exits): a node that did not join is started once more.
        for _ in range(2):
            self._start(f"--address={self.address}")
            if self._joined(2):
                return
            self._kill(self.procs.pop())
        self._fail(2)

    def _joined(self, nodes: int, timeout: float = 90) -> bool:
        code = ("import ray, time\nray.init(address=%r, log_to_driver=False)\n"
                "while len([n for n in ray.nodes() if n['Alive']]) < %d: time.sleep(0.2)\n" % (self.address, nodes))
        try:
            subprocess.run([sys.executable, "-c", code], env=self.env, timeout=timeout, check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        except (subprocess.SubprocessError, OSError):
            return False
        return True

    def _fail(self, nodes: int) -> None:
        logs = "\n".join(p.read_text(errors="replace")[-2000:] for p in sorted(Path(self.temp).glob("node*.log")))
        self.stop()
        pytest.fail(f"the test's Ray cluster did not start ({nodes} node(s) expected):\n{logs}")

    @staticmethod
    def _kill(p: subprocess.Popen) -> None:
        try:  # the node's whole group: raylet, agents, workers
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()

    def stop(self) -> None:
        for p in self.procs:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 3
        for p in self.procs:
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            self._kill(p)  # whatever the graceful stop left of the node
        shutil.rmtree(self.temp, ignore_errors=True)


@pytest.fixture(scope="module")
def ray_cluster():
    cluster = Cluster()
    cluster.start()
    try:
        yield cluster  # drivers run as processes of their own, with cluster.env
    finally:
        cluster.stop()
