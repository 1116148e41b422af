"""The clean stage's filter phase (phase 3, after URL dedup): the unit that drops each shard's URL
duplicates and runs the per-document steps of ``filters.py`` (page length, the C4 rules,
language, bad words). Top-level and working through files, so that an executor (process pool,
Ray) can send it; it returns False when its unit was done."""

from __future__ import annotations

from pathlib import Path

from ..config import CleanConfig
from ..corpus.document import Document
from .dedup.urls import normalize_url, url_losers
from .filters import build_steps
from .shards import ShardStats, rewrite_shard

_STEPS_CACHE: dict[str, list] = {}


def _steps_for(cfg_json: str) -> list:
    if cfg_json not in _STEPS_CACHE:
        _STEPS_CACHE[cfg_json] = build_steps(CleanConfig.model_validate_json(cfg_json))
    return _STEPS_CACHE[cfg_json]


def filter_shard(work: str, shard: int, cfg_json: str, n_url_parts: int) -> bool:
    """URL duplicates, then the per-document steps (page length, C4 rules, language, bad words)."""
    cfg = CleanConfig.model_validate_json(cfg_json)
    wd = Path(work)
    steps = _steps_for(cfg_json)
    losers = url_losers(wd, shard, n_url_parts) if n_url_parts else set()

    def decide(doc: Document, o: int, stats: ShardStats) -> str | None:
        if cfg.urls.normalize and doc.url:
            doc.metadata["url_normalized"] = normalize_url(doc.url, cfg.urls.tracking_query_prefixes)
        if o in losers:
            return "url_duplicate"
        for step in steps:
            reason = step(doc, stats.lines)
            if step.name == "language":  # what language ID said of every document it looked at
                lang = str(doc.metadata.get("language"))
                stats.languages[lang] += 1
                if reason is not None:
                    stats.languages_dropped[lang] += 1
            if reason is not None:
                return reason
        return None

    return rewrite_shard(wd, "ingest", "filter", shard, cfg.dropped_samples, decide)
