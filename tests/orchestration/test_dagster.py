"""The Dagster view of the stage graph (``dagster_project/``): the definitions load and match the
stage registry and ``dvc.yaml``; a selection of data assets materializes in process with its
metadata and asset checks; a training asset runs through Dagster Pipes, or in the Dagster
process when one CPU process trains; blocking checks stop
downstream work on bad data while warnings do not fail the run; the new-input sensor; DVC's lock
after a materialization; ``python -m dagster_project.run`` on an unknown asset.

The tiny projects here use the training tests' helpers (``write_params``, ``write_task``) with
one architecture (gpt: clm on bpe tokens), a folder of raw JSONL as the clean input, and a
complete params.yaml whose paths are relative to the project: the stages must run from the
project folder, and DVC reads every key a stage names from the file.
"""

from __future__ import annotations

import base64
import json
import os
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import yaml
from dagster import (
    AssetCheckKey,
    AssetCheckSeverity,
    AssetKey,
    DagsterEventType,
    DagsterInstance,
    Definitions,
    Failure,
    build_sensor_context,
)

from dagster_project.assets import launch_command, trains_in_process
from dagster_project.resources import DvcResource
from lmforge.stages import CHECKS
from lmforge.config import load_params, parse_params
from lmforge.stages import build_stages, write_dvc_yaml
from lmforge.testing.documents import page, write_jsonl
from tests.training.conftest import REPO, write_params, write_task
from tests.waiting import wait_for

with pytest.MonkeyPatch.context() as env:  # the module builds `defs` of $LMFORGE_PROJECT (else the cwd) on import
    env.setenv("LMFORGE_PROJECT", str(REPO))
    from dagster_project.definitions import build_definitions

DVC = str(Path(sys.executable).with_name("dvc"))
DATA_STAGES = ("clean", "tokenizer_bpe", "tokens_bpe", "dataset_clm")
RAW_DOCUMENTS = 200


# ----------------------------------------------------------------------------- helpers


def make_project(root: Path, **sections) -> Path:
    """A tiny gpt-only project at ``root`` (``sections`` merged over its settings); nothing run."""
    shutil.copytree(REPO / "pipelines", root / "pipelines", ignore=shutil.ignore_patterns("README.md"))
    rng = random.Random(11)
    write_task(root / "task", rng)
    (root / "raw").mkdir()
    write_jsonl(root / "raw" / "part-0.jsonl", [{"id": f"r{i}", "text": page(rng, lines=6)} for i in range(RAW_DOCUMENTS)])
    settings = {"clean": {"inputs": ["raw"]}, "tokenizer": {"kinds": ["bpe"]}, "dataset": {"objectives": ["clm"]},
                "train": {"architectures": ["gpt"]}, "tracking": {"register_models": False}}
    for key, value in sections.items():
        settings[key] = {**settings.get(key, {}), **value}
    path = write_params(root, **settings)
    relative = yaml.safe_load(path.read_text(encoding="utf-8").replace(f"{root}/", ""))
    full = parse_params(relative, str(path)).model_dump(mode="json")
    path.write_text(yaml.safe_dump(full, sort_keys=False), encoding="utf-8")
    return root


def dvc_init(root: Path) -> None:
    """``root`` as a git + DVC repository (no analytics) with dvc.yaml generated from the registry."""
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run([DVC, "init", "-q"], cwd=root, check=True, env={**os.environ, "DVC_NO_ANALYTICS": "1"})
    with open(root / ".dvc" / "config", "a", encoding="utf-8") as f:
        f.write("[core]\n    analytics = false\n")
    write_dvc_yaml(root)


def materialize(defs: Definitions, names, instance: DagsterInstance | None = None):
    return defs.resolve_job_def("full_pipeline").execute_in_process(
        instance=instance or DagsterInstance.ephemeral(), raise_on_error=False, asset_selection=[AssetKey(n) for n in names])


def materialized(result) -> dict[str, dict]:
    """Asset name -> the metadata values of its materialization."""
    return {e.asset_key.to_user_string(): {k: v.value for k, v in e.materialization.metadata.items()}
            for e in result.get_asset_materialization_events()}


def check_evaluations(result) -> dict[tuple[str, str], object]:
    return {(e.asset_key.to_user_string(), e.check_name): e for e in result.get_asset_check_evaluations()}


