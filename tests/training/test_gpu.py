"""Training on a CUDA GPU: every architecture's bf16 pretraining step through the real stage, its
from-scratch fine-tuning with the best weights kept, an
FSDP checkpoint that resumes after SIGKILL, and DDP / FSDP under ``torchrun`` against one process.

These run only where CUDA is present (``pytest -m gpu``); elsewhere they are skipped with the
reason. The tiny project of ``conftest.py`` is the data (cleaned, tokenised, stored on the CPU).
"""

from __future__ import annotations

import math
import os
import subprocess
import sys

import pytest
import torch

from lmforge.config import ARCHITECTURE_NAMES, load_params

from .conftest import edit_recipe, write_params
from .test_pretrain import _free_port, history, kill_after_first_checkpoint, lmforge

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

GPU = {"accelerator": "gpu", "threads": None}


def _mean(values) -> float:
    values = list(values)
    return sum(values) / len(values)


@pytest.mark.parametrize("arch", ARCHITECTURE_NAMES)
def test_bf16_pretraining_of_every_architecture_on_the_gpu(project, arch):
    """20 optimizer steps at bf16-mixed precision on the GPU (the default precision there): every
    logged loss finite, the last five below the first five, the model saved from the GPU."""
    from lmforge.training.pretrain import run_pretrain
    from lmforge.training.run import resolve_precision

    steps = 20
    write_params(project, train={**GPU, "max_steps": steps, "checkpoint_every": 10}, tracking={"enabled": False})
    params = load_params(project / "params.yaml")
    assert resolve_precision(params.train) == "bf16-mixed"
    metrics = run_pretrain(params, arch, log=lambda line: None)
    losses = history(project / "models" / arch / "pretrain" / "history.csv")
    assert sorted(losses) == list(range(1, steps + 1))
    assert all(math.isfinite(v) for v in losses.values()), losses
    first, last = _mean(losses[s] for s in range(1, 6)), _mean(losses[s] for s in range(steps - 4, steps + 1))
    assert last < first, (arch, losses)
    assert math.isfinite(metrics["validation"]["loss"])
    # the final evaluation ran on the GPU, not on the CPU Lightning's teardown moves the model to
    assert metrics["compute"]["device"] == torch.cuda.get_device_name()


@pytest.mark.parametrize("arch", ARCHITECTURE_NAMES)
def test_fine_tuning_of_every_architecture_on_the_gpu_keeps_and_restores_its_best_weights(project, arch):
    """The from-scratch fine-tuning on the GPU: its best weights written during training (ELMo's
    cuDNN-packed LSTM weights once stopped this) and the finished model saved."""
    from lmforge.training.finetune import run_finetune

    write_params(project, train={**GPU, "finetune_max_steps": 4, "checkpoint_every": 2}, tracking={"enabled": False})
    params = load_params(project / "params.yaml")
    metrics = run_finetune(params, arch, str(project / "task"), from_scratch=True, log=lambda line: None)
    assert metrics["init"] == "scratch" and metrics["selection"]["best_step"] is not None, metrics
    assert metrics["compute"]["device"] == torch.cuda.get_device_name()  # scored on the GPU too


@pytest.mark.slow
def test_an_fsdp_checkpoint_resumes_after_sigkill_with_the_same_losses(project):
    """FSDP (one process, bf16-mixed): killed with SIGKILL after a checkpoint, restarted with the
    same command, the run logs the losses an uninterrupted FSDP run logs (within bf16 and GPU
    kernel non-determinism: 2% relative)."""
    steps = 300
    no_dropout = {"dropout": 0.0, "attn_dropout": 0.0, "embd_dropout": 0.0}
    edit_recipe(project, "gpt", model=no_dropout)
    write_params(project, train={**GPU, "strategy": "fsdp", "max_steps": steps, "checkpoint_every": 25},
                 tracking={"enabled": False})
    kill_after_first_checkpoint(project, "gpt", 25)
    resumed = lmforge(project, "pretrain", "gpt")
    _, err = resumed.communicate(timeout=600)
    assert resumed.returncode == 0, err[-3000:]
    assert "resuming from" in err
    interrupted = history(project / "models" / "gpt" / "pretrain" / "history.csv")

    straight = project / "straight"
    done = lmforge(project, "pretrain", "gpt", "--set", f"train.output={straight}")
    _, err = done.communicate(timeout=600)
    assert done.returncode == 0, err[-3000:]
    reference = history(straight / "gpt" / "pretrain" / "history.csv")
    assert sorted(interrupted) == sorted(reference) == list(range(1, steps + 1))
    for step in reference:
        assert interrupted[step] == pytest.approx(reference[step], rel=2e-2), step


@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.device_count() < 2,
                    reason="needs two GPUs or more: on one, torchrun's single process would be compared with a single process")
@pytest.mark.parametrize("strategy", ["ddp", "fsdp"])
def test_torchrun_on_every_gpu_matches_one_process(project, strategy):
    """``torchrun`` with one process per GPU of this machine, each taking its share of the same
    global batch, logs the losses of one process with the whole batch (bf16 tolerance)."""
    gpus = torch.cuda.device_count()
    no_dropout = {"dropout": 0.0, "attn_dropout": 0.0, "embd_dropout": 0.0}
    common = ["--set", "train.max_steps=10", "--set", "tracking.enabled=false", "--set", "train.accelerator=gpu"]
    edit_recipe(project, "gpt", batch_size=8 * gpus, model=no_dropout)
    single = lmforge(project, "pretrain", "gpt", *common, "--set", f"train.output={project / 'one'}")
    _, err = single.communicate(timeout=600)
    assert single.returncode == 0, err[-3000:]

    edit_recipe(project, "gpt", batch_size=8)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(gpus), "--master_addr", "127.0.0.1",
           "--master_port", str(_free_port()), "-m", "lmforge.cli", "pretrain", "gpt", "--params", str(project / "params.yaml"),
           *common, "--set", f"train.output={project / 'many'}", "--set", f"train.devices={gpus}",
           "--set", f"train.strategy={strategy}"]
    res = subprocess.run(cmd, cwd=project, capture_output=True, text=True, timeout=600, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert res.returncode == 0, res.stderr[-3000:]
    one = history(project / "one" / "gpt" / "pretrain" / "history.csv")
    many = history(project / "many" / "gpt" / "pretrain" / "history.csv")
    assert sorted(one) == sorted(many) == list(range(1, 11))
    for step in one:
        assert many[step] == pytest.approx(one[step], rel=1e-2), (step, one, many)
