"""Line dedup as C4 was published, or the paper's three-sentence spans.

C4 as published: a line (md5 of the stripped, lower-cased line) is kept only in the page whose
URL hash sorts first, repeats inside a page are dropped, then pages are re-checked for
``min_sentences``. Spans: the first occurrence of each three-sentence span wins."""

from __future__ import annotations

import hashlib
import json
from itertools import compress
from operator import methodcaller
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from ...config import CleanConfig
from ...corpus.document import Document
from ..shards import ShardStats, read_shard, rewrite_shard, shard_name
from ..storage import is_done, load_partition, mark_done, save_npy, save_partitioned
from ..text import count_sentences, split_sentences

LINE_DTYPE = np.dtype([("hash", "<u8"), ("owner", "<u8"), ("ordinal", "<i8")])
WINNER_DTYPE = np.dtype([("ordinal", "<i8"), ("hash", "<u8")])


def _owner_key_of(doc_id: str, url: str | None, metadata: str | None) -> int:
    """C4 keeps a duplicated line in the page whose URL's md5 sorts first; documents without a
    URL use their id. The first 8 bytes, big-endian, keep the hex digests' order. The metadata
    JSON (where the filter put the normalised URL) is parsed only where it can hold one."""
    key = json.loads(metadata).get("url_normalized") if metadata and '"url_normalized"' in metadata else None
    key = key or url or doc_id
    return int.from_bytes(hashlib.md5(key.encode("utf-8")).digest()[:8], "big")


def _line_hash(line: str) -> int:
    return int.from_bytes(hashlib.md5(line.strip().lower().encode("utf-8")).digest()[:8], "big")


_DIGEST = methodcaller("digest")


def _line_hashes(texts: list[str]) -> tuple[np.ndarray, list[str], np.ndarray]:
    """:func:`_line_hash` of every line (``text.split("\\n")``) of every text, in order, with the
    lines and each text's number of lines; the per-line work runs in ``map``, not in bytecode."""
    if not texts:
        return np.zeros(0, dtype=np.uint64), [], np.zeros(0, dtype=np.int64)
    lines, counts = _split_lines(texts)
    digests = b"".join(map(_DIGEST, map(hashlib.md5, map(str.encode, map(str.lower, map(str.strip, lines))))))
    hashes = np.frombuffer(digests, dtype=">u8")[::2].astype(np.uint64)  # first 8 bytes, big-endian
    return hashes, lines, counts


def _split_lines(texts: list[str]) -> tuple[list[str], np.ndarray]:
    """The lines (``text.split("\\n")``) of every text, one after the other, and each text's number of lines."""
    if not texts:
        return [], np.zeros(0, dtype=np.int64)
    lines = "\n".join(texts).split("\n")
    counts = np.fromiter((t.count("\n") + 1 for t in texts), dtype=np.int64, count=len(texts))
    return lines, counts


def _units(doc: Document, mode: str, span: int) -> list[tuple[int, list[int]]]:
    """The dedup units of a document: (hash, [indices of the lines or sentences it covers])."""
    if mode == "lines":
        return [(_line_hash(line), [i]) for i, line in enumerate(doc.text.split("\n"))]
    sentences = _sentences(doc.text)
    units = []
    for i in range(0, max(0, len(sentences) - span + 1)):
        norm = " ".join(s.lower() for s in sentences[i : i + span])
        h = int.from_bytes(hashlib.md5(norm.encode("utf-8")).digest()[:8], "big")
        units.append((h, list(range(i, i + span))))
    return units


def _sentences(text: str) -> list[str]:
    return [s for line in text.split("\n") for s in split_sentences(line)]


# _FILTER_KEPT_SENTENCES: a document the filter phase kept has at least rules.min_sentences
# sentences as _fewer_sentences counts them: C4LineRules keeps a page only when count_sentences
# over its kept lines reaches min_sentences, and writes those lines joined by "\n" (they come
# from splitlines, so none holds a "\n"): the very lines, and counts, _fewer_sentences sees. So
# dedup_apply re-counts only a text it changed; an unchanged one would always pass.


def _fewer_sentences(text: str, minimum: int) -> bool:
    """``len(_sentences(text)) < minimum``, counting no further than ``minimum``."""
    n = 0
    for line in text.split("\n"):
        n += count_sentences(line)
        if n >= minimum:
            return False
    return True


