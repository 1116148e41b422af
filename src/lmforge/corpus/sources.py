"""Corpus sources: the embedded default, local files and Hugging Face datasets.

Every input spec resolves to a reader that yields :class:`Document` objects in a stable
order. Bad input raises :class:`CorpusError` naming the file (and line or record); the
caller decides, by ``on_bad_input``, whether that stops the run or is counted and skipped.

Reading is bounded by ``max_document_bytes`` (``clean.max_document_bytes``) while it happens: a
line is read ``limit + 1`` bytes at most, and an over-long one consumed in chunks without being
held; a WARC record's Content-Length is checked before its payload is read; a Parquet batch's
cells are measured before they become Python strings. A reader yields a :class:`TooLong` in
place of such a document, and ``read_counted`` drops and counts it, or calls it bad input
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import parse_qs

from ..bounded import DEFAULT_MAX_DOCUMENT_BYTES, rest_of_file, rest_of_line, skip
from .document import CorpusError, Document
from .stdlib import site_package_roots, stdlib_documents

TEXT_SUFFIXES = (".txt",)
JSONL_SUFFIXES = (".jsonl", ".jsonl.gz")
PARQUET_SUFFIXES = (".parquet",)
WET_SUFFIXES = (".warc.wet.gz", ".wet.gz", ".warc.wet")
SUPPORTED_SUFFIXES = TEXT_SUFFIXES + JSONL_SUFFIXES + PARQUET_SUFFIXES + WET_SUFFIXES
_SNIFF = 8192
_MAX_WARC_HEADER = 1 << 20  # bytes of one WARC record's header block, at most
_CONTENT_LENGTH = re.compile(r"[0-9]{1,19}")  # digits only: no sign, no "_", no spaces inside
TOO_LONG = "too_long_input"  # the drop reason of a document over max_document_bytes
_TOO_LONG_LISTED = 20  # where the first over-long documents were, kept in the report


@dataclass(frozen=True, slots=True)
class TooLong:
    """In place of a document over the limit: where it was (``path:line``, a record, a row) and
    its size in bytes as read (the line's, the record's payload, the row's cells)."""

    where: str
    size: int


@dataclass
class InputReport:
    """What reading the inputs did: counted per input, so nothing is lost silently."""

    documents: dict[str, int] = field(default_factory=dict)
    skipped: list[dict[str, Any]] = field(default_factory=list)
    # documents over max_document_bytes, dropped: how many, their bytes and where the first were
    too_long: dict[str, Any] = field(default_factory=lambda: {"documents": 0, "bytes": 0, "first": []})

    def add_too_long(self, label: str, item: TooLong) -> None:
        self.too_long["documents"] += 1
        self.too_long["bytes"] += item.size
        if len(self.too_long["first"]) < _TOO_LONG_LISTED:
            self.too_long["first"].append({"input": label, "where": item.where, "bytes": item.size})

    def merge_too_long(self, other: dict[str, Any]) -> None:
        self.too_long["documents"] += other["documents"]
        self.too_long["bytes"] += other["bytes"]
        self.too_long["first"] = (self.too_long["first"] + other["first"])[:_TOO_LONG_LISTED]

    def to_dict(self) -> dict[str, Any]:
        return {"documents_per_input": dict(self.documents), "skipped_inputs": list(self.skipped),
                "too_long": dict(self.too_long)}


# ----------------------------------------------------------------------------- helpers


def _suffix_kind(path: str | Path) -> str | None:
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
                yield _from_record(obj, default_id=f"{rel}:{lineno}", source=path)

    return _gzip_guard(path, gen)


def _from_record(obj: dict[str, Any], default_id: str, source: str) -> Document:
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
                    yield _from_record(obj, default_id=f"{rel}:{row}", source=path)
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
_READERS: dict[str, Callable[[str, str, str, int], Iterator[Document | TooLong]]] = {
    "text": read_text,
    "jsonl": read_jsonl,
    "parquet": read_parquet,
    "wet": read_wet,
}


# ----------------------------------------------------------------------------- Hugging Face


def parse_hf_spec(spec: str) -> tuple[str, str | None, str]:
    """``hf:NAME?config=CFG&split=SPLIT`` -> (name, config, split)."""
    body = spec[len("hf:") :]
    name, _, query = body.partition("?")
    if not name:
        raise CorpusError(f"{spec}: no dataset name after 'hf:'")
    q = parse_qs(query)
    unknown = set(q) - {"config", "split"}
    if unknown:
        raise CorpusError(f"{spec}: unknown option(s) {sorted(unknown)}; allowed: config, split")
    return name, (q.get("config") or [None])[0], (q.get("split") or ["train"])[0]


def read_hf(spec: str, max_documents: int | None, limit: int = DEFAULT_MAX_DOCUMENT_BYTES) -> Iterator[Document | TooLong]:
    """A Hugging Face dataset by name (streamed) or a directory made by ``save_to_disk``."""
    try:
        import datasets
    except ImportError:
        raise CorpusError(f"{spec}: the 'datasets' package is needed (pip install 'lmforge[hf]')") from None
    name, config, split = parse_hf_spec(spec)
    local = Path(name)
    try:
        if local.is_dir() and ((local / "state.json").exists() or (local / "dataset_dict.json").exists()):
            ds = datasets.load_from_disk(str(local))
            if isinstance(ds, datasets.DatasetDict):
                if split not in ds:
                    raise CorpusError(f"{spec}: split {split!r} not in {sorted(ds)}")
                ds = ds[split]
        else:
            ds = datasets.load_dataset(name, config, split=split, streaming=True)
    except CorpusError:
        raise
    except Exception as exc:
        raise CorpusError(f"{spec}: could not open the dataset: {type(exc).__name__}: {exc}") from None
    for i, row in enumerate(ds):
        if max_documents is not None and i >= max_documents:
            return
        if not isinstance(row.get("text"), str):
            raise CorpusError(f"{spec}: row {i} has no string field 'text'")
        if len(row["text"]) > limit // 4 and (size := len(row["text"].encode("utf-8", "surrogatepass"))) > limit:
            yield TooLong(f"{spec}: row {i}", size)
            continue
        yield _from_record(dict(row), default_id=f"{name}:{split}:{i}", source=f"hf:{name}")


# ----------------------------------------------------------------------------- resolution


@dataclass(frozen=True)
class Input:
    """One resolved input: a label for reports and what to read. Plain values only, so that it
    can be sent to another process (or machine) and read there."""

    label: str
    kind: str  # "file", "stdlib" or "hf"
    path: str = ""  # the file as named (in messages and documents' source); the dataset spec (kind "hf")
    location: str = ""  # where the file is opened: an absolute path (the same on every machine) or a URI
    rel: str = ""  # the file's path under the input it was found in: its documents' default ids
    include_site_packages: bool | list[str] = False  # kind "stdlib"
    max_documents: int | None = None  # kind "hf": rows streamed at most
    size: int | None = None  # bytes stored, where known
    version: str = ""  # a URI's ETag or modification time (in the stage's fingerprint)

    def read(self, limit: int = DEFAULT_MAX_DOCUMENT_BYTES) -> Iterator[Document | TooLong]:
        """The input's documents, a ``TooLong`` in place of each over ``limit`` bytes."""
        if self.kind == "stdlib":
            return stdlib_documents(self.include_site_packages)  # the project's own: no limit
        if self.kind == "hf":
            return read_hf(self.path, self.max_documents, limit)
        return _READERS[_suffix_kind(self.path)](self.location, self.path, self.rel, limit)  # type: ignore[index]


def resolve_inputs(specs: list[str], include_site_packages: bool | list[str] = False, max_documents: int | None = None) -> list[Input]:
    """Expand input specs into readers, in a stable order. A missing path is a CorpusError."""
    inputs: list[Input] = []
    for spec in specs:
        if spec == "stdlib":
            site_package_roots(include_site_packages)  # an unknown package fails here, before any reading
            inputs.append(Input("stdlib", "stdlib", include_site_packages=include_site_packages))
            continue
        if spec.startswith("hf:"):
            parse_hf_spec(spec)  # fail early on a malformed spec
            inputs.append(Input(spec, "hf", path=spec, max_documents=max_documents))
            continue
        if is_uri(spec):
            inputs += _uri_inputs(spec)
            continue
        path = Path(spec)
        if not path.exists():
            raise CorpusError(f"{spec}: input path not found")
        if path.is_dir():
            files = sorted(p for p in path.rglob("*") if p.is_file() and _suffix_kind(p) is not None)
            if not files:
                raise CorpusError(f"{spec}: directory has no input files (supported: {', '.join(SUPPORTED_SUFFIXES)})")
            for f in files:
                inputs.append(_file_input(f, f.relative_to(path).as_posix()))
        else:
            if _suffix_kind(path) is None:
                raise CorpusError(f"{spec}: unsupported file type (supported: {', '.join(SUPPORTED_SUFFIXES)})")
            inputs.append(_file_input(path, path.name))
    return inputs


def _file_input(path: Path, rel: str) -> Input:
    return Input(str(path), "file", path=str(path), location=str(path.absolute()), rel=rel, size=path.stat().st_size)


def _uri_inputs(spec: str) -> list[Input]:
    """The supported files at a URI (one file, or every one under a folder or prefix), listed
    through fsspec: ``s3://`` needs ``s3fs``, ``gs://`` ``gcsfs``, ``az://`` ``adlfs``."""
    try:
        import fsspec

        fs, root = fsspec.core.url_to_fs(spec)
        if fs.isdir(root):
            found = fs.find(root, detail=True)
            if not any(_suffix_kind(p) for p in found):
                raise CorpusError(f"{spec}: no input files there (supported: {', '.join(SUPPORTED_SUFFIXES)})")
        elif fs.isfile(root):
            if _suffix_kind(root) is None:
                raise CorpusError(f"{spec}: unsupported file type (supported: {', '.join(SUPPORTED_SUFFIXES)})")
            found = {root: fs.info(root)}
        else:
            raise CorpusError(f"{spec}: input path not found")
    except CorpusError:
        raise
    except Exception as exc:  # the protocol's package missing (ImportError), credentials, the network
        raise CorpusError(f"{spec}: cannot list the input: {type(exc).__name__}: {exc}") from None
    inputs = []
    for key in sorted(p for p in found if _suffix_kind(p) is not None):
        info = found[key]
        uri = fs.unstrip_protocol(key)
        rel = key[len(root):].lstrip("/") or key.rsplit("/", 1)[-1]
        version = next((str(info[k]) for k in ("ETag", "etag", "md5Hash", "mtime", "LastModified", "last_modified", "created")
                        if info.get(k) is not None), "")
        inputs.append(Input(uri, "file", path=uri, location=uri, rel=rel, size=info.get("size"), version=version))
    return inputs


def iter_documents(
    specs: list[str],
    on_bad_input: str = "fail",
    report: InputReport | None = None,
    include_site_packages: bool | list[str] = False,
    max_documents: int | None = None,
    max_document_bytes: int = DEFAULT_MAX_DOCUMENT_BYTES,
    on_too_long: str = "drop",
) -> Iterator[Document]:
    """All documents of all inputs. With ``on_bad_input='skip'`` a bad input is recorded in
    ``report.skipped`` (with how many of its documents were read before the problem) and
    reading goes on; with ``'fail'`` the CorpusError propagates. A document over
    ``max_document_bytes`` is dropped and counted (``on_too_long='drop'``) or is bad input
    (``'bad_input'``)."""
    report = report if report is not None else InputReport()
    for found in resolve_each(specs, on_bad_input, include_site_packages, max_documents):
        if isinstance(found, dict):
            report.skipped.append(found)
            continue
        for inp in found:
            yield from read_counted(inp, on_bad_input, report, max_documents, max_document_bytes, on_too_long)


def resolve_each(
    specs: list[str], on_bad_input: str, include_site_packages: bool | list[str] = False, max_documents: int | None = None
) -> Iterator[list[Input] | dict[str, Any]]:
    """Each spec's inputs, in order; for a spec that cannot be resolved, its CorpusError
    (``on_bad_input='fail'``) or, with ``'skip'``, its record for ``InputReport.skipped``."""
    for spec in specs:
        try:
            found = resolve_inputs([spec], include_site_packages, max_documents)
        except CorpusError as exc:
            if on_bad_input == "fail":
                raise
            yield {"input": spec, "error": str(exc), "documents_read": 0}
            continue
        yield found


def read_counted(inp: Input, on_bad_input: str, report: InputReport, max_documents: int | None,
                 max_document_bytes: int = DEFAULT_MAX_DOCUMENT_BYTES, on_too_long: str = "drop",
                 too_long: Callable[[int], None] | None = None) -> Iterator[Document]:
    """The documents of one input, at most ``max_documents``, counted in ``report``; a bad input
    raises (``on_bad_input='fail'``) or is recorded in ``report.skipped`` and ends early. A
    document over ``max_document_bytes`` is counted in ``report.too_long`` and dropped
    (``on_too_long='drop'``; ``too_long`` is called with its size) once the reader has gone past
    it (a WARC record is announced before its payload is read, which may be missing), or is bad
    input (``'bad_input'``)."""
    count = 0
    over: TooLong | None = None  # a document too long, counted once the reader is past it

    def drop(item: TooLong) -> None:
        report.add_too_long(inp.label, item)
        if too_long is not None:
            too_long(item.size)

    try:
        for doc in inp.read(max_document_bytes):
            if over is not None:
                drop(over)
                over = None
            if type(doc) is TooLong:
                if on_too_long != "drop":
                    raise CorpusError(f"{doc.where}: a document of {doc.size} bytes, over clean.max_document_bytes "
                                      f"({max_document_bytes})")
                over = doc
                continue
            if max_documents is not None and count >= max_documents:
                break
            count += 1
            yield doc
        if over is not None:
            drop(over)
    except (CorpusError, OSError, MemoryError) as exc:
        if isinstance(exc, CorpusError):
            err = exc
        elif isinstance(exc, MemoryError):
            err = CorpusError(f"{inp.label}: out of memory reading it (a record too large; see clean.max_document_bytes)")
        else:
            err = CorpusError(f"{inp.label}: cannot read: {exc}")
        if on_bad_input == "fail":
            raise err from None
        report.skipped.append({"input": inp.label, "error": str(err), "documents_read": count})
    finally:
        report.documents[inp.label] = report.documents.get(inp.label, 0) + count
