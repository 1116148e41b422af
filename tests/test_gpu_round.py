"""benchmarks/gpu_round.sh --dry: every step of the GPU round at toy size on a CPU, so the round
itself (on a lent GPU, minutes at most) cannot fail on a typo in the script, a parameter it sets
or a file it reads back."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_the_dry_round_runs_every_step_and_writes_its_results(tmp_path):
    out, work = tmp_path / "out", tmp_path / "work"
    env = {**os.environ, "OUT": str(out), "GPU_ROUND_WORK": str(work), "PYTHON": sys.executable,
           "GPU_ROUND_SECONDS": "1500", "OMP_NUM_THREADS": "1",
           "GPU_ROUND_BERT_RUNS": "ours-compiled", "GPU_ROUND_GPT_RUNS": "ours-compiled+pad+nodrop",
           "GPU_ROUND_FINETUNE_LR": "0.002"}
    # in two calls, as on a lent GPU: the data stages (where a CPU machine prepares the project),
    # then on the folder the first call made the stages after them, the tests beside them and the
    # MFU runs last
    for phases, mfu_last in (("data", "0"), ("mfu,tests,train", "1")):
        done = subprocess.run(["bash", str(REPO / "benchmarks" / "gpu_round.sh"), "--dry"],
                              env={**env, "GPU_ROUND_PHASES": phases, "GPU_ROUND_MFU_LAST": mfu_last},
                              cwd=tmp_path, capture_output=True, text=True, timeout=1700)
        assert done.returncode == 0, done.stderr[-3000:]
    assert "e2e: data stages start" not in done.stderr  # the second call did not run them again
    log = done.stderr
    assert log.index("e2e: exit") < log.index("mfu: after the training stages") < log.index("mfu: gpt2")
    assert sorted(p.name for p in out.iterdir()) == ["e2e.log", "leaderboard.md", "mfu.jsonl", "mfu.log",
                                                     "pytest_gpu.log", "round.log", "stages.csv", "training.csv"]
    # MFU: every run the GPU round times, each through its loop (eager on the CPU), none failed
    rows = [json.loads(line) for line in (out / "mfu.jsonl").read_text().splitlines()]
    assert [(r["model"], r["run"], r["batch"]) for r in rows] == [
        ("gpt2", "ours-compiled+pad+nodrop", 2),  # the model's batch (the device check's 2 for GPT-2's 32), asked for
        ("gpt2", "ours-compiled+pad+nodrop", 4), ("gpt2", "ours-cudagraphs+pad+nodrop", 4),  # the wide batch
        ("gpt2", "hf-compiled+pad+nodrop", 4),
        ("bert-base", "ours-compiled", 2)]
    assert all("error" not in r and r["tokens_per_s"] > 0 for r in rows), rows
    # each run's profiled steps: its top kernels (the CPU's operators here)
    assert all(r["kernels"] and r["kernel_ms_per_step"] > 0 for r in rows), rows
    # the GPU tests were collected and (without CUDA) skipped, with pytest's summary line
    assert "skipped" in (out / "pytest_gpu.log").read_text()
    # the end-to-end run: every step of the data and training stages succeeded, the report was written
    with open(out / "stages.csv", newline="") as f:
        steps = list(csv.DictReader(f))
    names = {s["step"] for s in steps}
    assert {"clean", "tokenizer_bpe", "dataset_clm", "pretrain_gpt", "finetune_gpt_docstring_kind",
            "finetune_scratch_gpt_docstring_kind", "evaluate_gpt", "report"} <= names, names
    assert all(s["status"] == "SUCCESS" for s in steps), [s for s in steps if s["status"] != "SUCCESS"]
    # every training's record, with where its time went
    with open(out / "training.csv", newline="") as f:
        trainings = {(r["architecture"], r["run"]): r for r in csv.DictReader(f)}
    assert set(trainings) == {("gpt", "pretrain"), ("gpt", "docstring_kind"), ("gpt", "docstring_kind-scratch")}
    assert float(trainings[("gpt", "pretrain")]["t_final_evaluation"]) >= 0
    assert trainings[("gpt", "docstring_kind-scratch")]["init"] == "scratch"
    board = (out / "leaderboard.md").read_text().splitlines()
    header = next(line for line in board if line.startswith("| architecture | objective"))
    row = next(line for line in board if line.startswith("| gpt |"))
    cells = dict(zip([c.strip() for c in header.split("|")], [c.strip() for c in row.split("|")]))
    assert cells["steps"] == "4"  # train.max_steps=4 of --set reached the training process Pipes launched
    # parameters through --set only: the scratch project's params.yaml is the starter's, untouched
    starter = (REPO / "src" / "lmforge" / "starter" / "params.yaml").read_bytes()
    assert (work / "project" / "params.yaml").read_bytes() == starter


def test_the_round_refuses_a_work_folder_it_did_not_make(tmp_path):
    work = tmp_path / "mine"
    work.mkdir()
    (work / "keep.txt").write_text("a user's file")
    env = {**os.environ, "OUT": str(tmp_path / "out"), "GPU_ROUND_WORK": str(work), "PYTHON": sys.executable}
    done = subprocess.run(["bash", str(REPO / "benchmarks" / "gpu_round.sh"), "--dry"], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    assert "was not made by this script" in done.stderr
    assert sorted(p.name for p in work.iterdir()) == ["keep.txt"]


def test_the_report_lists_each_finished_training_and_the_gains_where_both_arms_finished(tmp_path, capsys):
    from .conftest import load_benchmark

    report = load_benchmark("gpu_round_report")
    models = tmp_path / "project" / "models"

    def record(arch, run, **m):
        (models / arch / run).mkdir(parents=True)
        (models / arch / run / "metrics.json").write_text(json.dumps(m))

    record("gpt", "pretrain", steps=900, seconds=150.5, validation={"loss": 4.9}, timings={"setup": 2.0, "training": 90.1})
    record("gpt", "task", init="pretrained", task="task", steps=150, seconds=40.0, test={"accuracy": 0.70},
           timings={"training": 20.0, "baselines": 3.5})
    record("gpt", "task-scratch", init="scratch", task="task", steps=150, seconds=38.0, test={"accuracy": 0.66})
    record("bert", "task", init="pretrained", task="task", steps=150, seconds=41.0, test={"accuracy": 0.61})
    report.write_report(tmp_path / "no-dagster", tmp_path / "project", tmp_path / "out")
    with open(tmp_path / "out" / "training.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(r["architecture"], r["run"]) for r in rows] == [("bert", "task"), ("gpt", "pretrain"), ("gpt", "task"),
                                                             ("gpt", "task-scratch")]
    gpt = {r["run"]: r for r in rows if r["architecture"] == "gpt"}
    assert gpt["pretrain"]["validation_loss"] == "4.9" and gpt["pretrain"]["t_training"] == "90.1"
    assert gpt["task"]["t_baselines"] == "3.5" and gpt["task-scratch"]["t_baselines"] == ""
    # BERT's control did not finish: no gain for it
    assert report.transfer_gains(report.training_rows(models)) == [("gpt", "task", 0.70, 0.66)]
    assert "gpt on task: test accuracy 0.7000 pretrained, 0.6600 from scratch, gain +4.0 points" in capsys.readouterr().out


def _wheel(folder: Path, dist: str, module: str) -> Path:
    """A one-module wheel, ``dist`` 0.1, written by hand (no build tool)."""
    import base64
    import hashlib
    import zipfile

    files = {f"{module}/__init__.py": b"PROBE = 1\n",
             f"{dist}-0.1.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n".encode(),
             f"{dist}-0.1.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = "".join(f"{name},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},{len(data)}\n"
                     for name, data in files.items()) + f"{dist}-0.1.dist-info/RECORD,,\n"
    path = folder / f"{dist}-0.1-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        for name, data in {**files, f"{dist}-0.1.dist-info/RECORD": record.encode()}.items():
            z.writestr(name, data)
    return path


def test_carried_wheels_are_installed_unless_present_and_a_missing_module_stops_the_round_at_once(tmp_path):
    out, work, wheels = tmp_path / "out", tmp_path / "work", tmp_path / "wheels"
    wheels.mkdir()
    _wheel(wheels, "lmforge_probe", "lmforge_probe")
    _wheel(wheels, "filelock", "filelock_shadow")  # a distribution this Python has: left out
    env = {**os.environ, "OUT": str(out), "GPU_ROUND_WORK": str(work), "PYTHON": sys.executable,
           "GPU_ROUND_WHEELS": str(wheels), "GPU_ROUND_NEEDS": "lmforge_probe lmforge_no_such_module"}
    done = subprocess.run(["bash", str(REPO / "benchmarks" / "gpu_round.sh"), "--dry"], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    assert f"wheels: 1 of 2 in {wheels} to install" in done.stderr
    assert (work / "site" / "lmforge_probe" / "__init__.py").exists() and not (work / "site" / "filelock_shadow").exists()
    # the installed module is found; the one nothing provides is named, and nothing else ran
    assert "cannot import: lmforge_no_such_module (carry the packages as wheels)" in done.stderr
    assert not (work / "project").exists() and not (out / "mfu.jsonl").exists()
