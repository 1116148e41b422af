"""The team deployment's stores on a real PostgreSQL server (``postgres``: started by
tests/deploy/conftest.py from Debian's binaries on a free loopback port; no mock).

- Dagster: a DAGSTER_HOME holding ``dagster_project/dagster.postgres.yaml`` as its dagster.yaml,
  with the DAGSTER_PG_* variables pointing at the server, gives a PostgreSQL-backed instance; a
  tiny project's ``clean`` and ``tokenizer_bpe`` materialize in process on it, and a fresh
  instance (new connections) reads the run, the materializations and the asset-check evaluations
  back; the ``runs`` and ``event_logs`` tables of the ``dagster`` database hold them.
- MLflow: ``mlflow server`` with the ``mlflow`` database as its backend store and a folder as its
  proxied artifact store, on 127.0.0.1; a tiny gpt pretraining run logs to it over http and
  registers ``lmforge-gpt`` (alias ``candidate``); the client reads the run, its metrics and the
  registered model back (and loads the model through the server), and the ``runs``,
  ``metrics``, ``registered_models`` and ``registered_model_aliases`` tables hold them.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Iterator

import pytest
from dagster import AssetKey, DagsterEventType, DagsterInstance, DagsterRunStatus

from lmforge.stages import CHECKS
from lmforge.stages import build_stages

from ..orchestration.test_dagster import build_definitions, check_evaluations, make_project, materialize, materialized
from ..training.conftest import REPO, write_params
from ..mlflow_server import MlflowServer
from .conftest import PostgresServer

pytestmark = pytest.mark.slow

SELECTION = ("clean", "tokenizer_bpe")


# ----------------------------------------------------------------------------- Dagster


@pytest.fixture
def dagster_home(postgres: PostgresServer, tmp_path, monkeypatch) -> Path:
    """DAGSTER_HOME with the repository's PostgreSQL dagster.yaml, DAGSTER_PG_* set to the server."""
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(REPO / "dagster_project" / "dagster.postgres.yaml", home / "dagster.yaml")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    for name, value in (("HOST", postgres.host), ("PORT", str(postgres.port)), ("USER", postgres.user),
                        ("PASSWORD", postgres.password), ("DB", "dagster")):
        monkeypatch.setenv(f"DAGSTER_PG_{name}", value)
    return home


def test_password_is_required_over_tcp(postgres):
    import psycopg2

    with pytest.raises(psycopg2.OperationalError, match="password authentication failed"):
        postgres.connect("dagster", password="wrong")
    assert postgres.query("dagster", "SELECT current_user, inet_server_addr()::text") == [(postgres.user, "127.0.0.1/32")]


def test_dagster_instance_on_postgres_records_a_materialization(postgres, dagster_home, tmp_path):
    from dagster._core.run_coordinator import QueuedRunCoordinator
    from dagster_postgres import PostgresEventLogStorage, PostgresRunStorage, PostgresScheduleStorage

    root = make_project(tmp_path / "project")
    defs = build_definitions(root)
    with DagsterInstance.get() as instance:
        assert not instance.is_ephemeral
        assert isinstance(instance.run_storage, PostgresRunStorage)
        assert isinstance(instance.event_log_storage, PostgresEventLogStorage)
        assert isinstance(instance.schedule_storage, PostgresScheduleStorage)
        assert isinstance(instance.run_coordinator, QueuedRunCoordinator)  # submitted runs queue; in-process ones run
        result = materialize(defs, SELECTION, instance)
        assert result.success
        assert set(materialized(result)) == set(SELECTION)
    run_id = result.run_id
    assert (root / "data/tokenizers/bpe/tokenizer.json").is_file()

    graph = build_stages(root=root)
    expected_checks = {(s, spec.name) for s in SELECTION for spec in CHECKS[graph[s].kind]}
    assert set(check_evaluations(result)) == expected_checks

    # a fresh instance (new engine, new connections) reads it all back from PostgreSQL
    with DagsterInstance.get() as fresh:
        assert isinstance(fresh.run_storage, PostgresRunStorage)
        run = fresh.get_run_by_id(run_id)
        assert run is not None and run.status == DagsterRunStatus.SUCCESS and run.job_name == "full_pipeline"
        assert run_id in {r.run_id for r in fresh.get_runs()}
        for name in SELECTION:
            event = fresh.get_latest_materialization_event(AssetKey(name))
            assert event is not None and event.run_id == run_id, name
        evaluations = [e.get_dagster_event().event_specific_data
                       for e in fresh.all_logs(run_id, of_type=DagsterEventType.ASSET_CHECK_EVALUATION)]
        assert {(e.asset_key.to_user_string(), e.check_name) for e in evaluations} == expected_checks
        assert all(e.passed for e in evaluations)

    # and the tables say so, read with psycopg2
    assert postgres.query("dagster", "SELECT status, pipeline_name FROM runs WHERE run_id = %s", run_id) == \
        [("SUCCESS", "full_pipeline")]
    rows = postgres.query("dagster", "SELECT asset_key, count(*) FROM event_logs WHERE run_id = %s AND "
                                     "dagster_event_type = 'ASSET_MATERIALIZATION' GROUP BY asset_key", run_id)
    assert {AssetKey.from_db_string(key).to_user_string(): n for key, n in rows} == {name: 1 for name in SELECTION}


