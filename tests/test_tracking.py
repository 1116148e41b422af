"""lmforge.tracking: URIs, the Tracker, the registry gate, provenance; the model folders it logs."""

import os

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")  # tests never reach the network

import ast
import hashlib
import json
import math
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import mlflow
import pandas as pd
import pytest
import torch
import yaml
from mlflow import MlflowClient

from lmforge import tracking
from lmforge.models import folder
from lmforge.models.folder import load_model_dir, save_model_dir
from lmforge.models.layers import ConfigError
from lmforge.models.registry import build_model
from lmforge.tracking import (
    LmforgePyfunc,
    Tracker,
    default_tracking_uri,
    dvc_hashes,
    ensure_tracking_store,
    git_commit,
    is_rank_zero,
    load_registered_model,
    promote_if_better,
    resolve_tracking_uri,
    run_tags,
)
from lmforge.tracking.pyfunc import pip_requirements

TINY = {"vocab_size": 64, "n_layers": 1, "d_model": 32, "n_heads": 2, "d_ff": 64, "n_positions": 32}


@pytest.fixture(autouse=True)
def _rank_zero(monkeypatch):
    for var in ("RANK", "LOCAL_RANK", "SLURM_PROCID", "DAGSTER_RUN_ID"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """One sqlite store for the module (creating the schema takes seconds), in a folder that does
    not exist yet."""
    uri = default_tracking_uri(tmp_path_factory.mktemp("tracking") / "nested" / "store")
    ensure_tracking_store(uri)
    return uri


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    torch.manual_seed(0)
    model = build_model("gpt-tiny", **TINY)
    return model.eval(), save_model_dir(model, "gpt-tiny", "lm", TINY, tmp_path_factory.mktemp("models") / "gpt")


def _ids(batch=2, length=7):
    return torch.randint(0, TINY["vocab_size"], (batch, length), generator=torch.Generator().manual_seed(1))


# ----------------------------------------------------------------------------- URIs and the store


def test_default_and_resolved_uris(tmp_path):
    assert default_tracking_uri(tmp_path) == f"sqlite:///{tmp_path.resolve().as_posix()}/mlflow.db"
    assert resolve_tracking_uri(None, root=tmp_path) == default_tracking_uri(tmp_path)
    assert resolve_tracking_uri("", root=tmp_path) == default_tracking_uri(tmp_path)
    # relative sqlite paths become absolute against root; absolute ones are kept
    absolute = tmp_path.resolve().as_posix()
    assert resolve_tracking_uri("sqlite:///runs/x.db", root=tmp_path) == f"sqlite:///{absolute}/runs/x.db"
    assert resolve_tracking_uri("sqlite:////abs/x.db") == "sqlite:////abs/x.db"
    assert resolve_tracking_uri("x.db", root=tmp_path) == f"sqlite:///{absolute}/x.db"
    for uri in ("http://mlflow:5000", "https://mlflow.example.com", "postgresql://u:p@db/mlflow",
                "postgresql+psycopg2://u@db/m", "databricks", "databricks://profile"):
        assert resolve_tracking_uri(uri) == uri
    for bad in ("file:///tmp/mlruns", "./mlruns"):
        with pytest.raises(ConfigError, match="file store"):
            resolve_tracking_uri(bad)


def test_ensure_tracking_store_creates_once(store, tmp_path, monkeypatch):
    db = Path(store[len("sqlite:///"):])
    assert db.is_file() and db.stat().st_size > 0
    mtime = db.stat().st_mtime_ns
    lock = db.with_name(db.name + ".lock")

    def no_second_creation(*args, **kwargs):
        raise AssertionError("the store was opened again to create its schema")

    # free the second time in a process: neither the store nor its lock is touched again
    monkeypatch.setattr(tracking.store, "MlflowClient", no_second_creation)
    monkeypatch.setattr(tracking.store, "file_lock", no_second_creation)
    for _ in range(3):
        ensure_tracking_store(store)
    monkeypatch.undo()
    assert db.stat().st_mtime_ns == mtime and lock.exists()
    assert MlflowClient(store).search_experiments()  # a usable schema (the Default experiment)
    ensure_tracking_store("http://127.0.0.1:9")  # other stores: a no-op, nothing contacted
    assert not list(tmp_path.iterdir())


# ----------------------------------------------------------------------------- the tracker


def test_tracker_logs_params_metrics_artifacts_and_tags(store, tmp_path):
    (tmp_path / "report.txt").write_text("hello")
    (tmp_path / "tok").mkdir()
    (tmp_path / "tok" / "vocab.json").write_text("{}")
    with Tracker(store, "logging", "run-a", tags={"recipe": "tiny", "skip": None}) as tracker:
        tracker.log_params({"model": {"d_model": 32, "opt": {"lr": 1e-3}}, "seed": 7, "long": "x" * 7000,
                            "odd key!": [1, 2], "empty": {}})
        for step in range(3):
            tracker.log_metrics({"train/loss": 1.0 / (step + 1), "nan": float("nan"), "text": "no", "none": None,
                                 "tensor": torch.tensor(2.5), "flag": True}, step=step)
        tracker.log_artifact(tmp_path / "report.txt")
        tracker.log_artifact(tmp_path / "tok", artifact_path="assets")
        tracker.log_dict({"a": [1, 2]}, "config/resolved.json")
        tracker.set_tags({"git_commit": "abc", "dvc.data/x.parquet": "d41d8cd98f00b204e9800998ecf8427e"})
        run_id = tracker.run_id
        assert tracker.url is None  # not an http server
    client = MlflowClient(store)
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED" and run.info.run_name == "run-a"
    params = run.data.params
    assert params["model.d_model"] == "32" and params["model.opt.lr"] == "0.001" and params["seed"] == "7"
    assert len(params["long"]) == 6000 and params["odd key_"] == "[1, 2]" and params["empty"] == "{}"
    history = client.get_metric_history(run_id, "train/loss")
    assert [(m.step, m.value) for m in sorted(history, key=lambda m: m.step)] == [(0, 1.0), (1, 0.5), (2, 1.0 / 3)]
    assert all(math.isnan(m.value) for m in client.get_metric_history(run_id, "nan"))
    assert run.data.metrics["tensor"] == 2.5 and run.data.metrics["flag"] == 1.0
    assert "text" not in run.data.metrics and "none" not in run.data.metrics
    artifacts = {a.path for a in client.list_artifacts(run_id)}
    assert {"report.txt", "assets", "config"} <= artifacts
    assert [a.path for a in client.list_artifacts(run_id, "assets/tok")] == ["assets/tok/vocab.json"]
    local = client.download_artifacts(run_id, "config/resolved.json", str(tmp_path / "dl"))
    assert json.loads(Path(local).read_text()) == {"a": [1, 2]}
    tags = run.data.tags
    assert tags["recipe"] == "tiny" and tags["git_commit"] == "abc" and "skip" not in tags
    assert tags["dvc.data/x.parquet"] == "d41d8cd98f00b204e9800998ecf8427e"
    # artifacts live next to the database, not in the working directory
    assert run.info.artifact_uri.startswith(Path(store[len("sqlite:///"):]).parent.as_uri())


def test_tracker_marks_failed_runs_and_reraises(store):
    with pytest.raises(RuntimeError, match="boom"):
        with Tracker(store, "logging", "run-b") as tracker:
            tracker.log_metrics({"loss": 1.0}, step=0)
            raise RuntimeError("boom")
    run = MlflowClient(store).get_run(tracker.run_id)
    assert run.info.status == "FAILED" and run.data.tags["lmforge.error"] == "RuntimeError: boom"


@pytest.mark.parametrize("how", ["disabled", "rank1", "slurm1"])
def test_disabled_or_other_rank_tracker_is_a_no_op(tmp_path, monkeypatch, tiny_dir, how):
    if how == "rank1":
        monkeypatch.setenv("RANK", "1")
    if how == "slurm1":
        monkeypatch.setenv("SLURM_PROCID", "1")
    uri = default_tracking_uri(tmp_path / "store")
    with Tracker(uri, "exp", "run", tags={"a": "b"}, enabled=how != "disabled") as tracker:
        tracker.log_params({"a": {"b": 1}})
        tracker.log_metrics({"loss": 1.0}, step=3)
        tracker.log_artifact(tmp_path / "missing.txt")  # not even checked
        tracker.log_dict({"a": 1}, "a.json")
        tracker.set_tags({"x": "y"})
        assert tracker.log_model(tiny_dir[1], registered_name="never") is None
    assert tracker.run_id is None and tracker.url is None
    assert not (tmp_path / "store").exists()


def test_is_rank_zero(monkeypatch):
    assert is_rank_zero()
    monkeypatch.setenv("LOCAL_RANK", "0")
    monkeypatch.setenv("RANK", "2")  # the global rank decides
    assert not is_rank_zero()
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert is_rank_zero()
    monkeypatch.delenv("RANK")
    assert not is_rank_zero()


def test_tracker_requires_start(store):
    tracker = Tracker(store, "logging", "never-started")
    with pytest.raises(RuntimeError, match="not started"):
        tracker.log_metrics({"loss": 1.0})


# ----------------------------------------------------------------------------- model directories


def _files(directory: Path) -> list[Path]:
    return [p for p in directory.rglob("*") if p.is_file()]


def test_save_and_load_model_dir_round_trip(tiny_dir, tmp_path):
    model, directory = tiny_dir
    assert sorted(p.name for p in directory.iterdir()) == ["lmforge_model.json", "model.safetensors"]
    meta = json.loads((directory / "lmforge_model.json").read_text())
    assert meta["preset"] == "gpt-tiny" and meta["head"] == "lm" and meta["config_overrides"] == TINY
    assert meta["num_labels"] is None and meta["lmforge_version"]
    for path in _files(directory):  # safetensors and JSON only: no pickle anywhere
        assert not path.read_bytes().startswith(b"\x80") and path.suffix not in {".pkl", ".pt", ".bin"}
    loaded = load_model_dir(directory)
    assert not loaded.training
    ids = _ids()
    with torch.no_grad():
        assert torch.equal(model(ids).logits, loaded(ids).logits)


def test_save_model_dir_classifier_extra_files_and_replacement(tmp_path):
    torch.manual_seed(1)
    model = build_model("gpt-tiny", head="classification", num_labels=3, **TINY).eval()
    (tmp_path / "tokenizer").mkdir()
    (tmp_path / "tokenizer" / "tokenizer.json").write_text('{"v": 1}')
    (tmp_path / "card.md").write_text("card")
    out = tmp_path / "out" / "clf"
    save_model_dir(build_model("gpt-tiny", **TINY), "gpt-tiny", "lm", TINY, out)  # replaced below
    save_model_dir(model, "gpt-tiny", "classification", TINY, out, num_labels=3,
                   extra_files={"tokenizer": tmp_path / "tokenizer", "docs/card.md": tmp_path / "card.md"})
    assert (out / "tokenizer" / "tokenizer.json").read_text() == '{"v": 1}'
    assert (out / "docs" / "card.md").read_text() == "card"
    assert sorted(p.name for p in out.parent.iterdir()) == ["clf"]  # no temporary siblings left
    loaded = load_model_dir(out)
    ids = _ids()
    with torch.no_grad():
        out_a, out_b = model(ids).logits, loaded(ids).logits
    assert out_a.shape == (2, 3) and torch.equal(out_a, out_b)


def test_save_model_dir_rejects_mismatched_arguments(tmp_path):
    model = build_model("gpt-tiny", **TINY)
    with pytest.raises(ConfigError, match="does not match"):
        save_model_dir(model, "gpt-tiny", "lm", {**TINY, "d_model": 64, "d_ff": 128}, tmp_path / "bad")
    with pytest.raises(ConfigError, match="extra_files"):
        save_model_dir(model, "gpt-tiny", "lm", TINY, tmp_path / "bad", extra_files={"../x": tmp_path})
    assert not (tmp_path / "bad").exists()


def test_pyfunc_predict_accepts_dataframe_and_dict(tiny_dir):
    model, directory = tiny_dir
    wrapper = LmforgePyfunc()
    wrapper.load_context(SimpleNamespace(artifacts={"model": str(directory)}))
    ids = _ids()
    with torch.no_grad():
        expected = model(ids).logits.numpy()
    frame = pd.DataFrame({"input_ids": ids.tolist()})
    assert (wrapper.predict(None, frame) == expected).all()
    assert (wrapper.predict(None, {"input_ids": ids.tolist()}) == expected).all()
    with pytest.raises(ValueError, match="pad"):
        wrapper.predict(None, {"input_ids": [[1, 2, 3], [4]]})


# ----------------------------------------------------------------------------- registry


def test_log_model_registers_a_candidate(store, tiny_dir, tmp_path):
    model, directory = tiny_dir
    uri_before = os.environ.get("MLFLOW_TRACKING_URI"), mlflow.tracking.is_tracking_uri_set()
    with Tracker(store, "models", "train-gpt") as tracker:
        assert tracker.log_model(directory, name="unregistered") is None
        version = tracker.log_model(directory, name="gpt", registered_name="lmforge-gpt-tiny")
        run_id = tracker.run_id
    assert (os.environ.get("MLFLOW_TRACKING_URI"), mlflow.tracking.is_tracking_uri_set()) == uri_before
    client = MlflowClient(store)
    assert version.aliases == ["candidate"] and version.run_id == run_id
    assert client.get_model_version_by_alias("lmforge-gpt-tiny", "candidate").version == version.version
    run = client.get_run(run_id)
    assert len(run.outputs.model_outputs) == 2  # both logged models belong to the run
    loaded = load_registered_model(store, "lmforge-gpt-tiny", alias="candidate")
    ids = _ids()
    with torch.no_grad():
        assert torch.equal(model(ids).logits, loaded(ids).logits)
    # the pyfunc flavour serves the same logits
    pyfunc = mlflow.pyfunc.load_model(client.get_model_version_download_uri("lmforge-gpt-tiny", version.version))
    assert (pyfunc.predict({"input_ids": ids.tolist()}) == model(ids).logits.detach().numpy()).all()
    # nothing inferred: the requirements are the given ones, and a pretrained model has no signature
    # or input example (MLflow infers both, slowly, only when they are not given)
    served = Path(mlflow.artifacts.download_artifacts(
        client.get_model_version_download_uri("lmforge-gpt-tiny", version.version), dst_path=str(tmp_path / "served")))
    mlmodel = yaml.safe_load((served / "MLmodel").read_text())
    assert "signature" not in mlmodel and "saved_input_example_info" not in mlmodel, mlmodel
    assert mlmodel["metadata"]["lmforge"]["preset"] == "gpt-tiny"
    assert (served / "requirements.txt").read_text().split() == pip_requirements()
    assert not (served / "input_example.json").exists()


def _register_versions(store, tiny_dir, name, count):
    with Tracker(store, "gate", f"train-{name}") as tracker:
        return [tracker.log_model(tiny_dir[1], name="m", registered_name=name).version for _ in range(count)]


def test_promotion_gate_higher_is_better(store, tiny_dir):
    name = "gate-acc"
    v1, v2, v3, v4, v5 = _register_versions(store, tiny_dir, name, 5)
    client = MlflowClient(store)

    def champion():
        return client.get_model_version_by_alias(name, "champion").version

    assert promote_if_better(store, name, v1, "accuracy", 0.5) is True and champion() == v1
    assert promote_if_better(store, name, v2, "accuracy", 0.4) is False and champion() == v1  # worse
    assert promote_if_better(store, name, v3, "accuracy", 0.5) is False and champion() == v1  # a tie
    assert promote_if_better(store, name, int(v4), "accuracy", 0.6) is True and champion() == v4  # better
    assert promote_if_better(store, name, v5, "accuracy", float("nan")) is False and champion() == v4
    assert client.get_model_version(name, v2).tags["eval.accuracy"] == "0.4"
    assert client.get_model_version(name, v4).tags["eval.accuracy"] == "0.6"
    assert client.get_model_version_by_alias(name, "candidate").version == v5  # candidate untouched
    # a metric the champion was never evaluated on cannot replace it
    assert promote_if_better(store, name, v5, "bleu", 99.0) is False and champion() == v4


def test_promotion_gate_lower_is_better(store, tiny_dir):
    name = "gate-loss"
    v1, v2, v3 = _register_versions(store, tiny_dir, name, 3)
    client = MlflowClient(store)
    assert promote_if_better(store, name, v1, "val_loss", 2.0, higher_is_better=False)
    assert not promote_if_better(store, name, v2, "val_loss", 2.5, higher_is_better=False)
    assert client.get_model_version_by_alias(name, "champion").version == v1
    assert promote_if_better(store, name, v3, "val_loss", 1.5, higher_is_better=False)
    assert client.get_model_version_by_alias(name, "champion").version == v3
    loaded = load_registered_model(store, name)  # alias "champion" by default
    assert isinstance(loaded, torch.nn.Module)


# ----------------------------------------------------------------------------- provenance


def _git(repo, *args):
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                   env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
                        "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"})