def steps(result, event_type: DagsterEventType) -> set[str]:
    return {e.step_key for e in result.all_events if e.event_type == event_type}


def dvc_outputs(entry: dict) -> list[str]:
    return [next(iter(o)) if isinstance(o, dict) else o
            for section in ("outs", "metrics", "plots") for o in entry.get(section, [])]


def dvc_graph(path: Path) -> tuple[set[str], set[tuple[str, str]]]:
    """Nodes and edges of a dvc.yaml: (A, B) where a dep of B is an output of A or lies inside one."""
    stages = yaml.safe_load(path.read_text(encoding="utf-8"))["stages"]
    outs = {name: dvc_outputs(entry) for name, entry in stages.items()}
    edges = {(a, b) for b, entry in stages.items() for dep in entry.get("deps", []) for a in stages
             if a != b and any(dep == o or dep.startswith(o.rstrip("/") + "/") for o in outs[a])}
    return set(stages), edges


def dagster_graph(defs: Definitions) -> tuple[set[str], set[tuple[str, str]]]:
    graph = defs.resolve_asset_graph()
    keys = graph.get_all_asset_keys()
    return ({k.to_user_string() for k in keys},
            {(p.to_user_string(), k.to_user_string()) for k in keys for p in graph.get(k).parent_keys})


def evaluate_tick(defs: Definitions, instance: DagsterInstance, cursor: str | None):
    with build_sensor_context(instance=instance, cursor=cursor, definitions=defs) as context:
        return defs.resolve_sensor_def("new_raw_files").evaluate_tick(context)


# ----------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def repo_defs() -> Definitions:
    return build_definitions(root=REPO)


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory) -> SimpleNamespace:
    """A git + DVC tiny project whose data stages Dagster materialized once, in process."""
    root = make_project(tmp_path_factory.mktemp("dagster_project"))
    dvc_init(root)
    defs = build_definitions(root)
    cwd = os.getcwd()
    result = materialize(defs, DATA_STAGES)
    return SimpleNamespace(root=root, defs=defs, result=result, cwd=cwd, cwd_after=os.getcwd())


# ----------------------------------------------------------------------------- definitions


def test_definitions_load_and_follow_the_registry(repo_defs):
    Definitions.validate_loadable(repo_defs)
    params = load_params(REPO / "params.yaml")
    graph = build_stages(params, root=REPO)
    assets = repo_defs.resolve_asset_graph()

    assert {k.to_user_string() for k in assets.get_all_asset_keys()} == set(graph.stages)
    for stage in graph:
        node = assets.get(AssetKey(stage.name))
        assert node.group_name == stage.group
        assert node.code_version == graph.code_version(stage) and len(node.code_version) == 12
        assert node.kinds, stage.name
        assert stage.cli in node.description
    assert assets.all_group_names == {s.group for s in graph}

    expected_checks = {AssetCheckKey(AssetKey(s.name), spec.name): spec for s in graph for spec in CHECKS[s.kind]}
    assert set(assets.asset_check_keys) == set(expected_checks)
    for key, spec in expected_checks.items():
        assert assets.get_check_spec(key).blocking == spec.blocking, key

    archs = params.train.architectures
    jobs = {j.name for j in repo_defs.resolve_all_job_defs() if not j.name.startswith("__")}  # not Dagster's own
    assert jobs == {"full_pipeline", "retrain_all", *(f"retrain_{a}" for a in archs)}
    max_runtime = str(int(params.orchestrate.max_runtime_hours * 3600))
    for name in ("retrain_all", *(f"retrain_{a}" for a in archs)):
        assert repo_defs.resolve_job_def(name).tags["dagster/max_runtime"] == max_runtime, name
    for stage in graph:  # the training ops carry it too
        if stage.subprocess:
            assert assets.get(AssetKey(stage.name)).assets_def.op.tags["dagster/max_runtime"] == max_runtime
    retrain_gpt = {k.to_user_string() for k in repo_defs.resolve_job_def("retrain_gpt").asset_layer.selected_asset_keys}
    assert {"pretrain_gpt", "evaluate_gpt", "report"} <= retrain_gpt and "pretrain_bert" not in retrain_gpt
    assert "clean" not in retrain_gpt

    schedule = repo_defs.resolve_schedule_def("weekly_retrain")
    assert schedule.cron_schedule == params.orchestrate.retrain_cron
    assert schedule.job_name == "retrain_all"
    assert repo_defs.resolve_sensor_def("new_raw_files").job_name == "full_pipeline"


