"""What pretraining and fine-tuning share: the Lightning Trainer built from ``params.train`` and an
optimisation recipe, the launch rules for many devices, checkpoints and the metric history."""

from __future__ import annotations

import csv
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import ModelCheckpoint

from ..artifacts import replace_dir
from ..ranks import is_rank_zero
from ..config import ConfigError, Params, TrainConfig
from ..config.recipes import OptimConfig


def quiet() -> None:
    """Keep the stage logs about the run: drop Lightning's banner lines and tips and warnings
    that do not apply (the checkpoint folder holds our fingerprint marker by design)."""
    import logging
    import warnings

    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    if os.environ.get("LMFORGE_VERBOSITY") == "verbose":  # `lmforge --verbose`: everything the libraries say
        return
    for name in ("lightning.pytorch.utilities.rank_zero", "lightning.fabric.utilities.rank_zero",
                 "lightning.pytorch.accelerators.cuda"):
        logging.getLogger(name).setLevel(logging.WARNING)
    for pattern in (".*Checkpoint directory .* exists and is not empty.*", ".*LeafSpec.*is deprecated.*",
                    ".*does not have many workers.*", ".*The number of training batches.*",
                    # our sampler resumes at the checkpoint's data position (training/data.py)
                    ".*resuming from a checkpoint that ended before the epoch ended.*"):
        warnings.filterwarnings("ignore", message=pattern)


class LaunchError(ConfigError):
    """More than one device was asked for without a launcher that starts one process per device."""


def launch_world(cfg: TrainConfig) -> tuple[int | str, int, str]:
    """(devices, num_nodes, strategy) for this process.

    Under ``torchrun`` / ``srun`` (WORLD_SIZE set) the launcher decides: devices per node =
    LOCAL_WORLD_SIZE, nodes = WORLD_SIZE / LOCAL_WORLD_SIZE, and DDP unless FSDP was chosen (also
    for a world of one process when the strategy is named: a one-GPU machine runs the DDP path).
    Without one, more than one device is refused: Lightning would re-launch this command line
    itself, which must never happen inside another program (Dagster, a notebook).
    """
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if "WORLD_SIZE" in os.environ and (world > 1 or cfg.strategy in ("ddp", "fsdp", "ddp_find_unused_parameters_true")):
        local = int(os.environ.get("LOCAL_WORLD_SIZE") or os.environ.get("SLURM_NTASKS_PER_NODE") or world)
        strategy = cfg.strategy if cfg.strategy not in ("auto",) else "ddp"
        return local, world // local, strategy
    devices = cfg.devices
    if (devices == "auto" and torch.cuda.device_count() > 1 and cfg.accelerator in ("auto", "gpu", "cuda")) or \
            (isinstance(devices, int) and devices * cfg.num_nodes > 1):
        n = devices if isinstance(devices, int) else torch.cuda.device_count()
        raise LaunchError(
            f"train.devices={cfg.devices}, train.num_nodes={cfg.num_nodes}: start one process per device with a launcher, "
            f"e.g. `torchrun --nproc_per_node {n} -m lmforge.cli pretrain ...` (or srun under SLURM)")
    return 1, 1, "auto" if cfg.strategy in ("auto", "ddp", "ddp_find_unused_parameters_true") else cfg.strategy


# what training holds per parameter at the least: fp32 weights, their gradients and AdamW's two
# moments (mixed precision keeps fp32 master weights too)
TRAINING_BYTES_PER_PARAMETER = 16


def _training_memory(cfg: TrainConfig) -> tuple[int, str]:
    """(bytes, what they are) that one training run can spread its parameters over at the most:
    the GPUs' memory (each process's device; FSDP shards over every process, DDP keeps a copy
    on each) or this machine's memory."""
    if cfg.accelerator in ("auto", "gpu", "cuda") and torch.cuda.is_available():
        per_device = min(torch.cuda.get_device_properties(i).total_memory for i in range(torch.cuda.device_count()))
        world = world_size() if cfg.strategy == "fsdp" else 1
        return per_device * world, f"{world} GPU(s) of {per_device / 2**30:.1f} GiB"
    try:
        host = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # no sysconf (not POSIX): no bound known
        return 1 << 62, "this machine's memory"
    return host, f"this machine's {host / 2**30:.1f} GiB of memory"