def test_git_commit(tmp_path):
    assert git_commit(tmp_path) is None  # not a repository
    assert git_commit(tmp_path / "missing") is None
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    assert git_commit(repo) is None  # no commit yet
    (repo / "a.txt").write_text("1")
    _git(repo, "add", "a.txt")
    _git(repo, "commit", "-q", "-m", "first")
    sha = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert git_commit(repo) == sha and len(sha) == 40
    (repo / "untracked.txt").write_text("x")
    assert git_commit(repo) == sha  # untracked files do not make it dirty
    (repo / "a.txt").write_text("2")
    assert git_commit(repo) == f"{sha}-dirty"


def test_dvc_hashes_from_lock_and_computed(tmp_path):
    (tmp_path / "data" / "shards").mkdir(parents=True)
    (tmp_path / "data" / "shards" / "b.txt").write_bytes(b"bbb")
    (tmp_path / "data" / "shards" / "sub").mkdir()
    (tmp_path / "data" / "shards" / "sub" / "a.txt").write_bytes(b"aaa")
    (tmp_path / "data" / "shards" / "a-b.txt").write_bytes(b"x")
    (tmp_path / "data" / "raw.txt").write_bytes(b"hello\r\n")
    (tmp_path / "data" / "added.bin").write_bytes(b"added")
    (tmp_path / "data" / "added.bin.dvc").write_text(
        "outs:\n- md5: 0123456789abcdef0123456789abcdef\n  path: added.bin\n")
    (tmp_path / "dvc.lock").write_text(
        "schema: '2.0'\nstages:\n  clean:\n    cmd: lmforge clean\n    deps:\n    - path: data/raw.txt\n"
        "      md5: ffffffffffffffffffffffffffffffff\n    outs:\n    - path: data/clean.parquet\n"
        "      hash: md5\n      md5: 11111111111111111111111111111111\n      size: 3\n"
        "    - path: data/tok\n      hash: md5\n      md5: 22222222222222222222222222222222.dir\n"
        "      size: 9\n      nfiles: 2\n")
    hashes = dvc_hashes(["data/clean.parquet", tmp_path / "data" / "tok", "data/raw.txt", "data/shards",
                         "data/added.bin", "data/missing.txt"], root=tmp_path)
    md5 = {name: hashlib.md5(data).hexdigest() for name, data in
           {"a": b"aaa", "b": b"bbb", "x": b"x", "raw": b"hello\r\n"}.items()}
    # DVC's directory listing: sorted by relpath as a string ("a-b.txt" < "b.txt" < "sub/a.txt"),
    # serialised by json.dumps(sort_keys=True) with its default separators, then md5 + ".dir"
    listing = (f'[{{"md5": "{md5["x"]}", "relpath": "a-b.txt"}}, {{"md5": "{md5["b"]}", "relpath": "b.txt"}}, '
               f'{{"md5": "{md5["a"]}", "relpath": "sub/a.txt"}}]')
    assert hashes == {
        "data/clean.parquet": "11111111111111111111111111111111",  # recorded outs win
        "data/tok": "22222222222222222222222222222222.dir",  # absolute path inside root, nothing on disk
        "data/raw.txt": md5["raw"],  # a dep only: computed from raw bytes (DVC 3, no dos2unix)
        "data/shards": hashlib.md5(listing.encode()).hexdigest() + ".dir",
        "data/added.bin": "0123456789abcdef0123456789abcdef",  # from its .dvc file
    }
    assert dvc_hashes([], root=tmp_path) == {}


