"""Dedup against earlier clean outputs (``clean.near_dedup.against``).

Every clean run with near dedup on saves, in ``<output>/dedup/``, what a later run needs to
drop copies of the documents it kept: for each output shard ``sig-<shard>.npy`` (the kept
documents' MinHash signatures, one row each, in the shard's row order, each value's low 32
bits: see :func:`saved_signatures`) and ``exact-<shard>.npy`` (their exact-content hashes, two
uint64 per document), and ``manifest.json`` (the signature settings, the exact hash and its
normalisation, the documents per shard). See docs/CLEANING.md.

A later run reads those folders (never writes them): map units partition the run's own band
keys and exact hashes (:func:`own_map`) and the prior documents' (:func:`prior_map`) alike,
and each partition's reduce unit matches the run's documents against the prior's
(:func:`prior_near_reduce`, :func:`prior_exact_reduce`). The driver only gathers the matches.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from ...artifacts import read_json, sha256_file
from ...config import CleanConfig, NearDedupConfig
from ...errors import ConfigError
from ..shards import shard_name
from ..storage import is_done, load_partition, mark_done, save_npy, save_partitioned
from .exact import EXACT_DTYPE, EXACT_HASH, EXACT_TEXT, exact_records, save_exact_partitioned
from .minhash import _MAX_VERIFY, BAND_DTYPE, shard_band_keys, similarity

INDEX_DIR = "dedup"  # the folder of a clean output that holds its saved signatures
MANIFEST = "manifest.json"
FORMAT = 1
SIGNATURE = "the low 32 bits of each MinHash value"
_LOW32 = np.uint64(0xFFFFFFFF)
_EMPTY32 = np.uint32(0xFFFFFFFF)  # the saved signature of a text without n-grams: all ones
# a document of this run (ordinal) matched to a prior document (prior index, its shard, its row)
MATCH_DTYPE = np.dtype([("ordinal", "<i8"), ("prior", "<i4"), ("shard", "<i4"), ("row", "<i4"), ("similarity", "<f4")])

PRIOR_EXACT = "prior_exact_duplicate"
PRIOR_NEAR = "prior_near_duplicate"


# ----------------------------------------------------------------------------- the saved index


def saved_signatures(sigs: np.ndarray) -> np.ndarray:
    """The signatures an output saves: each 64-bit MinHash value's low 32 bits, half the bytes.
    Two runs compare truncated values on both sides, band keys included (:func:`band_keys32`):
    two different 64-bit values agree in their low halves with probability 2**-32, so a
    comparison differs from the full one about once in 40 million document pairs."""
    return (sigs & _LOW32).astype(np.uint32)


def band_keys32(sig32: np.ndarray, docs: np.ndarray, bands: int, rows: int) -> np.ndarray:
    """(docs, bands) band keys of truncated signatures: the keys of the values widened back to
    64 bits (so the same key function as the run's own)."""
    return shard_band_keys(sig32.astype(np.uint64), docs, bands, rows)


def signature_settings(nd: NearDedupConfig) -> dict[str, int]:
    """What a signature depends on: two runs' signatures compare only if these are equal."""
    return {"ngram": nd.ngram, "bands": nd.bands, "rows": nd.rows, "seed": nd.seed}


def index_files(shard: int) -> tuple[str, str]:
    return f"sig-{shard_name(shard)}.npy", f"exact-{shard_name(shard)}.npy"


def index_manifest(cfg: CleanConfig, documents: list[int]) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "near_dedup": signature_settings(cfg.near_dedup),
        "signature": SIGNATURE,
        "exact": {"hash": EXACT_HASH, "text": EXACT_TEXT},
        "documents": int(sum(documents)),
        "shards": [{"name": f"{shard_name(s)}.parquet", "documents": int(n)} for s, n in enumerate(documents)],
    }


@dataclass(frozen=True)
class Prior:
    """An earlier clean output to dedup against: ``path`` as configured, ``root`` absolute."""

    path: str
    root: Path
    manifest: dict[str, Any]

    @property
    def shards(self) -> list[dict[str, Any]]:
        return self.manifest["shards"]

    def identity(self) -> list[Any]:
        """What the run's fingerprint holds of it: a changed prior changes these."""
        return [str(self.root), sha256_file(self.root / "stats.json"), sha256_file(self.root / INDEX_DIR / MANIFEST)]


