"""Benchmark: model FLOPs utilisation (MFU) of pretraining through the real training loop, beside
``transformers``' Trainer on the same model, batches and machine.

    PYTHONPATH=src python3 benchmarks/mfu.py --model gpt2 --runs ours,hf,ours-compiled,hf-compiled --json gpt2.json
    PYTHONPATH=src python3 benchmarks/mfu.py --model bert-base --batch 64 --json bert.json
    .venv/bin/python benchmarks/mfu.py --model gpt2 --device-check   # what would run, on a CPU: a 2-layer model, 3 steps

Models: GPT-2 124M (the ``gpt2`` preset) on 1024-token blocks of the ``clm`` objective, and
BERT-base (``bert-base``, MLM + NSP head) on 512-token pairs of the ``mlm_nsp`` objective. The
corpus is synthetic (random token ids in documents of 1,000 tokens, a sentence every 20): its
content does not change the work, and it needs no download.

``ours``: the pretraining stage's own loop: ``LMForgeModule`` (fused AdamW, the cosine
schedule, gradient clipping at 1.0, the per-step finite-loss check), ``ObjectiveDataModule``
(examples built by the objective in ``--workers`` DataLoader processes, the stage's collate),
the stage's callbacks (its loss history, its progress lines) and the Trainer of
``training.run.build_trainer`` at bf16-mixed precision; ``-compiled`` adds
``train.compile`` (``torch.compile`` of the model). ``hf``: the same model converted with
``interop.hf.to_hf`` (same weights), trained by ``transformers.Trainer`` (bf16 autocast,
``adamw_torch_fused``, the same schedule and clipping, ``torch_compile`` for ``-compiled``) on
the same examples and collate. Two options may follow a run's name, each after a ``+``: ``+pad``
builds the model with its vocabulary rounded up to a multiple of 64 rows (GPT-2's 50,257 to
50,304: the LM head's matrix product on tensor-core-friendly shapes; the extra rows are never a
target, and the FLOPs below still count the real vocabulary), ``+cudnn`` runs attention on cuDNN's
kernels (``torch.nn.attention.sdpa_kernel``; on a CPU it changes nothing), ``+nodrop`` builds the
model with every dropout rate at 0 (as the tiny recipes pretrain: ``pretrain_model``; the
Trainer's model is converted from it, so it has none either). E.g. ``ours-compiled+pad+cudnn``.

Timing: after ``--warmup`` steps (compilation included) the GPU is synchronised, then
``--steps`` steps are timed, and the GPU synchronised again. Tokens are the batch's positions
(B x T, padding included). Two waits between steps: ``host_gap_fraction``, the host's time
between the end of one step and the start of the next (fetching the batch, moving it, the
loop's bookkeeping, and any wait of the host for the GPU inside them); ``gpu_idle_fraction``,
the GPU's own time between the two, from CUDA events recorded at the end of a step and at the
start of the next (after the batch's copy is queued): time the GPU had no step's work, because
the host had not yet queued it (the data not ready, or the loop's overhead).

``--profile-steps N``: after the timed window, N more steps run under ``torch.profiler``, and the
row gains ``kernels``: the device kernels (the CPU's operators on a CPU) with the most time, each
with its calls and milliseconds per step and its share of all kernel time, and
``kernel_ms_per_step``, the kernels' total per step (beside ``step_ms``: what is left is time the
GPU had no kernel running). The profiled steps are not in the timing.

Model FLOPs per token: ``lmforge.models.flops`` (the PaLM paper's appendix B, as nanoGPT counts
them), the count every training run's ``compute`` record uses: 6 N + 12 L d T, N the parameters
outside the embedding tables, the tied output layer over the vocabulary counted at the positions
that are predicted (every position for GPT-2; BERT's masked positions, as our model computes its
head: ``transformers`` computes it at every position, work the count leaves out), L layers, d
width, T the sequence length. For GPT-2 this is 6 x (every parameter less the position table)
plus attention; for BERT it also counts the pooler and the head's transform at every position
(1.1% above the count of the first two GPU rounds, which took the encoder layers alone).
MFU = model FLOPs per second / the GPU's dense bf16 peak (``--peak-tflops``; H100/H200 SXM:
989 TFLOP/s).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import gc
import inspect
import json
import math
import sys
import tempfile
import time
from pathlib import Path

import lightning.pytorch as pl
import numpy as np
import torch

from lmforge.config import Params
from lmforge.models.flops import flops_per_token as model_flops_per_token
from lmforge.models.registry import build_model, preset_config
from lmforge.objectives.base import Corpus, Document, Vocab, rng_for
from lmforge.objectives.registry import OBJECTIVES
from lmforge.training.data import ObjectiveDataModule
from lmforge.training.module import LMForgeModule
from lmforge.training.compute import PEAK_TFLOPS
from lmforge.config.recipes import OptimConfig
from lmforge.training.progress import TrainingProgress
from lmforge.training.run import History, build_trainer


MODELS = {
    "gpt2": dict(preset="gpt2", head="lm", objective="clm", length=1024, batch=32, learning_rate=6e-4,
                 vocab=Vocab(size=50257, eos=50256, special_ids=frozenset({50256})), first_token=0),
    "bert-base": dict(preset="bert-base", head="pretraining", objective="mlm_nsp", length=512, batch=64, learning_rate=1e-4,
                      vocab=Vocab(size=30522, pad=0, unk=100, cls=101, sep=102, mask=103,
                                  special_ids=frozenset({0, 100, 101, 102, 103})), first_token=999),
}
# a run's variant: the torch.compile mode it trains with (None: eager)
COMPILE_MODES = {"": None, "compiled": "default", "cudagraphs": "reduce-overhead"}
# --device-check: the same code paths with a model small enough for a CPU
SMALL = {"n_layers": 2, "d_model": 128, "n_heads": 2, "d_ff": 512}


def synthetic_corpus(vocab: Vocab, first_token: int, tokens: int, seed: int = 0) -> Corpus:
    rng = np.random.default_rng(seed)
    docs = []
    for d in range(max(4, math.ceil(tokens / 1000))):
        ids = rng.integers(first_token, vocab.size - 1 if vocab.eos == vocab.size - 1 else vocab.size, 1000)
        sentences = np.zeros(1000, dtype=bool)
        sentences[::20] = True
        docs.append(Document(ids.astype(np.int64), np.ones(1000, dtype=bool), sentences, d))
    return Corpus(docs)


def flops_per_token(name: str, model: torch.nn.Module, length: int, predicted_fraction: float,
                    vocab_size: int | None = None) -> float:
    """Model FLOPs per input position (``models.flops``), over ``vocab_size`` output rows (default:
    the model's; a padded model's real vocabulary counts only its real rows)."""
    cfg = model.config
    padding = cfg.vocab_size - (vocab_size or cfg.vocab_size)
    return model_flops_per_token(model, length, predicted_fraction) - 6 * cfg.d_model * padding * predicted_fraction


PAD_MULTIPLE = 64


def parse_run(run: str) -> tuple[str, str, set[str]]:
    """``impl[-variant][+option...]`` -> (impl, variant, options); unknown parts are an error."""
    name, *options = run.split("+")
    impl, _, variant = name.partition("-")
    if impl not in ("ours", "hf") or variant not in COMPILE_MODES or not set(options) <= {"pad", "cudnn", "nodrop"}:
        raise ValueError(f"unknown run {run!r} (ours or hf, alone or with -compiled or -cudagraphs, then +pad, +cudnn, "
                         "+nodrop)")
    return impl, variant, set(options)


def no_dropout(preset: str) -> dict[str, float]:
    """Overrides that set every dropout rate of ``preset``'s config to 0 (``+nodrop``)."""
    config = preset_config(preset)
    return {f.name: 0.0 for f in dataclasses.fields(config) if "dropout" in f.name}


