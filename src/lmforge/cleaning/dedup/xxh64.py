"""XXH64 (seed 0) in numpy, over many inputs at once: ``xxh64_slices`` hashes slices of one
byte string (MinHash's word n-grams), ``xxh64_stripes`` the rows of a uint64 array (its band
keys). Each gives ``xxhash.xxh64_intdigest`` of every input, computed step by step as XXH64
does (32-byte stripes, 8-byte lanes, a 4-byte lane, single bytes, the final avalanche) with a
vector per step instead of a Python call per input."""

from __future__ import annotations

import numpy as np


_MASK = (1 << 64) - 1
_X1, _X2, _X3, _X4, _X5 = 0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0x85EBCA77C2B2AE63, 0x27D4EB2F165667C5
_P1, _P2, _P3, _P4, _P5 = (np.uint64(x) for x in (_X1, _X2, _X3, _X4, _X5))


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


def _xxh_round(acc: np.ndarray, lane: np.ndarray) -> np.ndarray:
    return _rotl(acc + lane * _P2, 31) * _P1


def _xxh_start(n: int) -> list[np.ndarray]:
    """XXH64's four accumulators (seed 0) for ``n`` inputs of at least one 32-byte stripe."""
    return [np.full(n, np.uint64((_X1 + _X2) & _MASK)), np.full(n, _P2), np.zeros(n, dtype=np.uint64),
            np.full(n, np.uint64(-_X1 & _MASK))]


def _xxh_merge(v: list[np.ndarray]) -> np.ndarray:
    """The four accumulators folded into one hash, as XXH64 does after the last stripe."""
    h = _rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)
    for acc in v:
        h = (h ^ _xxh_round(np.zeros(acc.size, dtype=np.uint64), acc)) * _P1 + _P4
    return h


def _xxh_avalanche(h: np.ndarray) -> np.ndarray:
    """XXH64's final mixing, in place."""
    h ^= h >> np.uint64(33)
    h *= _P2
    h ^= h >> np.uint64(29)
    h *= _P3
    h ^= h >> np.uint64(32)
    return h


def _words_at_every_byte(data: bytes) -> np.ndarray:
    """The little-endian 64-bit word starting at every byte of ``data`` and one past it (the
    data padded with zero bytes): ``len(data) + 1`` words. The words at offsets r, r + 8, ...
    are one (unaligned) uint64 view of the data from byte r, so eight copies of whole words
    build the array, rather than a copy byte by byte of an (n, 8) strided view."""
    padded = data + bytes(8)
    words = np.empty(len(data) + 1, dtype="<u8")
    for r in range(8):
        part = words[r::8]
        part[:] = np.frombuffer(padded, dtype="<u8", count=part.size, offset=r)
    return words


def xxh64_slices(data: bytes, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """``xxhash.xxh64_intdigest(data[lo[i]:hi[i]])`` (seed 0) for every i, computed with numpy:
    XXH64 step by step (32-byte stripes, 8-byte lanes, a 4-byte lane, single bytes, the final
    avalanche) over all the slices at once."""
    n = lo.size
    if n == 0:
        return np.zeros(0, dtype=np.uint64)
    words = _words_at_every_byte(data)
    lo = lo.astype(np.int64)
    size = hi.astype(np.int64) - lo
    stripes = size // 32
    with np.errstate(over="ignore"):
        h = np.full(n, _P5, dtype=np.uint64)
        big = np.flatnonzero(stripes > 0)
        if big.size:
            v = _xxh_start(big.size)
            start, count = lo[big], stripes[big]
            for k in range(int(count.max())):
                a = np.flatnonzero(count > k)
                q = start[a] + 32 * k
                for j in range(4):
                    v[j][a] = _xxh_round(v[j][a], words[q + 8 * j])
            h[big] = _xxh_merge(v)
        h += size.astype(np.uint64)
        pos = lo + stripes * 32
        rest = size - stripes * 32
        for k in range(3):  # 8-byte lanes
            a = np.flatnonzero(rest >= 8 * (k + 1))
            lane = _xxh_round(np.zeros(a.size, dtype=np.uint64), words[pos[a] + 8 * k])
            h[a] = _rotl(h[a] ^ lane, 27) * _P1 + _P4
        pos += (rest // 8) * 8
        rest %= 8
        a = np.flatnonzero(rest >= 4)
        h[a] = _rotl(h[a] ^ ((words[pos[a]] & np.uint64(0xFFFFFFFF)) * _P1), 23) * _P2 + _P3
        pos[a] += 4
        rest[a] -= 4
        for k in range(3):  # single bytes
            a = np.flatnonzero(rest > k)
            h[a] = _rotl(h[a] ^ ((words[pos[a] + k] & np.uint64(0xFF)) * _P5), 11) * _P1
        return _xxh_avalanche(h)


def xxh64_stripes(lanes: np.ndarray) -> np.ndarray:
    """``xxhash.xxh64_intdigest(row.tobytes())`` of each row of a (n, 4k) uint64 array (k >= 1):
    the input is whole 32-byte stripes, so there is no tail."""
    n, width = lanes.shape
    with np.errstate(over="ignore"):
        v = _xxh_start(n)
        for k in range(0, width, 4):
            for j in range(4):
                v[j] = _xxh_round(v[j], lanes[:, k + j])
        h = _xxh_merge(v)
        h += np.uint64(width * 8)
        return _xxh_avalanche(h)
