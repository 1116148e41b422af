"""The pre-tokenized token store: the clean corpus encoded once per tokenizer kind. This module is
the format: writing a split (``SplitWriter``), reading and checking a store (``TokenStore``); the
stage that encodes the corpus into it is ``tokens_stage.py``.

Layout of ``<output>/<kind>/``::

    manifest.json                 kind, tokenizer hash, dtype, per-split counts, file sizes and sha256
    <split>/tokens.bin            token ids (uint16 when the vocabulary fits, else uint32)
    <split>/flags.bin             uint8 per token: the bits of ``lmforge.token_flags``
    <split>/doc_offsets.bin       int64, documents + 1 entries: document d is tokens[off[d]:off[d+1]]
    <split>/doc_ids.jsonl         one JSON string per document, in order
    mixture.png                   with ``tokenize.mixture``: each source's share of the train tokens

With ``tokenize.mixture`` the train split holds each source's documents as often as its weight
says (``tokenization/mixture.py``); the manifest's ``mixture`` has what each source got.

Word starts come from the tokenizer's word ids, sentence starts from the tokens' character
offsets and the sentence splitter, never from a spelling such as WordPiece's ``##``.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
from tokenizers import Encoding

from ..artifacts import sha256_file
from ..cleaning.text import sentence_starts
from ..errors import LmforgeError
from ..token_flags import SENTENCE_START, WORD_START
from .train import tokenizer_sha256

FILES = ("tokens.bin", "flags.bin", "doc_offsets.bin", "doc_ids.jsonl")


class StoreError(LmforgeError, RuntimeError):
    """A token store that is missing, corrupt, or does not match what was asked for."""


def token_dtype(vocab_size: int) -> np.dtype:
    return np.dtype(np.uint16) if vocab_size <= 2**16 else np.dtype(np.uint32)


def token_flags(enc: Encoding, text: str) -> np.ndarray:
    """Word-start and sentence-start flags of one document's tokens."""
    n = len(enc.ids)
    flags = np.zeros(n, dtype=np.uint8)
    if n == 0:
        return flags
    words = np.array([-1 if w is None else w for w in enc.word_ids], dtype=np.int64)
    starts = np.ones(n, dtype=bool)
    starts[1:] = words[1:] != words[:-1]
    flags[starts] |= WORD_START
    # The token holding a sentence's first character is the first token ending after it; the
    # sentence starts at the first token of that token's word (a lone "▁" or " " piece
    # belongs to the word that follows it).
    ends = np.array([e for _, e in enc.offsets], dtype=np.int64)
    pos = np.array(sentence_starts(text), dtype=np.int64)
    idx = np.searchsorted(ends, pos, side="right")
    idx = idx[idx < n]
    word_first = np.maximum.accumulate(np.where(starts, np.arange(n), 0))
    flags[word_first[idx]] |= SENTENCE_START
    return flags


class SplitWriter:
    """Appends one split's arrays, hashing as it writes."""

    def __init__(self, directory: Path):
        directory.mkdir(parents=True)
        self.files: dict[str, BinaryIO] = {n: open(directory / n, "wb") for n in FILES}
        self.hashes = {n: hashlib.sha256() for n in FILES}
        self.sizes = dict.fromkeys(FILES, 0)
        self.tokens = 0
        self.documents = 0
        self._write("doc_offsets.bin", np.zeros(1, dtype=np.int64).tobytes())

    def _write(self, name: str, data: bytes) -> None:
        self.files[name].write(data)
        self.hashes[name].update(data)
        self.sizes[name] += len(data)

    def append_part(self, part: Path, select: np.ndarray | None = None, dtype: np.dtype | None = None) -> None:
        """Append one shard's encoded documents (written by ``tokens_stage.encode_shard``), in
        order; with ``select`` (a boolean per document; then ``dtype`` is the tokens'), only those."""
        lengths = np.load(part / "lengths.npy")
        if select is None or select.all():
            self._write("tokens.bin", (part / "tokens.bin").read_bytes())
            self._write("flags.bin", (part / "flags.bin").read_bytes())
            ids = (part / "doc_ids.jsonl").read_bytes()
        else:
            per_token = np.repeat(select, lengths)
            self._write("tokens.bin", np.fromfile(part / "tokens.bin", dtype=dtype)[per_token].tobytes())
            self._write("flags.bin", np.fromfile(part / "flags.bin", dtype=np.uint8)[per_token].tobytes())
            lines = (part / "doc_ids.jsonl").read_bytes().splitlines(keepends=True)
            ids = b"".join(line for line, keep in zip(lines, select) if keep)
            lengths = lengths[select]
        self._write("doc_offsets.bin", (self.tokens + np.cumsum(lengths, dtype=np.int64)).tobytes())
        self._write("doc_ids.jsonl", ids)
        self.tokens += int(lengths.sum())
        self.documents += len(lengths)

    def close(self) -> dict[str, Any]:
        for fh in self.files.values():
            fh.flush()
            os.fsync(fh.fileno())
            fh.close()
        return {
            "documents": self.documents,
            "tokens": self.tokens,
            "files": {n: {"bytes": self.sizes[n], "sha256": self.hashes[n].hexdigest()} for n in FILES},
        }


