"""Benchmark: training-step throughput of our models against transformers' with the same config.

    .venv/bin/python benchmarks/models.py [--device cuda --dtype bfloat16]
    PYTHONPATH=src python3 benchmarks/models.py --device cuda --dtype bfloat16 --steps 10 [--batch 32 --length 512]
    .venv/bin/python benchmarks/models.py --compile      # both models through torch.compile (inductor)
    PYTHONPATH=src python3 benchmarks/models.py --device cuda --dtype bfloat16 --compile --compile-mode reduce-overhead

For each architecture with a transformers counterpart, our model and the transformers model
converted from it (same weights, same config, same head) train on the same random batch:
forward + backward + AdamW step, tokens/s over the best of several timed windows, the two
interleaved so machine load hits both alike. The ratio ours / transformers is what to read.
With ``--compile`` both models are wrapped in ``torch.compile`` (the default inductor backend;
compilation happens in the warm-up steps, untimed) and the graphs and graph breaks Dynamo
finds in each model's forward are listed after the table.
"""

from __future__ import annotations

import argparse
import time

import torch

from lmforge.interop.hf import to_hf
from lmforge.models.registry import build_model
from lmforge.models.switch import SwitchFeedForward
from lmforge.models.t5 import T5Attention
from lmforge.models.xlnet import XLNetRelativeAttention

# (preset, head, overrides, batch kind): a small but not trivial shape, the same for every
# architecture (4 layers, width 256, 4 heads, FFN 1024, vocabulary 8000), dropout 0
SHAPE = dict(d_model=256, n_layers=4, n_heads=4, d_ff=1024)
ENC_DEC = dict(d_model=256, d_ff=1024, n_heads=4, vocab_size=8000, dropout=0.0)
POS = 256  # learned position tables: at least the benchmark's length (main() raises it for --length > 256)
CASES = [
    ("gpt2", "lm", dict(vocab_size=8000, n_positions=POS, **SHAPE, dropout=0.0, attn_dropout=0.0, embd_dropout=0.0), "lm"),
    ("openai-gpt", "lm", dict(vocab_size=8000, n_positions=POS, **SHAPE, dropout=0.0, attn_dropout=0.0, embd_dropout=0.0), "lm"),
    ("bert-base", "pretraining", dict(vocab_size=8000, max_positions=POS, **SHAPE, dropout=0.0, attn_dropout=0.0), "pretraining"),
    ("albert-base", "pretraining", dict(vocab_size=8000, max_positions=POS, **SHAPE), "pretraining"),
    ("ernie-1.0-base", "pretraining", dict(vocab_size=8000, max_positions=POS, **SHAPE, dropout=0.0, attn_dropout=0.0), "pretraining"),
    ("xlnet-base", "lm", dict(vocab_size=8000, d_model=256, n_layers=4, n_heads=4, d_head=64, d_inner=1024, dropout=0.0), "plm"),
    ("bart-base", "seq2seq", dict(max_positions=POS, encoder_layers=4, decoder_layers=4, attn_dropout=0.0, act_dropout=0.0, **ENC_DEC), "seq2seq"),
    ("t5-small", "seq2seq", dict(d_kv=64, n_layers=4, n_decoder_layers=4, **ENC_DEC), "seq2seq"),
    ("t5-v1_1-small", "seq2seq", dict(d_kv=64, n_layers=4, n_decoder_layers=4, **ENC_DEC), "seq2seq"),
    ("switch-base-8", "seq2seq", dict(d_kv=64, n_layers=4, n_decoder_layers=4, **ENC_DEC), "seq2seq"),
]


