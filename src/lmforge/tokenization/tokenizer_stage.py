"""The tokenizer stage: each requested kind trained on the clean corpus's train split
(``train.py``) and saved as a folder that ``transformers.PreTrainedTokenizerFast.from_pretrained``
loads with its special tokens set (``tokenizer.json`` + ``tokenizer_config.json``), plus
``metrics.json`` measured on the validation split and its charts. The char kind adds
``char_table.npy`` (the character ids of every word-vocabulary entry) and ``char_config.json``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
from tokenizers import Tokenizer

from ..artifacts import fingerprint, finished, staged_dir
from ..chars import BOS_CHAR, BOW_CHAR, CHAR_VOCAB_SIZE, EOS_CHAR, EOW_CHAR, PAD_CHAR, char_table
from ..cleaning.output import clean_shards, iter_clean
from ..config import Params
from ..corpus.document import CorpusError
from ..layout import corpus_dir, tokenizer_dir
from ..splits import split_of
from .train import hf_tokenizer, measure, tokenizer_sha256, train_kind


def _fingerprint(params: Params, kind: str) -> str:
    """The kind's settings, the split and the clean corpus's shard checksums."""
    cfg = params.tokenizer
    return fingerprint(kind, getattr(cfg, kind).model_dump(mode="json"), cfg.max_training_documents,
                       params.split.model_dump(mode="json"), clean_shards(params))


def _intact(out: Path, metrics: dict[str, Any]) -> bool:
    """The tokenizer in ``out`` is still the one its metrics.json names."""
    return (out / "tokenizer.json").exists() and metrics.get("tokenizer_sha256") == tokenizer_sha256(out)


def run_tokenizer(params: Params, kinds: list[str] | None = None, log: Callable[[str], None] = print) -> dict[str, dict]:
    """Train every requested kind; a kind whose inputs and settings are unchanged is kept."""
    cfg = params.tokenizer
    src = corpus_dir(params)
    if not (src / "stats.json").exists():
        raise CorpusError(f"{src}: no cleaned corpus (stats.json missing); run `lmforge clean` first")
    results = {}
    for kind in kinds or cfg.kinds:
        out = tokenizer_dir(params, kind)
        fp = _fingerprint(params, kind)
        prev = finished(out / "metrics.json", fp, intact=lambda metrics: _intact(out, metrics))
        if prev is not None:
            log(f"tokenizer {kind}: up to date")
            results[kind] = prev
            continue

        def train_texts() -> Iterator[str]:
            n = 0
            for doc_id, text in iter_clean(src):
                if split_of(doc_id, params.split) == "train":
                    if cfg.max_training_documents is not None and n >= cfg.max_training_documents:
                        return
                    n += 1
                    yield text

        if next(train_texts(), None) is None:
            raise CorpusError(f"{src}: no documents in the train split to train the {kind} tokenizer on")
        t0 = time.perf_counter()
        tok = train_kind(kind, train_texts, cfg)
        seconds = time.perf_counter() - t0
        held_out = [t for i, t in iter_clean(src) if split_of(i, params.split) == "validation"]
        metrics = measure(tok, kind, held_out or list(train_texts()), cfg)
        metrics["measured_on"] = "validation" if held_out else "train (no validation documents)"
        metrics["training_seconds"] = round(seconds, 3)
        with staged_dir(out) as tmp:
            hf_tokenizer(tok, kind, cfg).save_pretrained(str(tmp))
            if kind == "char":
                _save_char_table(tok, cfg.char, tmp)
            metrics["fingerprint"] = fp
            metrics["tokenizer_sha256"] = tokenizer_sha256(tmp)
            (tmp / "metrics.json").write_text(json.dumps(metrics, indent=2, sort_keys=True) + "\n")
            from ..charts import write_charts
            from ..charts.tokenizers import tokenizer_charts

            write_charts(tmp, tokenizer_charts(metrics), log)
        log(f"tokenizer {kind}: vocab {metrics['vocab_size']}, {metrics['tokens_per_word']} tokens/word, "
            f"{metrics['bytes_per_token']} bytes/token, trained in {seconds:.1f}s")
        results[kind] = metrics
    return results


def _save_char_table(tok: Tokenizer, kcfg, directory: Path) -> None:
    """The char kind's extras: every word-vocabulary entry's character ids, and the scheme."""
    vocab = [tok.id_to_token(i) for i in range(tok.get_vocab_size())]
    sp = kcfg.special_tokens
    np.save(directory / "char_table.npy", char_table(vocab, kcfg.max_characters, sp["bos"], sp["eos"]))
    (directory / "char_config.json").write_text(json.dumps(
        {"max_characters": kcfg.max_characters, "char_vocab_size": CHAR_VOCAB_SIZE, "bos_char": BOS_CHAR,
         "eos_char": EOS_CHAR, "bow_char": BOW_CHAR, "eow_char": EOW_CHAR, "pad_char": PAD_CHAR}, indent=2) + "\n")
