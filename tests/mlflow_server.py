"""A real ``mlflow server`` on 127.0.0.1 for the tests that need one: started and waited for until
it answers ``/health``, stopped with its uvicorn worker, and startable again at the same address
(the same port, backend store and artifact folder). Extra arguments (``--app-name basic-auth``),
an environment and a launcher (the image's entry point) may be given."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path


def free_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class MlflowServer:
    """``mlflow server`` with its backend store (default: sqlite in ``folder``) and artifacts
    proxied to ``folder/artifacts`` (``--serve-artifacts`` is MLflow 3's default); its log is
    ``folder/mlflow-server.log``."""

    def __init__(self, folder: Path, backend_store_uri: str | None = None, *, extra_args: Sequence[str] = (),
                 env: Mapping[str, str] | None = None, launcher: Sequence[str] = ()):
        self.folder = folder
        self.extra_args = list(extra_args)
        self.env = dict(env) if env is not None else None
        self.launcher = list(launcher)
        self.backend_store_uri = backend_store_uri or f"sqlite:///{folder / 'mlflow.db'}"
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = folder / "mlflow-server.log"
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 120) -> None:
        """Start it and wait until it answers (the first start creates the schema)."""
        command = [*self.launcher, str(Path(sys.executable).with_name("mlflow")), "server",
                   "--backend-store-uri", self.backend_store_uri, "--artifacts-destination", str(self.folder / "artifacts"),
                   "--host", "127.0.0.1", "--port", str(self.port), "--workers", "1", *self.extra_args]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(command, cwd=self.folder, stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True, env=self.env)
        deadline = time.monotonic() + timeout
        while True:
            assert self.proc.poll() is None, \
                f"mlflow server exited ({self.proc.returncode}):\n{self.log_path.read_text(errors='replace')[-4000:]}"
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=5) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            assert time.monotonic() < deadline, \
                f"mlflow server did not answer /health in {timeout:g} s:\n{self.log_path.read_text(errors='replace')[-4000:]}"
            time.sleep(0.3)

    def stop(self) -> None:
        """Stop the CLI and its uvicorn worker (SIGTERM, then SIGKILL)."""
        if self.proc is None:
            return
        for sig, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
            try:
                os.killpg(self.proc.pid, sig)
                self.proc.wait(timeout=wait)
                break
            except ProcessLookupError:
                break
            except subprocess.TimeoutExpired:
                continue
        self.proc = None
