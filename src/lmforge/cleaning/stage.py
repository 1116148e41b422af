"""The clean stage: sources -> C4 rules, language ID, bad words -> line dedup -> MinHash dedup.

Phases (each resumable; a phase's per-shard outputs carry a checksummed completion marker):

1. ingest       read the inputs in a stable order into Parquet shards of ``shard_size``
                documents; every document gets a global ordinal (its position).
2. url dedup    normalise URLs, keep the newest crawl per URL (C4 dedups URLs before cleaning).
3. filter       per shard, in parallel: page length, the C4 line/page rules, language, bad words.
4. line dedup   C4 as published: a line (md5 of the stripped, lower-cased line) is kept only in
                the page whose URL hash sorts first, repeats inside a page are dropped, then
                pages are re-checked for ``min_sentences``. Or three-sentence spans, or off.
                Line records are partitioned by hash on disk; each partition is reduced alone.
5. near dedup   MinHash LSH over word n-grams; signatures and band keys streamed to disk per
                shard, candidates found per (band, partition), verified, clustered with
                union-find; the first document of each cluster is kept.
6. write        final Parquet shards, ``stats.json`` and samples of dropped documents.

Memory is bounded by a shard or a partition, never the corpus. A run killed at any point and
started again with the same inputs and parameters redoes only unfinished work and writes
byte-identical outputs.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import xxhash

from .. import __version__
from ..artifacts import atomic_write_bytes, atomic_write_json, fingerprint, finished, sha256_file, staged_dir
from ..config import CleanConfig
from ..corpus.document import SCHEMA, CorpusError, Document
from ..corpus.sources import InputReport, iter_documents
from . import minhash as mh
from .filters import build_steps
from .storage import is_done, load_partition, mark_done, save_npy, save_partitioned, write_parquet
from .text import split_sentences
from .urls import normalize_url

WORK_SCHEMA = SCHEMA.append(pa.field("ordinal", pa.int64()))
_SAMPLE_CHARS = 2000
_PART_BYTES = 32 << 20  # line-dedup partition: about this much text per partition
_PART_DOCS = 1_000_000  # URL and MinHash partitions: about this many documents each
_MAX_VERIFY = 64  # earlier bucket members a candidate is checked against


# ----------------------------------------------------------------------------- shard I/O


def _docs_to_table(docs: list[Document], ordinals: list[int], schema: pa.Schema = WORK_SCHEMA) -> pa.Table:
    cols: dict[str, list[Any]] = {
        "id": [d.id for d in docs],
        "text": [d.text for d in docs],
        "url": [d.url for d in docs],
        "timestamp": [d.timestamp for d in docs],
        "source": [d.source for d in docs],
        "metadata": [json.dumps(d.metadata, sort_keys=True, ensure_ascii=False) for d in docs],
    }
    if "ordinal" in schema.names:
        cols["ordinal"] = ordinals
    return pa.Table.from_pydict(cols, schema=schema)


def _table_to_docs(table: pa.Table) -> tuple[list[Document], list[int]]:
    rows = table.to_pylist()
    docs = [
        Document(
            id=r["id"], text=r["text"], url=r["url"], timestamp=r["timestamp"], source=r["source"],
            metadata=json.loads(r["metadata"]) if r["metadata"] else {},
        )
        for r in rows
    ]
    return docs, [r["ordinal"] for r in rows]


def _shard_name(i: int) -> str:
    return f"shard-{i:05d}"


@dataclass
class ShardStats:
    """Counts of one shard in one phase; merged in shard order."""

    dropped: Counter = field(default_factory=Counter)  # reason -> documents
    dropped_bytes: Counter = field(default_factory=Counter)  # reason -> bytes (text when dropped)
    lines: Counter = field(default_factory=Counter)  # line:<reason> -> lines removed
    samples: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def drop(self, reason: str, doc: Document, ordinal: int, keep_samples: int) -> None:
        self.dropped[reason] += 1
        self.dropped_bytes[reason] += len(doc.text.encode("utf-8"))
        bucket = self.samples.setdefault(reason, [])
        if len(bucket) < keep_samples:
            bucket.append({"id": doc.id, "ordinal": ordinal, "url": doc.url, "metadata": doc.metadata, "text": doc.text[:_SAMPLE_CHARS]})

    def to_dict(self) -> dict[str, Any]:
        return {"dropped": dict(self.dropped), "dropped_bytes": dict(self.dropped_bytes),
                "lines": dict(self.lines), "samples": self.samples}


# ----------------------------------------------------------------------------- worker functions
# Top-level so the process pool can pickle them; each takes and returns plain data.

_STEPS_CACHE: dict[str, list] = {}


def _steps_for(cfg_json: str) -> list:
    if cfg_json not in _STEPS_CACHE:
        _STEPS_CACHE[cfg_json] = build_steps(CleanConfig.model_validate_json(cfg_json))
    return _STEPS_CACHE[cfg_json]


URL_DTYPE = np.dtype([("hash", "<u8"), ("timestamp", "<U40"), ("ordinal", "<i8")])
LOSER_DTYPE = np.dtype([("ordinal", "<i8")])


def _url_map(work: str, shard: int, cfg_json: str, n_parts: int) -> bool:
    """Hash each document's normalised URL; records partitioned by hash."""
    cfg = CleanConfig.model_validate_json(cfg_json).urls
    wd = Path(work)
    out = wd / "urls" / f"map-{_shard_name(shard)}.npy"
    marker = out.with_suffix(".done")
    if is_done(marker):
        return False
    t = pq.read_table(wd / "ingest" / f"{_shard_name(shard)}.parquet", columns=["url", "timestamp", "ordinal"])
    rows = []
    for url, ts, o in zip(*(t.column(c).to_pylist() for c in ("url", "timestamp", "ordinal"))):
        if url:
            key = normalize_url(url, cfg.tracking_query_prefixes) if cfg.normalize else url
            rows.append((xxhash.xxh64_intdigest(key.encode("utf-8")), (ts or "")[:40], o))
    recs = np.array(rows, dtype=URL_DTYPE)
    save_partitioned(out, recs, (recs["hash"] % np.uint64(n_parts)).astype(np.int64), n_parts)
    mark_done([out, out.with_suffix(".offsets.npy")], marker)
    return True