def attention_kernels(options: set[str], cuda: bool):
    """The attention kernels a run may use: cuDNN's alone with ``+cudnn`` on a GPU, else SDPA's choice."""
    if "cudnn" in options and cuda:
        from torch.nn.attention import SDPBackend, sdpa_kernel

        return sdpa_kernel([SDPBackend.CUDNN_ATTENTION])
    return contextlib.nullcontext()


class _Clock:
    """Shared by both loops: step boundaries in, tokens/s and the data wait out."""

    def __init__(self, warmup: int, steps: int, cuda: bool, profile_steps: int = 0):
        self.warmup, self.steps, self.cuda = warmup, steps, cuda
        self.profile_steps = profile_steps
        self.profiler = None
        self.kernels: list[dict] | None = None  # the profiled steps' top kernels (profile_steps > 0)
        self.kernel_ms_per_step: float | None = None
        self.done = 0
        self.last_end: float | None = None
        self.wait = 0.0
        self.t0 = self.t1 = None
        self.events: list[tuple[torch.cuda.Event, torch.cuda.Event]] = []  # (end of step i, start of step i+1)
        self._end_event = None
        self.data_wait = 0.0  # the host's time inside the DataLoader's next() within the timed window

    @property
    def timing(self) -> bool:
        return self.t0 is not None and self.t1 is None

    @contextlib.contextmanager
    def profiling_data_wait(self):
        """Time every ``next()`` of a DataLoader iterator (both loops fetch through one) that
        falls inside the timed window: the host's wait for its next batch."""
        iterator = torch.utils.data.dataloader._BaseDataLoaderIter
        original = iterator.__next__
        clock = self

        def timed_next(it):
            if not clock.timing:
                return original(it)
            t = time.perf_counter()
            try:
                return original(it)
            finally:
                clock.data_wait += time.perf_counter() - t

        iterator.__next__ = timed_next
        try:
            yield self
        finally:
            iterator.__next__ = original

    def _sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()

    def _event(self):
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    @property
    def total_steps(self) -> int:
        return self.warmup + self.steps + self.profile_steps

    def step_start(self) -> None:
        if self.profile_steps and self.done == self.warmup + self.steps and self.profiler is None:
            activity = torch.profiler.ProfilerActivity.CUDA if self.cuda else torch.profiler.ProfilerActivity.CPU
            self.profiler = torch.profiler.profile(activities=[activity])
            self.profiler.start()
        now = time.perf_counter()
        if self.t0 is not None and self.t1 is None and self.last_end is not None:
            self.wait += now - self.last_end
            if self.cuda and self._end_event is not None:
                self.events.append((self._end_event, self._event()))

    def step_end(self) -> None:
        self.done += 1
        if self.done == self.warmup:
            self._sync()
            self.t0 = time.perf_counter()
            if self.cuda:
                torch.cuda.reset_peak_memory_stats()
        elif self.done == self.warmup + self.steps:
            self._sync()
            self.t1 = time.perf_counter()
        if self.cuda and self.t0 is not None and self.t1 is None:
            self._end_event = self._event()
        if self.profiler is not None and self.done == self.total_steps:
            self._sync()
            self.profiler.stop()
            self.kernels, self.kernel_ms_per_step = top_kernels(self.profiler, self.profile_steps, self.cuda)
        self.last_end = time.perf_counter()

    @property
    def gpu_idle(self) -> float | None:
        """Seconds the GPU spent between the timed steps (None without CUDA)."""
        if not self.cuda:
            return None
        return sum(end.elapsed_time(start) for end, start in self.events) / 1000

    @property
    def seconds(self) -> float:
        if self.t0 is None or self.t1 is None:
            raise RuntimeError(f"only {self.done} steps ran; the timed window needs {self.warmup + self.steps}")
        return self.t1 - self.t0