def format_mixture(mixture: dict[str, dict[str, Any]]) -> str:
    """The mixture's report as a table: per source, the train split before and after weighting."""
    lines = ["  train split by source (tokenize.mixture; validation and test as they are):",
             f"  {'source':28s} {'weight':>7s} {'max_tokens':>11s} {'docs before':>12s} {'docs after':>11s} "
             f"{'tokens before':>14s} {'tokens after':>13s} {'share before':>13s} {'target':>7s} {'realised':>9s}"]
    for name, e in mixture.items():
        cap = "-" if e["max_tokens"] is None else f"{e['max_tokens']:,}"
        lines.append(f"  {name[-28:]:28s} {e['weight']:7g} {cap:>11s} {e['documents_before']:12,} {e['documents_after']:11,} "
                     f"{e['tokens_before']:14,} {e['tokens_after']:13,} {e['share_before']:13.1%} {e['target_share']:7.1%} "
                     f"{e['realised_share']:9.1%}")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- reading


@dataclass
class SplitArrays:
    tokens: np.ndarray  # memory-mapped
    flags: np.ndarray
    doc_offsets: np.ndarray
    directory: Path

    @property
    def documents(self) -> int:
        return len(self.doc_offsets) - 1

    def document(self, d: int) -> np.ndarray:
        return self.tokens[self.doc_offsets[d] : self.doc_offsets[d + 1]]

    def doc_ids(self) -> list[str]:
        with open(self.directory / "doc_ids.jsonl", encoding="utf-8") as fh:
            return [json.loads(line) for line in fh]


class TokenStore:
    """A built store, checked against its manifest when opened."""

    def __init__(self, path: str | Path, tokenizer: str | Path | None = None):
        self.path = Path(path)
        manifest = self.path / "manifest.json"
        if not manifest.exists():
            raise StoreError(f"{self.path}: not a token store (no manifest.json); run `lmforge tokenize`")
        try:
            self.manifest = json.loads(manifest.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise StoreError(f"{manifest}: unreadable manifest: {exc}") from None
        if tokenizer is not None:
            self.check_tokenizer(tokenizer)

    def check_tokenizer(self, tokenizer: str | Path) -> None:
        """Fail unless the store was encoded with exactly this tokenizer."""
        sha = tokenizer_sha256(Path(tokenizer))
        if sha != self.manifest["tokenizer_sha256"]:
            raise StoreError(
                f"{self.path}: built with a different tokenizer (store: {self.manifest['tokenizer']} "
                f"sha256 {self.manifest['tokenizer_sha256'][:12]}, asked: {tokenizer} sha256 {sha[:12]}); "
                "rebuild it with `lmforge tokenize`"
            )

    def verify(self, full: bool = True) -> None:
        """Check every file's size (and with ``full``, its sha256) against the manifest."""
        for split, info in self.manifest["splits"].items():
            for name, want in info["files"].items():
                p = self.path / split / name
                if not p.exists():
                    raise StoreError(f"{p}: missing from the token store")
                size = p.stat().st_size
                if size != want["bytes"]:
                    raise StoreError(f"{p}: {size} bytes, the manifest says {want['bytes']} (truncated or modified)")
                if full and sha256_file(p) != want["sha256"]:
                    raise StoreError(f"{p}: checksum differs from the manifest (corrupt or modified)")

    def split(self, name: str) -> SplitArrays:
        if name not in self.manifest["splits"]:
            raise StoreError(f"{self.path}: no split {name!r} (has {sorted(self.manifest['splits'])})")
        self.verify(full=False)
        d = self.path / name
        dtype = np.dtype(self.manifest["dtype"])

        def mm(file: str, dt: np.dtype) -> np.ndarray:
            if (d / file).stat().st_size == 0:
                return np.zeros(0, dtype=dt)
            return np.memmap(d / file, dtype=dt, mode="r")

        return SplitArrays(mm("tokens.bin", dtype), mm("flags.bin", np.dtype(np.uint8)), mm("doc_offsets.bin", np.dtype(np.int64)), d)

    def summary(self) -> str:
        m = self.manifest
        total = sum(s["tokens"] for s in m["splits"].values())
        lines = [f"token store {m['kind']} at {self.path}: {total:,} tokens, vocab {m['vocab_size']}, dtype {m['dtype']}"]
        for name, s in m["splits"].items():
            lines.append(f"  {name:10s} {s['documents']:8,} documents {s['tokens']:12,} tokens")
        if m.get("mixture"):
            lines.append(format_mixture(m["mixture"]["sources"]))
        return "\n".join(lines)
