"""The tokens stage: the clean corpus encoded with one trained tokenizer into a token store
(``store.py`` has its format), shard by shard on an executor (``encode_shard`` is the unit of
work), the shards' parts joined in shard order so the store is the same on every executor; with
``tokenize.mixture`` the train split weighted by source (``mixture.py``).
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
from tokenizers import Tokenizer

from .. import __version__
from ..artifacts import atomic_write_bytes, atomic_write_json, fingerprint, finished, sha256_file, staged_dir
from ..cleaning.output import clean_shards
from ..cleaning.storage import is_done, save_npy
from ..config import ExecutorConfig, Params, SplitConfig
from ..corpus.document import CorpusError
from ..executors import open_executor
from ..executors.base import execution_report
from ..layout import corpus_dir, token_store_dir, tokenizer_dir
from ..splits import SPLITS, split_of
from ..token_flags import SENTENCE_START, WORD_START
from .store import SplitWriter, StoreError, TokenStore, token_dtype, token_flags
from .train import tokenizer_sha256

# ----------------------------------------------------------------------------- one shard, on an executor

_TOKENIZERS: dict[str, Tokenizer] = {}


def encode_shard(shard: str, tokenizer: str, tokenizer_sha: str, part: str, split_json: str, batch_size: int) -> int | None:
    """Encode one clean shard into ``part/<split>/`` (tokens, flags, each document's length, id and
    source); returns the shard's bytes of text, or None when the part was already done. Run by the
    executor (this process, a process pool or a Ray task), so only paths and JSON go in; the
    tokenizer's checksum keys the process's cached tokenizer (one retrained at the same path is
    loaded again)."""
    out = Path(part)
    marker = out / "part.done"
    if is_done(marker) and (out / SPLITS[0] / "sources.jsonl").exists():  # (a part of an older version has none)
        return None
    source = pq.ParquetFile(shard)
    if tokenizer_sha not in _TOKENIZERS:
        _TOKENIZERS.clear()
        try:
            _TOKENIZERS[tokenizer_sha] = Tokenizer.from_file(tokenizer)
        except Exception as exc:  # noqa: BLE001 - the Rust library's error names no file
            raise StoreError(f"{tokenizer}: cannot load the tokenizer: {exc}") from None
    tok = _TOKENIZERS[tokenizer_sha]
    dtype = token_dtype(tok.get_vocab_size())
    split_cfg = SplitConfig.model_validate_json(split_json)
    parts = {name: {"tokens": [], "flags": [], "lengths": [], "ids": [], "sources": []} for name in SPLITS}
    n_bytes = 0
    for batch in source.iter_batches(batch_size=batch_size, columns=["id", "text", "source"]):
        ids, texts = batch.column("id").to_pylist(), batch.column("text").to_pylist()
        encs = tok.encode_batch(texts, add_special_tokens=False)
        for doc_id, text, enc, src in zip(ids, texts, encs, batch.column("source").to_pylist()):
            p = parts[split_of(doc_id, split_cfg)]
            p["tokens"].append(np.asarray(enc.ids, dtype=dtype).tobytes())
            p["flags"].append(token_flags(enc, text).tobytes())
            p["lengths"].append(len(enc.ids))
            p["ids"].append(json.dumps(doc_id, ensure_ascii=False) + "\n")
            p["sources"].append(json.dumps(src or "", ensure_ascii=False) + "\n")  # what tokenize.mixture weights by
            n_bytes += len(text.encode("utf-8"))
    written = []
    for name, p in parts.items():
        d = out / name
        written += [atomic_write_bytes(d / "tokens.bin", b"".join(p["tokens"])),
                    atomic_write_bytes(d / "flags.bin", b"".join(p["flags"])),
                    atomic_write_bytes(d / "doc_ids.jsonl", "".join(p["ids"]).encode("utf-8")),
                    atomic_write_bytes(d / "sources.jsonl", "".join(p["sources"]).encode("utf-8"))]
        save_npy(d / "lengths.npy", np.asarray(p["lengths"], dtype=np.int64))
        written.append(d / "lengths.npy")
    atomic_write_json(marker, {"outputs": {str(w.relative_to(out)): sha256_file(w) for w in written}, "bytes": n_bytes})
    return n_bytes


# ----------------------------------------------------------------------------- the stage


def _fingerprint(params: Params, kind: str, tok_sha: str) -> str:
    """The tokenizer's checksum, the clean corpus's shard checksums, the split and the mixture
    (when there is one: a store without one keeps the fingerprint it always had)."""
    parts: list[Any] = [kind, tok_sha, clean_shards(params), params.split.model_dump(mode="json")]
    if params.tokenize.mixture:
        parts.append({"mixture": {k: v.model_dump(mode="json") for k, v in sorted(params.tokenize.mixture.items())},
                      "seed": params.tokenize.mixture_seed})
    return fingerprint(*parts)


def corpus_sources(shards: list[Path]) -> list[str]:
    """The sources the clean shards' documents came from (their ``source`` column), sorted."""
    import pyarrow.compute as pc

    found: set[str] = set()
    for shard in shards:
        found.update(s or "" for s in pc.unique(pq.read_table(shard, columns=["source"]).column("source")).to_pylist())
    return sorted(found)