def test_training_launches_under_torchrun_when_devices_exceed_one():
    params = load_params(REPO / "params.yaml")
    stage = build_stages(params, root=REPO)["pretrain_gpt"]
    single = launch_command(stage, params, REPO / "params.yaml")
    assert single[1:4] == ["-m", "dagster_project.launch", "pretrain_gpt"]
    two = params.model_copy(update={"train": params.train.model_copy(update={"devices": 2})})
    command = launch_command(stage, two, REPO / "params.yaml")
    assert command[1:3] == ["-m", "torch.distributed.run"] and "--nproc_per_node=2" in command
    assert command[-4:-2] == ["dagster_project.launch", "pretrain_gpt"]
    nodes = params.model_copy(update={"train": params.train.model_copy(update={"num_nodes": 2})})
    with pytest.raises(Failure, match="num_nodes=2"):
        launch_command(stage, nodes, REPO / "params.yaml")


def test_asset_graph_and_dvc_yaml_have_the_same_nodes_and_edges(repo_defs, tmp_path):
    nodes, edges = dvc_graph(REPO / "dvc.yaml")
    assert dagster_graph(repo_defs) == (nodes, edges)
    assert ("clean", "tokenizer_bpe") in edges and ("pretrain_gpt", "evaluate_gpt") in edges

    tiny = make_project(tmp_path / "tiny")  # a generated dvc.yaml of another configuration
    write_dvc_yaml(tiny)
    nodes, edges = dvc_graph(tiny / "dvc.yaml")
    assert dagster_graph(build_definitions(tiny)) == (nodes, edges)
    assert "finetune_gpt_task" in nodes and ("finetune_gpt_task", "evaluate_gpt") in edges


# ----------------------------------------------------------------------------- materializing


def test_data_assets_materialize_in_process_with_metadata_and_checks(pipeline):
    result, root = pipeline.result, pipeline.root
    assert result.success
    assert pipeline.cwd_after == pipeline.cwd == os.getcwd()  # stages ran from the project, then came back

    meta = materialized(result)
    assert set(meta) == set(DATA_STAGES)
    stats = json.loads((root / "data/clean/stats.json").read_text())
    clean = meta["clean"]
    assert clean["documents_in"] == stats["documents_in"] == RAW_DOCUMENTS
    assert 0 < clean["documents_out"] == stats["documents_out"] <= RAW_DOCUMENTS
    assert clean["drop_reasons"].startswith("| reason | documents | of input |")
    assert all(f"| {reason} |" in clean["drop_reasons"] for reason in stats["dropped"])
    tokenizer = meta["tokenizer_bpe"]
    assert tokenizer["unknown_rate"] == json.loads((root / "data/tokenizers/bpe/metrics.json").read_text())["unknown_rate"]
    assert 0 < tokenizer["vocab_size"] <= 400 and tokenizer["tokens_per_word"] > 1
    assert meta["tokens_bpe"]["train_tokens"] > 0 and meta["tokens_bpe"]["train_documents"] > 0
    assert meta["dataset_clm"]["train/examples_per_epoch"] > 0 and meta["dataset_clm"]["train/block_size"] == 32
    for name in DATA_STAGES:
        assert meta[name]["dvc_lock_updated"] is True, name
    # the stages' pictures, inline in the asset's metadata, each the PNG the stage wrote
    pictures = {"clean": ("data/clean", ("drops", "lengths", "languages", "near_duplicates")),
                "tokenizer_bpe": ("data/tokenizers/bpe", ("fertility", "token_lengths")),
                "dataset_clm": ("data/datasets/clm", ("input_lengths",))}
    for name, (folder, charts) in pictures.items():
        for chart in charts:
            data = base64.b64encode((root / folder / f"{chart}.png").read_bytes()).decode("ascii")
            assert re.fullmatch(rf"!\[[^\]]+\]\(data:image/png;base64,{re.escape(data)}\)", meta[name][chart]), (name, chart)

    evaluations = check_evaluations(result)
    assert set(evaluations) == {(s, spec.name) for s in DATA_STAGES for spec in CHECKS[build_stages(root=root)[s].kind]}
    assert all(e.passed for e in evaluations.values()), {k: e.description for k, e in evaluations.items()}

    for path in ("data/clean/stats.json", "data/tokenizers/bpe/tokenizer.json", "data/tokens/bpe/manifest.json",
                 "data/datasets/clm/stats.json"):
        assert (root / path).is_file(), path
    assert not (root / "models").exists()  # only the selection ran