def top_kernels(profiler, steps: int, cuda: bool, top: int = 20) -> tuple[list[dict], float]:
    """The profiled steps' kernels (a CPU's operators without CUDA) by their own time: the ``top``
    largest, each with calls and ms per step and its share of all kernel time, and the total ms
    per step."""
    rows = []
    for event in profiler.key_averages():
        own = event.self_device_time_total if cuda else event.self_cpu_time_total  # microseconds
        if own > 0 and (not cuda or event.device_type == torch.autograd.DeviceType.CUDA):
            rows.append((own, event.count, event.key))
    total = sum(own for own, _, _ in rows)
    rows.sort(reverse=True)
    return ([{"kernel": key[:160], "calls_per_step": round(count / steps, 2), "ms_per_step": round(own / 1000 / steps, 3),
              "share": round(own / total, 4)} for own, count, key in rows[:top]],
            round(total / 1000 / steps, 3))


class _LightningClock(pl.Callback):
    def __init__(self, clock: _Clock):
        self.clock = clock

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        self.clock.step_start()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.clock.step_end()


def _optim(spec: dict, batch: int, total: int) -> OptimConfig:
    return OptimConfig(max_steps=total, batch_size=batch, learning_rate=spec["learning_rate"], warmup_steps=min(10, total),
                       weight_decay=0.01, gradient_clip=1.0, eval_every=total + 1, eval_batches=None)


