"""Benchmark: objective builders against transformers' collators, and against what a tiny
model consumes.

    .venv/bin/python benchmarks/objectives.py

Runs clean -> tokenizers -> token stores on the embedded demo corpus (default parameters, in a
temporary folder), then, in one process:

1. MLM: our ``mlm`` objective (exact-count 15%, 80/10/10) + ``pad_batch`` against
   ``transformers.DataCollatorForLanguageModeling`` (mlm_probability 0.15) on the same
   ``[CLS] tokens [SEP]`` sequences, batches of 32; examples/s and the ratio.
2. Permutation LM: our ``permutation`` objective against
   ``DataCollatorForPermutationLanguageModeling`` (plm_probability 1/6, max_span_length 5) on
   the same 128-token blocks (+ ``<sep> <cls>``: 130 tokens, the even length the collator
   needs); examples/s and the ratio.
3. Every objective's examples/s and input tokens/s (one process, batches of 32 through
   ``pad_batch``) next to the tokens/s a tiny model trains on: a 2-layer, 128-wide
   ``torch.nn.TransformerEncoder`` with an 8k-vocabulary head, forward + backward + AdamW step,
   batch 32 x 128, on this machine's CPU.
"""

from __future__ import annotations

import tempfile
import time

import torch

from lmforge.cleaning.stage import run_clean
from lmforge.config import Params
from lmforge.objectives.base import Corpus, Document, Vocab, rng_for
from lmforge.datasets.open import ObjectiveDataset, open_objective, store_corpus
from lmforge.objectives.features import pad_batch
from lmforge.objectives.permutation import PermutationLM
from lmforge.objectives.registry import OBJECTIVES
from lmforge.tokenizer_kinds import KINDS
from lmforge.tokenization.tokenizer_stage import run_tokenizer
from lmforge.tokenization.tokens_stage import run_tokens

BATCH = 32


def rate(fn, n_examples: int, min_seconds: float = 1.0) -> float:
    """Examples per second of ``fn`` (which builds ``n_examples``), repeated for at least min_seconds."""
    fn()  # warm-up
    done, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < min_seconds:
        fn()
        done += n_examples
    return done / (time.perf_counter() - t0)