def test_materialized_stages_are_recorded_in_the_dvc_lock(pipeline):
    root = pipeline.root
    lock = yaml.safe_load((root / "dvc.lock").read_text())
    assert set(DATA_STAGES) <= set(lock["stages"])
    assert lock["stages"]["clean"]["outs"][0]["path"] == "data/clean"
    status = subprocess.run([DVC, "status", "--json", *DATA_STAGES], cwd=root, capture_output=True, text=True, check=True)
    assert json.loads(status.stdout) == {}
    # a stage Dagster did not run is not reported clean
    status = subprocess.run([DVC, "status", "--json", "report"], cwd=root, capture_output=True, text=True, check=True)
    assert "report" in json.loads(status.stdout)


def with_training_process(root: Path, choice: str) -> Path:
    """A copy of the project's params.yaml with ``orchestrate.training_process: choice``."""
    settings = yaml.safe_load((root / "params.yaml").read_text(encoding="utf-8"))
    settings["orchestrate"]["training_process"] = choice
    path = root / f"params-{choice}.yaml"
    path.write_text(yaml.safe_dump(settings, sort_keys=False), encoding="utf-8")
    return path


def test_training_runs_in_process_only_for_one_cpu_process():
    params = load_params(REPO / "params.yaml")

    def choose(choice="auto", **train):
        return trains_in_process(params.model_copy(update={
            "train": params.train.model_copy(update=train),
            "orchestrate": params.orchestrate.model_copy(update={"training_process": choice})}))

    assert choose(accelerator="cpu") and choose("in_process", accelerator="cpu")
    assert not choose("subprocess", accelerator="cpu")
    assert not choose(accelerator="cpu", devices=2) and not choose(accelerator="gpu")
    assert choose(accelerator="auto") == (not torch.cuda.is_available() and not torch.backends.mps.is_available())
    with pytest.raises(Failure, match="train.devices=2, train.num_nodes=1 need training_process: subprocess"):
        choose("in_process", devices=2)


@pytest.mark.slow
def test_training_asset_runs_through_pipes(pipeline):
    from mlflow import MlflowClient

    instance = DagsterInstance.ephemeral()
    defs = build_definitions(pipeline.root, with_training_process(pipeline.root, "subprocess"))
    result = materialize(defs, ["pretrain_gpt"], instance)
    assert result.success
    meta = materialized(result)["pretrain_gpt"]
    metrics = json.loads((pipeline.root / "models/gpt/pretrain/metrics.json").read_text())
    reported = {k: v for k, v in meta.items() if k.startswith("reported/")}
    assert reported["reported/steps"] == metrics["steps"] == 4
    assert reported["reported/mlflow_run_id"] == metrics["mlflow_run_id"]
    assert meta["loss_curve"].startswith("![gpt loss](data:image/png;base64,")
    assert meta["mlflow_run"].endswith(f"/runs/{metrics['mlflow_run_id']}")
    assert meta["dvc_lock_updated"] is True
    run = MlflowClient(f"sqlite:///{pipeline.root / 'mlflow.db'}").get_run(metrics["mlflow_run_id"])
    assert run.data.tags["dagster_run_id"] == result.run_id  # the subprocess saw the Dagster run
    messages = [e.user_message for e in instance.all_logs(result.run_id)]
    assert any("pretrain gpt: validation loss" in m for m in messages)  # streamed through Pipes
    assert any(m.startswith("[pipes] external process successfully opened") for m in messages)
    assert check_evaluations(result)[("pretrain_gpt", "loss_finite_and_decreasing")].passed


