"""Benchmark: tokenizer training and token-store encoding on the embedded corpus, and our
Unigram (Hugging Face ``tokenizers``) against the ``sentencepiece`` trainer.

    .venv/bin/python benchmarks/tokenization.py          # sentencepiece: pip install 'lmforge[bench]'

Cleans the embedded demo corpus with the default parameters (into a temporary folder), then
for every kind: training time (train split), token-store build time and MB/s (both cores:
the Rust engine encodes each batch in parallel), and the encode-only throughput of the Rust
engine for comparison. For Unigram, sentencepiece trains on the same train-split text with the
same number of learned pieces and comparable settings (NFKC, whitespace collapsed, every
character covered), and both are compared on bytes per token over the held-out splits.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

from lmforge.cleaning.stage import run_clean
from lmforge.config import Params
from lmforge.splits import split_of
from lmforge.cleaning.output import iter_clean
from lmforge.tokenizer_kinds import KINDS
from lmforge.tokenization.tokenizer_stage import run_tokenizer
from lmforge.tokenization.tokens_stage import run_tokens


def best_of(n: int, fn):
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    reps = 3
    with tempfile.TemporaryDirectory() as tmp:
        params = Params.model_validate({
            "clean": {"output": f"{tmp}/clean"},
            "tokenizer": {"output": f"{tmp}/tok"},
            "tokenize": {"output": f"{tmp}/tokens"},
        })
        run_clean(params.clean, log=lambda m: None)
        docs = list(iter_clean(Path(f"{tmp}/clean")))
        train = [t for i, t in docs if split_of(i, params.split) == "train"]
        held_out = [t for i, t in docs if split_of(i, params.split) != "train"]  # validation + test
        mb_all = sum(len(t.encode()) for _, t in docs) / 1e6
        mb_train = sum(len(t.encode()) for t in train) / 1e6
        print(f"corpus: {len(docs)} cleaned documents, {mb_all:.2f} MB ({len(train)} train, {mb_train:.2f} MB); "
              f"{os.cpu_count()} cores; best of {reps}\n")

        rows = []
        for kind in KINDS:
            def train_once(kind=kind):
                import shutil
                shutil.rmtree(f"{tmp}/tok/{kind}", ignore_errors=True)
                run_tokenizer(params, [kind], log=lambda m: None)

            def store_once(kind=kind):
                import shutil
                shutil.rmtree(f"{tmp}/tokens/{kind}", ignore_errors=True)
                run_tokens(params, kind, log=lambda m: None)

            t_train = best_of(reps, train_once)
            t_store = best_of(reps, store_once)
            from tokenizers import Tokenizer

            tok = Tokenizer.from_file(f"{tmp}/tok/{kind}/tokenizer.json")
            texts = [t for _, t in docs]
            t_enc = best_of(reps, lambda: tok.encode_batch(texts, add_special_tokens=False))
            metrics = json.loads(Path(f"{tmp}/tok/{kind}/metrics.json").read_text())
            rows.append((kind, metrics, t_train, t_store, t_enc))

        print("| kind | vocab | training s | token store s | store MB/s | encode-only MB/s | tokens/word | bytes/token (validation) |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        for kind, m, t_train, t_store, t_enc in rows:
            print(f"| {kind} | {m['vocab_size']} | {t_train:.2f} | {t_store:.2f} | {mb_all / t_store:.2f} | {mb_all / t_enc:.2f} | "
                  f"{m['tokens_per_word']:.3f} | {m['bytes_per_token']:.3f} |")

        try:
            import sentencepiece as spm
        except ImportError:
            print("\nsentencepiece not installed (pip install 'lmforge[bench]'): Unigram comparison skipped")
            return
        # sentencepiece cannot grow this small corpus to our default 7,900 pieces (it stops at
        # about 7,400), so both train 4,000 pieces here.
        pieces = 4000
        params.tokenizer.unigram.vocab_size = pieces + params.tokenizer.unigram.sentinels
        ucfg = params.tokenizer.unigram
        train_file = Path(tmp) / "train.txt"
        train_file.write_text("\n".join(t for t in train), encoding="utf-8")
        prefix = f"{tmp}/spm"
        specials = list(ucfg.special_tokens.values())

        def spm_once():
            spm.SentencePieceTrainer.train(
                input=str(train_file), model_prefix=prefix, model_type="unigram", vocab_size=pieces,
                character_coverage=1.0, normalization_rule_name="nmt_nfkc", remove_extra_whitespaces=True,
                pad_id=0, eos_id=1, unk_id=2, bos_id=-1, user_defined_symbols=specials[3:],
                pad_piece=specials[0], eos_piece=specials[1], unk_piece=specials[2],
                num_threads=os.cpu_count(), input_sentence_size=0, minloglevel=2,
            )

        from lmforge.tokenization.train import train_kind

        t_spm = best_of(reps, spm_once)
        t_hf = best_of(reps, lambda: train_kind("unigram", lambda: iter(train), params.tokenizer))
        sp = spm.SentencePieceProcessor(model_file=f"{prefix}.model")
        from tokenizers import Tokenizer

        hf = train_kind("unigram", lambda: iter(train), params.tokenizer)
        vbytes = sum(len(t.encode()) for t in held_out)
        hf_tokens = sum(len(e.ids) for e in hf.encode_batch(held_out, add_special_tokens=False))
        sp_tokens = sum(len(ids) for ids in sp.encode(held_out))
        print(f"\nUnigram, {pieces} pieces on the train split ({mb_train:.2f} MB), held out (validation + test) {vbytes / 1e6:.3f} MB:\n")
        print("| trainer | training s | bytes/token (held out) |")
        print("|---|---:|---:|")
        print(f"| tokenizers UnigramTrainer (ours) | {t_hf:.2f} | {vbytes / hf_tokens:.3f} |")
        print(f"| sentencepiece | {t_spm:.2f} | {vbytes / sp_tokens:.3f} |")
        print(f"\ntraining time ratio ours / sentencepiece: {t_hf / t_spm:.2f}; "
              f"compression ratio (bytes/token) ours / sentencepiece: {(vbytes / hf_tokens) / (vbytes / sp_tokens):.3f}")


if __name__ == "__main__":
    sys.exit(main())
