"""Pretraining: outputs, tracking, exact resume after SIGKILL, 2-process DDP, the NaN guard."""

from __future__ import annotations

import csv
import json
import math
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from lmforge.config import load_params
from lmforge.models.layers import ModelOutput
from lmforge.training.module import LMForgeModule, NonFiniteLossError, lr_lambda
from lmforge.config.recipes import OptimConfig

from ..waiting import wait_for
from .conftest import edit_recipe, write_params


def history(path: Path) -> dict[int, float]:
    with open(path, encoding="utf-8") as f:
        return {int(r["step"]): float(r["train/loss"]) for r in csv.DictReader(f) if r.get("train/loss")}


def lmforge(root: Path, *args: str, env: dict | None = None, **kwargs) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "lmforge.cli", *args, "--params", str(root / "params.yaml")],
                            cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})}, **kwargs)


def test_pretrain_writes_model_history_metrics_and_mlflow_run(project):
    from mlflow import MlflowClient

    from lmforge import tracking
    from lmforge.models.folder import load_model_dir
    from lmforge.training.pretrain import run_pretrain

    params = load_params(project / "params.yaml")
    logs: list[str] = []
    called = time.monotonic()
    metrics = run_pretrain(params, "gpt", log=logs.append)
    whole = time.monotonic() - called
    out = project / "models" / "gpt" / "pretrain"
    assert metrics["steps"] == 4
    assert json.loads((out / "metrics.json").read_text())["validation"]["loss"] == metrics["validation"]["loss"]
    assert sorted(history(out / "history.csv")) == [1, 2, 3, 4]
    assert (out / "loss.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the learning rate and the tokens trained on (from the batches' shapes), with their rate
    with open(out / "history.csv", encoding="utf-8") as f:
        rows = [r for r in csv.DictReader(f) if r["train/loss"]]
    tokens = [int(r["tokens"]) for r in rows]
    assert tokens[0] > 0 and tokens == [tokens[0] * k for k in range(1, 5)]  # equal blocks every step
    assert all(float(r["tokens_per_second"]) > 0 and float(r["lr"]) > 0 for r in rows)
    # what the run cost: the tokens of the history, the model FLOPs over them (clm: every position predicted)
    from lmforge.models.flops import flops_per_token

    compute = metrics["compute"]
    assert compute["tokens"] == tokens[-1] == compute["examples"] * params.dataset.clm.block_size
    assert compute["predicted_fraction"] == 1.0 and compute["device"] == "cpu" and compute["mfu"] is None
    saved = load_model_dir(out / "model")
    assert compute["flops"] == pytest.approx(flops_per_token(saved, compute["positions_per_example"], 1.0) * tokens[-1])
    assert compute["positions_per_example"] == params.dataset.clm.block_size and 0 < compute["cpu_seconds"]
    v = metrics["validation"]
    assert 0 < v["loss"] and 0 <= v["accuracy"] <= 1 and v["predicted_tokens"] > 0 and v["bits_per_byte"] > 0
    # where the wall time went, phase by phase in the order they ran, and named in the last log line
    timings = metrics["timings"]
    assert list(timings) == ["baselines", "setup", "first_step", "training", "final_evaluation", "outputs"]
    assert all(t >= 0 for t in timings.values()) and timings["first_step"] > 0
    assert sum(timings.values()) <= whole + 0.5  # parts of the call, none counted twice
    assert "(baselines " in logs[-1] and "final_evaluation " in logs[-1]
    # the headline numbers follow from the loss: e^loss, and bits over the bpe tokenizer's bytes per token
    tokenizer = json.loads((Path(params.tokenizer.output) / "bpe" / "metrics.json").read_text())
    assert v["perplexity"] == pytest.approx(math.exp(v["loss"]), rel=1e-9)
    assert v["bits_per_byte"] == pytest.approx(v["loss"] / math.log(2) / tokenizer["bytes_per_token"], rel=1e-9)
    assert v["unigram_bits_per_byte"] == pytest.approx(v["unigram_loss"] / math.log(2) / tokenizer["bytes_per_token"], rel=1e-9)
    assert v["uniform_loss"] == pytest.approx(math.log(tokenizer["vocab_size"]), rel=1e-12)
    # the reloaded model (safetensors, no pickle) gives the saved model's outputs
    model = load_model_dir(out / "model")
    assert not list((out / "model").glob("*.pt*")) and (out / "model" / "tokenizer" / "tokenizer.json").exists()
    ids = torch.randint(0, 100, (2, 16))
    assert torch.isfinite(model(input_ids=ids).logits).all()
    # one MLflow run with per-step metrics, the model registered with the alias "candidate"
    client = MlflowClient(tracking.resolve_tracking_uri(params.tracking.uri))
    run = client.get_run(metrics["mlflow_run_id"])
    assert run.data.tags["stage"] == "pretrain" and run.data.tags["architecture"] == "gpt"
    assert len(client.get_metric_history(run.info.run_id, "train/loss")) == 4
    assert len(client.get_metric_history(run.info.run_id, "tokens_per_second")) == 4
    assert "loss.png" in {a.path for a in client.list_artifacts(run.info.run_id)}
    version = client.get_model_version_by_alias("lmforge-gpt", "candidate")
    assert version.run_id == run.info.run_id
    # unchanged settings: up to date, nothing retrained
    again = run_pretrain(params, "gpt", log=logs.append)
    assert again["mlflow_run_id"] == metrics["mlflow_run_id"] and logs[-1] == "pretrain gpt: up to date"
    # a change to the recipe's fine-tuning settings is not pretraining's: still up to date
    tuned = params.model_copy(update={"recipe_overrides": {"gpt": ["sizes.tiny.finetune.learning_rate=0.5",
                                                                   "finetune.patience=3"]}})
    assert run_pretrain(tuned, "gpt", log=logs.append)["mlflow_run_id"] == metrics["mlflow_run_id"]
    assert logs[-1] == "pretrain gpt: up to date"


def test_a_training_run_logs_the_machine_s_use_as_system_metrics(project):
    """MLflow's system metrics (CPU, memory, ...) sampled during the run, every
    tracking.system_metrics_seconds, into the training run."""
    from mlflow import MlflowClient

    from lmforge import tracking
    from lmforge.training.pretrain import run_pretrain

    write_params(project, tracking={"system_metrics_seconds": 0.2}, train={"max_steps": 8})
    params = load_params(project / "params.yaml")
    metrics = run_pretrain(params, "gpt", log=lambda line: None)
    client = MlflowClient(tracking.resolve_tracking_uri(params.tracking.uri))
    keys = client.get_run(metrics["mlflow_run_id"]).data.metrics
    for key in ("system/cpu_utilization_percentage", "system/system_memory_usage_megabytes"):
        history = client.get_metric_history(metrics["mlflow_run_id"], key)
        assert history and all(m.value >= 0 for m in history), sorted(keys)


def kill_after_first_checkpoint(root: Path, arch: str, every: int, *args: str) -> None:
    """Start ``lmforge pretrain arch *args`` and SIGKILL it once its first last.ckpt (that of step
    ``every``) is written whole."""
    attempts = root / "models" / arch / ".pretrain.attempts"
    proc = lmforge(root, "pretrain", arch, *args)
    (last,) = wait_for(lambda: list(attempts.glob("*/checkpoints/last.ckpt")), "the first last.ckpt", timeout=300,
                       alive=lambda: proc.poll() is None)
    # written whole before it appears under its name (Lightning writes it through a transaction)
    assert torch.load(last, map_location="cpu", weights_only=False)["global_step"] == every
    assert proc.poll() is None, "the run finished before it could be killed; make it longer"
    proc.send_signal(signal.SIGKILL)
    proc.wait()


@pytest.mark.slow
def test_resume_after_sigkill_reaches_the_same_losses(project):
    """A run killed with SIGKILL and restarted with the same command continues from its last
    checkpoint (data position, optimizer, schedule, RNG) and logs the losses an uninterrupted run logs."""
    steps = 40
    common = ["--set", f"train.max_steps={steps}", "--set", "train.checkpoint_every=5", "--set", "tracking.enabled=false"]
    kill_after_first_checkpoint(project, "gpt", 5, *common)
    assert not (project / "models" / "gpt" / "pretrain" / "metrics.json").exists()
    resumed = lmforge(project, "pretrain", "gpt", *common)
    _, err = resumed.communicate(timeout=600)
    assert resumed.returncode == 0, err
    assert "resuming from" in err
    interrupted = history(project / "models" / "gpt" / "pretrain" / "history.csv")

    straight = project / "straight"
    done = lmforge(project, "pretrain", "gpt", *common, "--set", f"train.output={straight}")
    _, err = done.communicate(timeout=600)
    assert done.returncode == 0, err
    reference = history(straight / "gpt" / "pretrain" / "history.csv")
    assert sorted(interrupted) == sorted(reference) == list(range(1, steps + 1))
    for step in reference:
        assert interrupted[step] == pytest.approx(reference[step], rel=1e-6, abs=1e-6), step


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_two_process_ddp_matches_one_process_on_the_same_global_batch(project):
    """torchrun with 2 CPU processes (gloo), 4 examples each, against 1 process with 8: the same
    global batches, so the same losses after the first optimizer step (dropout off)."""
    no_dropout = {"dropout": 0.0, "attn_dropout": 0.0, "embd_dropout": 0.0}
    common = ["--set", "train.max_steps=3", "--set", "tracking.enabled=false"]
    edit_recipe(project, "gpt", batch_size=8, model=no_dropout)
    single = lmforge(project, "pretrain", "gpt", *common, "--set", f"train.output={project / 'one'}")
    _, err = single.communicate(timeout=600)
    assert single.returncode == 0, err

    edit_recipe(project, "gpt", batch_size=4)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_addr", "127.0.0.1",
           "--master_port", str(_free_port()), "-m", "lmforge.cli", "pretrain", "gpt", "--params", str(project / "params.yaml"),
           *common, "--set", f"train.output={project / 'two'}", "--set", "train.devices=2", "--set", "train.strategy=ddp"]
    res = subprocess.run(cmd, cwd=project, capture_output=True, text=True, timeout=600,
                         env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert res.returncode == 0, res.stderr[-3000:]
    one = history(project / "one" / "gpt" / "pretrain" / "history.csv")
    two = history(project / "two" / "gpt" / "pretrain" / "history.csv")
    assert sorted(one) == sorted(two) == [1, 2, 3]
    for step in one:  # step 1: same init and batch; steps 2, 3: after all-reduced updates
        assert two[step] == pytest.approx(one[step], abs=1e-4), (step, one, two)


def test_more_devices_without_a_launcher_is_refused(project):
    from lmforge.training.run import LaunchError
    from lmforge.training.pretrain import run_pretrain

    params = load_params(project / "params.yaml", ["train.devices=2"])
    with pytest.raises(LaunchError, match="torchrun --nproc_per_node 2"):
        run_pretrain(params, "gpt")


class _NaNAfter(torch.nn.Module):
    """A model whose loss is finite for ``good`` calls, then NaN."""

    def __init__(self, good: int):
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(()))
        self.calls, self.good = 0, good

    def forward(self, input_ids, **_):
        self.calls += 1
        loss = self.w * input_ids.float().mean()
        return ModelOutput(loss=loss if self.calls <= self.good else loss * float("nan"))