@pytest.mark.slow
def test_training_asset_runs_in_the_dagster_process_on_one_cpu(pipeline):
    from mlflow import MlflowClient

    instance = DagsterInstance.ephemeral()
    defs = build_definitions(pipeline.root, with_training_process(pipeline.root, "in_process"))
    result = materialize(defs, ["pretrain_gpt", "finetune_gpt_task"], instance)
    assert result.success
    meta = materialized(result)["finetune_gpt_task"]
    metrics = json.loads((pipeline.root / "models/gpt/task/metrics.json").read_text())
    assert meta["reported/mlflow_run_id"] == metrics["mlflow_run_id"]  # the same figures as through Pipes
    assert meta["reported/test/accuracy"] == metrics["test"]["accuracy"]
    assert meta["confusion"].startswith("![gpt on task test confusion matrix](data:image/png;base64,")  # its picture
    assert meta["dvc_lock_updated"] is True
    run = MlflowClient(f"sqlite:///{pipeline.root / 'mlflow.db'}").get_run(metrics["mlflow_run_id"])
    assert run.data.tags["dagster_run_id"] == result.run_id
    messages = [e.user_message for e in instance.all_logs(result.run_id)]
    assert any(m.startswith("finetune gpt on task") for m in messages)  # the stage's lines, in Dagster's log
    assert not any(m.startswith("[pipes]") for m in messages)  # nothing was launched
    assert pipeline.cwd == os.getcwd()


# ----------------------------------------------------------------------------- one run per asset at a time


def test_every_asset_is_a_pool_of_its_own(repo_defs):
    graph = repo_defs.resolve_asset_graph()
    pools = {k.to_user_string(): graph.get(k).pools for k in graph.get_all_asset_keys()}
    assert pools and all(p == {f"lmforge/{name}"} for name, p in pools.items()), pools


def test_a_run_waits_while_another_run_materializes_the_same_asset(tmp_path):
    """The project's dagster.yaml limits each asset's pool to one step: while another run holds
    the slot of `clean`, a run materializing it waits, and runs once the slot is free."""
    import threading

    root = make_project(tmp_path / "project", orchestrate={"dvc_commit": False})
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(REPO / "dagster_project" / "dagster.yaml", home / "dagster.yaml")
    defs = build_definitions(root)
    with DagsterInstance.from_config(str(home)) as instance:
        storage = instance.event_log_storage
        assert storage.initialize_concurrency_limit_to_default("lmforge/clean")  # as a run's first claim would
        assert storage.get_concurrency_info("lmforge/clean").slot_count == 1
        assert storage.claim_concurrency_slot("lmforge/clean", "another-run", "clean").is_claimed
        box: dict = {}
        runner = threading.Thread(target=lambda: box.update(result=materialize(defs, ["clean"], instance)))
        runner.start()

        def blocked() -> bool:
            return any("Step blocked by limit for pool lmforge/clean" in (entry.user_message or "")
                       for run in instance.get_runs() for entry in instance.all_logs(run.run_id))

        wait_for(blocked, "the run saying its step is blocked by the pool", alive=runner.is_alive)
        assert runner.is_alive() and not (root / "data/clean/stats.json").exists()  # waiting for the slot
        storage.free_concurrency_slots_for_run("another-run")
        runner.join(timeout=300)
        assert not runner.is_alive() and box["result"].success
        assert (root / "data/clean/stats.json").exists()
        messages = [e.message or "" for e in box["result"].all_events]
        assert "Step blocked by limit for pool lmforge/clean" in messages


# ----------------------------------------------------------------------------- checks on bad data


def test_failed_blocking_check_stops_downstream_assets(tmp_path):
    root = make_project(tmp_path, checks={"clean_min_documents": 10**6})
    result = materialize(build_definitions(root), ["clean", "tokenizer_bpe", "tokens_bpe"])
    assert not result.success
    assert set(materialized(result)) == {"clean"}
    failed = check_evaluations(result)[("clean", "not_empty")]
    assert not failed.passed and failed.severity == AssetCheckSeverity.ERROR
    assert "1000000 required" in failed.description
    assert check_evaluations(result)[("clean", "drop_rates")].passed
    started = steps(result, DagsterEventType.STEP_START)
    assert "clean" in started and not started & {"tokenizer_bpe", "tokens_bpe"}  # never started
    assert steps(result, DagsterEventType.STEP_FAILURE) == {"clean_not_empty"}  # the check failed, not the asset
    assert (root / "data/clean/stats.json").exists() and not (root / "data/tokenizers").exists()