def _settings(s: dict[str, Any]) -> str:
    return ", ".join(f"{k}={s.get(k)}" for k in ("ngram", "bands", "rows", "seed"))


def open_priors(cfg: CleanConfig) -> list[Prior]:
    """The configured prior outputs, checked: each a finished clean output with saved signatures
    made with this run's signature settings, and not this run's own output. A ConfigError
    naming the path otherwise."""
    key = "clean.near_dedup.against"
    own = Path(cfg.output).resolve()
    priors = []
    for spec in cfg.near_dedup.against:
        root = Path(spec).resolve()
        if not root.is_dir():
            raise ConfigError(f"{key}: {spec} does not exist" if not root.exists() else f"{key}: {spec} is not a folder")
        if root == own or own in root.parents or root in own.parents:
            raise ConfigError(f"{key}: {spec} is (or holds, or is inside) this run's output {cfg.output}, which the run replaces")
        stats = read_json(root / "stats.json")
        if not isinstance(stats, dict) or not stats.get("shards") or "fingerprint" not in stats:
            raise ConfigError(f"{key}: {spec} is not a finished clean output (no stats.json of a finished run)")
        manifest = read_json(root / INDEX_DIR / MANIFEST)
        if not isinstance(manifest, dict):
            raise ConfigError(f"{key}: {spec} has no saved signatures ({INDEX_DIR}/{MANIFEST}): it was cleaned with "
                              "near dedup off or by an older lmforge; clean it again")
        if (manifest.get("format") != FORMAT or manifest.get("signature") != SIGNATURE
                or manifest.get("exact") != {"hash": EXACT_HASH, "text": EXACT_TEXT}):
            raise ConfigError(f"{key}: {spec} saved its signatures in another format ({manifest.get('format')}, "
                              f"{manifest.get('exact')}); clean it again")
        theirs, ours = manifest.get("near_dedup") or {}, signature_settings(cfg.near_dedup)
        if theirs != ours:
            raise ConfigError(f"{key}: {spec} was made with near_dedup {_settings(theirs)}, this run has {_settings(ours)}: "
                              "signatures compare only when these are equal")
        for s, shard in enumerate(manifest["shards"]):
            for name in index_files(s):
                p = root / INDEX_DIR / name
                if not p.is_file():
                    raise ConfigError(f"{key}: {spec} is missing {INDEX_DIR}/{name}")
                rows = np.load(p, mmap_mode="r").shape[0]
                if rows != shard["documents"]:
                    raise ConfigError(f"{key}: {spec}: {INDEX_DIR}/{name} has {rows} rows, its manifest says {shard['documents']}")
        priors.append(Prior(spec, root, manifest))
    return priors


def prior_units(priors: list[Prior]) -> list[tuple[int, str, int]]:
    """(prior index, its absolute folder, shard index) of every prior shard."""
    return [(k, str(p.root), s) for k, p in enumerate(priors) for s in range(len(p.shards))]


def prior_ids(priors: list[Prior], refs: set[tuple[int, int]]) -> dict[tuple[int, int], list[str]]:
    """The document ids of the prior shards in ``refs`` ((prior, shard) pairs), row by row."""
    out = {}
    for k, s in sorted(refs):
        out[(k, s)] = pq.read_table(priors[k].root / priors[k].shards[s]["name"], columns=["id"]).column("id").to_pylist()
    return out


# ----------------------------------------------------------------------------- the passes
# Top-level so an executor (process pool, Ray) can send them; each returns False when its unit was done.


def _prior_stem(k: int, shard: int) -> str:
    return f"prior{k:03d}-{shard_name(shard)}"


def prior_map(work: str, k: int, root: str, shard: int, cfg_json: str, n_parts: int) -> bool:
    """One prior shard's band keys and exact hashes, partitioned as this run's own (by band and
    key, by hash) into the work folder; the prior's files are only read."""
    nd = CleanConfig.model_validate_json(cfg_json).near_dedup
    wd = Path(work) / "minhash"
    bands_out, exact_out = wd / f"{_prior_stem(k, shard)}-bands.npy", wd / f"{_prior_stem(k, shard)}-exact.npy"
    marker = wd / f"{_prior_stem(k, shard)}.done"
    if is_done(marker):
        return False
    sig_name, exact_name = index_files(shard)
    sig32 = np.load(Path(root) / INDEX_DIR / sig_name)
    hashes = np.load(Path(root) / INDEX_DIR / exact_name)
    _save_keys(bands_out, exact_out, sig32, hashes, np.full(hashes.shape[0], k), shard, nd, n_parts)
    mark_done([bands_out, bands_out.with_suffix(".offsets.npy"), exact_out, exact_out.with_suffix(".offsets.npy")], marker)
    return True