def test_a_nan_loss_stops_the_run_naming_the_step(tmp_path):
    import lightning.pytorch as pl

    optim = OptimConfig(max_steps=10, batch_size=2, learning_rate=1e-3)
    module = LMForgeModule(_NaNAfter(good=3), optim)
    data = [{"input_ids": torch.ones(4, dtype=torch.long)} for _ in range(40)]
    loader = torch.utils.data.DataLoader(data, batch_size=2)
    trainer = pl.Trainer(max_steps=10, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                         default_root_dir=tmp_path, accelerator="cpu")
    with pytest.raises(NonFiniteLossError, match=r"loss is nan at step 3 \(micro-batch 4\)"):
        trainer.fit(module, loader)


class _FusedOnCpu(LMForgeModule):
    """The module with the fused AdamW it takes on a GPU, here on the CPU (torch has it there too)."""

    def configure_optimizers(self):
        config = super().configure_optimizers()
        groups = config["optimizer"].param_groups
        o = self.optim
        optimizer = torch.optim.AdamW([{k: v for k, v in g.items() if k != "initial_lr"} for g in groups], lr=o.learning_rate,
                                      betas=o.betas, eps=o.eps, fused=True)
        return {"optimizer": optimizer,
                "lr_scheduler": {"scheduler": torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda(o)), "interval": "step"}}


