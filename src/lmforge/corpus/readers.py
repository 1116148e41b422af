"""The readers of corpus files, one per format: ``.txt`` (a document per file), JSON lines,
Parquet and Common Crawl WET, local or at a URI through fsspec, gzip-compressed where the name
says so. Each yields :class:`Document` objects in a stable order, and raises :class:`CorpusError`
naming the file (and line or record) on bad input.

Reading is bounded by ``max_document_bytes`` (``clean.max_document_bytes``) while it happens: a
line is read ``limit + 1`` bytes at most, and an over-long one consumed in chunks without being
held; a WARC record's Content-Length is checked before its payload is read; a Parquet batch's
cells are measured before they become Python strings. A reader yields a :class:`TooLong` in
place of such a document, and ``sources.read_counted`` drops and counts it, or calls it bad input
(``on_too_long``). A JSON line Python's parser cannot hold (a number of more digits than
``int`` converts, nesting deeper than the recursion limit) is bad input naming its line.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import re
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from ..bounded import DEFAULT_MAX_DOCUMENT_BYTES, rest_of_file, rest_of_line, skip
from .document import CorpusError, Document

TEXT_SUFFIXES = (".txt",)
JSONL_SUFFIXES = (".jsonl", ".jsonl.gz")
PARQUET_SUFFIXES = (".parquet",)
WET_SUFFIXES = (".warc.wet.gz", ".wet.gz", ".warc.wet")
SUPPORTED_SUFFIXES = TEXT_SUFFIXES + JSONL_SUFFIXES + PARQUET_SUFFIXES + WET_SUFFIXES
_SNIFF = 8192
_MAX_WARC_HEADER = 1 << 20  # bytes of one WARC record's header block, at most
_CONTENT_LENGTH = re.compile(r"[0-9]{1,19}")  # digits only: no sign, no "_", no spaces inside


@dataclass(frozen=True, slots=True)
class TooLong:
    """In place of a document over the limit: where it was (``path:line``, a record, a row) and
    its size in bytes as read (the line's, the record's payload, the row's cells)."""

    where: str
    size: int


# ----------------------------------------------------------------------------- helpers


def suffix_kind(path: str | Path) -> str | None:
    name = str(path).lower()
    for kind, suffixes in (
        ("wet", WET_SUFFIXES),
        ("jsonl", JSONL_SUFFIXES),
        ("parquet", PARQUET_SUFFIXES),
        ("text", TEXT_SUFFIXES),
    ):
        if name.endswith(suffixes):
            return kind
    return None


def is_uri(spec: str) -> bool:
    """``s3://bucket/key``, ``gs://...``, ``file://...``: read through fsspec (not ``hf:``)."""
    return "://" in spec


def _open_raw(location: str) -> BinaryIO:
    if is_uri(location):
        import fsspec

        return fsspec.open(location, "rb").open()  # closing it closes what fsspec opened
    return open(location, "rb")


def _open_binary(location: str) -> BinaryIO:
    raw = _open_raw(location)
    if location.lower().endswith(".gz"):
        return _Gunzip(raw)
    return raw


class _Gunzip(gzip.GzipFile):
    """A gzip stream over an open file, closing that file with itself."""

    def __init__(self, raw: BinaryIO):
        super().__init__(fileobj=raw, mode="rb")
        self._raw = raw

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._raw.close()


def _check_not_binary(head: bytes, path: str) -> None:
    if b"\x00" in head[:_SNIFF]:
        raise CorpusError(f"{path}: binary file (NUL bytes in the first {_SNIFF} bytes); expected text")


def _decode(data: bytes, path: str, where: str = "") -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CorpusError(f"{path}{where}: invalid UTF-8 at byte {exc.start}: {exc.reason}") from None


def _gzip_guard(path: str, fn: Callable[[], Iterator[Document]]) -> Iterator[Document]:
    """Turn the decompressor's errors into a CorpusError naming the file."""
    try:
        yield from fn()
    except EOFError:
        raise CorpusError(f"{path}: truncated gzip stream (the file ends before the compressed data does)") from None
    except (gzip.BadGzipFile, zlib.error) as exc:
        raise CorpusError(f"{path}: corrupt gzip data: {exc}") from None


# ----------------------------------------------------------------------------- readers


def read_text(location: str, path: str, rel: str, limit: int = DEFAULT_MAX_DOCUMENT_BYTES) -> Iterator[Document | TooLong]:
    """A ``.txt`` file is one document (its id: the path relative to the input)."""
    with _open_raw(location) as fh:
        data = fh.read(limit + 1)
        if len(data) > limit:
            _check_not_binary(data, path)
            yield TooLong(path, len(data) + rest_of_file(fh))
            return
    _check_not_binary(data, path)
    text = _decode(data, path)
    yield Document(id=rel, text=text, source=path)


def read_jsonl(location: str, path: str, rel: str, limit: int = DEFAULT_MAX_DOCUMENT_BYTES) -> Iterator[Document | TooLong]:
    """One JSON object per line: ``text`` required; ``id``, ``url``, ``timestamp`` optional; the
    rest is metadata. A line over ``limit`` bytes (its line end not counted) is a ``TooLong``."""

    def gen() -> Iterator[Document | TooLong]:
        with _open_binary(location) as fh:
            readline, cap = fh.readline, limit + 1
            lineno = 0
            while raw := readline(cap):
                lineno += 1
                if lineno == 1:
                    _check_not_binary(raw, path)
                if len(raw) > limit and raw[-1] != 10:  # is_cut(raw, limit), inline: it runs on every line
                    yield TooLong(f"{path}:{lineno}", len(raw) + rest_of_line(fh))
                    continue
                line = _decode(raw, path, f":{lineno}").strip()
                if not line:
                    continue
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise CorpusError(f"{path}:{lineno}: not valid JSON: {exc.msg}") from None
                except ValueError as exc:  # a number of more digits than int() converts
                    raise CorpusError(f"{path}:{lineno}: JSON that Python cannot read: {str(exc).split(';')[0]}") from None
                except RecursionError:
                    raise CorpusError(f"{path}:{lineno}: JSON nested too deeply to read") from None
                if not isinstance(obj, dict) or not isinstance(obj.get("text"), str):
                    raise CorpusError(f"{path}:{lineno}: expected an object with a string field 'text'")
                yield from_record(obj, default_id=f"{rel}:{lineno}", source=path)

    return _gzip_guard(path, gen)


def from_record(obj: dict[str, Any], default_id: str, source: str) -> Document:
    meta = {k: v for k, v in obj.items() if k not in ("text", "id", "url", "timestamp")}
    ts = obj.get("timestamp")
    return Document(
        id=str(obj["id"]) if obj.get("id") is not None else default_id,
        text=obj["text"],
        url=str(obj["url"]) if obj.get("url") else None,
        timestamp=str(ts) if ts is not None else None,
        source=source,
        metadata=_jsonable(meta),
    )


def _jsonable(meta: dict[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(meta, default=str)) if meta else {}


def read_parquet(location: str, path: str, rel: str, limit: int = DEFAULT_MAX_DOCUMENT_BYTES) -> Iterator[Document | TooLong]:
    """A Parquet file's rows, ``text`` required. A row whose string and binary cells hold more than
    ``limit`` bytes together is a ``TooLong``, measured on the batch's columns before any of its
    cells becomes a Python object (a batch is as much as pyarrow decodes at once)."""
    import pyarrow.parquet as pq

    with contextlib.ExitStack() as files:
        try:
            pf = pq.ParquetFile(files.enter_context(_open_raw(location)))
        except Exception as exc:  # pyarrow raises ArrowInvalid / OSError for non-Parquet bytes
            raise CorpusError(f"{path}: not a readable Parquet file: {exc}") from None
        if "text" not in pf.schema_arrow.names:
            raise CorpusError(f"{path}: Parquet file has no 'text' column (columns: {pf.schema_arrow.names})")
        row = 0
        try:
            for batch in pf.iter_batches(batch_size=4096):
                sizes = _over_long_rows(batch, limit)
                if sizes is None:  # the usual batch: every row within the limit
                    rows: Iterator[dict[str, Any] | int] = iter(batch.to_pylist())
                else:  # the rows over the limit as their sizes, the others read
                    kept = iter(batch.filter([n <= limit for n in sizes]).to_pylist())
                    rows = (n if n > limit else next(kept) for n in sizes)
                for obj in rows:
                    row += 1
                    if isinstance(obj, int):
                        yield TooLong(f"{path}: row {row}", obj)
                        continue
                    if not isinstance(obj.get("text"), str):
                        raise CorpusError(f"{path}: row {row}: 'text' is not a string")
                    yield from_record(obj, default_id=f"{rel}:{row}", source=path)
        except CorpusError:
            raise
        except Exception as exc:
            raise CorpusError(f"{path}: failed reading Parquet after {row} rows: {exc}") from None


def read_wet(location: str, path: str, rel: str, limit: int = DEFAULT_MAX_DOCUMENT_BYTES) -> Iterator[Document | TooLong]:
    """Common Crawl WET: WARC records whose ``conversion`` payloads are the extracted page text.
    A record's Content-Length is checked before its payload is read: digits only, and a
    conversion payload over ``limit`` bytes is a ``TooLong`` (consumed in chunks, as is every
    other record's payload, which is not kept)."""

    def gen() -> Iterator[Document | TooLong]:
        with _open_binary(location) as fh:
            first = True
            while True:
                line = fh.readline(_MAX_WARC_HEADER)
                if not line:
                    return
                if not line.strip():
                    continue
                if not line.startswith(b"WARC/"):
                    if first:
                        raise CorpusError(f"{path}: not a WARC/WET file (first line: {line[:40]!r})")
                    raise CorpusError(f"{path}: malformed WARC record header: {line[:60]!r}")
                first = False
                headers: dict[str, str] = {}
                room = _MAX_WARC_HEADER - len(line)
                while True:
                    h = fh.readline(room + 1)
                    room -= len(h)
                    if room < 0:
                        raise CorpusError(f"{path}: WARC record header longer than {_MAX_WARC_HEADER} bytes")
                    if not h:
                        raise CorpusError(f"{path}: file ends inside a WARC header")
                    if not h.strip():
                        break
                    key, _, value = h.decode("utf-8", "replace").partition(":")
                    headers[key.strip().lower()] = value.strip()
                record_id = headers.get("warc-record-id", "").strip("<>")
                at = f"{path} record {record_id}" if record_id else path
                given = headers.get("content-length")
                if given is None or not _CONTENT_LENGTH.fullmatch(given):
                    shown = "" if given is None else f" ({given[:40]!r})"
                    raise CorpusError(f"{at}: WARC record without a valid Content-Length{shown}")
                length = int(given)
                if headers.get("warc-type") != "conversion" or length > limit:
                    if headers.get("warc-type") == "conversion":
                        yield TooLong(at, length)  # before its payload is read: it may be bad input
                    done = skip(fh, length)
                    if done < length:
                        raise CorpusError(f"{at}: truncated WARC record ({done} of {length} bytes)")
                    continue
                payload = fh.read(length)
                if len(payload) < length:
                    raise CorpusError(f"{at}: truncated WARC record ({len(payload)} of {length} bytes)")
                text = _decode(payload, path, f" record {record_id}")
                yield Document(
                    id=record_id or f"{rel}:{fh.tell()}",
                    text=text,
                    url=headers.get("warc-target-uri"),
                    timestamp=headers.get("warc-date"),
                    source=path,
                    metadata={k: headers[k] for k in ("content-type", "warc-identified-content-language") if k in headers},
                )

    return _gzip_guard(path, gen)


def _over_long_rows(batch: Any, limit: int) -> list[int] | None:
    """Each row's bytes in its string and binary cells, when a row's are over ``limit``; else None."""
    import pyarrow as pa
    import pyarrow.compute as pc

    total = None
    for column in batch.columns:
        t = column.type
        if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t):
            n = pc.fill_null(pc.binary_length(column), 0).cast(pa.int64())
            total = n if total is None else pc.add(total, n)
    if total is None or len(total) == 0 or pc.max(total).as_py() <= limit:
        return None
    return total.to_pylist()


# each reader: (where to open it, its name in messages and in documents' ``source``, its path
# under the input it was found in, the limit on a document's bytes)
READERS: dict[str, Callable[[str, str, str, int], Iterator[Document | TooLong]]] = {
    "text": read_text,
    "jsonl": read_jsonl,
    "parquet": read_parquet,
    "wet": read_wet,
}
