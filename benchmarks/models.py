"""Benchmark: training-step throughput of our models against transformers' with the same config.

    .venv/bin/python benchmarks/models.py [--device cuda --dtype bfloat16]

For each architecture with a transformers counterpart, our model and the transformers model
converted from it (same weights, same config, same head) train on the same random batch:
forward + backward + AdamW step, tokens/s over the best of several timed windows, the two
interleaved so machine load hits both alike. The ratio ours / transformers is what to read.
"""

from __future__ import annotations

import argparse
import time

import torch

from lmforge.interop.hf import to_hf
from lmforge.models.registry import build_model

# (preset, head, overrides, batch kind): a small but not trivial shape, the same for every
# architecture (4 layers, width 256, 4 heads, FFN 1024, vocabulary 8000), dropout 0
SHAPE = dict(d_model=256, n_layers=4, n_heads=4, d_ff=1024)
ENC_DEC = dict(d_model=256, d_ff=1024, n_heads=4, vocab_size=8000, dropout=0.0)
CASES = [
    ("gpt2", "lm", dict(vocab_size=8000, n_positions=256, **SHAPE, dropout=0.0, attn_dropout=0.0, embd_dropout=0.0), "lm"),
    ("openai-gpt", "lm", dict(vocab_size=8000, n_positions=256, **SHAPE, dropout=0.0, attn_dropout=0.0, embd_dropout=0.0), "lm"),
    ("bert-base", "pretraining", dict(vocab_size=8000, max_positions=256, **SHAPE, dropout=0.0, attn_dropout=0.0), "pretraining"),
    ("albert-base", "pretraining", dict(vocab_size=8000, max_positions=256, **SHAPE), "pretraining"),
    ("ernie-1.0-base", "pretraining", dict(vocab_size=8000, max_positions=256, **SHAPE, dropout=0.0, attn_dropout=0.0), "pretraining"),
    ("xlnet-base", "lm", dict(vocab_size=8000, d_model=256, n_layers=4, n_heads=4, d_head=64, d_inner=1024, dropout=0.0), "plm"),
    ("bart-base", "seq2seq", dict(max_positions=256, encoder_layers=4, decoder_layers=4, attn_dropout=0.0, act_dropout=0.0, **ENC_DEC), "seq2seq"),
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
    """Interleaved timing: in each window every contender runs ``per_window`` steps; best window counts."""
    for s in steps:
        s()  # warm-up
    best = [0.0] * len(steps)
    for _ in range(windows):
        for i, s in enumerate(steps):
            t0 = time.perf_counter()
            for _ in range(per_window):
                s()
            best[i] = max(best[i], tokens * per_window / (time.perf_counter() - t0))
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--length", type=int, default=128)
    ap.add_argument("--only", nargs="*", help="preset names to run (default: all)")
    args = ap.parse_args()
    dtype = getattr(torch, args.dtype)
    print(f"device {args.device}, {args.dtype}, batch {args.batch} x {args.length}, torch threads {torch.get_num_threads()}, "
          f"shape {SHAPE}, vocab 8000; seq2seq targets {args.length // 4} long\n")
    print("| architecture | ours tokens/s | transformers tokens/s | ratio ours / transformers |")
    print("|---|---:|---:|---:|")
    for name, head, overrides, kind in CASES:
        if args.only and name not in args.only:
            continue
        torch.manual_seed(0)
        ours = build_model(name, head=head, **overrides)
        theirs = to_hf(ours)
        ours.to(args.device).train()
        theirs.to(args.device).train()
        b_ours, b_theirs = make_batch(name, kind, 8000, args.batch, args.length, args.device)
        rates = tokens_per_second([step_fn(ours, b_ours, dtype, args.device), step_fn(theirs, b_theirs, dtype, args.device)],
                                  args.batch * args.length)
        print(f"| {name} ({head}) | {rates[0]:,.0f} | {rates[1]:,.0f} | {rates[0] / rates[1]:.2f}x |")


if __name__ == "__main__":
    main()
