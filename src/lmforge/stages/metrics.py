"""The data stages' statistics as DVC metrics: after ``clean``, ``quality``, ``tokenizer_<kind>``,
``tokens_<kind>`` and ``dataset_<objective>`` run, the numbers of the record each wrote in its
output (``stats.json``, ``metrics.json``, ``manifest.json``) go to ``<output>.metrics.json``
beside it (its numbers only), which ``dvc.yaml`` lists under ``metrics`` (``dvc metrics show``,
``dvc exp show`` and ``dvc metrics diff`` read it). A file beside the output, not in it: DVC
refuses a metrics file inside another output."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Callable

from ..artifacts import atomic_write_json, read_json

SUFFIX = ".metrics.json"


def metrics_path(output: str | Path) -> Path:
    out = Path(output)
    return out.with_name(out.name + SUFFIX)


def _numbers(node: Any, skip: frozenset[str] = frozenset()) -> Any:
    """``node`` with only its numeric leaves (booleans, text, lists, non-finite numbers and
    histograms left out — histograms are the stages' pictures —, and the mappings left empty);
    DVC shows nested keys dotted."""
    if isinstance(node, dict):
        kept = {k: _numbers(v, skip) for k, v in node.items() if k not in skip and "histogram" not in k}
        return {k: v for k, v in kept.items() if v is not None and v != {}}
    if isinstance(node, (int, float)) and not isinstance(node, bool) and math.isfinite(node):
        return node
    return None


def _clean(out: Path) -> dict:
    s = read_json(out / "stats.json") or {}
    keys = ("documents_in", "documents_out", "documents_kept_fraction", "bytes_in", "bytes_out", "bytes_kept_fraction")
    m: dict[str, Any] = {k: s[k] for k in keys if k in s}
    m["dropped_documents"] = {r: d["documents"] for r, d in sorted((s.get("dropped") or {}).items())}
    m["lines_removed"] = dict(sorted((s.get("lines_removed") or {}).items()))
    return _numbers(m)


def _quality(out: Path) -> dict:
    s = read_json(out / "stats.json") or {}
    keys = ("documents_in", "documents_out", "documents_kept_fraction", "bytes_in", "bytes_out", "bytes_kept_fraction",
            "cut_score")
    m: dict[str, Any] = {k: s[k] for k in keys if k in s}
    v = (s.get("classifier") or {}).get("validation") or {}
    m["validation"] = {k: v[k] for k in ("accuracy", "balanced_accuracy", "auc", "chance_accuracy") if k in v}
    return _numbers(m)


def _tokenizer(out: Path) -> dict:
    return _numbers(read_json(out / "metrics.json") or {}, skip=frozenset({"training_seconds"}))


def _tokens(out: Path) -> dict:
    manifest = read_json(out / "manifest.json") or {}
    m: dict[str, Any] = {split: {k: s[k] for k in ("documents", "tokens") if k in s}
                         for split, s in (manifest.get("splits") or {}).items()}
    mixture = (manifest.get("mixture") or {}).get("sources")
    if mixture:  # tokenize.mixture: each source's train tokens after weighting and its shares
        m["mixture"] = {name: {k: e[k] for k in ("tokens_after", "target_share", "realised_share")}
                        for name, e in mixture.items()}
    return _numbers(m)


def _dataset(out: Path) -> dict:
    stats = read_json(out / "stats.json") or {}
    return _numbers(stats.get("splits") or {})


READERS: dict[str, Callable[[Path], dict]] = {"clean": _clean, "quality": _quality, "tokenizer": _tokenizer, "tokens": _tokens,
                                              "dataset": _dataset}


def write_stage_metrics(kind: str, output: Path) -> Path | None:
    """Write ``<output>.metrics.json`` for a stage of ``kind`` whose output is ``output``;
    None for kinds without one."""
    read = READERS.get(kind)
    if read is None:
        return None
    return atomic_write_json(metrics_path(output), read(output))
