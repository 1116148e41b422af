"""DVC's view end to end: in a temporary copy of the project with a tiny configuration,
`lmforge dvc` then `dvc repro` runs every stage; afterwards `dvc status` is clean, a second
`dvc repro` runs nothing, metrics and plots show, and `dvc exp run -S` re-runs the training
stages only.

The copy is a git repository (`git init` and a commit), not `dvc init --no-scm`: `dvc exp run`
needs git (experiments are git refs), and it is how a user works with the project."""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from .conftest import REPO, tiny_params, write_corpus

BIN = Path(sys.executable).parent
TRAINING = ["pretrain_gpt", "finetune_gpt_task", "evaluate_gpt", "report"]
DATA = ["clean", "tokenizer_bpe", "tokens_bpe", "dataset_clm"]


def copy_tracked_files(dest: Path) -> None:
    """The repository's tracked files (as they are in the working tree); outputs such as data/,
    models/ and mlflow.db are not tracked, so they stay behind."""
    files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, check=True, capture_output=True).stdout.decode()
    for rel in filter(None, files.split("\0")):
        src = REPO / rel
        if src.is_file() and not rel.startswith(("tests/", "benchmarks/")):
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)


@pytest.mark.slow
def test_dvc_repro_status_metrics_plots_and_experiments(tmp_path):
    root = tmp_path / "project"
    root.mkdir()
    copy_tracked_files(root)
    assert (root / ".dvc" / "config").exists() and (root / "src" / "lmforge" / "stages" / "graph.py").exists()
    write_corpus(root)
    params = tiny_params(tracking={"uri": f"sqlite:///{tmp_path / 'mlflow.db'}"})
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")

    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "DVC_NO_ANALYTICS": "1",
           "DVC_SITE_CACHE_DIR": str(tmp_path / "dvc-site-cache")}

    def run(*cmd: str, ok: bool = True) -> str:
        done = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
        out = done.stdout + done.stderr
        assert not ok or done.returncode == 0, f"{' '.join(cmd)} exited {done.returncode}:\n{out[-6000:]}"
        return out

    def dvc(*args: str) -> str:
        return run(str(BIN / "dvc"), *args)

    def ran(out: str) -> list[str]:
        return re.findall(r"Running stage '(\w+)'", out)

    def skipped(out: str) -> list[str]:
        return re.findall(r"Stage '(\w+)' didn't change, skipping", out)

    run("git", "init", "-q")
    for key, value in (("user.name", "lmforge tests"), ("user.email", "tests@lmforge.invalid"), ("commit.gpgsign", "false")):
        run("git", "config", key, value)
    assert "dvc.yaml: written" in run(str(BIN / "lmforge"), "dvc")
    stages = list(yaml.safe_load((root / "dvc.yaml").read_text(encoding="utf-8"))["stages"])
    assert stages == DATA + ["pretrain_gpt", "finetune_gpt_task", "finetune_scratch_gpt_task", "evaluate_gpt", "report"]
    run("git", "add", "-A")
    run("git", "commit", "-q", "-m", "tiny project")

    # the whole pipeline, in graph order
    assert ran(dvc("repro")) == stages
    assert json.loads(dvc("status", "--json")) == {}
    out = dvc("repro")
    assert ran(out) == [] and skipped(out) == stages, out
    run("git", "add", "dvc.lock")
    run("git", "commit", "-q", "-m", "dvc repro")

    # metrics: the report's leaderboard as DVC reads it
    report = json.loads((root / "data/report/metrics.json").read_text(encoding="utf-8"))
    shown = json.loads(dvc("metrics", "show", "--json"))
    assert shown[""]["data"]["data/report/metrics.json"]["data"] == report
    # and the data stages' statistics, from the records the stages wrote
    clean_stats = json.loads((root / "data/clean/stats.json").read_text(encoding="utf-8"))
    clean_metrics = shown[""]["data"]["data/clean.metrics.json"]["data"]
    assert (clean_metrics["documents_in"], clean_metrics["documents_out"]) == (clean_stats["documents_in"],
                                                                               clean_stats["documents_out"])
    assert {k: v["documents"] for k, v in clean_stats["dropped"].items()} == clean_metrics.get("dropped_documents", {})
    tokenizer = json.loads((root / "data/tokenizers/bpe/metrics.json").read_text(encoding="utf-8"))
    assert shown[""]["data"]["data/tokenizers/bpe.metrics.json"]["data"]["tokens_per_word"] == tokenizer["tokens_per_word"]
    assert shown[""]["data"]["data/tokens/bpe.metrics.json"]["data"]["train"]["tokens"] > 0
    assert 0.99 < shown[""]["data"]["data/datasets/clm.metrics.json"]["data"]["train"]["labels_per_input_token"] <= 1
    assert report["gpt"]["steps"] == 4 and report["summary"]["architectures"] == 1

    # plots: the loss curve drawn from the report's CSV, and the report's charts
    plots = json.loads(dvc("plots", "show", "--json", "-o", str(tmp_path / "dvc_plots")))["data"]
    curve = plots["pretraining_loss"][0]["content"]["data"]["values"]
    assert [int(v["step"]) for v in curve] == [1, 2, 3, 4] and all(float(v["train_loss"]) > 0 for v in curve)
    schedule = plots["learning_rate"][0]["content"]["data"]["values"]  # the recipe's warmup, then the decay
    assert [int(v["step"]) for v in schedule] == [1, 2, 3, 4] and all(float(v["lr"]) > 0 for v in schedule)
    throughput = plots["tokens_per_second"][0]["content"]["data"]["values"]
    assert all(float(v["tokens_per_second"]) > 0 for v in throughput)
    assert {"data/report/loss_curves.png", "data/report/bits_per_byte.png", "data/report/downstream.png"} <= set(plots)

    # an experiment with another value of a parameter the training stages read: a recipe's (the
    # recipe is a parameters file, its keys named per stage), so it re-runs the stages that read
    # the key (the from-scratch control reads the fine-tuning settings only), and `dvc params diff`
    # and `dvc exp show` show it
    gpt_lr = "pipelines/gpt.yaml:sizes.tiny.pretrain.learning_rate"
    out = dvc("exp", "run", "-S", f"{gpt_lr}=0.003")
    assert ran(out) == TRAINING and sorted(skipped(out)) == sorted(DATA + ["finetune_scratch_gpt_task"]), out
    assert json.loads(dvc("status", "--json")) == {}
    pretrained = json.loads((root / "models/gpt/pretrain/metrics.json").read_text(encoding="utf-8"))
    assert pretrained["optim"]["learning_rate"] == 0.003 and pretrained["steps"] == 4
    with open(root / "models/gpt/pretrain/history.csv", newline="", encoding="utf-8") as f:
        assert [int(r["step"]) for r in csv.DictReader(f) if r["train/loss"]] == [1, 2, 3, 4]
    recipe = (root / "pipelines/gpt.yaml").read_text(encoding="utf-8")
    assert "learning_rate: 0.003" in recipe and "# passes over the training examples" in recipe  # comments kept
    changed = json.loads(dvc("params", "diff", "--json"))["pipelines/gpt.yaml"]["sizes.tiny.pretrain.learning_rate"]
    assert (changed["old"], changed["new"]) == (0.002, 0.003)
    rows = {}  # name -> (the recipe's learning rate, the report's gpt validation loss) per revision

    def walk(entries):
        for e in entries:
            data = e.get("data") or {}
            recipe_params = data.get("params", {}).get("pipelines/gpt.yaml", {}).get("data", {})
            lr = recipe_params.get("sizes", {}).get("tiny", {}).get("pretrain", {}).get("learning_rate")
            metrics = data.get("metrics", {}).get("data/report/metrics.json", {}).get("data", {})
            rows[e.get("name") or e["rev"]] = (lr, metrics.get("gpt", {}).get("val_loss"))
            for exp in e.get("experiments") or []:
                walk(exp.get("revs", []))

    walk(json.loads(dvc("exp", "show", "--json")))
    new_loss = json.loads((root / "data/report/metrics.json").read_text(encoding="utf-8"))["gpt"]["val_loss"]
    assert rows.pop("workspace") == (0.003, new_loss)
    # the commit's and the experiment's: each with its own learning rate and the loss it gave
    assert sorted(rows.values()) == sorted([(0.002, report["gpt"]["val_loss"]), (0.003, new_loss)]), rows
    assert new_loss != report["gpt"]["val_loss"]
