"""Benchmark: a masked-LM training step that scores only the masked positions against the same
step scoring every position.

    python benchmarks/sparse_mlm.py [--vocab 8000 4096] [--steps 20] [--threads 2]

For the tiny presets the pipeline pretrains on a CPU (BERT, ERNIE, ALBERT: width 128, 2 layers),
a batch of 16 x 128 tokens with 15% of them labelled, AdamW: the median seconds of a forward,
backward and optimizer step over ``--steps`` steps (after 3 warm-up steps), for

- ``every position``: the head run on all B x L states, the loss over the labelled ones (what the
  models did before, and what ``transformers``' ``BertForPreTraining`` does);
- ``labelled only``: the model's own training path (:meth:`MLMHead.logits_and_loss`).

Both in the same process on the same batch; the ratio is every / labelled. The two losses are
printed too: they are the same number.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from lmforge.models.layers import lm_loss
from lmforge.models.registry import build_model

PRESETS = {"bert": "bert-tiny", "albert": "albert-tiny"}  # ERNIE's tiny recipe is bert-tiny's shape


def dense_loss(model, batch):
    """The same model, every position scored."""
    labels = batch["labels"]
    inputs = {k: v for k, v in batch.items() if k != "labels"}
    encoder = model.encoder if hasattr(model, "encoder") else model.albert
    hidden = encoder(**inputs)[0]
    logits = model.mlm(hidden, encoder.embeddings.word.weight)
    return lm_loss(logits, labels)


def sparse_loss(model, batch):
    return model(**batch).loss


def timed(model, fn, batch, steps):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    times = []
    for i in range(steps + 3):
        start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = fn(model, batch)
        loss.backward()
        opt.step()
        if i >= 3:
            times.append(time.perf_counter() - start)
    return statistics.median(times), float(loss.detach())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vocab", type=int, nargs="+", default=[8000, 4096])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print("| model | vocabulary | every position (s/step) | labelled only (s/step) | ratio | loss (every / labelled) |")
    print("|---|---:|---:|---:|---:|---|")
    for arch, preset in PRESETS.items():
        for vocab in args.vocab:
            torch.manual_seed(0)
            model = build_model(preset, head="mlm", vocab_size=vocab, dropout=0.0, attn_dropout=0.0).train()
            state = {k: v.clone() for k, v in model.state_dict().items()}
            g = torch.Generator().manual_seed(0)
            ids = torch.randint(5, vocab, (16, 128), generator=g)
            labels = torch.full_like(ids, -100)
            masked = torch.rand(ids.shape, generator=g) < 0.15
            labels[masked] = ids[masked]
            batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels}
            dense, dense_first = timed(model, dense_loss, batch, args.steps)
            model.load_state_dict(state)
            sparse, sparse_first = timed(model, sparse_loss, batch, args.steps)
            print(f"| {arch} ({preset}) | {vocab} | {dense:.3f} | {sparse:.3f} | {dense / sparse:.2f} | "
                  f"{dense_first:.4f} / {sparse_first:.4f} |")


if __name__ == "__main__":
    main()
