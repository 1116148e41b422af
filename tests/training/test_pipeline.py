"""Every architecture through pretraining, fine-tuning, evaluation and the report, on the tiny
project (a few steps each: this checks the wiring and the registry, not the learning, which the
default run reports in BENCHMARKS.md)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from lmforge.cli import main
from lmforge.config import ARCHITECTURE_NAMES


@pytest.mark.slow
def test_every_architecture_pretrains_finetunes_and_is_evaluated(project, monkeypatch):
    from mlflow import MlflowClient

    monkeypatch.chdir(project)
    runner = CliRunner()
    for command in ("pretrain", "finetune", "evaluate", "report"):
        res = runner.invoke(main, [command, "--params", "params.yaml"])
        assert res.exit_code == 0, (command, res.output, res.exception)
    table = res.output
    client = MlflowClient(f"sqlite:///{project / 'mlflow.db'}")
    for arch in ARCHITECTURE_NAMES:
        ev = json.loads((project / "data" / "report" / "evaluation" / f"{arch}.json").read_text())
        assert ev["pretrain"]["steps"] == 4
        task = ev["finetune"]["task"]
        assert task["steps"] == 2 and task["test"]["examples"] == 12 and 0 <= task["test"]["accuracy"] <= 1
        assert task["mode"] == "classification"  # T5, BART and Switch through the encoder, as their recipes say
        assert task["baselines"]["majority"]["accuracy"] == pytest.approx(0.5)
        assert f"| {arch} " in table
        # registered, candidate, and (first evaluation) champion
        for name in (f"lmforge-{arch}", f"lmforge-{arch}-task"):
            candidate = client.get_model_version_by_alias(name, "candidate")
            assert client.get_model_version_by_alias(name, "champion").version == candidate.version
            assert ev["promotion"][name]["champion"] is True
    for name in ("leaderboard.csv", "leaderboard.md", "metrics.json", "loss_curves.png", "bits_per_byte.png", "downstream.png"):
        assert (project / "data" / "report" / name).stat().st_size > 0
    # what the pretrained models write, beside the numbers (ELMo writes nothing)
    board = (project / "data" / "report" / "leaderboard.md").read_text()
    assert "## What the pretrained models write" in board
    for arch in ARCHITECTURE_NAMES:
        ev = json.loads((project / "data" / "report" / "evaluation" / f"{arch}.json").read_text())
        assert (len(ev["samples"]) == 3) == (arch != "elmo")
        assert (f"| {arch} | " in board.split("## What the pretrained models write")[1]) == (arch != "elmo")
        artifacts = [a.path for a in client.list_artifacts(client.search_runs(
            [client.get_experiment_by_name("lmforge").experiment_id],
            f"tags.stage = 'evaluate' and tags.architecture = '{arch}'")[0].info.run_id)]
        assert (f"samples_{arch}.json" in artifacts) == (arch != "elmo")
    # evaluating the same models again does not move the champion (no improvement)
    res = runner.invoke(main, ["evaluate", "gpt", "--params", "params.yaml"])
    assert res.exit_code == 0, res.output
    ev = json.loads((project / "data" / "report" / "evaluation" / "gpt.json").read_text())
    assert ev["promotion"]["lmforge-gpt-task"]["champion"] is False


@pytest.mark.slow
def test_lmforge_run_walks_the_stage_graph_in_order(project, monkeypatch):
    """`lmforge run` runs every stage of the graph (one architecture here) and prints each
    stage's summary in graph order, ending with the leaderboard."""
    from lmforge.stages import build_stages

    from .conftest import write_params

    write_params(project, train={"architectures": ["gpt"]}, tokenizer={"kinds": ["bpe"]}, dataset={"objectives": ["clm"]})
    monkeypatch.chdir(project)
    res = CliRunner().invoke(main, ["run", "--params", "params.yaml"])
    assert res.exit_code == 0, (res.output, res.exception)
    names = [s.name for s in build_stages(root=project)]
    assert names == ["clean", "tokenizer_bpe", "tokens_bpe", "dataset_clm", "pretrain_gpt", "finetune_gpt_task",
                     "finetune_scratch_gpt_task", "evaluate_gpt", "report"]
    markers = ["clean ->", "tokenizers (metrics", "dataset clm", "pretrain_gpt: done", "finetune_gpt_task: done",
               "finetune_scratch_gpt_task: done", "evaluate_gpt: done", "| gpt "]
    positions = [res.output.find(m) for m in markers]
    assert -1 not in positions and positions == sorted(positions), (markers, positions, res.output)
    assert (project / "data" / "report" / "leaderboard.csv").exists()
