"""The compose stack's MLflow server asks who is calling: a real ``mlflow server`` with the
compose file's ``--app-name basic-auth`` and ``--allowed-hosts``, started through the image's
entry point (docker/entrypoint.sh, which writes the auth app's configuration) on a free loopback
port. A request without credentials, or with a wrong password, is refused (401); the admin
account of the environment gets in (200); a foreign Host header is still refused (403); and
lmforge's tracker logs to it with the credentials in its tracking URI, never showing them."""

from __future__ import annotations

import base64
import http.client
import json
import os
import secrets
import sys
from pathlib import Path

import pytest

from ..mlflow_server import MlflowServer
from .test_docker import DOCKER, INTERPOLATION, ROOT, load_compose

pytestmark = pytest.mark.slow

USER = "lmforge-test"
PASSWORD = "test-only-" + secrets.token_hex(8)  # the auth app wants 12 characters at least


def compose_arguments() -> list[str]:
    """The MLflow service's ``--app-name`` and ``--allowed-hosts`` (its default) from compose.yaml."""
    command = [str(c) for c in load_compose()["services"]["mlflow"]["command"]]
    out = []
    for flag in ("--app-name", "--allowed-hosts"):
        assert flag in command, f"the compose file's mlflow command has no {flag}"
        out += [flag, INTERPOLATION.sub(lambda m: m["arg"] or "", command[command.index(flag) + 1])]
    return out


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("mlflow-auth")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "PYTHONPATH": str(ROOT / "src"), "LMFORGE_PROJECT": str(ROOT), "DAGSTER_HOME": str(folder / "dagster_home"),
           "LMFORGE_SET": "", "MLFLOW_DISABLE_TELEMETRY": "true", "DO_NOT_TRACK": "1", "TMPDIR": str(folder),
           "MLFLOW_AUTH_DATABASE_URI": f"sqlite:///{folder / 'auth.db'}",
           "MLFLOW_AUTH_ADMIN_USERNAME": USER, "MLFLOW_AUTH_ADMIN_PASSWORD": PASSWORD,
           "MLFLOW_FLASK_SERVER_SECRET_KEY": secrets.token_hex(16)}
    for name in ("MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD", "MLFLOW_TRACKING_URI"):
        env.pop(name, None)
    srv = MlflowServer(folder, extra_args=compose_arguments(), env=env, launcher=["sh", str(DOCKER / "entrypoint.sh")])
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


def request(server, method: str, path: str, *, auth: tuple[str, str] | None = None, host: str | None = None,
            body: dict | None = None) -> int:
    headers = {"Content-Type": "application/json", "Host": host or f"127.0.0.1:{server.port}"}
    if auth is not None:
        headers["Authorization"] = "Basic " + base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    try:
        connection.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers)
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


CALLS = [("GET", "/api/2.0/mlflow/experiments/search?max_results=1", None),
         ("POST", "/api/2.0/mlflow/experiments/create", {"name": "intruder"}),
         ("GET", "/api/2.0/mlflow/registered-models/search", None)]


@pytest.mark.parametrize("method,path,body", CALLS)
def test_a_request_without_the_right_credentials_is_refused(server, method, path, body):
    assert request(server, method, path, body=body) == 401
    assert request(server, method, path, body=body, auth=(USER, "wrong-password-123")) == 401
    assert request(server, method, path, body=body, auth=("nobody", PASSWORD)) == 401


def test_the_admin_account_of_the_environment_gets_in_and_health_stays_open(server):
    assert request(server, "GET", "/api/2.0/mlflow/experiments/search?max_results=1", auth=(USER, PASSWORD)) == 200
    assert request(server, "GET", "/health") == 200  # the compose healthcheck needs no account
    assert request(server, "GET", "/api/2.0/mlflow/experiments/search?max_results=1", auth=(USER, PASSWORD),
                   host="evil.example") == 403  # DNS rebinding protection still on
    assert request(server, "POST", "/api/2.0/mlflow/experiments/create", body={"name": "intruder"}) == 401
    assert request(server, "GET", "/api/2.0/mlflow/experiments/get-by-name?experiment_name=intruder",
                   auth=(USER, PASSWORD)) == 404  # refused requests made nothing
    (written,) = Path(server.folder).glob("mlflow-auth.*")  # the entry point's configuration of the auth app: this user's alone
    assert written.stat().st_mode & 0o077 == 0
    assert PASSWORD not in written.read_text(encoding="utf-8")


def test_the_tracker_logs_with_credentials_in_its_uri_and_never_shows_them(server, tmp_path):
    from mlflow import MlflowClient

    from lmforge.tracking import Tracker, check_reachable

    uri = f"http://{USER}:{PASSWORD}@127.0.0.1:{server.port}"
    check_reachable(uri, 10)
    logs: list[str] = []
    with Tracker(uri, "auth", "run", spool_dir=tmp_path / "spool", log=logs.append) as tracker:
        tracker.log_params({"tracking": {"uri": uri}, "lr": 0.1})
        tracker.set_tags({"note": f"from {uri}"})
    assert tracker.url.startswith(f"http://127.0.0.1:{server.port}/#/experiments/")
    os.environ["MLFLOW_TRACKING_USERNAME"], os.environ["MLFLOW_TRACKING_PASSWORD"] = USER, PASSWORD
    try:
        run = MlflowClient(server.url).get_run(tracker.run_id)
    finally:
        del os.environ["MLFLOW_TRACKING_USERNAME"], os.environ["MLFLOW_TRACKING_PASSWORD"]
    assert run.info.status == "FINISHED"
    assert run.data.params == {"tracking.uri": f"http://127.0.0.1:{server.port}", "lr": "0.1"}
    assert run.data.tags["note"] == f"from http://127.0.0.1:{server.port}"
    assert not any(PASSWORD in line for line in logs)
