"""MinHash signatures and LSH banding over word n-grams of normalised text.

Each n-gram is hashed to 64 bits (xxh64); permutation ``i`` is simulated by xor-ing a seeded
64-bit constant and applying the splitmix64 finaliser, a bijection on 64-bit integers with
full avalanche, so the minimum over a document's n-grams is a proper MinHash. With ``b``
bands of ``r`` rows a pair with Jaccard ``s`` becomes a candidate with probability
``1 - (1 - s**r)**b`` (14 x 8: 0.92 at s = 0.8, 0.05 at s = 0.5); candidates are then checked
against the full signature (``verify_threshold``), which removes most false positives.
"""

from __future__ import annotations

import numpy as np
import xxhash

from .text import normalize_for_dedup

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_EMPTY = np.uint64(0xFFFFFFFFFFFFFFFF)


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