def _mixed_train(writer: SplitWriter, parts: list[Path], params: Params, dtype: np.dtype) -> dict[str, Any]:
    """Write the train split with ``tokenize.mixture``'s copies, pass by pass (``mixture.py``);
    the mixture's report."""
    from .mixture import plan

    ids: list[str] = []
    sources: list[str] = []
    lengths = []
    for part in parts:
        d = part / "train"
        ids += [json.loads(line) for line in (d / "doc_ids.jsonl").read_text(encoding="utf-8").splitlines()]
        sources += [json.loads(line) for line in (d / "sources.jsonl").read_text(encoding="utf-8").splitlines()]
        lengths.append(np.load(d / "lengths.npy"))
    copies, report = plan(ids, sources, np.concatenate(lengths) if lengths else np.zeros(0, np.int64),
                          params.tokenize.mixture, params.tokenize.mixture_seed)
    if not copies.any():
        raise StoreError("tokenize.mixture: its weights and caps leave the train split empty")
    bounds = np.cumsum([0] + [len(x) for x in lengths])
    for p in range(int(copies.max())):
        for i, part in enumerate(parts):
            select = copies[bounds[i]:bounds[i + 1]] > p
            if select.any():
                writer.append_part(part / "train", select, dtype)
    return report


def _intact(directory: Path) -> bool:
    try:
        TokenStore(directory).verify(full=False)
    except StoreError:
        return False
    return True


def run_tokens(params: Params, kind: str, log: Callable[[str], None] = print,
                executor: ExecutorConfig | None = None) -> dict[str, Any]:
    """Encode the clean corpus with the trained ``kind`` tokenizer, shard by shard on ``executor``
    (default: in this process); up to date stores are kept. The store is the same on every
    executor: the shards' parts are joined in shard order."""
    tok_dir = tokenizer_dir(params, kind)
    if not (tok_dir / "tokenizer.json").exists():
        raise StoreError(f"{tok_dir}: no trained {kind} tokenizer; run `lmforge tokenizer` first")
    src = corpus_dir(params)
    if not (src / "stats.json").exists():
        raise CorpusError(f"{src}: no cleaned corpus (stats.json missing); run `lmforge clean` first")
    tok_sha = tokenizer_sha256(tok_dir)
    out = token_store_dir(params, kind)
    shards = sorted(src.glob("shard-*.parquet"))
    if params.tokenize.mixture:  # before any encoding: a misspelt source is the parameters' fault
        from .mixture import check_rules

        check_rules(params.tokenize.mixture, corpus_sources(shards))
    fp = _fingerprint(params, kind, tok_sha)
    prev = finished(out / "manifest.json", fp, intact=lambda _: _intact(out))
    if prev is not None:
        log(f"token store {kind}: up to date")
        return prev
    tok = Tokenizer.from_file(str(tok_dir / "tokenizer.json"))
    dtype = token_dtype(tok.get_vocab_size())
    work = out.with_name(f".{out.name}.work")  # the shards' parts, beside the output; kept until it is published
    left = work / "fingerprint"
    if work.exists() and (not left.exists() or left.read_text(encoding="utf-8").strip() != fp):
        shutil.rmtree(work)  # parts of another tokenizer, corpus or split
    work.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(work / "fingerprint", fp.encode())
    t0 = time.perf_counter()
    # Local: one shard after another in this process (the tokenizer encodes each batch on every
    # core); Ray: one task per shard.
    with open_executor(executor or ExecutorConfig(), 0, log) as ex:
        args = [(str(sh.resolve()), str((tok_dir / "tokenizer.json").resolve()), tok_sha, str((work / sh.stem).resolve()),
                 params.split.model_dump_json(), params.tokenize.batch_size) for sh in shards]
        done = ex.map(encode_shard, args, f"token store {kind}")
        execution = execution_report(ex)
    if None in done:
        log(f"token store {kind}: {done.count(None)} of {len(done)} shards already encoded, reused")
    n_bytes = sum(json.loads((work / sh.stem / "part.done").read_text(encoding="utf-8"))["bytes"] for sh in shards)
    with staged_dir(out) as tmp:
        writers = {s: SplitWriter(tmp / s) for s in SPLITS}
        mixture = None
        weighted = ("train",) if params.tokenize.mixture else ()
        for sh in shards:
            for name, writer in writers.items():
                if name not in weighted:
                    writer.append_part(work / sh.stem / name)
        if weighted:
            t_mix = time.perf_counter()
            mixture = _mixed_train(writers["train"], [work / sh.stem for sh in shards], params, dtype)
            mix_seconds = time.perf_counter() - t_mix
        seconds = time.perf_counter() - t0
        manifest = {
            "kind": kind,
            "tokenizer": str(tok_dir),
            "tokenizer_sha256": tok_sha,
            "vocab_size": tok.get_vocab_size(),
            "dtype": dtype.name,
            "flags": {"word_start": WORD_START, "sentence_start": SENTENCE_START},
            "source": str(src),
            "source_bytes": n_bytes,
            "split": params.split.model_dump(mode="json"),
            "splits": {s: w.close() for s, w in writers.items()},
            "fingerprint": fp,
            "lmforge_version": __version__,
        }
        if mixture is not None:  # the train split's sources before and after weighting (validation, test: as they are)
            manifest["mixture"] = {"seed": params.tokenize.mixture_seed, "sources": mixture}
        if sum(v["documents"] for v in manifest["splits"].values()) == 0:
            raise CorpusError(f"{src}: the cleaned corpus has no documents to tokenize")
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        if mixture is not None:
            from ..charts import write_charts
            from ..charts.mixture import mixture_charts

            write_charts(tmp, mixture_charts(kind, mixture), log)
    shutil.rmtree(work, ignore_errors=True)
    if mixture is not None:
        log(f"token store {kind}: tokenize.mixture sampled and wrote the train split in {mix_seconds:.2f}s")
    manifest["execution"] = execution  # for the caller (Dagster's metadata); not in the file
    total = sum(v["tokens"] for v in manifest["splits"].values())
    log(f"token store {kind}: {total:,} tokens; encoded {n_bytes / 1e6:.1f} MB in {seconds:.1f}s "
        f"({n_bytes / 1e6 / max(seconds, 1e-9):.2f} MB/s)")
    return manifest