def test_computed_dvc_hashes_equal_what_dvc_records(tmp_path):
    """DVC hashes a stage's dependencies itself and records them in dvc.lock (dvc_hashes reads only
    the outs there): the hashes computed here equal them, for a file (CRLF text: DVC 3 hashes the raw
    bytes) and for a folder (nested, a .git folder inside, a .dvcignore rule at the root)."""
    project = tmp_path / "project"
    shards = project / "data" / "shards"
    (shards / "sub").mkdir(parents=True)
    (shards / ".git").mkdir()
    for name, data in {"b.txt": b"bbb", "a-b.txt": b"x", "sub/a.txt": b"aaa", ".git/HEAD": b"ref",
                       "skipped.log": b"ignored", "sub/empty.bin": b""}.items():
        (shards / name).write_bytes(data)
    (project / "data" / "raw.txt").write_bytes(b"hello\r\nworld\r\n")
    (project / ".dvcignore").write_text("*.log\n")
    env = {**os.environ, "DVC_NO_ANALYTICS": "1", "DVC_SITE_CACHE_DIR": str(tmp_path / "dvc-site-cache")}

    def dvc(*args: str) -> None:
        subprocess.run([str(Path(sys.executable).parent / "dvc"), *args], cwd=project, env=env, check=True,
                       capture_output=True)

    dvc("init", "--no-scm", "-q")
    dvc("stage", "add", "-q", "-n", "copy", "-d", "data/raw.txt", "-d", "data/shards", "-o", "out.txt",
        "cp data/raw.txt out.txt")
    dvc("repro", "-q")
    lock = yaml.safe_load((project / "dvc.lock").read_text())["stages"]["copy"]
    recorded = {dep["path"]: dep["md5"] for dep in lock["deps"]}
    assert recorded["data/shards"].endswith(".dir") and len(recorded) == 2
    assert dvc_hashes(["data/raw.txt", project / "data" / "shards", "out.txt"], root=project) == {
        **recorded, "out.txt": lock["outs"][0]["md5"]}
    (project / ".dvcignore").unlink()  # the ignored file now counts
    assert dvc_hashes(["data/shards"], root=project)["data/shards"] != recorded["data/shards"]
    (shards / ".dvcignore").write_text("*.txt\n")  # DVC refuses to hash a folder holding one: no tag
    assert dvc_hashes(["data/shards", "data/raw.txt"], root=project) == {"data/raw.txt": recorded["data/raw.txt"]}