def own_map(work: str, shard: int, cfg_json: str, source: str, n_parts: int) -> bool:
    """The run's own band keys (of its truncated signatures) and exact hashes of one shard,
    partitioned as :func:`prior_map` partitions the prior's."""
    nd = CleanConfig.model_validate_json(cfg_json).near_dedup
    wd = Path(work) / "minhash"
    bands_out, exact_out = wd / f"own-{shard_name(shard)}-bands.npy", wd / f"own-{shard_name(shard)}-exact.npy"
    marker = wd / f"own-{shard_name(shard)}.done"
    if is_done(marker):
        return False
    ordinals = pq.read_table(Path(work) / source / f"{shard_name(shard)}.parquet", columns=["ordinal"]).column("ordinal")
    sig32 = saved_signatures(np.load(wd / f"sig-{shard_name(shard)}.npy"))
    hashes = np.load(wd / f"exact-{shard_name(shard)}.npy")
    _save_keys(bands_out, exact_out, sig32, hashes, ordinals.to_numpy().astype(np.int64), shard, nd, n_parts)
    mark_done([bands_out, bands_out.with_suffix(".offsets.npy"), exact_out, exact_out.with_suffix(".offsets.npy")], marker)
    return True


def _save_keys(bands_out: Path, exact_out: Path, sig32: np.ndarray, hashes: np.ndarray, ordinal: np.ndarray, shard: int,
               nd: NearDedupConfig, n_parts: int) -> None:
    """Band records partitioned by (band, key) and exact records by hash. ``ordinal``: the
    run's ordinals, or for a prior's documents the prior's index (they have no ordinal here)."""
    docs = np.flatnonzero((sig32 != _EMPTY32).any(axis=1))  # a text without n-grams has nothing to compare
    keys = band_keys32(sig32, docs, nd.bands, nd.rows).ravel()
    recs = np.zeros(keys.size, dtype=BAND_DTYPE)
    recs["key"] = keys
    recs["ordinal"] = np.repeat(ordinal[docs], nd.bands)
    recs["shard"] = shard
    recs["row"] = np.repeat(docs, nd.bands).astype(np.int32)
    band = np.tile(np.arange(nd.bands, dtype=np.int64), docs.size)
    save_partitioned(bands_out, recs, band * n_parts + (keys % np.uint64(n_parts)).astype(np.int64), nd.bands * n_parts)
    rows = np.arange(hashes.shape[0], dtype=np.int32)
    save_exact_partitioned(exact_out, exact_records(hashes, ordinal, shard, rows), n_parts)


def _prior_files(wd: Path, units: list[tuple[int, str, int]], what: str) -> list[Path]:
    return [wd / "minhash" / f"{_prior_stem(k, s)}-{what}.npy" for k, _root, s in units]


def _own_files(wd: Path, n_shards: int, what: str) -> list[Path]:
    return [wd / "minhash" / f"own-{shard_name(s)}-{what}.npy" for s in range(n_shards)]


