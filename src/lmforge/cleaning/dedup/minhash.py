"""Near-duplicate dedup: MinHash signatures and LSH banding over word n-grams of normalised text,
candidates verified against the full signature and clustered with union-find (the first
document of a cluster is kept). See docs/CLEANING.md for the hashing and the band arithmetic.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import xxhash

from ...config import CleanConfig
from ..shards import shard_name
from ..storage import is_done, load_partition, mark_done, save_npy, save_partitioned
from ..text import normalize_for_dedup

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_EMPTY = np.uint64(0xFFFFFFFFFFFFFFFF)
_MAX_VERIFY = 64  # earlier bucket members a candidate is checked against

BAND_DTYPE = np.dtype([("key", "<u8"), ("ordinal", "<i8"), ("shard", "<i4"), ("row", "<i4")])


def _mix(z: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * _M1
        z = (z ^ (z >> np.uint64(27))) * _M2
        return z ^ (z >> np.uint64(31))


def permutation_seeds(num_perm: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.integers(0, np.iinfo(np.uint64).max, size=num_perm, dtype=np.uint64, endpoint=True)


def shingle_hashes(text: str, ngram: int) -> np.ndarray:
    """64-bit hashes of the distinct word n-grams of the normalised text."""
    words = normalize_for_dedup(text).split()
    if not words:
        return np.zeros(0, dtype=np.uint64)
    if len(words) < ngram:
        grams = {" ".join(words)}
    else:
        grams = {" ".join(words[i : i + ngram]) for i in range(len(words) - ngram + 1)}
    return np.fromiter((xxhash.xxh64_intdigest(g.encode("utf-8")) for g in grams), dtype=np.uint64, count=len(grams))


def signature(hashes: np.ndarray, seeds: np.ndarray) -> np.ndarray:
    """MinHash signature (one uint64 per permutation); all-ones for a document without n-grams."""
    if hashes.size == 0:
        return np.full(seeds.shape[0], _EMPTY, dtype=np.uint64)
    # (P, N) matrix in chunks of permutations to bound memory for long documents.
    out = np.empty(seeds.shape[0], dtype=np.uint64)
    step = max(1, 4_000_000 // max(1, hashes.size))
    for lo in range(0, seeds.shape[0], step):
        block = _mix(hashes[None, :] ^ seeds[lo : lo + step, None])
        out[lo : lo + step] = block.min(axis=1)
    return out


def band_keys(sig: np.ndarray, bands: int, rows: int) -> np.ndarray:
    """One 64-bit key per band (hash of the band's ``rows`` values)."""
    view = sig[: bands * rows].reshape(bands, rows)
    return np.fromiter(
        (xxhash.xxh64_intdigest(view[b].tobytes()) for b in range(bands)), dtype=np.uint64, count=bands
    )


def similarity(a: np.ndarray, b: np.ndarray) -> float:
    """Estimated Jaccard similarity: the share of equal signature positions."""
    return float(np.mean(a == b))


class UnionFind:
    """Union-find over document ordinals; the root of a cluster is its smallest ordinal."""

    def __init__(self) -> None:
        self.parent: dict[int, int] = {}

    def find(self, x: int) -> int:
        parent = self.parent
        root = x
        while parent.get(root, root) != root:
            root = parent[root]
        while parent.get(x, x) != root:  # path compression
            parent[x], x = root, parent[x]
        return root

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return
        if ra < rb:
            self.parent[rb] = ra
        else:
            self.parent[ra] = rb


# ----------------------------------------------------------------------------- the passes
# Top-level so an executor (process pool, Ray) can send them; each returns False when its unit was done.


def minhash_map(work: str, shard: int, cfg_json: str, source: str, n_parts: int) -> bool:
    """Signatures of the shard's documents, and their band keys partitioned by (band, key)."""
    cfg = CleanConfig.model_validate_json(cfg_json).near_dedup
    wd = Path(work)
    sig_path = wd / "minhash" / f"sig-{shard_name(shard)}.npy"
    out = wd / "minhash" / f"bands-{shard_name(shard)}.npy"
    marker = out.with_suffix(".done")
    if is_done(marker):
        return False
    table = pq.read_table(wd / source / f"{shard_name(shard)}.parquet", columns=["text", "ordinal"])
    texts, ordinals = table.column("text").to_pylist(), table.column("ordinal").to_pylist()
    seeds = permutation_seeds(cfg.bands * cfg.rows, cfg.seed)
    sigs = np.zeros((len(texts), cfg.bands * cfg.rows), dtype=np.uint64)
    rows = []
    for r, (text, o) in enumerate(zip(texts, ordinals)):
        hashes = shingle_hashes(text, cfg.ngram)
        sigs[r] = signature(hashes, seeds)
        if hashes.size == 0:
            continue  # nothing to compare
        for b, key in enumerate(band_keys(sigs[r], cfg.bands, cfg.rows).tolist()):
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


def minhash_reduce(work: str, unit: int, n_shards: int, verify: float | None) -> bool:
    """Candidate pairs of one (band, partition) unit, verified against the full signatures:
    the edges (earlier ordinal, later ordinal) of the near-duplicate graph."""
    wd = Path(work)
    out = wd / "minhash" / f"edges-{unit:05d}.npy"
    marker = out.with_suffix(".done")
    if is_done(marker):
        return False
    recs = load_partition([wd / "minhash" / f"bands-{shard_name(s)}.npy" for s in range(n_shards)], unit, BAND_DTYPE)
    edges: list[tuple[int, int]] = []
    if recs.size:
        recs = recs[np.lexsort((recs["ordinal"], recs["key"]))]
        sigs: dict[int, np.ndarray] = {}

        def sig(i: int) -> np.ndarray:
            s = int(recs["shard"][i])
            if s not in sigs:
                sigs[s] = np.load(wd / "minhash" / f"sig-{shard_name(s)}.npy", mmap_mode="r")
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
                    if similarity(sig(i), sj) >= verify:
                        edges.append((int(recs["ordinal"][i]), int(recs["ordinal"][j])))
                        break
    save_npy(out, np.array(edges, dtype=np.int64).reshape(-1, 2))
    mark_done([out], marker)
    return True


def near_duplicates(wd: Path, n_units: int) -> dict[int, int]:
    """ordinal -> the ordinal of the document it duplicates (its cluster's first document),
    for every document but the first of each cluster of the edges the reduce units found."""
    uf = UnionFind()
    for u in range(n_units):
        for a, b in np.load(wd / "minhash" / f"edges-{u:05d}.npy").tolist():
            uf.union(a, b)
    drops = {}
    for o in list(uf.parent):
        root = uf.find(o)
        if root != o:
            drops[o] = root
    return drops


def cluster_sizes(drops: dict[int, int]) -> dict[int, int]:
    """Cluster size -> how many near-duplicate clusters have it, from :func:`near_duplicates`'s
    map (each cluster is its first document and the documents mapped to it): singletons, the
    documents that duplicate nothing, are not counted."""
    members: dict[int, int] = {}
    for root in drops.values():
        members[root] = members.get(root, 1) + 1
    sizes: dict[int, int] = {}
    for size in members.values():
        sizes[size] = sizes.get(size, 0) + 1
    return dict(sorted(sizes.items()))