def test_run_tags(monkeypatch):
    tags = run_tags(commit="abc-dirty", inputs={"data/clean": "11.dir"}, recipe="tiny-gpt", extra={"k": 1, "n": None})
    assert tags == {"git_commit": "abc-dirty", "dvc.data/clean": "11.dir", "recipe": "tiny-gpt", "k": "1"}
    monkeypatch.setenv("DAGSTER_RUN_ID", "dag-123")
    assert run_tags(commit=None, inputs={}, recipe=None) == {"dagster_run_id": "dag-123"}
    assert run_tags(commit=None, inputs={}, recipe=None, dagster_run_id="given")["dagster_run_id"] == "given"


def _imported_modules(path: Path, package: str, module_level_only: bool = False) -> set[str]:
    """The absolute names of the modules a source file imports (``from x import y`` counts both
    ``x`` and ``x.y``, since ``y`` may be a module); only its top-level statements with
    ``module_level_only``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in tree.body if module_level_only else ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names)
    return names


def test_tracking_imports_no_lightning_and_no_layer_above_it():
    """Nothing in lmforge.tracking imports Lightning or the layers built on it (training, stages,
    the CLI, the Dagster project); a model folder needs neither MLflow nor Lightning."""
    above = ("lmforge.training", "lmforge.stages", "lmforge.cli", "dagster_project")
    for path in Path(tracking.__file__).parent.glob("*.py"):
        names = _imported_modules(path, "lmforge.tracking")
        assert not [n for n in names if n.split(".")[0] == "lightning" or n.startswith(above)], path
        # DVC only inside the function that needs it: importing lmforge.tracking stays fast
        top = _imported_modules(path, "lmforge.tracking", module_level_only=True)
        assert not [n for n in top if n.split(".")[0] in ("dvc", "dvc_data", "dvc_objects")], path
    names = _imported_modules(Path(folder.__file__), "lmforge.models")
    assert {n.split(".")[0] for n in names} <= {"__future__", "json", "os", "shutil", "tempfile", "pathlib",
                                                 "typing", "torch", "safetensors", "lmforge"}
    assert all(n.startswith(("lmforge.models.", "lmforge.errors")) or n == "lmforge.__version__"
               for n in names if n.startswith("lmforge."))


def test_only_a_classifier_s_folder_gets_a_text_signature_and_example(tmp_path):
    """A tagger, span, regression or generation model has no label/score output for MLflow to
    check an example against (``lmforge predict`` refuses it): it is logged without one."""
    from lmforge.tracking.pyfunc import text_signature

    assert text_signature(tmp_path) == (None, None)  # no task.json: a pretrained model
    for mode, expected in (("classification", True), ("text_to_text", True), ("tagging", False),
                           ("span_qa", False), ("regression", False), ("generation", False)):
        (tmp_path / "task.json").write_text(json.dumps({"labels": ["a", "b"], "mode": mode, "pair": False}))
        signature, example = text_signature(tmp_path)
        assert (signature is not None, example is not None) == (expected, expected), mode
        if expected:
            assert signature.outputs.input_names() == ["label", "score", "p_a", "p_b"]
            assert list(example.columns) == ["text"]