def run_ours(model, spec, objective, *, batch, warmup, steps, compile, workers, accelerator, work_dir,
             profile_steps: int = 0) -> _Clock:
    params = Params()
    params.train.accelerator = accelerator
    params.train.compile = bool(compile)
    params.train.compile_mode = compile or "default"
    params.train.checkpoint_every = 10 ** 6
    clock = _Clock(warmup, steps, accelerator == "gpu", profile_steps)
    optim = _optim(spec, batch, clock.total_steps)
    # as the pretraining stage builds it (its finite-loss check every log_every steps)
    module = LMForgeModule(model, optim, compile=bool(compile), compile_mode=compile or "default",
                           finite_check_every=params.train.log_every)
    data = ObjectiveDataModule(objective, None, batch_size=batch, micro_steps=clock.total_steps, seed=0,
                               pad_id=spec["vocab"].pad or 0, ordered=False, num_workers=workers)
    # the stage's own callbacks too: its loss history and its progress lines
    history = History(params.train.log_every)
    callbacks = [_LightningClock(clock), history, TrainingProgress(f"mfu {spec['preset']}", history)]
    trainer = build_trainer(params, optim, Path(work_dir), callbacks, has_validation=False)
    with clock.profiling_data_wait():
        trainer.fit(module, datamodule=data)
    return clock


