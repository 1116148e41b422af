"""The clean stage's write phase (the last): the unit that writes each final shard (dropping the
near-duplicates, the copies of prior outputs' documents and the decontaminated documents or
lines) with the kept documents' signatures; then, into the folder being published, the dedup
index and ``stats.json`` with the samples of dropped documents; and whether a published output
is still what its ``stats.json`` records. The unit is top-level and works through files, so
that an executor (process pool, Ray) can send it."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from .. import __version__
from ..artifacts import atomic_write_bytes, atomic_write_json, sha256_file
from ..config import CleanConfig
from ..corpus.document import SCHEMA, Document
from ..corpus.sources import TOO_LONG
from . import decontaminate as dc
from . import decontaminate_phase as dp
from .dedup.prior import INDEX_DIR, MANIFEST, Prior, describe_priors, index_files, index_manifest, saved_signatures
from .shards import LENGTH_BOUNDS, LengthHistogram, ShardStats, kept_counts, merge_stats, rewrite_shard, shard_name, source_counts
from .storage import is_done, mark_done, save_npy


def write_final(work: str, shard: int, source: str, drops: dict[int, int], prior: dict[int, tuple[str, dict]],
                keep_samples: int, save_index: bool, contaminated: dict[int, list[int]] | None = None,
                mode: str = "documents") -> bool:
    """Drop the copies of prior outputs' documents (``prior``: ordinal -> reason and the prior
    document), near-duplicates (``drops``: ordinal -> the kept document it duplicates), recording
    which document each copies, and the training documents that overlap an evaluation text
    (``contaminated``: ordinal -> the lines the overlap touches; ``mode``: drop the document, or
    remove those lines); final schema. ``save_index``: also the kept documents' signatures and
    exact hashes, for a later run to dedup against."""
    wd = Path(work)
    contaminated = contaminated or {}

    def decide(doc: Document, o: int, stats: ShardStats) -> str | None:
        if o in prior:
            reason, of = prior[o]
            doc.metadata["prior_duplicate_of"] = of
            return reason
        if o in drops:
            doc.metadata["duplicate_of_ordinal"] = drops[o]
            return "near_duplicate"
        lines = contaminated.get(o)
        if lines is not None:
            if mode == "documents":
                return "decontaminated"
            doc.text = dc.remove_lines(doc.text, set(lines))
            stats.lines["line:decontaminated"] += len(lines)
            if not doc.text.strip():
                return "decontaminated"
        return None

    did = False
    marker = wd / "final" / f"index-{shard_name(shard)}.done"
    if save_index and not is_done(marker):  # the rows the shard keeps, in its order
        ordinals = pq.read_table(wd / source / f"{shard_name(shard)}.parquet", columns=["ordinal"]).column("ordinal").to_numpy()
        gone = np.fromiter([*drops, *prior, *dp.decontaminated_away(wd, source, shard, contaminated, mode)], dtype=np.int64)
        kept = ~np.isin(ordinals, gone)
        sig_name, exact_name = index_files(shard)
        paths = [wd / "final" / sig_name, wd / "final" / exact_name]
        save_npy(paths[0], saved_signatures(np.load(wd / "minhash" / sig_name)[kept]))
        save_npy(paths[1], np.load(wd / "minhash" / exact_name)[kept])
        mark_done(paths, marker)
        did = True
    return rewrite_shard(wd, source, "final", shard, keep_samples, decide, schema=SCHEMA, adds_metadata_only=True) or did


def publish_index(cfg: CleanConfig, wd: Path, staged: Path, n_shards: int) -> dict[str, Any]:
    """Move the kept documents' signatures and exact hashes into ``<output>/dedup/`` with their
    manifest; their checksums (from the markers that wrote them), for stats.json."""
    folder = staged / INDEX_DIR
    folder.mkdir()
    files, documents = {}, []
    for s in range(n_shards):
        done = json.loads((wd / "final" / f"index-{shard_name(s)}.done").read_text(encoding="utf-8"))["outputs"]
        for name in index_files(s):
            os.replace(wd / "final" / name, folder / name)
            files[f"{INDEX_DIR}/{name}"] = done[name]
        documents.append(int(np.load(folder / index_files(s)[1], mmap_mode="r").shape[0]))
    atomic_write_json(folder / MANIFEST, index_manifest(cfg, documents))
    files[f"{INDEX_DIR}/{MANIFEST}"] = sha256_file(folder / MANIFEST)
    return files


def outputs_intact(output: Path, stats: dict[str, Any]) -> bool:
    for name, digest in {**stats.get("shards", {}), **(stats.get("dedup_index") or {})}.items():
        p = output / name
        if not p.exists() or sha256_file(p) != digest:
            return False
    return bool(stats.get("shards"))


def write_stats(cfg, wd: Path, output: Path, manifest, n_shards: int, source: str, fp: str,
                clusters: dict[int, int] | None, index: dict[str, str] | None, priors: list[Prior],
                decontamination: dict[str, Any] | None = None) -> dict[str, Any]:
    """Merge the phases' per-shard counts into ``stats.json`` in ``output`` (and return it), with
    the samples of dropped documents under ``output/dropped/<reason>.jsonl``."""
    phase_dirs = ["filter"] + (["dedup"] if source == "dedup" else []) + ["final"]
    paths = []
    for d in phase_dirs:
        paths += [wd / d / f"{shard_name(s)}.stats.json" for s in range(n_shards)]
    merged = merge_stats(sorted(paths, key=lambda p: (phase_dirs.index(p.parent.name), p.name)), cfg.dropped_samples)
    docs_out = bytes_out = 0
    lengths_out = LengthHistogram()
    shards = {}
    sources: dict[str, dict[str, int]] = {}
    for s in range(n_shards):  # counted and checksummed where each shard was written
        name = f"{shard_name(s)}.parquet"
        kept = json.loads((wd / "final" / f"{shard_name(s)}.stats.json").read_text(encoding="utf-8")).get("kept")
        if kept is None or "sources" not in kept:  # work left by an earlier version
            table = pq.read_table(output / name, columns=["text", "source"])
            kept = {**kept_counts(table), "sources": source_counts(table)}
        for src, n in kept["sources"].items():
            into = sources.setdefault(src, {"documents": 0, "bytes": 0})
            into["documents"] += n["documents"]
            into["bytes"] += n["bytes"]
        docs_out += kept["documents"]
        bytes_out += kept["bytes"]
        lengths_out.add_counts(kept["lengths"])
        shards[name] = json.loads((wd / "final" / f"{shard_name(s)}.done").read_text(encoding="utf-8"))["outputs"][name]
    # documents over clean.max_document_bytes, dropped while reading (their bytes: as read)
    too_long = manifest["inputs"].get("too_long") or {"documents": 0, "bytes": 0}
    dropped = {r: {"documents": merged.dropped[r], "bytes": merged.dropped_bytes[r]} for r in merged.dropped}
    if too_long["documents"]:
        dropped[TOO_LONG] = {"documents": too_long["documents"], "bytes": too_long["bytes"]}
    docs_in, bytes_in = manifest["documents"] + too_long["documents"], manifest["bytes"] + too_long["bytes"]
    stats = {
        "documents_in": docs_in,
        "bytes_in": bytes_in,
        "documents_out": docs_out,
        "bytes_out": bytes_out,
        "documents_kept_fraction": round(docs_out / docs_in, 6),
        "bytes_kept_fraction": round(bytes_out / max(1, bytes_in), 6),
        "dropped": dict(sorted(dropped.items())),
        "lines_removed": dict(sorted(merged.lines.items())),
        # documents by length in bytes: bin i from lower_bounds[i] to the next bound, the last open
        "length_histogram": {"lower_bounds": list(LENGTH_BOUNDS), "documents_in": manifest.get("length_histogram"),
                             "documents_out": lengths_out.to_list()},
        # language ID's verdicts (language code -> documents), and those the language rule dropped
        "languages": {"seen": dict(merged.languages.most_common()),
                      "dropped": dict(merged.languages_dropped.most_common())} if cfg.language.enabled else None,
        # near-duplicate clusters (a kept document and its dropped near-copies): size -> clusters
        "near_duplicate_clusters": {str(k): v for k, v in clusters.items()} if clusters is not None else None,
        # evaluation texts against the training documents (decontamination.json holds the whole report)
        "decontamination": dp.summary(decontamination),
        "inputs": manifest["inputs"],
        # the kept documents by their source: the names tokenize.mixture weights
        "sources": dict(sorted(sources.items())),
        "shards": shards,
        # the kept documents' signatures and exact hashes (file -> sha256), for a later run's
        # clean.near_dedup.against; and the prior outputs this run was deduped against
        "dedup_index": index,
        "deduped_against": describe_priors(priors),
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