def _url_reduce(work: str, part: int, n_shards: int, shard_size: int) -> bool:
    """Per URL keep the newest crawl (ties: the earliest document); the rest are losers,
    saved partitioned by the shard they belong to."""
    wd = Path(work)
    out = wd / "urls" / f"losers-{part:05d}.npy"
    marker = out.with_suffix(".done")
    if is_done(marker):
        return False
    recs = load_partition([wd / "urls" / f"map-{_shard_name(s)}.npy" for s in range(n_shards)], part, URL_DTYPE)
    losers = np.zeros(0, dtype=LOSER_DTYPE)
    if recs.size:
        # newest first: sort by hash, then timestamp descending, then ordinal ascending
        ts_rank = np.unique(recs["timestamp"], return_inverse=True)[1]
        recs = recs[np.lexsort((recs["ordinal"], -ts_rank, recs["hash"]))]
        first = np.r_[True, recs["hash"][1:] != recs["hash"][:-1]]
        losers = np.zeros(int((~first).sum()), dtype=LOSER_DTYPE)
        losers["ordinal"] = recs["ordinal"][~first]
    save_partitioned(out, losers, (losers["ordinal"] // shard_size).astype(np.int64), n_shards)
    mark_done([out, out.with_suffix(".offsets.npy")], marker)
    return True


Decide = Callable[[Document, int, ShardStats], "str | None"]


def _rewrite_shard(wd: Path, src: str, dst: str, shard: int, keep_samples: int, decide: Decide, schema: pa.Schema = WORK_SCHEMA) -> bool:
    """One pass over a shard: ``decide`` may rewrite a document's text and returns a drop
    reason or None. Kept documents, the shard's stats and its completion marker are written
    to ``dst``. A dropped document is counted (and sampled) with the text it came in with."""
    out = wd / dst / f"{_shard_name(shard)}.parquet"
    marker = out.with_suffix(".done")
    if is_done(marker):
        return False
    docs, ordinals = _table_to_docs(pq.read_table(wd / src / f"{_shard_name(shard)}.parquet"))
    stats = ShardStats()
    kept, kept_ord = [], []
    for doc, o in zip(docs, ordinals):
        original = doc.text
        reason = decide(doc, o, stats)
        if reason is not None:
            doc.text = original
            stats.drop(reason, doc, o, keep_samples)
            continue
        kept.append(doc)
        kept_ord.append(o)
    write_parquet(out, _docs_to_table(kept, kept_ord, schema))
    stats_path = out.with_suffix(".stats.json")
    atomic_write_json(stats_path, stats.to_dict())
    mark_done([out, stats_path], marker)
    return True


def _filter_shard(work: str, shard: int, cfg_json: str, n_url_parts: int) -> bool:
    """URL duplicates, then the per-document steps (page length, C4 rules, language, bad words)."""
    cfg = CleanConfig.model_validate_json(cfg_json)
    wd = Path(work)
    steps = _steps_for(cfg_json)
    url_losers: set[int] = set()
    if n_url_parts:
        paths = [wd / "urls" / f"losers-{p:05d}.npy" for p in range(n_url_parts)]
        url_losers = set(load_partition(paths, shard, LOSER_DTYPE)["ordinal"].tolist())

    def decide(doc: Document, o: int, stats: ShardStats) -> str | None:
        if cfg.urls.normalize and doc.url:
            doc.metadata["url_normalized"] = normalize_url(doc.url, cfg.urls.tracking_query_prefixes)
        if o in url_losers:
            return "url_duplicate"
        for step in steps:
            reason = step(doc, stats.lines)
            if reason is not None:
                return reason
        return None

    return _rewrite_shard(wd, "ingest", "filter", shard, cfg.dropped_samples, decide)



def _owner_key(doc: Document) -> int:
    """C4 keeps a duplicated line in the page whose URL's md5 sorts first; documents without a
    URL use their id. The first 8 bytes, big-endian, keep the hex digests' order."""
    key = doc.metadata.get("url_normalized") or doc.url or doc.id
    return int.from_bytes(hashlib.md5(key.encode("utf-8")).digest()[:8], "big")


def _line_hash(line: str) -> int:
    return int.from_bytes(hashlib.md5(line.strip().lower().encode("utf-8")).digest()[:8], "big")


LINE_DTYPE = np.dtype([("hash", "<u8"), ("owner", "<u8"), ("ordinal", "<i8")])
WINNER_DTYPE = np.dtype([("ordinal", "<i8"), ("hash", "<u8")])


def _units(doc: Document, mode: str, span: int) -> list[tuple[int, list[int]]]:
    """The dedup units of a document: (hash, [indices of the lines or sentences it covers])."""
    if mode == "lines":
        return [(_line_hash(line), [i]) for i, line in enumerate(doc.text.split("\n"))]
    sentences = _sentences(doc.text)
    units = []
    for i in range(0, max(0, len(sentences) - span + 1)):
        norm = " ".join(s.lower() for s in sentences[i : i + span])
        h = int.from_bytes(hashlib.md5(norm.encode("utf-8")).digest()[:8], "big")
        units.append((h, list(range(i, i + span))))
    return units


def _sentences(text: str) -> list[str]:
    return [s for line in text.split("\n") for s in split_sentences(line)]


def _dedup_map(work: str, shard: int, mode: str, span: int, n_parts: int) -> bool:
    wd = Path(work)
    out = wd / "dedup" / f"map-{_shard_name(shard)}.npy"
    marker = out.with_suffix(".done")
    if is_done(marker):
        return False
    docs, ordinals = _table_to_docs(pq.read_table(wd / "filter" / f"{_shard_name(shard)}.parquet"))
    rows = []
    for doc, o in zip(docs, ordinals):
        owner = _owner_key(doc) if mode == "lines" else 0  # spans: the first occurrence wins
        for h, _ in _units(doc, mode, span):
            rows.append((h, owner, o))
    recs = np.array(rows, dtype=LINE_DTYPE)
    save_partitioned(out, recs, (recs["hash"] % np.uint64(n_parts)).astype(np.int64), n_parts)
    mark_done([out, out.with_suffix(".offsets.npy")], marker)
    return True


def _dedup_reduce(work: str, part: int, n_shards: int, shard_size: int) -> bool:
    wd = Path(work)
    out = wd / "dedup" / f"winners-{part:05d}.npy"
    marker = out.with_suffix(".done")
    if is_done(marker):
        return False
    recs = load_partition([wd / "dedup" / f"map-{_shard_name(s)}.npy" for s in range(n_shards)], part, LINE_DTYPE)
    if recs.size:
        order = np.lexsort((recs["ordinal"], recs["owner"], recs["hash"]))
        recs = recs[order]
        first = np.ones(recs.size, dtype=bool)
        first[1:] = recs["hash"][1:] != recs["hash"][:-1]
        win = recs[first]
    else:
        win = recs
    winners = np.zeros(win.size, dtype=WINNER_DTYPE)
    winners["ordinal"], winners["hash"] = win["ordinal"], win["hash"]
    save_partitioned(out, winners, (winners["ordinal"] // shard_size).astype(np.int64), n_shards)
    mark_done([out, out.with_suffix(".offsets.npy")], marker)
    return True


def _dedup_apply(work: str, shard: int, cfg_json: str, n_parts: int) -> bool:
    """Remove the lines (or sentence spans) this document does not own, then re-check sentences."""
    cfg = CleanConfig.model_validate_json(cfg_json)
    wd = Path(work)
    mode, span = cfg.line_dedup.mode, cfg.line_dedup.span_sentences
    min_sent = cfg.rules.min_sentences
    owned: set[tuple[int, int]] | None = None

    def decide(doc: Document, o: int, stats: ShardStats) -> str | None:
        nonlocal owned
        if owned is None:  # loaded on first use: a shard already done never reads it
            win = load_partition([wd / "dedup" / f"winners-{p:05d}.npy" for p in range(n_parts)], shard, WINNER_DTYPE)
            owned = set(zip(win["ordinal"].tolist(), win["hash"].tolist()))
        seen: set[int] = set()
        remove: set[int] = set()
        for h, covered in _units(doc, mode, span):
            if (o, h) not in owned:
                remove.update(covered)
                if mode == "lines":
                    stats.lines["line:global_duplicate"] += 1
            elif h in seen:
                remove.update(covered)
                if mode == "lines":
                    stats.lines["line:local_duplicate"] += 1
            seen.add(h)
        if mode == "lines":
            lines = [ln for i, ln in enumerate(doc.text.split("\n")) if i not in remove]
            doc.text = "\n".join(lines)
            if not lines:
                return "all_lines_duplicate"
        elif remove:
            stats.lines["sentence:span_duplicate"] += len(remove)
            doc.text = _drop_sentences(doc.text, remove)
            if not doc.text:
                return "all_spans_duplicate"
            if len(doc.text.split()) < cfg.line_dedup.min_words_after_span_removal:
                return "span_duplicates"
        if min_sent is not None and len(_sentences(doc.text)) < min_sent:
            return "too_few_sentences_after_dedup"
        return None

    return _rewrite_shard(wd, "filter", "dedup", shard, cfg.dropped_samples, decide)


def _drop_sentences(text: str, remove: set[int]) -> str:
    lines, idx = [], 0
    for line in text.split("\n"):
        kept = []
        for s in split_sentences(line):
            if idx not in remove:
                kept.append(s)
            idx += 1
        if kept:
            lines.append(" ".join(kept))
    return "\n".join(lines)


BAND_DTYPE = np.dtype([("key", "<u8"), ("ordinal", "<i8"), ("shard", "<i4"), ("row", "<i4")])


def _minhash_map(work: str, shard: int, cfg_json: str, source: str, n_parts: int) -> bool:
    cfg = CleanConfig.model_validate_json(cfg_json).near_dedup
    wd = Path(work)
    sig_path = wd / "minhash" / f"sig-{_shard_name(shard)}.npy"
    out = wd / "minhash" / f"bands-{_shard_name(shard)}.npy"
    marker = out.with_suffix(".done")
    if is_done(marker):
        return False
    table = pq.read_table(wd / source / f"{_shard_name(shard)}.parquet", columns=["text", "ordinal"])
    texts, ordinals = table.column("text").to_pylist(), table.column("ordinal").to_pylist()
    seeds = mh.permutation_seeds(cfg.bands * cfg.rows, cfg.seed)
    sigs = np.zeros((len(texts), cfg.bands * cfg.rows), dtype=np.uint64)
    rows = []
    for r, (text, o) in enumerate(zip(texts, ordinals)):
        hashes = mh.shingle_hashes(text, cfg.ngram)
        sigs[r] = mh.signature(hashes, seeds)
        if hashes.size == 0:
            continue  # nothing to compare
        for b, key in enumerate(mh.band_keys(sigs[r], cfg.bands, cfg.rows).tolist()):
            rows.append((key, o, shard, r, b))
    save_npy(sig_path, sigs)
    recs = np.zeros(len(rows), dtype=BAND_DTYPE)
    part = np.zeros(len(rows), dtype=np.int64)
    if rows:
        arr = np.array(rows, dtype=np.uint64)
        recs["key"], recs["ordinal"] = arr[:, 0], arr[:, 1].astype(np.int64)
        recs["shard"], recs["row"] = arr[:, 2].astype(np.int32), arr[:, 3].astype(np.int32)
        part = arr[:, 4].astype(np.int64) * n_parts + (recs["key"] % np.uint64(n_parts)).astype(np.int64)
    save_partitioned(out, recs, part, cfg.bands * n_parts)
    mark_done([out, out.with_suffix(".offsets.npy"), sig_path], marker)
    return True


def _minhash_reduce(work: str, unit: int, n_shards: int, verify: float | None) -> bool:
    wd = Path(work)
    out = wd / "minhash" / f"edges-{unit:05d}.npy"
    marker = out.with_suffix(".done")
    if is_done(marker):
        return False
    recs = load_partition([wd / "minhash" / f"bands-{_shard_name(s)}.npy" for s in range(n_shards)], unit, BAND_DTYPE)
    edges: list[tuple[int, int]] = []
    if recs.size:
        recs = recs[np.lexsort((recs["ordinal"], recs["key"]))]
        sigs: dict[int, np.ndarray] = {}

        def sig(i: int) -> np.ndarray:
            s = int(recs["shard"][i])
            if s not in sigs:
                sigs[s] = np.load(wd / "minhash" / f"sig-{_shard_name(s)}.npy", mmap_mode="r")
            return sigs[s][int(recs["row"][i])]

        starts = np.flatnonzero(np.r_[True, recs["key"][1:] != recs["key"][:-1]])
        ends = np.r_[starts[1:], recs.size]
        for lo, hi in zip(starts.tolist(), ends.tolist()):
            if hi - lo < 2:
                continue
            for j in range(lo + 1, hi):
                if verify is None:
                    edges.append((int(recs["ordinal"][lo]), int(recs["ordinal"][j])))
                    continue
                # Link to the first earlier member that really is similar (not only the
                # first one: a bucket can mix a cluster with an unrelated document).
                sj = sig(j)
                for i in range(lo, min(j, lo + _MAX_VERIFY)):
                    if mh.similarity(sig(i), sj) >= verify:
                        edges.append((int(recs["ordinal"][i]), int(recs["ordinal"][j])))
                        break
    save_npy(out, np.array(edges, dtype=np.int64).reshape(-1, 2))
    mark_done([out], marker)
    return True


def _write_final(work: str, shard: int, source: str, drops: dict[int, int], keep_samples: int) -> bool:
    """Drop near-duplicates (recording which kept document each duplicates); final schema."""

    def decide(doc: Document, o: int, stats: ShardStats) -> str | None:
        if o in drops:
            doc.metadata["duplicate_of_ordinal"] = drops[o]
            return "near_duplicate"
        return None

    return _rewrite_shard(Path(work), source, "final", shard, keep_samples, decide, schema=SCHEMA)



# ----------------------------------------------------------------------------- the driver


@dataclass
class CleanResult:
    output: Path
    stats: dict[str, Any]
    seconds: float
    skipped: bool = False


def _fingerprint(cfg: CleanConfig) -> str:
    """Identifies the inputs and parameters: work left by a run with another fingerprint is discarded."""
    items: list[Any] = [cfg.model_dump(mode="json", exclude={"workers", "keep_work", "output"})]
    for spec in cfg.inputs:
        p = Path(spec)
        if p.is_file():
            st = p.stat()
            items.append([spec, st.st_size, st.st_mtime_ns])
        elif p.is_dir():
            for f in sorted(q for q in p.rglob("*") if q.is_file()):
                st = f.stat()
                items.append([str(f), st.st_size, st.st_mtime_ns])
        elif spec == "stdlib":
            items.append([spec, sys.version])  # the demo corpus changes with the interpreter
        else:
            items.append(spec)
    return fingerprint(*items)


def _ingest(cfg: CleanConfig, wd: Path, log: Callable[[str], None]) -> dict[str, Any]:
    manifest_path = wd / "ingest" / "manifest.json"
    if manifest_path.exists():
        return json.loads(manifest_path.read_text(encoding="utf-8"))
    report = InputReport()
    shard, buf, ords = 0, [], []
    n_docs = n_bytes = 0

    def flush() -> None:
        nonlocal shard, buf, ords
        path = wd / "ingest" / f"{_shard_name(shard)}.parquet"
        marker = path.with_suffix(".done")
        if not is_done(marker):
            write_parquet(path, _docs_to_table(buf, ords))
            mark_done([path], marker)
        shard, buf, ords = shard + 1, [], []

    for doc in iter_documents(cfg.inputs, cfg.on_bad_input, report, cfg.include_site_packages, cfg.max_documents):
        buf.append(doc)
        ords.append(n_docs)
        n_docs += 1
        n_bytes += len(doc.text.encode("utf-8"))
        if len(buf) == cfg.shard_size:
            flush()
    if buf:
        flush()
    if n_docs == 0:
        detail = f"; skipped inputs: {report.skipped}" if report.skipped else ""
        raise CorpusError(f"empty corpus: the inputs {cfg.inputs} yielded no documents{detail}")
    manifest = {"shards": shard, "documents": n_docs, "bytes": n_bytes, "inputs": report.to_dict()}
    atomic_write_json(manifest_path, manifest)
    log(f"ingest: {n_docs} documents, {n_bytes / 1e6:.1f} MB in {shard} shards")
    return manifest


def _merge_stats(paths: Iterable[Path], keep_samples: int) -> ShardStats:
    total = ShardStats()
    for p in paths:
        d = json.loads(p.read_text(encoding="utf-8"))
        total.dropped.update(d["dropped"])
        total.dropped_bytes.update(d["dropped_bytes"])
        total.lines.update(d["lines"])
        for reason, items in d["samples"].items():
            bucket = total.samples.setdefault(reason, [])
            bucket.extend(items[: max(0, keep_samples - len(bucket))])
    return total


def run_clean(cfg: CleanConfig, log: Callable[[str], None] = print) -> CleanResult:
    """Run the clean stage to completion (resuming unfinished work) and return its stats."""
    t0 = time.perf_counter()
    output = Path(cfg.output)
    wd = output / ".work"
    fp = _fingerprint(cfg)
    prev = None if wd.exists() else finished(output / "stats.json", fp, intact=lambda stats: _outputs_intact(output, stats))
    if prev is not None:
        log(f"clean: {output} is up to date (same inputs and parameters)")
        return CleanResult(output, prev, time.perf_counter() - t0, skipped=True)
    fp_path = wd / "fingerprint"
    if wd.exists() and (not fp_path.exists() or fp_path.read_text().strip() != fp):
        log("clean: discarding unfinished work from a run with other inputs or parameters")
        shutil.rmtree(wd)
    if not wd.exists():
        wd.mkdir(parents=True)
        atomic_write_bytes(fp_path, fp.encode())
    build_steps(cfg)  # fail fast on a bad word list or a missing language backend

    manifest = _ingest(cfg, wd, log)
    n_shards = manifest["shards"]
    workers = cfg.workers or os.cpu_count() or 1
    cfg_json = cfg.model_dump_json()
    ctx = get_context("spawn")
    with ProcessPoolExecutor(max_workers=min(workers, max(1, n_shards)), mp_context=ctx) as pool:

        def run_all(fn: Callable[..., bool], args: list[tuple]) -> None:
            done = [fut.result() for fut in [pool.submit(fn, *a) for a in args]]
            if not all(done):
                log(f"{fn.__name__.strip('_')}: {done.count(False)} of {len(done)} units already done, reused")

        n_url_parts = 0
        if cfg.urls.dedup:
            n_url_parts = max(1, math.ceil(manifest["documents"] / _PART_DOCS))
            run_all(_url_map, [(str(wd), s, cfg_json, n_url_parts) for s in range(n_shards)])
            run_all(_url_reduce, [(str(wd), p, n_shards, cfg.shard_size) for p in range(n_url_parts)])
        run_all(_filter_shard, [(str(wd), s, cfg_json, n_url_parts) for s in range(n_shards)])
        log("filter: done")

        source = "filter"
        if cfg.line_dedup.mode != "off":
            n_parts = max(1, math.ceil(manifest["bytes"] / _PART_BYTES))
            run_all(_dedup_map, [(str(wd), s, cfg.line_dedup.mode, cfg.line_dedup.span_sentences, n_parts) for s in range(n_shards)])
            run_all(_dedup_reduce, [(str(wd), p, n_shards, cfg.shard_size) for p in range(n_parts)])
            run_all(_dedup_apply, [(str(wd), s, cfg_json, n_parts) for s in range(n_shards)])
            source = "dedup"
            log(f"line dedup ({cfg.line_dedup.mode}): done")

        near_drops: dict[int, int] = {}
        if cfg.near_dedup.enabled:
            nd = cfg.near_dedup
            n_parts = max(1, math.ceil(manifest["documents"] / _PART_DOCS))
            run_all(_minhash_map, [(str(wd), s, cfg_json, source, n_parts) for s in range(n_shards)])
            run_all(_minhash_reduce, [(str(wd), u, n_shards, nd.verify_threshold) for u in range(nd.bands * n_parts)])
            uf = mh.UnionFind()
            for u in range(nd.bands * n_parts):
                for a, b in np.load(wd / "minhash" / f"edges-{u:05d}.npy").tolist():
                    uf.union(a, b)
            for o in list(uf.parent):
                root = uf.find(o)
                if root != o:
                    near_drops[o] = root
            log(f"near dedup: {len(near_drops)} near-duplicates")

        (wd / "final").mkdir(exist_ok=True)
        per_shard: list[dict[int, int]] = [{} for _ in range(n_shards)]
        for o, root in near_drops.items():
            per_shard[o // cfg.shard_size][o] = root
        run_all(_write_final, [(str(wd), s, source, per_shard[s], cfg.dropped_samples) for s in range(n_shards)])

    # Publish: the shards, stats.json and the dropped samples go into a staged folder that
    # replaces the output whole. The work folder (inside the old output) goes with it, unless
    # it is to be kept.
    with staged_dir(output) as staged:
        for s in range(n_shards):
            os.replace(wd / "final" / f"{_shard_name(s)}.parquet", staged / f"{_shard_name(s)}.parquet")
        stats = _final_stats(cfg, wd, staged, manifest, n_shards, source, fp)
        if cfg.keep_work:
            os.replace(wd, staged / wd.name)
    return CleanResult(output, stats, time.perf_counter() - t0)


def _outputs_intact(output: Path, stats: dict[str, Any]) -> bool:
    for name, digest in stats.get("shards", {}).items():
        p = output / name
        if not p.exists() or sha256_file(p) != digest:
            return False
    return bool(stats.get("shards"))


def _final_stats(cfg, wd: Path, output: Path, manifest, n_shards: int, source: str, fp: str) -> dict[str, Any]:
    phase_dirs = ["filter"] + (["dedup"] if source == "dedup" else []) + ["final"]
    paths = []
    for d in phase_dirs:
        paths += [wd / d / f"{_shard_name(s)}.stats.json" for s in range(n_shards)]
    merged = _merge_stats(sorted(paths, key=lambda p: (phase_dirs.index(p.parent.name), p.name)), cfg.dropped_samples)
    docs_out = bytes_out = 0
    shards = {}
    for s in range(n_shards):
        p = output / f"{_shard_name(s)}.parquet"
        t = pq.read_table(p, columns=["text"])
        docs_out += t.num_rows
        bytes_out += sum(len(x.encode("utf-8")) for x in t.column("text").to_pylist())
        shards[p.name] = sha256_file(p)
    stats = {
        "documents_in": manifest["documents"],
        "bytes_in": manifest["bytes"],
        "documents_out": docs_out,
        "bytes_out": bytes_out,
        "documents_kept_fraction": round(docs_out / manifest["documents"], 6),
        "bytes_kept_fraction": round(bytes_out / max(1, manifest["bytes"]), 6),
        "dropped": {r: {"documents": merged.dropped[r], "bytes": merged.dropped_bytes[r]} for r in sorted(merged.dropped)},
        "lines_removed": dict(sorted(merged.lines.items())),
        "inputs": manifest["inputs"],
        "shards": shards,
        "fingerprint": fp,
        "params": cfg.model_dump(mode="json", exclude={"workers", "keep_work"}),
        "lmforge_version": __version__,
    }
    dropped_dir = output / "dropped"
    for reason, items in sorted(merged.samples.items()):
        data = "".join(json.dumps(i, sort_keys=True, ensure_ascii=False) + "\n" for i in items)
        atomic_write_bytes(dropped_dir / f"{reason}.jsonl", data.encode("utf-8"))
    atomic_write_json(output / "stats.json", stats)
    return stats