def make_batch(name: str, head: str, vocab: int, B: int, L: int, device: str) -> tuple[dict, dict]:
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, vocab, (B, L), generator=g)
    mask = torch.ones(B, L, dtype=torch.long)
    mask[: B // 2, -L // 8:] = 0  # half the rows padded: masks on the hot path for both
    move = lambda d: {k: v.to(device) for k, v in d.items()}  # noqa: E731
    if head == "seq2seq":  # span-corruption-like: targets a quarter of the input length
        labels = torch.randint(5, vocab, (B, L // 4), generator=g)
        batch = {"input_ids": ids, "attention_mask": mask, "labels": labels}
        return move(batch), move(batch)
    if head == "plm":  # XLNet: 1/6 of the positions are targets, one random order per row
        P = L // 6
        targets = torch.stack([torch.randperm(L, generator=g)[:P].sort().values for _ in range(B)])
        rank = torch.stack([torch.randperm(L, generator=g) for _ in range(B)]).float()
        is_target = torch.zeros(B, L, dtype=torch.bool).scatter_(1, targets, True)
        # i cannot see j when j is a target not earlier than i in the order
        perm = ((rank[:, :, None] <= rank[:, None, :]) & is_target[:, None, :]).float()
        mapping = torch.zeros(B, P, L).scatter_(2, targets[:, :, None], 1.0)
        batch = {"input_ids": ids, "attention_mask": mask, "perm_mask": perm, "target_mapping": mapping,
                 "labels": torch.gather(ids, 1, targets)}
        return move(batch), move(batch)
    if head == "lm":
        ours = {"input_ids": ids, "attention_mask": mask, "labels": ids}
        theirs = dict(ours)
    else:
        labels = torch.where(torch.rand(B, L, generator=g) < 0.15, ids, torch.full_like(ids, -100))
        pair = torch.randint(0, 2, (B,), generator=g)
        key = "sentence_order_label" if name.startswith("albert") else "next_sentence_label"
        ours = {"input_ids": ids, "attention_mask": mask, "labels": labels, key: pair}
        theirs = {"input_ids": ids, "attention_mask": mask, "labels": labels, key: pair}
    return move(ours), move(theirs)


def step_fn(model: torch.nn.Module, batch: dict, dtype: torch.dtype, device: str):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    autocast = torch.autocast(device_type=device.split(":")[0], dtype=dtype, enabled=dtype != torch.float32)

    def step():
        opt.zero_grad(set_to_none=True)
        with autocast:
            loss = model(**batch).loss
        loss.backward()
        opt.step()
        if device.startswith("cuda"):
            torch.cuda.synchronize()

    return step


def tokens_per_second(steps: list, tokens: int, windows: int = 5, per_window: int = 3) -> list[float]:
    """Interleaved timing: in each window every contender runs ``per_window`` steps; best window counts.
    On a GPU every step ends with ``torch.cuda.synchronize()`` (``step_fn``), so the host clock
    reads finished work."""
    for s in steps:
        s()  # warm-up (two steps: the first allocates AdamW's state)
        s()
    best = [0.0] * len(steps)
    for _ in range(windows):
        for i, s in enumerate(steps):
            t0 = time.perf_counter()
            for _ in range(per_window):
                s()
            best[i] = max(best[i], tokens * per_window / (time.perf_counter() - t0))
    return best


def profile_steps(step, label: str, path: str, steps: int = 3) -> str:
    """Profile ``steps`` training steps (after the timing, so warm): append the kernel and host
    tables to ``path`` and return a one-line summary per step: device (kernel) time, kernel
    launches and host-device synchronisations."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step()
    ka = prof.key_averages()
    device_events = [e for e in prof.events() if e.device_type == DeviceType.CUDA]  # kernels, copies, memsets
    kernel_us = sum(e.time_range.elapsed_us() for e in device_events) / steps
    launches = sum(e.count for e in ka if e.key in ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel",
                                                      "cuLaunchKernelEx", "cudaGraphLaunch")) / steps
    syncs = sum(e.count for e in ka if "Synchronize" in e.key) / steps
    copies = sum(e.count for e in ka if e.key.startswith("cudaMemcpy")) / steps
    with open(path, "a") as f:
        f.write(f"\n===== {label}\n")
        f.write(ka.table(sort_by="self_device_time_total", row_limit=25))
        f.write(ka.table(sort_by="self_cpu_time_total", row_limit=25))
    return (f"{label}: {kernel_us / 1000:.2f} ms device time per step ({len(device_events) / steps:.0f} device "
            f"events), {launches:.0f} launches, "
            f"{syncs:.0f} synchronize calls, {copies:.0f} memcpy calls")


def graph_breaks(model: torch.nn.Module, batch: dict) -> str:
    """The graphs Dynamo makes of ``model``'s forward on ``batch`` and where it breaks."""
    import torch._dynamo

    with torch.autocast(device_type=next(model.parameters()).device.type, enabled=False):
        explained = torch._dynamo.explain(model)(**batch)
    torch._dynamo.reset()
    reasons = sorted({str(r.reason).split("\n")[0] for r in explained.break_reasons})
    return f"{explained.graph_count} graph(s), {explained.graph_break_count} break(s)" + (
        f" ({'; '.join(reasons)})" if reasons else "")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--length", type=int, default=128)
    ap.add_argument("--only", nargs="*", help="preset names to run (default: all)")
    ap.add_argument("--windows", type=int, default=5, help="timed windows (the best counts)")
    ap.add_argument("--steps", type=int, default=3, help="steps per timed window")
    ap.add_argument("--tf32", action="store_true", help="CUDA float32 matmuls on TF32 tensor cores (default off)")
    ap.add_argument("--compile", action="store_true", help="torch.compile both models (inductor); list graph breaks")
    ap.add_argument("--compile-mode", default=None, choices=["default", "reduce-overhead", "max-autotune"],
                    help="torch.compile's mode with --compile (reduce-overhead: CUDA graphs on a GPU)")
    ap.add_argument("--profile", metavar="PATH", help="profile 3 steps of each model after timing; tables to PATH")
    ap.add_argument("--switch-dispatch", default="auto", choices=["auto", "sorted", "capacity"],
                    help="our Switch layer's dispatch (SwitchFeedForward.dispatch)")
    ap.add_argument("--attention", default="auto", choices=["auto", "unfused"],
                    help="XLNet's and T5's attention with trained scores: SDPA on a GPU (auto) or written out")
    args = ap.parse_args()
    SwitchFeedForward.dispatch = args.switch_dispatch
    if args.attention == "unfused":
        XLNetRelativeAttention.fused = T5Attention.fused = False
    dtype = getattr(torch, args.dtype)
    where = f"torch threads {torch.get_num_threads()}"
    if args.device.startswith("cuda"):
        torch.backends.cuda.matmul.allow_tf32 = args.tf32
        torch.backends.cudnn.allow_tf32 = args.tf32
        where = f"{torch.cuda.get_device_name()}, TF32 {'on' if args.tf32 else 'off'}"
    import transformers

    compiled = f"torch.compile (inductor, mode {args.compile_mode or 'default'})" if args.compile else "eager"
    print(f"device {args.device} ({where}), torch {torch.__version__}, transformers {transformers.__version__}, "
          f"{args.dtype}, batch {args.batch} x {args.length}, best of {args.windows} windows of {args.steps} steps, "
          f"shape {SHAPE}, vocab 8000; seq2seq targets {args.length // 4} long; position tables "
          f"{max(POS, args.length)}; our Switch dispatch {args.switch_dispatch}, "
          f"attention {args.attention}, {compiled}\n")
    print("| architecture | ours tokens/s | transformers tokens/s | ratio ours / transformers |")
    print("|---|---:|---:|---:|")
    notes: list[str] = []
    for name, head, overrides, kind in CASES:
        if args.only and name not in args.only:
            continue
        torch.manual_seed(0)
        overrides = {k: max(v, args.length) if k in ("n_positions", "max_positions") else v for k, v in overrides.items()}
        ours = build_model(name, head=head, **overrides)
        theirs = to_hf(ours)
        ours.to(args.device).train()
        theirs.to(args.device).train()
        b_ours, b_theirs = make_batch(name, kind, 8000, args.batch, args.length, args.device)
        models = [ours, theirs]
        if args.compile:
            notes.append(f"{name}: " + ", ".join(f"{who} {graph_breaks(m, b)}" for m, b, who in
                                                  ((ours, b_ours, "ours"), (theirs, b_theirs, "transformers"))))
            models = [torch.compile(m, mode=args.compile_mode) for m in models]
        steps = [step_fn(m, b, dtype, args.device) for m, b in zip(models, (b_ours, b_theirs))]
        rates = tokens_per_second(steps, args.batch * args.length, args.windows, args.steps)
        print(f"| {name} ({head}) | {rates[0]:,.0f} | {rates[1]:,.0f} | {rates[0] / rates[1]:.2f}x |")
        if args.profile:
            notes.extend(profile_steps(s, f"{name} {who}", args.profile) for s, who in zip(steps, ("ours", "transformers")))
        del ours, theirs, models, steps
    for line in notes:
        print(line)


if __name__ == "__main__":
    main()
