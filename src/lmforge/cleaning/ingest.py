"""The clean stage's first phase: the inputs read into numbered work shards, in parallel.

The inputs are split into groups of consecutive inputs (one file alone, or small files together,
about ``_GROUP_BYTES`` each) and each group is a unit: it reads its inputs and writes their
documents to a Parquet *piece* as it goes, so a unit's memory is one batch, not one file. Then
the driver, which now knows how many documents each piece holds, numbers them in input order
and has the pieces cut into the shards of ``shard_size`` documents: the same shards, byte for
byte, as one reader going through the inputs in order, whatever the executor and the number of
workers. The inputs are read where the units run, so on a cluster they must be on a path every
node sees. See docs/CLEANING.md.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ..artifacts import atomic_write_json, read_json
from ..config import CleanConfig
from ..corpus.document import SCHEMA, CorpusError
from ..corpus.sources import Input, InputReport, read_counted, resolve_each
from ..executors.base import Executor, run_phase
from .shards import WORK_SCHEMA, LengthHistogram, docs_to_table, kept_counts, shard_name
from .storage import is_done, mark_done, write_parquet

_GROUP_BYTES = 64 << 20  # at most about this much input per read unit ...
_MIN_GROUP_BYTES = 1 << 20  # ... and at least this much (small files together)
_BATCH = 1024  # documents per row group of a piece


# ----------------------------------------------------------------------------- the units


def _read_inputs(work: str, group: int, inputs: list[dict[str, Any]], on_bad_input: str, max_documents: int | None,
                 max_document_bytes: int, on_too_long: str) -> bool:
    """Read a group of inputs into ``ingest/pieces/piece-<group>.parquet``, with what was read
    (documents per input, skipped inputs, documents too long, bytes, lengths) beside it. False
    when already done."""
    folder = Path(work) / "ingest" / "pieces"
    out = folder / f"piece-{group:05d}.parquet"
    marker = out.with_suffix(".done")
    if is_done(marker):
        return False
    folder.mkdir(parents=True, exist_ok=True)
    report = InputReport()
    lengths = LengthHistogram()
    n_docs = n_bytes = 0
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        with pq.ParquetWriter(tmp, SCHEMA, compression="zstd") as writer:
            batch = []

            def flush() -> None:
                nonlocal n_docs, n_bytes
                table = docs_to_table(batch, [], schema=SCHEMA)
                writer.write_table(table, row_group_size=_BATCH)
                counts = kept_counts(table)  # documents, UTF-8 bytes and lengths, counted on the batch's column
                n_docs += counts["documents"]
                n_bytes += counts["bytes"]
                lengths.add_counts(counts["lengths"])
                batch.clear()

            for spec in inputs:
                for doc in read_counted(Input(**spec), on_bad_input, report, max_documents, max_document_bytes, on_too_long,
                                        too_long=lengths.add):  # the lengths of all documents read, dropped ones too
                    batch.append(doc)
                    if len(batch) == _BATCH:
                        flush()
            if batch:
                flush()
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    read = out.with_suffix(".json")
    atomic_write_json(read, {"documents": n_docs, "bytes": n_bytes, "lengths": lengths.to_list(),
                             "documents_per_input": list(report.documents.items()), "skipped_inputs": report.skipped,
                             "too_long": report.too_long})
    mark_done([out, read], marker)
    return True


def _cut_shard(work: str, shard: int, spans: list[tuple[int, int, int]], first_ordinal: int) -> bool:
    """Write ingest shard ``shard`` from ``spans`` (piece, first row, rows) of the pieces, its
    documents numbered from ``first_ordinal``. False when already done."""
    wd = Path(work) / "ingest"
    out = wd / f"{shard_name(shard)}.parquet"
    marker = out.with_suffix(".done")
    if is_done(marker):
        return False
    parts = [_rows(wd / "pieces" / f"piece-{g:05d}.parquet", start, n) for g, start, n in spans]
    table = pa.concat_tables(parts).combine_chunks()
    n = table.num_rows
    ordinals = pa.array(range(first_ordinal, first_ordinal + n), type=pa.int64())
    write_parquet(out, pa.Table.from_arrays([*table.columns, ordinals], schema=WORK_SCHEMA))
    mark_done([out], marker)
    return True


def _rows(path: Path, start: int, n: int) -> pa.Table:
    """Rows ``start`` to ``start + n`` of a piece, reading only the row groups that hold them."""
    pf = pq.ParquetFile(path)
    groups, first, row = [], None, 0
    for i in range(pf.num_row_groups):
        rows = pf.metadata.row_group(i).num_rows
        if row + rows > start and row < start + n:
            groups.append(i)
            first = row if first is None else first
        row += rows
    return pf.read_row_groups(groups).slice(start - (first or 0), n)


# ----------------------------------------------------------------------------- the driver


def _plan(cfg: CleanConfig, workers: int) -> list[dict[str, Any]]:
    """The inputs in order, as entries: ``{"group": [input, ...]}`` to read, or ``{"skipped": ...}``
    for an input spec that could not be resolved (with ``on_bad_input: skip``)."""
    entries: list[dict[str, Any]] = []
    resolved: list[Input] = []
    for found in resolve_each(cfg.inputs, cfg.on_bad_input, cfg.include_site_packages, cfg.max_documents):
        if isinstance(found, dict):  # a spec skipped: the inputs before it, then its record
            entries.append({"inputs": resolved})
            entries.append({"skipped": found})
            resolved = []
            continue
        resolved += found
    entries.append({"inputs": resolved})
    known = sum(i.size or 0 for e in entries for i in e.get("inputs", []))
    # about four units per worker, each between 1 MiB and 64 MiB of input
    target = min(_GROUP_BYTES, max(_MIN_GROUP_BYTES, known // max(1, 4 * workers)))
    plan: list[dict[str, Any]] = []
    for entry in entries:
        if "skipped" in entry:
            plan.append(entry)
            continue
        group: list[Input] = []
        size = 0
        for inp in entry["inputs"]:
            if inp.size is None:  # the demo corpus, a dataset: a unit of its own
                if group:
                    plan.append({"group": group})
                plan.append({"group": [inp]})
                group, size = [], 0
                continue
            group.append(inp)
            size += inp.size
            if size >= target:
                plan.append({"group": group})
                group, size = [], 0
        if group:
            plan.append({"group": group})
    return [{"group": [dataclasses.asdict(i) for i in e["group"]]} if "group" in e else e for e in plan]


def ingest(cfg: CleanConfig, wd: Path, ex: Executor, workers: int, log: Callable[[str], None]) -> dict[str, Any]:
    """Read the inputs into ``wd/ingest`` shards (resuming finished units); the manifest: shards,
    documents, bytes, what each input gave and the length histogram."""
    folder = wd / "ingest"
    manifest_path = folder / "manifest.json"
    if manifest_path.exists():
        return json.loads(manifest_path.read_text(encoding="utf-8"))
    plan_path = folder / "plan.json"
    saved = read_json(plan_path)  # the grouping of a run that was stopped: its pieces are reused
    plan = saved["entries"] if saved is not None else _plan(cfg, workers)
    if saved is None:
        atomic_write_json(plan_path, {"entries": plan})
    work = str(wd.resolve())
    groups = [e["group"] for e in plan if "group" in e]
    run_phase(ex, _read_inputs, [(work, g, inputs, cfg.on_bad_input, cfg.max_documents, cfg.max_document_bytes, cfg.on_too_long)
                                 for g, inputs in enumerate(groups)], "clean", log)

    report = InputReport()
    lengths = LengthHistogram()
    counts: list[int] = []
    n_bytes = 0
    g = 0
    for entry in plan:
        if "skipped" in entry:
            report.skipped.append(entry["skipped"])
            continue
        read = json.loads((folder / "pieces" / f"piece-{g:05d}.json").read_text(encoding="utf-8"))
        g += 1
        for label, count in read["documents_per_input"]:
            report.documents[label] = report.documents.get(label, 0) + count
        report.skipped += read["skipped_inputs"]
        if "too_long" in read:  # not in a piece left by an earlier version
            report.merge_too_long(read["too_long"])
        counts.append(read["documents"])
        n_bytes += read["bytes"]
        lengths.add_counts(read["lengths"])
    n_docs = sum(counts)
    if n_docs == 0:
        detail = f"; skipped inputs: {report.skipped}" if report.skipped else ""
        if report.too_long["documents"]:
            detail += (f"; {report.too_long['documents']} over clean.max_document_bytes ({cfg.max_document_bytes}), "
                       f"the first at {report.too_long['first'][0]['where']}")
        raise CorpusError(f"empty corpus: the inputs {cfg.inputs} yielded no documents{detail}")

    n_shards = math.ceil(n_docs / cfg.shard_size)
    spans: list[list[tuple[int, int, int]]] = [[] for _ in range(n_shards)]
    first = 0  # the ordinal of the first document of piece g
    for g, count in enumerate(counts):
        o = first
        while o < first + count:  # cut piece g at the shard boundaries
            s = o // cfg.shard_size
            n = min(first + count, (s + 1) * cfg.shard_size) - o
            spans[s].append((g, o - first, n))
            o += n
        first += count
    run_phase(ex, _cut_shard, [(work, s, spans[s], s * cfg.shard_size) for s in range(n_shards)], "clean", log)

    manifest = {"shards": n_shards, "documents": n_docs, "bytes": n_bytes, "inputs": report.to_dict(),
                "length_histogram": lengths.to_list()}
    atomic_write_json(manifest_path, manifest)
    shutil.rmtree(folder / "pieces", ignore_errors=True)  # the shards hold every document now
    over = report.too_long["documents"]
    dropped = f" ({over} over clean.max_document_bytes dropped)" if over else ""
    log(f"ingest: {n_docs} documents, {n_bytes / 1e6:.1f} MB in {n_shards} shards{dropped}")
    return manifest
