"""Near-duplicate dedup: MinHash signatures and LSH banding over word n-grams of normalised text,
candidates verified against the full signature and clustered with union-find (the first
document of a cluster is kept). See docs/CLEANING.md for the hashing and the band arithmetic.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import xxhash

from ...config import CleanConfig
from ..shards import shard_name
from ..storage import is_done, load_partition, mark_done, save_npy, save_partitioned
from ..text import normalize_for_dedup, normalize_for_dedup_utf8
from .exact import exact_hashes
from .xxh64 import xxh64_slices, xxh64_stripes

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_EMPTY = np.uint64(0xFFFFFFFFFFFFFFFF)
_MAX_VERIFY = 64  # earlier bucket members a candidate is checked against
_BLOCK = 1 << 17  # elements of one (n-grams, permutations) block of shard_signatures

BAND_DTYPE = np.dtype([("key", "<u8"), ("ordinal", "<i8"), ("shard", "<i4"), ("row", "<i4")])


def _mix(z: np.ndarray) -> np.ndarray:
    """The 64-bit finaliser that turns a hash into one permutation's value, computed in place
    in ``z`` (an array the caller owns: no temporaries its size but one)."""
    with np.errstate(over="ignore"):
        z ^= z >> np.uint64(30)
        z *= _M1
        z ^= z >> np.uint64(27)
        z *= _M2
        z ^= z >> np.uint64(31)
    return z


def _xorshift30(x: np.ndarray) -> np.ndarray:
    return x ^ (x >> np.uint64(30))


def _mix_pairs(hashes: np.ndarray, seeds: np.ndarray) -> np.ndarray:
    """``_mix(hashes[:, None] ^ seeds[None, :])``, the (hashes, seeds) matrix, with its first
    step done on the two vectors: a logical shift distributes over xor, so ``z ^ (z >> 30)``
    of ``z = h ^ s`` is ``(h ^ (h >> 30)) ^ (s ^ (s >> 30))``. Two passes over the matrix
    fewer."""
    z = _xorshift30(hashes)[:, None] ^ _xorshift30(seeds)[None, :]
    with np.errstate(over="ignore"):
        z *= _M1
        z ^= z >> np.uint64(27)
        z *= _M2
        z ^= z >> np.uint64(31)
    return z


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


def _gram_hashes(texts: list[str], ngram: int) -> tuple[np.ndarray, np.ndarray]:
    """The hashes of the word n-grams of every text, and each text's count, for a whole shard.

    The same n-grams as :func:`shingle_hashes` (repeats included: a repeat changes no minimum):
    the normalised texts are joined by ``\\n``, words are the runs between spaces (normalised
    text has single spaces and no others), and an n-gram's bytes are a slice of the joined
    text from its first word's start to its last word's end, hashed by :func:`xxh64_slices`,
    so the words and the n-gram strings are never built in Python."""
    data = b"\n".join(map(normalize_for_dedup_utf8, texts))
    n = len(texts)
    if not data.strip(b"\n"):
        return np.zeros(0, dtype=np.uint64), np.zeros(n, dtype=np.int64)
    arr = np.frombuffer(data, dtype=np.uint8)
    newline = arr == 10
    sep = newline | (arr == 32)
    inner = ~sep
    edge = np.diff(inner.view(np.int8), prepend=np.int8(0), append=np.int8(0))
    w_start = np.flatnonzero(edge == 1)  # byte offset of each word
    w_end = np.flatnonzero(edge == -1)  # ... and just past it
    w_doc = np.searchsorted(np.flatnonzero(newline), w_start)  # which text each word is in
    n_words = np.bincount(w_doc, minlength=n)
    first = np.concatenate(([0], np.cumsum(n_words)[:-1]))
    # n-grams inside a text with at least ngram words: starts k with word k + ngram - 1 in it
    k = np.arange(max(0, w_start.size - ngram + 1))
    k = k[w_doc[k] == w_doc[k + ngram - 1]]
    # a text with fewer words (but some) is one n-gram: all of it
    short = np.flatnonzero((n_words > 0) & (n_words < ngram))
    g_first = np.concatenate((k, first[short]))
    g_last = np.concatenate((k + ngram - 1, first[short] + n_words[short] - 1))
    g_doc = np.concatenate((w_doc[k], short))
    order = np.argsort(g_doc, kind="stable")
    hashes = xxh64_slices(data, w_start[g_first[order]], w_end[g_last[order]])
    return hashes, np.bincount(g_doc, minlength=n).astype(np.int64)


def shard_signatures(texts: list[str], ngram: int, seeds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``signature(shingle_hashes(t, ngram), seeds)`` of every text, as one (texts, permutations)
    array, and whether each text has n-grams; computed for many texts at once."""
    hashes, counts = _gram_hashes(texts, ngram)
    n, p = len(texts), seeds.shape[0]
    sigs = np.full((n, p), _EMPTY, dtype=np.uint64)
    ends = np.cumsum(counts)
    starts = ends - counts
    budget = max(1, _BLOCK // p)  # n-grams per block: a block stays in the cache
    d = 0
    while d < n:
        if counts[d] == 0:
            d += 1
            continue
        if counts[d] > budget:  # one long text: in blocks of permutations
            sigs[d] = signature(hashes[starts[d] : ends[d]], seeds)
            d += 1
            continue
        e = int(np.searchsorted(ends, starts[d] + budget, side="right"))  # texts that fit the block
        docs = np.arange(d, e)
        docs = docs[counts[d:e] > 0]
        g0, g1 = int(starts[d]), int(ends[e - 1])
        block = _mix_pairs(hashes[g0:g1], seeds)
        sigs[docs] = np.minimum.reduceat(block, starts[docs] - g0, axis=0)
        d = e
    return sigs, counts > 0


def shard_band_keys(sigs: np.ndarray, docs: np.ndarray, bands: int, rows: int) -> np.ndarray:
    """``band_keys(sigs[r], bands, rows)`` for each row ``r`` in ``docs``, as one (docs, bands) array."""
    if rows % 4 == 0 and sys.byteorder == "little":  # whole 32-byte stripes: XXH64 from the words
        lanes = np.ascontiguousarray(sigs[docs, : bands * rows]).reshape(-1, rows)
        return xxh64_stripes(lanes).reshape(-1, bands)
    data = np.ascontiguousarray(sigs).tobytes()
    width = sigs.shape[1] * 8
    lo = (docs[:, None] * width + np.arange(bands)[None, :] * (rows * 8)).ravel()
    keys = np.fromiter(map(xxhash.xxh64_intdigest, map(data.__getitem__, map(slice, lo.tolist(), (lo + rows * 8).tolist()))),
                       dtype=np.uint64, count=lo.size)
    return keys.reshape(-1, bands)


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
    """Signatures and exact-content hashes of the shard's documents (the clean output saves
    those it keeps), and their band keys partitioned by (band, key)."""
    cfg = CleanConfig.model_validate_json(cfg_json).near_dedup
    wd = Path(work)
    sig_path = wd / "minhash" / f"sig-{shard_name(shard)}.npy"
    out = wd / "minhash" / f"bands-{shard_name(shard)}.npy"
    marker = out.with_suffix(".done")
    if is_done(marker):
        return False
    table = pq.read_table(wd / source / f"{shard_name(shard)}.parquet", columns=["text", "ordinal"])
    texts, ordinals = table.column("text").to_pylist(), table.column("ordinal").to_numpy().astype(np.int64)
    seeds = permutation_seeds(cfg.bands * cfg.rows, cfg.seed)
    sigs, has_grams = shard_signatures(texts, cfg.ngram, seeds)
    save_npy(sig_path, sigs)
    exact_path = wd / "minhash" / f"exact-{shard_name(shard)}.npy"
    hashes = exact_hashes(texts)
    save_npy(exact_path, hashes)
    outputs = [sig_path, exact_path]
    docs = np.flatnonzero(has_grams)  # a text without n-grams has nothing to compare
    keys = shard_band_keys(sigs, docs, cfg.bands, cfg.rows).ravel()  # row-major: text by text, band by band
    recs = np.zeros(keys.size, dtype=BAND_DTYPE)
    recs["key"] = keys
    recs["ordinal"] = np.repeat(ordinals[docs], cfg.bands)
    recs["shard"] = shard
    recs["row"] = np.repeat(docs, cfg.bands).astype(np.int32)
    band = np.tile(np.arange(cfg.bands, dtype=np.int64), docs.size)
    part = band * n_parts + (keys % np.uint64(n_parts)).astype(np.int64)
    save_partitioned(out, recs, part, cfg.bands * n_parts)
    mark_done([out, out.with_suffix(".offsets.npy"), *outputs], marker)
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
        shared = ends - starts >= 2  # a bucket of one document has no pairs: not visited
        for lo, hi in zip(starts[shared].tolist(), ends[shared].tolist()):
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