def check_trainable(cfg: TrainConfig, preset: str, head: str | None, overrides: dict, where: str) -> int:
    """The parameter count of the model ``build_model(preset, head, **overrides)``, found on the
    meta device (nothing allocated); a ``ConfigError`` naming ``where`` (the recipe's size) when
    its options cannot build a model or its parameters alone, with their gradients and optimizer
    state, exceed the memory it would train in (an absurd size: a typo's extra zeros)."""
    from ..models.registry import build_on_meta

    try:
        model = build_on_meta(preset, head=head, **overrides)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    n = sum(p.numel() for p in model.parameters())
    need = n * TRAINING_BYTES_PER_PARAMETER
    have, what = _training_memory(cfg)
    if need > have:
        raise ConfigError(f"{where}: {preset} with {overrides} has {n:,} parameters; training them needs at least "
                          f"{need / 2**30:,.1f} GiB (weights, gradients and AdamW's moments in fp32), more than "
                          f"{what}")
    return n


def resolve_precision(cfg: TrainConfig) -> str:
    if cfg.precision:
        return cfg.precision
    gpu = cfg.accelerator in ("auto", "gpu", "cuda") and torch.cuda.is_available()
    return "bf16-mixed" if gpu and torch.cuda.is_bf16_supported() else "32-true"


def evaluation_device(cfg: TrainConfig) -> torch.device:
    """Where this process evaluates a model outside the Trainer (the untrained model's validation
    loss, and after ``fit``, whose teardown leaves the model on the CPU, the final evaluation and a
    fine-tuning's scoring): the GPU it trains on (its local rank's) when it trains on one, else the
    CPU."""
    if cfg.accelerator in ("auto", "gpu", "cuda") and torch.cuda.is_available():
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
    return torch.device("cpu")


def world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