# ----------------------------------------------------------------------------- MLflow


@pytest.fixture
def mlflow_server(postgres: PostgresServer, tmp_path) -> Iterator[str]:
    """``mlflow server`` on 127.0.0.1 (a free port): backend store the ``mlflow`` database,
    artifacts proxied to a folder (``--serve-artifacts`` is MLflow 3's default). Its URL."""
    server = MlflowServer(tmp_path, backend_store_uri=postgres.uri("mlflow"))
    try:
        server.start()
        yield server.url
    finally:
        server.stop()


def test_mlflow_server_on_postgres_receives_a_training_run_and_registers_the_model(postgres, mlflow_server, project,
                                                                                   tmp_path):
    from mlflow import MlflowClient

    from lmforge import tracking
    from lmforge.config import load_params
    from lmforge.models.folder import MODEL_FILE
    from lmforge.training.pretrain import run_pretrain

    write_params(project, train={"max_steps": 2, "checkpoint_every": 2},
                 tracking={"uri": mlflow_server, "register_models": True, "experiment": "lmforge-team"})
    params = load_params(project / "params.yaml")
    assert tracking.resolve_tracking_uri(params.tracking.uri, project) == mlflow_server  # passed through
    metrics = run_pretrain(params, "gpt", log=lambda message: None)
    run_id = metrics["mlflow_run_id"]
    assert metrics["steps"] == 2 and metrics["registered_model"] == {"name": "lmforge-gpt", "version": "1"}

    client = MlflowClient(mlflow_server)
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED"
    assert client.get_experiment(run.info.experiment_id).name == "lmforge-team"
    assert run.data.params["architecture"] == "gpt" and run.data.params["objective"] == "clm"
    assert run.data.tags["stage"] == "pretrain"
    assert [m.step for m in client.get_metric_history(run_id, "train/loss")] == [1, 2]
    assert "final/loss" in run.data.metrics
    assert {a.path for a in client.list_artifacts(run_id)} >= {"history.csv", "loss.png", "tokenizer"}
    version = client.get_model_version_by_alias("lmforge-gpt", "candidate")
    assert version.version == "1" and version.run_id == run_id

    # artifacts went through the server's proxy into its artifacts destination
    stored = tmp_path / "artifacts"
    assert any(p.name == "history.csv" for p in stored.rglob("*")), sorted(stored.rglob("*"))[:20]
    assert any(p.name == MODEL_FILE for p in stored.rglob("*"))
    model = tracking.load_registered_model(mlflow_server, "lmforge-gpt", alias="candidate")
    assert sum(p.numel() for p in model.parameters()) == metrics["parameters"]

    # and the mlflow database holds them
    assert postgres.query("mlflow", "SELECT status, name FROM runs WHERE run_uuid = %s", run_id) == \
        [("FINISHED", "pretrain-gpt")]
    assert postgres.query("mlflow", "SELECT count(*) FROM metrics WHERE run_uuid = %s AND key = 'train/loss'",
                          run_id) == [(2,)]
    assert postgres.query("mlflow", "SELECT name FROM registered_models") == [("lmforge-gpt",)]
    assert postgres.query("mlflow", "SELECT version FROM registered_model_aliases WHERE name = 'lmforge-gpt' "
                                    "AND alias = 'candidate'") == [(1,)]
    assert postgres.query("mlflow", "SELECT run_id FROM model_versions WHERE name = 'lmforge-gpt'") == [(run_id,)]