def _drop_sentences(text: str, remove: set[int]) -> str:
    lines, idx = [], 0
    for line in text.split("\n"):
        kept = []
        for s in split_sentences(line):
            if idx not in remove:
                kept.append(s)
            idx += 1
        if kept:
            lines.append(" ".join(kept))
    return "\n".join(lines)


# ----------------------------------------------------------------------------- the passes
# Top-level so an executor (process pool, Ray) can send them; each returns False when its unit was done.


def dedup_map(work: str, shard: int, mode: str, span: int, n_parts: int) -> bool:
    """(unit hash, owner, ordinal) of every line or span of the shard, partitioned by hash."""
    wd = Path(work)
    out = wd / "dedup" / f"map-{shard_name(shard)}.npy"
    marker = out.with_suffix(".done")
    if is_done(marker):
        return False
    outputs = [out, out.with_suffix(".offsets.npy")]
    if mode == "lines":
        t = pq.read_table(wd / "filter" / f"{shard_name(shard)}.parquet", columns=["id", "text", "url", "metadata", "ordinal"])
        hashes, _, counts = _line_hashes(t.column("text").to_pylist())
        save_npy(_line_hashes_path(wd, shard), hashes)  # for dedup_apply, which needs them again
        outputs.append(_line_hashes_path(wd, shard))
        owners = [_owner_key_of(i, u, m) for i, u, m in zip(*(t.column(c).to_pylist() for c in ("id", "url", "metadata")))]
        recs = np.zeros(hashes.size, dtype=LINE_DTYPE)
        recs["hash"] = hashes
        recs["owner"] = np.repeat(np.array(owners, dtype=np.uint64), counts)
        recs["ordinal"] = np.repeat(t.column("ordinal").to_numpy().astype(np.int64), counts)
    else:
        docs, ordinals = read_shard(wd, "filter", shard)
        rows = []
        for doc, o in zip(docs, ordinals):
            for h, _ in _units(doc, mode, span):
                rows.append((h, 0, o))  # spans: the first occurrence wins
        recs = np.array(rows, dtype=LINE_DTYPE)
    save_partitioned(out, recs, (recs["hash"] % np.uint64(n_parts)).astype(np.int64), n_parts)
    mark_done(outputs, marker)
    return True


def _line_hashes_path(wd: Path, shard: int) -> Path:
    """Where dedup_map leaves the hash of every line of the shard, in line order."""
    return wd / "dedup" / f"lines-{shard_name(shard)}.npy"