def run_hf(model, spec, objective, *, batch, warmup, steps, compile, workers, accelerator, work_dir,
           profile_steps: int = 0) -> _Clock:
    from transformers import Trainer, TrainerCallback, TrainingArguments

    from lmforge.interop.hf import to_hf

    hf_model = to_hf(model)
    accepted = set(inspect.signature(hf_model.forward).parameters)
    # the same examples (epoch 0, same seeds) and the same collate as the stage's loop
    data = ObjectiveDataModule(objective, None, batch_size=batch, micro_steps=1, seed=0,
                               pad_id=spec["vocab"].pad or 0, ordered=False)

    class Examples(torch.utils.data.Dataset):
        def __len__(self):
            return len(objective)

        def __getitem__(self, i):
            return objective.example(i, rng_for(0, 0, i))

    def collate(examples):
        return {k: v for k, v in data.collate(examples).items() if k in accepted}

    clock = _Clock(warmup, steps, accelerator == "gpu", profile_steps)

    class HFClock(TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            clock.step_start()

        def on_step_end(self, args, state, control, **kw):
            clock.step_end()

    total = clock.total_steps
    args = TrainingArguments(
        output_dir=str(work_dir), per_device_train_batch_size=batch, max_steps=total, learning_rate=spec["learning_rate"],
        warmup_steps=min(10, total), lr_scheduler_type="cosine", weight_decay=0.01, max_grad_norm=1.0,
        bf16=accelerator == "gpu", optim="adamw_torch_fused" if accelerator == "gpu" else "adamw_torch",
        torch_compile=bool(compile), torch_compile_mode=None if compile in (None, "default") else compile,
        dataloader_num_workers=workers, dataloader_pin_memory=accelerator == "gpu", logging_strategy="no", save_strategy="no",
        eval_strategy="no", report_to="none", disable_tqdm=True, remove_unused_columns=False, seed=0,
        use_cpu=accelerator != "gpu")
    trainer = Trainer(model=hf_model, args=args, train_dataset=Examples(), data_collator=collate, callbacks=[HFClock()])
    with clock.profiling_data_wait():
        trainer.train()
    return clock


def predicted_fraction(objective, n: int = 64) -> float:
    """Labelled positions per input position over the first ``n`` examples."""
    labelled = positions = 0
    for i in range(min(n, len(objective))):
        e = objective.example(i, rng_for(0, 0, i))
        labelled += int((np.asarray(e["labels"]) != -100).sum())
        positions += len(e["input_ids"])
    return labelled / positions


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", choices=sorted(MODELS), default="gpt2")
    ap.add_argument("--runs", default="ours,hf,ours-compiled,hf-compiled",
                    help="comma-separated: ours, hf, each with -compiled (torch.compile) or -cudagraphs "
                         "(torch.compile's reduce-overhead mode: the compiled step replayed as CUDA graphs), "
                         "then +pad (the vocabulary padded to a multiple of 64), +cudnn (cuDNN attention) and +nodrop "
                         "(every dropout rate 0)")
    ap.add_argument("--batch", type=int, help="sequences per step (default: the model's)")
    ap.add_argument("--steps", type=int, default=30, help="timed steps")
    ap.add_argument("--warmup", type=int, default=10, help="untimed steps first (compilation happens here)")
    ap.add_argument("--profile-steps", type=int, default=0,
                    help="after the timed steps, this many more under torch.profiler: the row's top kernels")
    ap.add_argument("--workers", type=int, default=4, help="DataLoader worker processes, both loops")
    ap.add_argument("--peak-tflops", type=float, help="the GPU's dense bf16 peak (default: from its name)")
    ap.add_argument("--device-check", action="store_true",
                    help="on a CPU: a 2-layer model, 3 steps, 0 workers, eager: checks the code paths, measures nothing")
    ap.add_argument("--json", help="append one JSON line per run to this file")
    a = ap.parse_args(argv)

    spec = MODELS[a.model]
    cuda = torch.cuda.is_available() and not a.device_check
    if not cuda and not a.device_check:
        sys.exit("mfu.py: no CUDA GPU here (use --device-check on a CPU to try the code paths)")
    accelerator = "gpu" if cuda else "cpu"
    batch = a.batch or (spec["batch"] if cuda else 2)
    length = spec["length"] if cuda else 64
    warmup, steps, workers = (a.warmup, a.steps, a.workers) if cuda else (1, 2, 0)
    overrides = {} if cuda else dict(SMALL)
    if a.model == "gpt2" and not cuda:
        overrides["n_positions"] = length
    if a.model == "bert-base" and not cuda:
        overrides["max_positions"] = length

    gpu_name = torch.cuda.get_device_name() if cuda else "cpu"
    peak = a.peak_tflops or next((v for k, v in PEAK_TFLOPS.items() if k in gpu_name), None)
    if cuda and peak is None:
        sys.exit(f"mfu.py: no bf16 peak known for {gpu_name!r}; give --peak-tflops")
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True

    vocab = spec["vocab"]
    corpus = synthetic_corpus(vocab, spec["first_token"], (warmup + steps + a.profile_steps) * batch * length * 11 // 10)
    objective = OBJECTIVES[spec["objective"]](corpus, vocab, OBJECTIVES[spec["objective"]].Config(
        **({"block_size": length} if spec["objective"] == "clm" else {"max_length": length})))
    fraction = 1.0 if spec["objective"] == "clm" else predicted_fraction(objective)

    runs = [r.strip() for r in a.runs.split(",") if r.strip()]
    for run in runs:  # every name checked before the first run starts
        try:
            parse_run(run)
        except ValueError as exc:
            sys.exit(f"mfu.py: {exc}")
    results = []
    for run in runs:
        impl, variant, options = parse_run(run)
        # the device check runs each loop eagerly: compiling on a CPU takes minutes and measures nothing
        compiled = None if a.device_check else COMPILE_MODES[variant]
        torch.manual_seed(0)
        rows = -(-vocab.size // PAD_MULTIPLE) * PAD_MULTIPLE if "pad" in options else vocab.size
        dropout = no_dropout(spec["preset"]) if "nodrop" in options else {}
        model = build_model(spec["preset"], head=spec["head"], **overrides, **dropout, vocab_size=rows)
        per_token = flops_per_token(a.model, model, length, fraction, vocab_size=vocab.size)
        loop = run_ours if impl == "ours" else run_hf
        row = {"model": a.model, "run": run, "device": gpu_name, "batch": batch, "length": length, "steps": steps,
               "vocab_rows": rows, "attention": "cudnn" if "cudnn" in options and cuda else "sdpa",
               "dropout": not dropout,
               "warmup": warmup, "workers": workers, "compile_mode": compiled, "parameters": sum(p.numel() for p in model.parameters()),
               "flops_per_token": per_token}
        try:
            with tempfile.TemporaryDirectory() as work, attention_kernels(options, cuda):
                clock = loop(model, spec, objective, batch=batch, warmup=warmup, steps=steps, compile=compiled,
                             workers=workers, accelerator=accelerator, work_dir=work, profile_steps=a.profile_steps)
            tokens_per_s = steps * batch * length / clock.seconds
            row.update(tokens_per_s=round(tokens_per_s), step_ms=round(1000 * clock.seconds / steps, 2),
                       host_gap_fraction=round(clock.wait / clock.seconds, 4),
                       data_wait_fraction=round(clock.data_wait / clock.seconds, 4),
                       gpu_idle_fraction=round(clock.gpu_idle / clock.seconds, 4) if cuda else None,
                       peak_memory_gib=round(torch.cuda.max_memory_allocated() / 2 ** 30, 2) if cuda else None)
            if clock.kernels is not None:
                row.update(kernel_ms_per_step=clock.kernel_ms_per_step, kernels=clock.kernels)
            if peak:
                row["mfu"] = round(per_token * tokens_per_s / (peak * 1e12), 4)
        except Exception as exc:  # one failed run is reported; the others still run
            row["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:500]
        print(json.dumps(row), flush=True)
        results.append(row)
        if a.json:
            with open(a.json, "a", encoding="utf-8") as f:
                f.write(json.dumps(row) + "\n")
        del model
        gc.collect()
        if cuda:
            torch.cuda.empty_cache()
    return results


if __name__ == "__main__":
    main()
