"""``python -m dagster_project.run --set``: parameters for one run, checked before Dagster starts,
handed to every process of the run, params.yaml untouched (the end-to-end path is exercised by
tests/test_gpu_round.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dagster_project.overrides import ENV, export_overrides, run_overrides
from lmforge.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]


def test_a_wrong_key_is_refused_before_dagster_starts(tmp_path):
    (tmp_path / "params.yaml").write_text("clean:\n  workers: 1\n")
    env = {**os.environ, "LMFORGE_PROJECT": str(tmp_path), "DAGSTER_HOME": str(tmp_path / "home"),
           "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "dagster_project.run", "--set", "clean.no_such_key=1"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    # the configuration error as lmforge's commands print it: the file, then the key; no traceback
    assert done.stderr.startswith("error: ") and "clean.no_such_key: unknown key" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "home").exists()  # Dagster's instance never started
    assert (tmp_path / "params.yaml").read_text() == "clean:\n  workers: 1\n"


def test_the_items_travel_in_the_environment(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    assert run_overrides() == []
    export_overrides(["train.max_steps=3", "pipelines/gpt.yaml:sizes.tiny.pretrain.learning_rate=0.01"])
    assert run_overrides() == ["train.max_steps=3", "pipelines/gpt.yaml:sizes.tiny.pretrain.learning_rate=0.01"]
    export_overrides([])
    assert ENV not in os.environ
    monkeypatch.setenv(ENV, "{not json")
    with pytest.raises(ConfigError, match="JSON list"):
        run_overrides()


def test_the_params_resource_reads_the_run_overrides(tmp_path, monkeypatch):
    from dagster_project.resources import ParamsResource

    (tmp_path / "params.yaml").write_text("train:\n  max_steps: 7\n")
    monkeypatch.setenv(ENV, '["train.max_steps=3"]')
    assert ParamsResource(root=str(tmp_path)).load().train.max_steps == 3
    monkeypatch.delenv(ENV)
    assert ParamsResource(root=str(tmp_path)).load().train.max_steps == 7