def tiny_model_tokens_per_second(vocab: int = 8000, seq: int = 128) -> float:
    torch.manual_seed(0)
    emb = torch.nn.Embedding(vocab, 128)
    layer = torch.nn.TransformerEncoderLayer(128, 2, 512, batch_first=True, dropout=0.0)
    enc = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
    head = torch.nn.Linear(128, vocab)
    params = list(emb.parameters()) + list(enc.parameters()) + list(head.parameters())
    opt = torch.optim.AdamW(params, lr=1e-3)
    x = torch.randint(0, vocab, (BATCH, seq))

    def step():
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(head(enc(emb(x))).view(-1, vocab), x.view(-1))
        loss.backward()
        opt.step()

    return rate(step, BATCH * seq, min_seconds=3.0)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        params = Params.model_validate({
            "clean": {"output": f"{tmp}/clean"}, "tokenizer": {"output": f"{tmp}/tok"},
            "tokenize": {"output": f"{tmp}/tokens"}, "dataset": {"output": f"{tmp}/datasets"},
        })
        run_clean(params.clean, log=lambda m: None)
        run_tokenizer(params, log=lambda m: None)
        for kind in KINDS:
            run_tokens(params, kind, log=lambda m: None)
        print(f"torch threads: {torch.get_num_threads()}; batches of {BATCH}\n")

        # 1. MLM vs DataCollatorForLanguageModeling ------------------------------------------
        from transformers import (
            DataCollatorForLanguageModeling,
            DataCollatorForPermutationLanguageModeling,
            PreTrainedTokenizerFast,
        )

        mlm = open_objective(params, "mlm")
        hf_tok = PreTrainedTokenizerFast.from_pretrained(f"{tmp}/tok/wordpiece")
        v = mlm.vocab
        seqs = []
        for d, s, e in mlm.chunks[:BATCH * 8]:
            toks = mlm.corpus[int(d)].tokens[s:e].tolist()
            seqs.append([v.cls] + toks + [v.sep])
        hf_mlm = DataCollatorForLanguageModeling(hf_tok, mlm=True, mlm_probability=0.15, return_tensors="pt")
        batches = [seqs[i:i + BATCH] for i in range(0, len(seqs), BATCH)]
        ours_data = ObjectiveDataset(mlm, seed=0)

        def ours_mlm():
            for b in range(len(batches)):
                pad_batch([ours_data[b * BATCH + j] for j in range(BATCH)], v.pad)

        def hf_mlm_run():
            for batch in batches:
                hf_mlm([{"input_ids": s} for s in batch])

        n = len(batches) * BATCH
        r_ours, r_hf = rate(ours_mlm, n), rate(hf_mlm_run, n)
        print("| builder | examples/s | ratio ours / transformers |")
        print("|---|---:|---:|")
        print(f"| mlm (ours) | {r_ours:,.0f} | {r_ours / r_hf:.2f}x |")
        print(f"| DataCollatorForLanguageModeling | {r_hf:,.0f} | |")

        # 2. Permutation vs DataCollatorForPermutationLanguageModeling ------------------------
        uni = Vocab.from_tokenizer(f"{tmp}/tok/unigram")
        store = store_corpus(f"{tmp}/tokens/unigram", "train")
        blocks = []
        for d in range(len(store)):
            doc = store[d]
            for s in range(0, len(doc) - 127, 128):
                blocks.append(doc.slice(s, s + 128))
                if len(blocks) == BATCH * 8:
                    break
            if len(blocks) == BATCH * 8:
                break
        corpus = Corpus([Document(b.tokens, b.word_starts, b.sentence_starts, i) for i, b in enumerate(blocks)])
        perm = PermutationLM(corpus, uni, PermutationLM.Config(max_length=130))
        assert len(perm) == len(blocks), "one example per 128-token block"
        hf_uni = PreTrainedTokenizerFast.from_pretrained(f"{tmp}/tok/unigram")
        hf_perm = DataCollatorForPermutationLanguageModeling(hf_uni, plm_probability=1 / 6, max_span_length=5, return_tensors="pt")
        perm_seqs = [b.tokens.tolist() + [uni.sep, uni.cls] for b in blocks]

        def ours_perm():
            for b in range(len(blocks) // BATCH):
                pad_batch([perm.example(b * BATCH + j, rng_for(0, 0, b * BATCH + j)) for j in range(BATCH)], uni.pad)

        def hf_perm_run():
            for b in range(len(blocks) // BATCH):
                hf_perm([{"input_ids": s} for s in perm_seqs[b * BATCH:(b + 1) * BATCH]])

        n = (len(blocks) // BATCH) * BATCH
        r_ours, r_hf = rate(ours_perm, n), rate(hf_perm_run, n)
        print(f"| permutation (ours), 130 tokens | {r_ours:,.0f} | {r_ours / r_hf:.2f}x |")
        print(f"| DataCollatorForPermutationLanguageModeling | {r_hf:,.0f} | |")

        # 3. Every objective vs a tiny model ------------------------------------------------
        model_tps = tiny_model_tokens_per_second()
        print(f"\ntiny model (2 x 128, vocab 8k, batch {BATCH} x 128, train step): {model_tps:,.0f} tokens/s\n")
        print("| objective | examples/s | input tokens/s | data / model |")
        print("|---|---:|---:|---:|")
        for name in sorted(OBJECTIVES):
            obj = open_objective(params, name)
            data = ObjectiveDataset(obj, seed=0)
            count = min(len(data), BATCH * 4)
            count -= count % BATCH or 0
            count = max(count, min(len(data), BATCH))
            pad = obj.vocab.pad if obj.vocab.pad is not None else 0
            tokens = sum(len(data[i]["input_ids"]) for i in range(count))

            def build():
                for lo in range(0, count, BATCH):
                    pad_batch([data[i] for i in range(lo, min(count, lo + BATCH))], pad)

            r = rate(build, count)
            tps = r * tokens / count
            print(f"| {name} | {r:,.0f} | {tps:,.0f} | {tps / model_tps:.1f}x |")


if __name__ == "__main__":
    main()