def test_failed_warning_check_does_not_fail_the_run(tmp_path):
    root = make_project(tmp_path)
    planted = root / "data/report/evaluation/gpt.json"  # worse than the majority class, better than unigram
    planted.parent.mkdir(parents=True)
    planted.write_text(json.dumps({
        "pretrain": {"validation": {"loss": 3.0, "unigram_loss": 5.0}},
        "finetune": {"task": {"test": {"accuracy": 0.4}, "baselines": {"majority": {"accuracy": 0.5}}}},
    }))
    defs = build_definitions(root)
    keys = {AssetCheckKey(AssetKey("evaluate_gpt"), spec.name) for spec in CHECKS["evaluate"]}
    job = defs.resolve_job_def("full_pipeline").get_subset(asset_selection=set(), asset_check_selection=keys)
    result = job.execute_in_process(instance=DagsterInstance.ephemeral(), raise_on_error=False)
    assert result.success
    assert not materialized(result)
    evaluations = check_evaluations(result)
    majority = evaluations[("evaluate_gpt", "beats_majority_baseline")]
    assert not majority.passed and majority.severity == AssetCheckSeverity.WARN
    assert "accuracy 0.4 vs majority 0.5" in majority.description
    assert evaluations[("evaluate_gpt", "beats_unigram_baseline")].passed


# ----------------------------------------------------------------------------- the sensor


def test_sensor_requests_a_run_only_when_a_raw_file_arrives(tmp_path):
    root = make_project(tmp_path)
    defs = build_definitions(root)
    instance = DagsterInstance.ephemeral()

    first = evaluate_tick(defs, instance, None)
    assert not first.run_requests and "first look: 1 files" in first.skip_message
    assert str(root / "raw" / "part-0.jsonl") in json.loads(first.cursor)
    again = evaluate_tick(defs, instance, first.cursor)
    assert not again.run_requests and again.skip_message == "no new raw files"

    write_jsonl(root / "raw" / "part-1.jsonl", [{"id": "new", "text": "A new document arrived today."}])
    arrived = evaluate_tick(defs, instance, again.cursor)
    assert arrived.skip_message is None and len(arrived.run_requests) == 1
    request = arrived.run_requests[0]
    assert request.job_name in (None, "full_pipeline") and request.tags["lmforge/new_files"] == "1"
    assert request.run_key == evaluate_tick(defs, instance, again.cursor).run_requests[0].run_key  # Dagster dedups it

    settled = evaluate_tick(defs, instance, arrived.cursor)
    assert not settled.run_requests and settled.skip_message == "no new raw files"


def test_sensor_without_a_watched_folder_says_how_to_configure_one(tmp_path):
    root = make_project(tmp_path, clean={"inputs": ["stdlib"]})
    data = evaluate_tick(build_definitions(root), DagsterInstance.ephemeral(), None)
    assert not data.run_requests
    assert "clean.inputs or orchestrate.watch" in data.skip_message


# ----------------------------------------------------------------------------- python -m dagster_project.run


def test_run_module_rejects_an_unknown_asset(tmp_path):
    root = make_project(tmp_path / "project")
    home = tmp_path / "dagster_home"
    env = {**os.environ, "DAGSTER_HOME": str(home), "LMFORGE_PROJECT": str(root)}
    done = subprocess.run([sys.executable, "-m", "dagster_project.run", "--select", "clean,nonexistent"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr
    assert "no asset named nonexistent;" in done.stderr
    assert "finetune_gpt_task" in done.stderr  # the assets of the project named by LMFORGE_PROJECT
    assert not home.exists() and not (root / "data").exists()  # nothing ran


def test_failed_dvc_commit_says_why(tmp_path):
    root = make_project(tmp_path)
    dvc_init(root)
    with pytest.raises(Failure) as failure:  # nothing materialized: the stage's output is missing
        DvcResource().commit(root, "clean", None, lambda message: None)
    assert failure.value.description.startswith("dvc commit clean failed: ")
    assert "data/clean" in failure.value.description