def test_bf16_mixed_clips_the_gradients_of_a_fused_optimizer_as_lightning_clips_a_plain_one(tmp_path):
    """Lightning refuses to clip for a fused optimizer under bf16-mixed (a guard for fp16's loss
    scaler): the module clips itself, to the same weights as Lightning's clipping of a plain AdamW."""
    import lightning.pytorch as pl

    def train(cls, clip):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Embedding(50, 16), torch.nn.Linear(16, 50))

        class LM(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.net = model

            def forward(self, input_ids, **_):
                logits = self.net(input_ids)
                return ModelOutput(loss=torch.nn.functional.cross_entropy(logits.float().flatten(0, 1), input_ids.flatten()))

        optim = OptimConfig(max_steps=4, batch_size=2, learning_rate=1e-2, gradient_clip=clip)
        module = cls(LM(), optim)
        g = torch.Generator().manual_seed(1)
        data = [{"input_ids": torch.randint(0, 50, (8,), generator=g)} for _ in range(8)]
        trainer = pl.Trainer(max_steps=4, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                             default_root_dir=tmp_path, accelerator="cpu", precision="bf16-mixed",
                             gradient_clip_val=optim.gradient_clip, gradient_clip_algorithm="norm")
        trainer.fit(module, torch.utils.data.DataLoader(data, batch_size=2))
        return torch.cat([p.detach().flatten() for p in model.parameters()])

    plain, fused = train(LMForgeModule, 1e-3), train(_FusedOnCpu, 1e-3)
    assert torch.allclose(fused, plain, atol=1e-5), (fused - plain).abs().max()
    # and the clipping did something: unclipped, the same run ends elsewhere
    assert (train(LMForgeModule, None) - plain).abs().max() > 1e-4


def test_a_nan_loss_found_by_a_later_check_still_names_its_step(tmp_path):
    """Checked every 4 micro-batches, the loss that went NaN at the 6th is found at the 8th's
    check, and the error names the 6th (step 5), not the step that read it."""
    import lightning.pytorch as pl

    optim = OptimConfig(max_steps=10, batch_size=2, learning_rate=1e-3)
    module = LMForgeModule(_NaNAfter(good=5), optim, finite_check_every=4)
    data = [{"input_ids": torch.ones(4, dtype=torch.long)} for _ in range(40)]
    trainer = pl.Trainer(max_steps=10, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                         default_root_dir=tmp_path, accelerator="cpu")
    with pytest.raises(NonFiniteLossError, match=r"loss is nan at step 5 \(micro-batch 6\)"):
        trainer.fit(module, torch.utils.data.DataLoader(data, batch_size=2))
    assert module.model.calls == 8  # found at the check of the 8th micro-batch, before its backward


def test_a_nan_loss_between_checks_is_found_before_a_checkpoint_is_written(tmp_path):
    """A checkpoint due before the next periodic check checks the losses first: no checkpoint
    holds the weights a NaN loss has reached."""
    import lightning.pytorch as pl
    from lightning.pytorch.callbacks import ModelCheckpoint

    optim = OptimConfig(max_steps=10, batch_size=2, learning_rate=1e-3)
    module = LMForgeModule(_NaNAfter(good=2), optim, finite_check_every=100)
    data = [{"input_ids": torch.ones(4, dtype=torch.long)} for _ in range(40)]
    ckpt = ModelCheckpoint(dirpath=tmp_path / "ckpt", every_n_train_steps=4, save_top_k=-1)
    trainer = pl.Trainer(max_steps=10, logger=False, enable_progress_bar=False, callbacks=[ckpt],
                         default_root_dir=tmp_path, accelerator="cpu")
    with pytest.raises(NonFiniteLossError, match=r"loss is nan at step 2 \(micro-batch 3\)"):
        trainer.fit(module, torch.utils.data.DataLoader(data, batch_size=2))
    assert not list((tmp_path / "ckpt").glob("*.ckpt"))


def test_a_training_step_reads_the_device_only_on_the_steps_that_log(tmp_path, monkeypatch):
    """No step reads a tensor on the host (each read waits for the GPU) except the steps the
    history writes a row at: there the finite-loss check reads the losses since the last check
    at once, and the history its sums. Without a progress bar Lightning is given no loss to read
    after every step."""
    import traceback

    import lightning.pytorch as pl

    from lmforge.models.registry import build_model
    from lmforge.training.run import History

    torch.manual_seed(0)
    model = build_model("gpt-tiny", head="lm", vocab_size=200, n_positions=32)
    module = LMForgeModule(model, OptimConfig(max_steps=8, batch_size=4, learning_rate=1e-3), finite_check_every=4)
    data = [{"input_ids": x, "labels": x} for x in torch.randint(0, 200, (32, 32))]
    reads: list[str] = []

    def counted(name):
        original = getattr(torch.Tensor, name)

        def read(self, *args):
            caller = traceback.extract_stack(limit=2)[0].filename
            if "torch/optim" not in caller:  # the CPU AdamW's step counter (a CUDA one stays on the device)
                reads.append(f"{name} {caller}")
            return original(self, *args)
        return read

    class Watch(pl.Callback):
        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            if batch_idx == 2:
                for name in ("item", "__bool__", "__float__", "tolist"):
                    monkeypatch.setattr(torch.Tensor, name, counted(name))

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            if batch_idx == 6:
                monkeypatch.undo()

    trainer = pl.Trainer(max_steps=8, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                         default_root_dir=tmp_path, accelerator="cpu", callbacks=[Watch(), History(log_every=4)],
                         gradient_clip_val=1.0)
    trainer.fit(module, torch.utils.data.DataLoader(data, batch_size=4))
    # steps 3 to 7: the check and the history's row at step 4, nothing else
    assert sorted(r.rsplit("/", 1)[-1] for r in reads) == ["module.py", "run.py"], reads


def test_learning_rate_schedule():
    o = OptimConfig(max_steps=100, batch_size=1, learning_rate=1.0, warmup_steps=10, schedule="cosine", min_lr_ratio=0.1)
    f = lr_lambda(o)
    assert [round(f(s), 6) for s in (0, 4, 9)] == [0.1, 0.5, 1.0]
    assert f(10) == pytest.approx(1.0) and f(55) == pytest.approx(0.55) and f(100) == pytest.approx(0.1)
    lin = lr_lambda(o.model_copy(update={"schedule": "linear"}))
    assert lin(55) == pytest.approx(0.55) and lin(100) == pytest.approx(0.1)
    assert lr_lambda(o.model_copy(update={"schedule": "constant"}))(90) == 1.0


def test_stream_sampler_ranks_partition_the_global_batch_and_resume_mid_run():
    from lmforge.training.data import StreamSampler

    def keys(**kw):
        return list(StreamSampler(50, 4, 30, seed=3, shuffle=True, **kw))

    single = list(StreamSampler(50, 8, 30, seed=3, shuffle=True))
    ranks = [keys(rank=r, world_size=2) for r in (0, 1)]
    for step in range(30):  # each global batch of 8 = rank 0's 4 then rank 1's 4
        assert single[8 * step: 8 * step + 8] == ranks[0][4 * step: 4 * step + 4] + ranks[1][4 * step: 4 * step + 4]
    whole = keys()
    assert keys(start_step=lambda: 12) == whole[12 * 4:]  # resuming at micro-step 12
    assert len(StreamSampler(50, 4, 30, seed=3, shuffle=True, start_step=12)) == 120  # the whole run's length
    # data epochs: each is a permutation of the 50 examples, different from the last one
    epochs = [[i for e, i in whole if e == k] for k in (0, 1)]
    assert sorted(epochs[0]) == list(range(50)) and sorted(epochs[1]) == list(range(50)) and epochs[0] != epochs[1]
    ordered = list(StreamSampler(50, 4, 5, seed=3, shuffle=False))
    assert [i for _, i in ordered] == list(range(20))


@pytest.mark.slow
def test_compiled_pretraining_follows_the_eager_losses(project):
    """``train.compile: true`` (inductor) trains the same model as eager: the same loss at every
    step (dropout drawn from eager's generator: ``fallback_random``), and the saved model loads
    without any trace of the compiled wrapper. (Every architecture's compiled forward and
    backward against eager: tests/models/test_compile.py.)"""
    import torch._inductor.config

    from lmforge.models.folder import load_model_dir
    from lmforge.training.pretrain import run_pretrain

    arch = "gpt"
    run_pretrain(load_params(project / "params.yaml"), arch, log=lambda line: None)
    write_params(project, train={"compile": True, "output": str(project / "compiled")})
    with torch._inductor.config.patch(fallback_random=True):
        run_pretrain(load_params(project / "params.yaml"), arch, log=lambda line: None)
    eager = history(project / "models" / arch / "pretrain" / "history.csv")
    compiled = history(project / "compiled" / arch / "pretrain" / "history.csv")
    assert sorted(compiled) == sorted(eager) == [1, 2, 3, 4]
    for step in eager:
        assert compiled[step] == pytest.approx(eager[step], rel=1e-4), (step, compiled, eager)
    state = load_model_dir(project / "compiled" / arch / "pretrain" / "model").state_dict()
    assert not any("_orig_mod" in key for key in state)


def test_the_untrained_models_validation_runs_where_the_model_will_train(monkeypatch):
    import torch

    from lmforge.config import TrainConfig
    from lmforge.training.run import evaluation_device

    assert evaluation_device(TrainConfig(accelerator="cpu")) == torch.device("cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert evaluation_device(TrainConfig(accelerator="auto")) == torch.device("cuda", 1)
    assert evaluation_device(TrainConfig(accelerator="cpu")) == torch.device("cpu")
