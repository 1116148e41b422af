"""The clean stage's decontamination phase (the rule is ``decontaminate.py``): the units that
register the held-out documents' windows and scan the training documents, and the report that
reads back what they found. Top-level functions that work through files, so that an executor
(process pool, Ray) can run them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from ..artifacts import atomic_write_json
from ..config import CleanConfig, SplitConfig
from ..splits import split_of
from . import decontaminate as dc
from .shards import read_shard, shard_name

def decontaminated_away(wd: Path, source: str, shard: int, contaminated: dict[int, list[int]], mode: str) -> list[int]:
    """The ordinals decontamination drops: every overlapping document, or (paragraphs) those with
    nothing left once their overlapping lines go."""
    if mode == "documents" or not contaminated:
        return list(contaminated)
    docs, ordinals = read_shard(wd, source, shard)
    return [o for doc, o in zip(docs, ordinals)
            if o in contaminated and not dc.remove_lines(doc.text, set(contaminated[o])).strip()]

def decon_dir(work: str) -> Path:
    return Path(work) / "decon"


def held_out_windows(work: str, shard: int, source: str, cfg_json: str, split_json: str, skip: list[int]) -> bool:
    """The windows the shard's validation and test documents register (those not dropped as
    near-duplicates): the evaluation texts of the tasks built from the corpus."""
    out = decon_dir(work) / f"held-{shard_name(shard)}.npz"
    if out.exists():
        return False
    d = CleanConfig.model_validate_json(cfg_json).decontaminate
    split = SplitConfig.model_validate_json(split_json)
    docs, ordinals = read_shard(Path(work), source, shard)
    skipped = set(skip)
    held = [doc.text for doc, o in zip(docs, ordinals) if o not in skipped and split_of(doc.id, split) != "train"]
    dc.GramSet(dc.registered(held, d.ngram, d.min_words, dc.WordHashes())).save(out)
    return True


def scan_training(work: str, shard: int, source: str, split_json: str, skip: list[int], final: bool = False) -> bool:
    """Scan the shard's training documents for the evaluation windows: the lines each overlap
    touches (``scan-*.json``) and the windows found (``scan-*.npz``); with ``final``, the
    published shard, after decontamination (``after-*``)."""
    d = decon_dir(work)
    stem = f"{'after' if final else 'scan'}-{shard_name(shard)}"
    if (d / f"{stem}.json").exists():
        return False
    grams = dc.GramSet.load(d / "evaluation.npz")  # read per unit: a later run may write other texts there
    split = SplitConfig.model_validate_json(split_json)
    if final:
        table = pq.read_table(Path(work) / "final" / f"{shard_name(shard)}.parquet", columns=["id", "text"])
        docs = list(zip(range(table.num_rows), table.column("id").to_pylist(), table.column("text").to_pylist()))
    else:
        read, ordinals = read_shard(Path(work), source, shard)
        docs = [(o, doc.id, doc.text) for doc, o in zip(read, ordinals)]
    skipped, word_hashes = set(skip), dc.WordHashes()
    verdicts, found, scanned = {}, [], 0
    for o, doc_id, text in docs:
        if o in skipped or split_of(doc_id, split) != "train":
            continue
        scanned += 1
        verdict = dc.scan(text or "", grams, word_hashes)
        if verdict is not None:
            verdicts[str(o)] = sorted(verdict.lines)
            found.append(verdict.matched)
    dc.GramSet.union(found).save(d / f"{stem}.npz")
    atomic_write_json(d / f"{stem}.json", {"scanned": scanned, "verdicts": verdicts})
    return True


def report(cfg: CleanConfig, wd: Path, n_shards: int, evaluation: dc.EvaluationSets,
                            staged: Path, n_windows: int) -> dict[str, Any]:
    """How many evaluation texts overlapped the training documents before decontamination and
    after, by source and by task (read back from what the scans found)."""
    d, dcfg = wd / "decon", cfg.decontaminate

    def union(stem: str) -> tuple[dc.GramSet, int, int]:
        found, scanned, overlapping = [], 0, 0
        for s in range(n_shards):
            found.append(dc.GramSet.load(d / f"{stem}-{shard_name(s)}.npz").by_length)
            record = json.loads((d / f"{stem}-{shard_name(s)}.json").read_text(encoding="utf-8"))
            scanned += record["scanned"]
            overlapping += len(record["verdicts"])
        return dc.GramSet.union(found), scanned, overlapping

    before, scanned, overlapping = union("scan")
    after, scanned_after, overlapping_after = union("after")
    word_hashes = dc.WordHashes()

    def counts(texts: list[str]) -> dict[str, int]:
        b = dc.overlap(texts, before, dcfg.ngram, dcfg.min_words, word_hashes)
        a = dc.overlap(texts, after, dcfg.ngram, dcfg.min_words, word_hashes)
        return {**b.to_dict(), "overlapping_after": a.overlapping}

    tasks: dict[str, Any] = {}
    if evaluation.corpus_tasks is not None:
        for task, splits in evaluation.corpus_tasks(staged).items():
            # (a reason names "the clean output", not the folder it is staged in: the report is the
            # same whatever the output is called)
            tasks[task] = {"skipped": splits.replace(str(staged), "the clean output")} if isinstance(splits, str) else \
                {split: counts(texts) for split, texts in splits.items()}
    for name, texts in evaluation.texts.items():
        tasks[name] = {"all": counts(texts)}
    return {
        "ngram": dcfg.ngram, "min_words": dcfg.min_words, "mode": dcfg.mode, "held_out": dcfg.held_out,
        "evaluation_windows": n_windows,
        "training_documents_scanned": scanned, "training_documents_overlapping": overlapping,
        "after": {"training_documents_scanned": scanned_after, "training_documents_overlapping": overlapping_after},
        # per task (the corpus's own, built from the output; the others by their spec) and split:
        # texts, those too short to check, those that overlapped the training documents before
        # decontamination and after
        "tasks": tasks,
    }


def summary(report: dict[str, Any] | None) -> dict[str, Any] | None:
    """Per task and split: (examples, overlapping before, overlapping after)."""
    if report is None:
        return None
    tasks = {t: v if "skipped" in v else {s: [c["texts"], c["overlapping"], c["overlapping_after"]] for s, c in v.items()}
             for t, v in report["tasks"].items()}
    return {"evaluation_windows": report["evaluation_windows"],
            "training_documents_overlapping": report["training_documents_overlapping"],
            "training_documents_overlapping_after": report["after"]["training_documents_overlapping"],
            "tasks": tasks}
