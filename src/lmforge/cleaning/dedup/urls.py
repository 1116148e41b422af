"""URL dedup: C4 normalises URLs, then keeps the newest crawl of each."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import xxhash

from ...config import CleanConfig
from ..shards import shard_name
from ..storage import is_done, load_partition, mark_done, save_partitioned

_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")

URL_DTYPE = np.dtype([("hash", "<u8"), ("timestamp", "<U40"), ("ordinal", "<i8")])
LOSER_DTYPE = np.dtype([("ordinal", "<i8")])


def normalize_url(url: str, tracking_query_prefixes: tuple[str, ...] | list[str] = ("utm_", "ref", "feed")) -> str:
    """Normalise a URL the way C4 did before deduplicating.

    The scheme and a leading ``www.`` are removed, a query string that starts with a tracking
    parameter (``?utm_...``, ``?ref...``, ``?feed...``) is removed with everything after it,
    and trailing slashes are stripped. The host is lower-cased (hosts are case-insensitive;
    paths are not, so they are left alone).
    """
    url = url.strip()
    url = _SCHEME.sub("", url)
    if url.lower().startswith("www."):
        url = url[4:]
    q = url.find("?")
    if q >= 0 and url[q + 1 :].startswith(tuple(tracking_query_prefixes)):
        url = url[:q]
    slash = url.find("/")
    host, rest = (url, "") if slash < 0 else (url[:slash], url[slash:])
    return (host.lower() + rest).rstrip("/")


# ----------------------------------------------------------------------------- the passes
# Top-level so an executor (process pool, Ray) can send them; each returns False when its unit was done.


def url_map(work: str, shard: int, cfg_json: str, n_parts: int) -> bool:
    """Hash each document's normalised URL; records partitioned by hash."""
    cfg = CleanConfig.model_validate_json(cfg_json).urls
    wd = Path(work)
    out = wd / "urls" / f"map-{shard_name(shard)}.npy"
    marker = out.with_suffix(".done")
    if is_done(marker):
        return False
    t = pq.read_table(wd / "ingest" / f"{shard_name(shard)}.parquet", columns=["url", "timestamp", "ordinal"])
    rows = []
    for url, ts, o in zip(*(t.column(c).to_pylist() for c in ("url", "timestamp", "ordinal"))):
        if url:
            key = normalize_url(url, cfg.tracking_query_prefixes) if cfg.normalize else url
            rows.append((xxhash.xxh64_intdigest(key.encode("utf-8")), (ts or "")[:40], o))
    recs = np.array(rows, dtype=URL_DTYPE)
    save_partitioned(out, recs, (recs["hash"] % np.uint64(n_parts)).astype(np.int64), n_parts)
    mark_done([out, out.with_suffix(".offsets.npy")], marker)
    return True


def url_reduce(work: str, part: int, n_shards: int, shard_size: int) -> bool:
    """Per URL keep the newest crawl (ties: the earliest document); the rest are losers,
    saved partitioned by the shard they belong to."""
    wd = Path(work)
    out = wd / "urls" / f"losers-{part:05d}.npy"
    marker = out.with_suffix(".done")
    if is_done(marker):
        return False
    recs = load_partition([wd / "urls" / f"map-{shard_name(s)}.npy" for s in range(n_shards)], part, URL_DTYPE)
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


def url_losers(wd: Path, shard: int, n_parts: int) -> set[int]:
    """Ordinals of the documents of ``shard`` whose URL a newer crawl (or an earlier document) keeps."""
    paths = [wd / "urls" / f"losers-{p:05d}.npy" for p in range(n_parts)]
    return set(load_partition(paths, shard, LOSER_DTYPE)["ordinal"].tolist())
