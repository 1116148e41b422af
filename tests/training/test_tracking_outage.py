"""A tracking server that goes away during a run: the run goes on, keeps what it could not send
on disk, sends it when the server is back (or `lmforge tracking sync` does), and every metric ends
up in MLflow. A real `mlflow server` on 127.0.0.1, stopped and started again by the test."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from lmforge.config import load_params
from lmforge.tracking import Tracker
from lmforge.tracking.spool import pending
from lmforge.tracking.sync import send_spooled

from ..mlflow_server import MlflowServer


@pytest.fixture(scope="module")
def _shared_server(tmp_path_factory):
    srv = MlflowServer(tmp_path_factory.mktemp("server"))  # one server for the module: it takes seconds to start
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture
def server(_shared_server):
    """The module's server, answering when a test starts (a test that stopped it and failed
    before starting it again leaves it stopped)."""
    if _shared_server.proc is None:  # stopped
        _shared_server.start()
    return _shared_server


@pytest.mark.slow
def test_a_run_keeps_what_it_cannot_send_and_sends_it_when_the_server_is_back(server, tmp_path, monkeypatch):
    from mlflow import MlflowClient

    from lmforge.tracking import tracker as tracker_module

    # the tracker's clock, moved on by the test: the retry falls due when the test says so
    ahead = [0.0]
    monkeypatch.setattr(tracker_module, "time", SimpleNamespace(time=lambda: time.time() + ahead[0]))
    logs: list[str] = []
    artifact = tmp_path / "history.csv"
    tracker = Tracker(server.url, "outage", "run", spool_dir=tmp_path / "spool", retry_seconds=60,
                      timeout_seconds=2, log=logs.append)
    with tracker:
        tracker.log_params({"lr": 0.1})
        for step in (1, 2, 3):
            tracker.log_metrics({"loss": 10.0 - step}, step)
        server.stop()
        for step in (4, 5, 6):
            tracker.log_metrics({"loss": 10.0 - step}, step)  # the run goes on
        artifact.write_text("step,loss\n")
        tracker.log_artifact(artifact)
        artifact.write_text("changed after logging\n")  # what was logged is what is sent
        assert tracker.offline and len(list(pending(tmp_path / "spool"))) == 1
        server.start()
        tracker.log_metrics({"loss": 3.0}, 7)  # not yet time to ask again: kept
        assert tracker.offline and not any("is back after" in line for line in logs), logs
        ahead[0] += 60  # the retry falls due
        for step in (8, 9):
            tracker.log_metrics({"loss": 10.0 - step}, step)
        assert not tracker.offline
    client = MlflowClient(server.url)
    history = client.get_metric_history(tracker.run_id, "loss")
    assert sorted((m.step, m.value) for m in history) == [(step, 10.0 - step) for step in range(1, 10)]
    run = client.get_run(tracker.run_id)
    assert run.info.status == "FINISHED" and run.data.params == {"lr": "0.1"}
    local = client.download_artifacts(tracker.run_id, "history.csv", str(tmp_path / "download"))
    assert Path(local).read_text() == "step,loss\n"
    assert any("does not answer" in line for line in logs) and any("is back after" in line for line in logs)
    assert not list(pending(tmp_path / "spool"))  # nothing left behind


@pytest.mark.slow
def test_pretraining_through_an_outage_finishes_and_all_its_metrics_reach_mlflow(server, project, tmp_path):
    """The server is stopped when training starts and started again a few seconds later; what the
    run could not send on the way is sent then, or by `lmforge tracking sync` after it ended."""
    from mlflow import MlflowClient

    from lmforge.training.pretrain import run_pretrain

    spool = tmp_path / "spool"
    params = load_params(project / "params.yaml", [f"tracking.uri={server.url}", "train.max_steps=30", "train.log_every=1",
                                                   f"tracking.spool_dir={spool}", "tracking.retry_seconds=1"])
    noticed, restarted = threading.Event(), threading.Event()

    def restart_once_noticed() -> None:
        noticed.wait(timeout=180)
        server.start()
        restarted.set()

    logs: list[str] = []

    def log(message: str) -> None:
        logs.append(message)
        if message.startswith("pretrain gpt: ") and "steps x" in message:  # training starts now
            server.stop()
            threading.Thread(target=restart_once_noticed, daemon=True).start()
        if "does not answer" in message:  # the run noticed: the server comes back while it trains
            noticed.set()

    metrics = run_pretrain(params, "gpt", log=log)
    assert metrics["steps"] == 30
    assert restarted.wait(timeout=180)
    send_spooled(spool, server.url, log=logs.append)
    client = MlflowClient(server.url)
    run_id = metrics["mlflow_run_id"]
    assert sorted(m.step for m in client.get_metric_history(run_id, "train/loss")) == list(range(1, 31))
    assert client.get_run(run_id).info.status == "FINISHED"
    assert "final/loss" in client.get_run(run_id).data.metrics
    assert client.get_model_version_by_alias("lmforge-gpt", "candidate").run_id == run_id  # registered, late or not
    assert any("does not answer" in line for line in logs), logs
    assert not list(pending(spool))