def dedup_reduce(work: str, part: int, n_shards: int, shard_size: int) -> bool:
    """The winning (ordinal, hash) of every unit of one partition, saved by shard."""
    wd = Path(work)
    out = wd / "dedup" / f"winners-{part:05d}.npy"
    marker = out.with_suffix(".done")
    if is_done(marker):
        return False
    recs = load_partition([wd / "dedup" / f"map-{shard_name(s)}.npy" for s in range(n_shards)], part, LINE_DTYPE)
    if recs.size:
        order = np.lexsort((recs["ordinal"], recs["owner"], recs["hash"]))
        recs = recs[order]
        first = np.ones(recs.size, dtype=bool)
        first[1:] = recs["hash"][1:] != recs["hash"][:-1]
        win = recs[first]
    else:
        win = recs
    winners = np.zeros(win.size, dtype=WINNER_DTYPE)
    winners["ordinal"], winners["hash"] = win["ordinal"], win["hash"]
    save_partitioned(out, winners, (winners["ordinal"] // shard_size).astype(np.int64), n_shards)
    mark_done([out, out.with_suffix(".offsets.npy")], marker)
    return True


def dedup_apply(work: str, shard: int, cfg_json: str, n_parts: int) -> bool:
    """Remove the lines (or sentence spans) this document does not own, then re-check sentences."""
    cfg = CleanConfig.model_validate_json(cfg_json)
    wd = Path(work)
    mode, span = cfg.line_dedup.mode, cfg.line_dedup.span_sentences
    min_sent = cfg.rules.min_sentences
    owned: set[tuple[int, int]] | None = None
    by_lines: dict[int, tuple[list[str], list[bool], int, int]] | None = None

    def decide(doc: Document, o: int, stats: ShardStats) -> str | None:
        nonlocal owned, by_lines
        if owned is None:  # loaded on first use: a shard already done never reads it
            win = load_partition([wd / "dedup" / f"winners-{p:05d}.npy" for p in range(n_parts)], shard, WINNER_DTYPE)
            owned = set(zip(win["ordinal"].tolist(), win["hash"].tolist()))
            if mode == "lines":
                by_lines = _line_decisions(wd, shard, owned)
        if by_lines is not None:
            lines, keep, n_global, n_local = by_lines[o]
            if n_global:
                stats.lines["line:global_duplicate"] += n_global
            if n_local:
                stats.lines["line:local_duplicate"] += n_local
            if n_global or n_local:
                kept = list(compress(lines, keep))
                if not kept:
                    return "all_lines_duplicate"
                doc.text = "\n".join(kept)
                if min_sent is not None and _fewer_sentences(doc.text, min_sent):
                    return "too_few_sentences_after_dedup"
            # else: the text is the filter's, which has min_sentences (see _FILTER_KEPT_SENTENCES)
            return None
        seen: set[int] = set()
        remove: set[int] = set()
        for h, covered in _units(doc, mode, span):
            if (o, h) not in owned:
                remove.update(covered)
                if mode == "lines":
                    stats.lines["line:global_duplicate"] += 1
            elif h in seen:
                remove.update(covered)
                if mode == "lines":
                    stats.lines["line:local_duplicate"] += 1
            seen.add(h)
        if mode == "lines":
            lines = [ln for i, ln in enumerate(doc.text.split("\n")) if i not in remove]
            doc.text = "\n".join(lines)
            if not lines:
                return "all_lines_duplicate"
        elif remove:
            stats.lines["sentence:span_duplicate"] += len(remove)
            doc.text = _drop_sentences(doc.text, remove)
            if not doc.text:
                return "all_spans_duplicate"
            if len(doc.text.split()) < cfg.line_dedup.min_words_after_span_removal:
                return "span_duplicates"
        if min_sent is not None and remove and _fewer_sentences(doc.text, min_sent):  # (as above)
            return "too_few_sentences_after_dedup"
        return None

    return rewrite_shard(wd, "filter", "dedup", shard, cfg.dropped_samples, decide, adds_metadata_only=True)


def _line_decisions(wd: Path, shard: int, owned: set[tuple[int, int]]) -> dict[int, tuple[list[str], list[bool], int, int]]:
    """Line mode, for every document of the shard (by ordinal): its lines, which are kept, and
    how many go as global duplicates (another page owns the line) and as local ones (owned,
    but already seen earlier in the page): what the per-line loop of ``dedup_apply`` decides."""
    table = pq.read_table(wd / "filter" / f"{shard_name(shard)}.parquet", columns=["text", "ordinal"])
    ordinals = table.column("ordinal").to_numpy().astype(np.int64)
    texts = table.column("text").to_pylist()
    lines, counts = _split_lines(texts)
    # the hashes dedup_map computed from the same texts (computed again for its work left by an
    # earlier version, which did not keep them)
    saved = _line_hashes_path(wd, shard)
    hashes = np.load(saved) if saved.exists() else None
    if hashes is None or hashes.size != len(lines):
        hashes = _line_hashes(texts)[0]
    line_ord = np.repeat(ordinals, counts)
    is_owned = np.fromiter(map(owned.__contains__, zip(line_ord.tolist(), hashes.tolist())), dtype=bool, count=hashes.size)
    # a line whose hash an earlier line of the same document has
    doc = np.repeat(np.arange(ordinals.size), counts)
    order = np.lexsort((np.arange(hashes.size), hashes, doc))
    repeat = np.zeros(hashes.size, dtype=bool)
    repeat[order[1:]] = (doc[order[1:]] == doc[order[:-1]]) & (hashes[order[1:]] == hashes[order[:-1]])
    local = is_owned & repeat
    keep = (is_owned & ~repeat).tolist()
    n_global = np.bincount(doc, weights=~is_owned, minlength=ordinals.size).astype(np.int64).tolist()
    n_local = np.bincount(doc, weights=local, minlength=ordinals.size).astype(np.int64).tolist()
    ends = np.cumsum(counts).tolist()
    out = {}
    start = 0
    for r, o in enumerate(ordinals.tolist()):
        end = ends[r]
        out[o] = (lines[start:end], keep[start:end], n_global[r], n_local[r])
        start = end
    return out
