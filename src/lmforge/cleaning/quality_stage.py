"""The quality stage (optional, ``quality.enabled``): train the quality classifier
(``quality.py``) on the reference set against a sample of the clean corpus, score every clean
document, keep the top ``quality.keep_fraction`` (or those over ``quality.threshold``) and write
them as the clean stage writes its shards (the same columns, each document's score added to its
metadata as ``quality_score``), for the tokenizers and token stores to read instead of the clean
output (``layout.corpus_dir``).

The output folder holds the shards, ``stats.json`` (counts, the classifier's held-out accuracy
and AUC, the score distribution, the n-grams it weighs most), ``scores.parquet`` (every clean
document's id, score and whether it was kept), ``model.joblib`` (the trained scikit-learn
pipeline), ``samples/kept.jsonl`` and ``samples/dropped.jsonl`` (documents spread over the
ranks, for reading) and ``scores.png``. See docs/CLEANING.md.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .. import __version__
from ..artifacts import atomic_write_bytes, atomic_write_json, fingerprint, finished, read_json, sha256_file, staged_dir
from ..config import Params
from ..corpus.document import CorpusError
from ..corpus.sources import InputReport, iter_documents
from ..layout import clean_dir, quality_dir
from .output import iter_clean
from .quality import QualityError, keep_mask, sample, score, top_features, train
from .stage import input_versions
from .storage import write_parquet

MODEL_FILE = "model.joblib"
_SAMPLE_CHARS = 2000  # characters of a sampled document written to samples/
_BATCH = 1000  # documents scored at once
_BINS = 20  # score histogram bins over [0, 1]


@dataclass
class QualityResult:
    output: Path
    stats: dict[str, Any]
    seconds: float
    skipped: bool = False


def _fingerprint(params: Params, clean_shards: dict[str, str]) -> str:
    import sklearn

    cfg = params.quality
    return fingerprint("quality", cfg.model_dump(mode="json", exclude={"output", "enabled"}), clean_shards,
                       input_versions(cfg.reference, params.clean.include_site_packages),
                       params.clean.max_document_bytes, sklearn.__version__)


def _intact(out: Path, stats: dict[str, Any]) -> bool:
    if not (out / MODEL_FILE).exists() or not (out / "scores.parquet").exists():
        return False
    return all((out / name).exists() and sha256_file(out / name) == digest for name, digest in stats.get("shards", {}).items())


def _histogram(values: np.ndarray) -> list[int]:
    counts, _ = np.histogram(np.clip(values, 0.0, 1.0), bins=_BINS, range=(0.0, 1.0))
    return [int(c) for c in counts]


def _spread(positions: np.ndarray, k: int) -> list[int]:
    """``k`` of ``positions`` evenly spread from the first to the last (all when fewer)."""
    if len(positions) <= k:
        return [int(p) for p in positions]
    if k <= 1:
        return [int(p) for p in positions[:k]]
    return [int(positions[round(i * (len(positions) - 1) / (k - 1))]) for i in range(k)]


def run_quality(params: Params, log: Callable[[str], None] = print) -> QualityResult:
    """Run the quality stage to completion, or report it up to date (same clean shards, reference
    files and settings). The clean stage must have run."""
    t0 = time.perf_counter()
    cfg = params.quality
    if not cfg.enabled:
        raise QualityError("quality.enabled is false: set it to true in params.yaml (or --set quality.enabled=true) "
                           "to run the quality stage; the stages after it then read quality.output")
    src, out = clean_dir(params), quality_dir(params)
    clean_stats = read_json(src / "stats.json")
    if clean_stats is None or not clean_stats.get("shards"):
        raise QualityError(f"{src}: no clean corpus (stats.json missing); run `lmforge clean` first")
    fp = _fingerprint(params, clean_stats["shards"])
    prev = finished(out / "stats.json", fp, intact=lambda stats: _intact(out, stats))
    if prev is not None:
        log(f"quality: {out} is up to date (same clean corpus, reference and parameters)")
        return QualityResult(out, prev, time.perf_counter() - t0, skipped=True)

    # the two classes: the reference set (positives) and a sample of the clean corpus (negatives)
    report = InputReport()
    docs = iter_documents(cfg.reference, report=report, include_site_packages=params.clean.include_site_packages,
                          max_document_bytes=params.clean.max_document_bytes)
    try:
        reference, reference_read = sample(((d.id, d.text) for d in docs), cfg.max_documents, cfg.seed, cfg)
    except CorpusError as exc:
        raise QualityError(f"quality.reference: {exc}") from None
    corpus, corpus_read = sample(iter_clean(src), cfg.max_documents, cfg.seed + 1, cfg)
    log(f"quality: training on {len(reference)} of {reference_read} reference documents against "
        f"{len(corpus)} of {corpus_read} clean documents")
    t_train = time.perf_counter()
    trained = train([t for _, t in reference], [t for _, t in corpus], cfg)
    v = trained.validation
    log(f"quality: held-out accuracy {v['accuracy']:.3f} (chance {v['chance_accuracy']:.3f}), balanced "
        f"{v['balanced_accuracy']:.3f}, AUC {v['auc']:.3f} ({time.perf_counter() - t_train:.1f}s)")

    # every clean document's score
    shards = sorted(src.glob("shard-*.parquet"))
    ids: list[str] = []
    parts: list[np.ndarray] = []
    sizes: list[int] = []
    n_bytes: list[int] = []
    for shard in shards:
        table = pq.read_table(shard, columns=["id", "text"])
        texts = table.column("text").to_pylist()
        ids += table.column("id").to_pylist()
        sizes.append(len(texts))
        n_bytes += [len(t.encode("utf-8")) if t else 0 for t in texts]
        for i in range(0, len(texts), _BATCH):
            parts.append(score(trained.model, [t or "" for t in texts[i:i + _BATCH]], cfg))
    scores = np.concatenate(parts) if parts else np.zeros(0)
    keep = keep_mask(scores, ids, cfg)
    order = sorted(range(len(ids)), key=lambda i: (-scores[i], ids[i]))
    rank = np.empty(len(ids), dtype=np.int64)
    rank[order] = np.arange(len(ids))
    n_kept = int(keep.sum())
    log(f"quality: keeping {n_kept} of {len(ids)} documents")
    by_rank = np.array(order, dtype=np.int64)
    wanted = {"kept": _spread(by_rank[:n_kept], cfg.samples), "dropped": _spread(by_rank[n_kept:], cfg.samples)}
    picked = {i: name for name, positions in wanted.items() for i in positions}
    samples: dict[str, dict[int, dict[str, Any]]] = {"kept": {}, "dropped": {}}

    with staged_dir(out) as staged:
        written: dict[str, str] = {}
        offset = 0
        for shard, size in zip(shards, sizes):
            mask = keep[offset:offset + size]
            table = pq.read_table(shard)
            for j in range(size):
                if offset + j in picked:
                    row = {c: table.column(c)[j].as_py() for c in ("id", "url", "source", "text")}
                    samples[picked[offset + j]][offset + j] = {
                        "id": row["id"], "score": round(float(scores[offset + j]), 6), "rank": int(rank[offset + j]),
                        "url": row["url"], "source": row["source"], "text": (row["text"] or "")[:_SAMPLE_CHARS]}
            if mask.any():
                kept = table.filter(pa.array(mask))
                meta = []
                for m, s in zip(kept.column("metadata").to_pylist(), scores[offset:offset + size][mask]):
                    d = json.loads(m) if m else {}  # a JSON object: the clean stage writes one per document
                    d["quality_score"] = round(float(s), 6)
                    meta.append(json.dumps(d, sort_keys=True, ensure_ascii=False))
                kept = kept.set_column(kept.schema.get_field_index("metadata"), kept.schema.field("metadata"),
                                       pa.array(meta, pa.string()))
                write_parquet(staged / shard.name, kept)
                written[shard.name] = sha256_file(staged / shard.name)
            offset += size
        write_parquet(staged / "scores.parquet", pa.table({
            "id": pa.array(ids, pa.string()), "score": pa.array(scores.astype(np.float64)),
            "kept": pa.array(keep.astype(bool))}))
        import joblib

        joblib.dump(trained.model, staged / MODEL_FILE)
        for name, rows in samples.items():
            lines = "".join(json.dumps(rows[i], sort_keys=True, ensure_ascii=False) + "\n"
                            for i in sorted(rows, key=lambda i: rank[i]))
            atomic_write_bytes(staged / "samples" / f"{name}.jsonl", lines.encode("utf-8"))
        stats = _stats(params, fp, clean_stats, trained, reference_read, corpus_read, report, ids, scores, keep,
                       n_bytes, written)
        stats["classifier"]["top_features"] = top_features(trained.model, [t for _, t in reference] + [t for _, t in corpus], cfg)
        atomic_write_json(staged / "stats.json", stats)
        from ..charts import write_charts
        from ..charts.quality import quality_charts

        write_charts(staged, quality_charts(stats), log)
    return QualityResult(out, stats, time.perf_counter() - t0)


def _stats(params: Params, fp: str, clean_stats: dict[str, Any], trained, reference_read: int, corpus_read: int,
           report: InputReport, ids: list[str], scores: np.ndarray, keep: np.ndarray, n_bytes: list[int],
           shards: dict[str, str]) -> dict[str, Any]:
    import sklearn

    cfg = params.quality
    sizes = np.array(n_bytes, dtype=np.int64)
    n_in, n_out = len(ids), int(keep.sum())
    b_in, b_out = int(sizes.sum()), int(sizes[keep].sum()) if n_in else 0
    quantiles = {f"p{q:02d}": round(float(np.quantile(scores, q / 100)), 6) for q in (1, 10, 25, 50, 75, 90, 99)} if n_in else {}
    return {
        "documents_in": n_in,
        "documents_out": n_out,
        "documents_kept_fraction": round(n_out / max(n_in, 1), 6),
        "bytes_in": b_in,
        "bytes_out": b_out,
        "bytes_kept_fraction": round(b_out / max(b_in, 1), 6),
        "rule": {"threshold": cfg.threshold} if cfg.threshold is not None else {"keep_fraction": cfg.keep_fraction},
        "cut_score": round(float(scores[keep].min()), 6) if n_out else None,  # the lowest kept score
        "score_quantiles": quantiles,
        # documents by score: bin i from bounds[i] to bounds[i + 1] (the last bin closed)
        "score_histogram": {"bounds": [round(i / _BINS, 6) for i in range(_BINS + 1)], "corpus": _histogram(scores),
                            "kept": _histogram(scores[keep]),
                            "held_out_reference": _histogram(np.array(trained.held_out_scores["reference"])),
                            "held_out_corpus": _histogram(np.array(trained.held_out_scores["corpus"]))},
        "classifier": {
            "validation": trained.validation,
            "model": MODEL_FILE,
            "kind": "scikit-learn HashingVectorizer (word 1-2 grams, l2) + LogisticRegression (balanced classes)",
            "sklearn_version": sklearn.__version__,
            "reference_documents": reference_read,  # non-empty documents read; the classifier saw a sample
            "corpus_documents": corpus_read,
            # the training negatives are scored too (in-sample): with a corpus near quality.max_documents in
            # size, their scores lean low; the held-out figures above are the unbiased ones
            "corpus_documents_trained_on": trained.validation["documents"]["corpus_train"],
        },
        "reference": {"inputs": list(cfg.reference), **report.to_dict()},
        "clean_fingerprint": clean_stats.get("fingerprint"),
        "shards": shards,
        "fingerprint": fp,
        "params": cfg.model_dump(mode="json"),
        "lmforge_version": __version__,
    }