class History(pl.Callback):
    """The metric history of a run (optimizer step -> train loss, learning rate, auxiliary losses,
    tokens seen and tokens per second, validation loss), kept in the checkpoint so a resumed run's
    history is whole, and streamed to ``sink(metrics, step)`` (MLflow) on rank 0.

    ``tokens`` counts the input positions of every batch of every process (padding included),
    from the batches' shapes: no read of the device. ``tokens_per_second`` is the rate since the
    previous row, on the host's clock; writing a row reads the loss sums from the device, which
    waits for the queued steps, so from row to row the clock measures the device's work."""

    def __init__(self, log_every: int, sink=None):
        self.log_every = log_every
        self.sink = sink
        self.rows: list[dict[str, float]] = []
        self._pending: dict[str, tuple] = {}  # key -> (sum, count) since the last optimizer step
        self._last_step = 0
        self._tokens = 0  # input positions trained on, all processes, the whole run (a resumed one too)
        self._row_tokens = 0  # ... since the last row
        self._row_time: float | None = None  # when the last row was written (or training started)

    def on_train_start(self, trainer, pl_module) -> None:
        self._row_time, self._row_tokens = time.monotonic(), 0

    def _accumulate(self, key: str, value) -> None:
        # summed where it lives (on the GPU: no host read, which would wait for the step), read
        # on the host only when a row is written
        value = value.detach().float() if torch.is_tensor(value) else float(value)
        total, count = self._pending.get(key, (0.0, 0))
        self._pending[key] = (total + value, count + 1)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        loss = (outputs["loss"] if isinstance(outputs, dict) else outputs).detach()
        if trainer.world_size > 1:  # the loss of the global batch: the mean over ranks (a collective, on every rank)
            loss = trainer.strategy.reduce(loss, reduce_op="mean")
        self._accumulate("train/loss", loss)
        for key, value in trainer.callback_metrics.items():
            if key.startswith("train/") and key != "train/loss":
                self._accumulate(key, value)
        ids = batch.get("input_ids") if isinstance(batch, dict) else None
        if ids is not None:
            n = ids.numel() * trainer.world_size  # the shape only
            self._tokens += n
            self._row_tokens += n
        step = trainer.global_step
        if step == self._last_step:  # still accumulating gradients
            return
        self._last_step = step
        if step == 1 or step % self.log_every == 0 or step == trainer.max_steps:
            row = {"step": step, **{k: float(total) / count for k, (total, count) in self._pending.items()}}
            row["lr"] = trainer.optimizers[0].param_groups[0]["lr"]
            now = time.monotonic()
            if self._tokens:
                row["tokens"] = self._tokens
                if self._row_time is not None and now > self._row_time:
                    row["tokens_per_second"] = self._row_tokens / (now - self._row_time)
            self._row_time, self._row_tokens = now, 0
            self._add(row)
        self._pending = {}

    def on_validation_end(self, trainer, pl_module) -> None:
        if trainer.sanity_checking or "val/loss" not in trainer.callback_metrics:
            return
        row = {"step": trainer.global_step}
        row.update({k: float(v) for k, v in trainer.callback_metrics.items() if k.startswith("val/")})
        self._add(row)

    def _add(self, row: dict[str, float]) -> None:
        self.rows.append(row)
        if self.sink is not None:
            self.sink({k: v for k, v in row.items() if k != "step"}, int(row["step"]))

    def merge(self, step: int, metrics: dict[str, float]) -> None:
        """Add ``metrics`` at ``step`` (e.g. a task metric computed after the validation loss):
        into the validation row of that step when it is the last row, else as a row of its own."""
        last = self.rows[-1] if self.rows else None
        if last is not None and last.get("step") == step and any(k.startswith("val/") for k in last):
            last.update(metrics)
        else:
            self.rows.append({"step": step, **metrics})
        if self.sink is not None:
            self.sink(dict(metrics), int(step))

    @property
    def tokens(self) -> int:
        """Input positions trained on so far, every process, the whole run (a resumed one too)."""
        return self._tokens

    def state_dict(self) -> dict[str, Any]:
        return {"rows": self.rows, "last_step": self._last_step, "tokens": self._tokens}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.rows = list(state.get("rows", []))
        self._last_step = int(state.get("last_step", 0))
        self._tokens = int(state.get("tokens", 0))

    def write_csv(self, path: Path) -> None:
        keys = ["step"] + sorted({k for r in self.rows for k in r} - {"step"})
        tmp = path.with_suffix(".tmp")
        with open(tmp, "w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=keys)
            writer.writeheader()
            for r in self.rows:
                writer.writerow({k: r.get(k, "") for k in keys})
        os.replace(tmp, path)

    def first(self, key: str) -> float | None:
        return next((r[key] for r in self.rows if key in r), None)

    def last(self, key: str) -> float | None:
        return next((r[key] for r in reversed(self.rows) if key in r), None)


def build_trainer(params: Params, optim: OptimConfig, work_dir: Path, callbacks: list, *,
                  has_validation: bool, best_on_loss: bool = True) -> pl.Trainer:
    """The Trainer for one stage, working in ``work_dir`` (an :class:`Attempt`'s folder) and
    checkpointing ``last.ckpt`` every ``train.checkpoint_every`` steps and ``best.ckpt`` on the
    validation loss in its ``checkpoints/`` (unless ``best_on_loss`` is false: fine-tuning keeps
    the weights that are best on the task's metric itself)."""
    cfg = params.train
    quiet()
    devices, num_nodes, strategy = launch_world(cfg)
    ckpt_dir = work_dir / "checkpoints"
    checkpoints = [ModelCheckpoint(dirpath=ckpt_dir, filename="step-{step}", every_n_train_steps=cfg.checkpoint_every,
                                   save_last=True, save_top_k=1, enable_version_counter=False)]
    if has_validation and best_on_loss:
        checkpoints.append(ModelCheckpoint(dirpath=ckpt_dir, filename="best", monitor="val/loss", mode="min",
                                           save_top_k=1, enable_version_counter=False))
    val_every = min(optim.eval_every, optim.max_steps) * optim.accumulate_grad_batches
    return pl.Trainer(
        accelerator=cfg.accelerator, devices=devices, num_nodes=num_nodes, strategy=strategy,
        precision=resolve_precision(cfg), max_steps=optim.max_steps, max_epochs=-1,
        accumulate_grad_batches=optim.accumulate_grad_batches,
        gradient_clip_val=optim.gradient_clip, gradient_clip_algorithm="norm",
        val_check_interval=val_every if has_validation else None, check_val_every_n_epoch=None,
        limit_val_batches=(optim.eval_batches or 1.0) if has_validation else 0,
        num_sanity_val_steps=0, logger=False, enable_progress_bar=False, enable_model_summary=False,
        callbacks=[*checkpoints, *callbacks], default_root_dir=str(work_dir), use_distributed_sampler=False,
        log_every_n_steps=cfg.log_every,
    )


def attempts_root(out_dir: Path) -> Path:
    """``<output>/../.<output name>.attempts``: the attempts of a training stage, beside its output
    (outside it, so that what DVC tracks changes only when an attempt is published)."""
    return out_dir.with_name(f".{out_dir.name}.attempts")


@dataclass
class Attempt:
    """A training stage's work in progress for one fingerprint: ``<attempts>/<fp[:16]>/`` holds its
    ``checkpoints/`` (the resume state) and ``output/``, the stage's output being written.
    :meth:`publish` swaps ``output/`` in place of the stage's output only once it is complete, so a
    failed or interrupted run leaves the previous output (and ``dvc status``) as they were, and
    another attempt's checkpoints are never deleted to make room for this one."""

    out_dir: Path
    dir: Path
    resume: Path | None

    @property
    def checkpoints(self) -> Path:
        return self.dir / "checkpoints"

    @property
    def staging(self) -> Path:
        return self.dir / "output"

    def publish(self, keep: int, log) -> None:
        """Put the finished output in place, then keep only the ``keep`` most recent attempts
        (this one always)."""
        replace_dir(self.staging, self.out_dir)
        others = sorted((p for p in attempts_root(self.out_dir).iterdir() if p.is_dir() and p != self.dir),
                        key=lambda p: p.stat().st_mtime, reverse=True)
        for old in others[max(keep - 1, 0):]:
            shutil.rmtree(old, ignore_errors=True)
            log(f"{self.out_dir}: removed the attempt {old.name} (train.keep_attempts={keep})")


def start_attempt(out_dir: Path, fp: str, log, *, restart: bool = False) -> Attempt:
    """The attempt for fingerprint ``fp``: resumed from its ``last.ckpt`` when an earlier run with
    the same settings left one (unless ``restart``: the only way its resume state is discarded).
    Attempts of other settings are left where they are."""
    root = attempts_root(out_dir)
    here = root / fp[:16]
    if restart and here.exists():
        log(f"{out_dir}: --restart: discarding the resume state in {here}")
        if is_rank_zero():
            shutil.rmtree(here)
    others = [p.name for p in root.iterdir() if p.is_dir() and p != here] if root.exists() else []
    last = here / "checkpoints" / "last.ckpt"
    if is_rank_zero():
        (here / "checkpoints").mkdir(parents=True, exist_ok=True)
        (here / "fingerprint").write_text(fp + "\n")
        shutil.rmtree(here / "output", ignore_errors=True)  # an unfinished output of an interrupted run
        (here / "output").mkdir()
        os.utime(here)
    if others and not last.exists():
        log(f"{out_dir}: new settings; training in {here} (the checkpoints of earlier settings stay in "
            f"{root}: {', '.join(sorted(others))})")
    return Attempt(out_dir, here, last if last.exists() else None)
