"""Corpus sources: the embedded default, local files and Hugging Face datasets.

Every input spec resolves to a reader that yields :class:`Document` objects in a stable
order. Bad input raises :class:`CorpusError` naming the file (and line or record); the
caller decides, by ``on_bad_input``, whether that stops the run or is counted and skipped.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import parse_qs

from .document import CorpusError, Document
from .stdlib import site_package_roots, stdlib_documents

TEXT_SUFFIXES = (".txt",)
JSONL_SUFFIXES = (".jsonl", ".jsonl.gz")
PARQUET_SUFFIXES = (".parquet",)
WET_SUFFIXES = (".warc.wet.gz", ".wet.gz", ".warc.wet")
SUPPORTED_SUFFIXES = TEXT_SUFFIXES + JSONL_SUFFIXES + PARQUET_SUFFIXES + WET_SUFFIXES
_SNIFF = 8192


@dataclass
class InputReport:
    """What reading the inputs did: counted per input, so nothing is lost silently."""

    documents: dict[str, int] = field(default_factory=dict)
    skipped: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"documents_per_input": dict(self.documents), "skipped_inputs": list(self.skipped)}


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


def read_text(location: str, path: str, rel: str) -> Iterator[Document]:
    """A ``.txt`` file is one document (its id: the path relative to the input)."""
    with _open_raw(location) as fh:
        data = fh.read()
    _check_not_binary(data, path)
    text = _decode(data, path)
    yield Document(id=rel, text=text, source=path)


def read_jsonl(location: str, path: str, rel: str) -> Iterator[Document]:
    """One JSON object per line: ``text`` required; ``id``, ``url``, ``timestamp`` optional; the rest is metadata."""

    def gen() -> Iterator[Document]:
        with _open_binary(location) as fh:
            for lineno, raw in enumerate(fh, start=1):
                if lineno == 1:
                    _check_not_binary(raw, path)
                line = _decode(raw, path, f":{lineno}").strip()
                if not line:
                    continue
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise CorpusError(f"{path}:{lineno}: not valid JSON: {exc.msg}") from None
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


def read_parquet(location: str, path: str, rel: str) -> Iterator[Document]:
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
                for obj in batch.to_pylist():
                    row += 1
                    if not isinstance(obj.get("text"), str):
                        raise CorpusError(f"{path}: row {row}: 'text' is not a string")
                    yield _from_record(obj, default_id=f"{rel}:{row}", source=path)
        except CorpusError:
            raise
        except Exception as exc:
            raise CorpusError(f"{path}: failed reading Parquet after {row} rows: {exc}") from None


def read_wet(location: str, path: str, rel: str) -> Iterator[Document]:
    """Common Crawl WET: WARC records whose ``conversion`` payloads are the extracted page text."""

    def gen() -> Iterator[Document]:
        with _open_binary(location) as fh:
            first = True
            while True:
                line = fh.readline()
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
                while True:
                    h = fh.readline()
                    if not h:
                        raise CorpusError(f"{path}: file ends inside a WARC header")
                    if not h.strip():
                        break
                    key, _, value = h.decode("utf-8", "replace").partition(":")
                    headers[key.strip().lower()] = value.strip()
                try:
                    length = int(headers["content-length"])
                except (KeyError, ValueError):
                    raise CorpusError(f"{path}: WARC record without a valid Content-Length") from None
                payload = fh.read(length)
                if len(payload) < length:
                    raise CorpusError(f"{path}: truncated WARC record ({len(payload)} of {length} bytes)")
                if headers.get("warc-type") != "conversion":
                    continue
                record_id = headers.get("warc-record-id", "").strip("<>")
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


# each reader: (where to open it, its name in messages and in documents' ``source``, its path
# under the input it was found in)
_READERS: dict[str, Callable[[str, str, str], Iterator[Document]]] = {
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


def read_hf(spec: str, max_documents: int | None) -> Iterator[Document]:
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

    def read(self) -> Iterator[Document]:
        if self.kind == "stdlib":
            return stdlib_documents(self.include_site_packages)
        if self.kind == "hf":
            return read_hf(self.path, self.max_documents)
        return _READERS[_suffix_kind(self.path)](self.location, self.path, self.rel)  # type: ignore[index]


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
) -> Iterator[Document]:
    """All documents of all inputs. With ``on_bad_input='skip'`` a bad input is recorded in
    ``report.skipped`` (with how many of its documents were read before the problem) and
    reading goes on; with ``'fail'`` the CorpusError propagates."""
    report = report if report is not None else InputReport()
    for found in resolve_each(specs, on_bad_input, include_site_packages, max_documents):
        if isinstance(found, dict):
            report.skipped.append(found)
            continue
        for inp in found:
            yield from read_counted(inp, on_bad_input, report, max_documents)


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


def read_counted(inp: Input, on_bad_input: str, report: InputReport, max_documents: int | None) -> Iterator[Document]:
    """The documents of one input, at most ``max_documents``, counted in ``report``; a bad input
    raises (``on_bad_input='fail'``) or is recorded in ``report.skipped`` and ends early."""
    count = 0
    try:
        for doc in inp.read():
            if max_documents is not None and count >= max_documents:
                break
            count += 1
            yield doc
    except (CorpusError, OSError) as exc:
        err = exc if isinstance(exc, CorpusError) else CorpusError(f"{inp.label}: cannot read: {exc}")
        if on_bad_input == "fail":
            raise err from None
        report.skipped.append({"input": inp.label, "error": str(err), "documents_read": count})
    finally:
        report.documents[inp.label] = report.documents.get(inp.label, 0) + count