def prior_near_reduce(work: str, unit: int, n_shards: int, units: list[tuple[int, str, int]], verify: float | None) -> bool:
    """This run's documents of one (band, partition) unit whose band key is a prior document's
    and whose signature passes the check (``verify``) against it: matched to the first such
    prior document (in prior, shard, row order)."""
    wd = Path(work)
    out = wd / "minhash" / f"prior-near-{unit:05d}.npy"
    marker = out.with_suffix(".done")
    if is_done(marker):
        return False
    ours = load_partition(_own_files(wd, n_shards, "bands"), unit, BAND_DTYPE)
    theirs = load_partition(_prior_files(wd, units, "bands"), unit, BAND_DTYPE)
    matches = []
    if ours.size and theirs.size:
        theirs = theirs[np.lexsort((theirs["row"], theirs["shard"], theirs["ordinal"], theirs["key"]))]
        ours = ours[np.isin(ours["key"], theirs["key"])]
        lo = np.searchsorted(theirs["key"], ours["key"], side="left")
        hi = np.searchsorted(theirs["key"], ours["key"], side="right")
        roots = {k: root for k, root, _s in units}
        own_sigs: dict[int, np.ndarray] = {}
        prior_sigs: dict[tuple[int, int], np.ndarray] = {}
        for i in range(ours.size):
            s = int(ours["shard"][i])
            if s not in own_sigs:
                own_sigs[s] = np.load(wd / "minhash" / f"sig-{shard_name(s)}.npy", mmap_mode="r")
            mine = saved_signatures(own_sigs[s][int(ours["row"][i])])
            for j in range(int(lo[i]), min(int(hi[i]), int(lo[i]) + _MAX_VERIFY)):
                ref = (int(theirs["ordinal"][j]), int(theirs["shard"][j]))
                if ref not in prior_sigs:
                    prior_sigs[ref] = np.load(Path(roots[ref[0]]) / INDEX_DIR / index_files(ref[1])[0], mmap_mode="r")
                sim = similarity(prior_sigs[ref][int(theirs["row"][j])], mine)
                if verify is None or sim >= verify:
                    matches.append((int(ours["ordinal"][i]), ref[0], ref[1], int(theirs["row"][j]), sim))
                    break
    save_npy(out, np.array(matches, dtype=MATCH_DTYPE))
    mark_done([out], marker)
    return True


def prior_exact_reduce(work: str, part: int, n_shards: int, units: list[tuple[int, str, int]]) -> bool:
    """This run's documents of one hash partition whose exact hash is a prior document's:
    matched to the first such (in prior, shard, row order)."""
    wd = Path(work)
    out = wd / "minhash" / f"prior-exact-{part:05d}.npy"
    marker = out.with_suffix(".done")
    if is_done(marker):
        return False
    ours = load_partition(_own_files(wd, n_shards, "exact"), part, EXACT_DTYPE)
    theirs = load_partition(_prior_files(wd, units, "exact"), part, EXACT_DTYPE)
    matches = []
    if ours.size and theirs.size:
        theirs = theirs[np.lexsort((theirs["row"], theirs["shard"], theirs["ordinal"], theirs["hi"], theirs["lo"]))]
        ours = ours[np.isin(ours["lo"], theirs["lo"])]
        lo = np.searchsorted(theirs["lo"], ours["lo"], side="left")
        hi = np.searchsorted(theirs["lo"], ours["lo"], side="right")
        for i in range(ours.size):
            for j in range(int(lo[i]), int(hi[i])):  # the same low half: the high half decides
                if theirs["hi"][j] == ours["hi"][i]:
                    matches.append((int(ours["ordinal"][i]), int(theirs["ordinal"][j]), int(theirs["shard"][j]),
                                    int(theirs["row"][j]), 1.0))
                    break
    save_npy(out, np.array(matches, dtype=MATCH_DTYPE))
    mark_done([out], marker)
    return True


def prior_matches(wd: Path, n_near_units: int, n_exact_parts: int) -> dict[int, tuple[str, tuple[int, int, int], float]]:
    """ordinal -> (reason, (prior, shard, row), similarity) for every document of this run that
    copies a prior document: an exact copy first, else a near one (its first match in prior,
    shard, row order)."""
    out: dict[int, tuple[str, tuple[int, int, int], float]] = {}
    for reason, name, n in ((PRIOR_EXACT, "prior-exact", n_exact_parts), (PRIOR_NEAR, "prior-near", n_near_units)):
        found: dict[int, tuple[tuple[int, int, int], float]] = {}
        for u in range(n):
            for o, k, s, r, sim in np.load(wd / "minhash" / f"{name}-{u:05d}.npy").tolist():
                if o not in out and (o not in found or (k, s, r) < found[o][0]):
                    found[o] = ((k, s, r), sim)
        for o, (ref, sim) in found.items():
            out[o] = (reason, ref, sim)
    return out


def describe_priors(priors: list[Prior]) -> list[dict[str, Any]]:
    """What stats.json says of the outputs the run was deduped against."""
    out = []
    for p in priors:
        stats = json.loads((p.root / "stats.json").read_text(encoding="utf-8"))
        out.append({"path": p.path, "documents": p.manifest["documents"], "fingerprint": stats["fingerprint"]})
    return out
