"""Corpus sources: the embedded default, local files and folders, URIs and Hugging Face datasets.

Every input spec resolves to :class:`Input` objects in a stable order, each read by its format's
reader (``readers.py``, ``huggingface.py``, ``stdlib.py``). Bad input raises :class:`CorpusError`
naming the file (and line or record); the caller decides, by ``on_bad_input``, whether that
stops the run or is counted and skipped (``InputReport``). A document over
``max_document_bytes`` comes from its reader as a ``TooLong``, and ``read_counted`` drops and
counts it, or calls it bad input (``on_too_long``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..bounded import DEFAULT_MAX_DOCUMENT_BYTES
from .document import CorpusError, Document
from .huggingface import parse_hf_spec, read_hf
from .readers import READERS, SUPPORTED_SUFFIXES, TooLong, is_uri, suffix_kind
from .stdlib import site_package_roots, stdlib_documents

TOO_LONG = "too_long_input"  # the drop reason of a document over max_document_bytes
_TOO_LONG_LISTED = 20  # where the first over-long documents were, kept in the report


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
        return READERS[suffix_kind(self.path)](self.location, self.path, self.rel, limit)  # type: ignore[index]


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
            files = sorted(p for p in path.rglob("*") if p.is_file() and suffix_kind(p) is not None)
            if not files:
                raise CorpusError(f"{spec}: directory has no input files (supported: {', '.join(SUPPORTED_SUFFIXES)})")
            for f in files:
                inputs.append(_file_input(f, f.relative_to(path).as_posix()))
        else:
            if suffix_kind(path) is None:
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
            if not any(suffix_kind(p) for p in found):
                raise CorpusError(f"{spec}: no input files there (supported: {', '.join(SUPPORTED_SUFFIXES)})")
        elif fs.isfile(root):
            if suffix_kind(root) is None:
                raise CorpusError(f"{spec}: unsupported file type (supported: {', '.join(SUPPORTED_SUFFIXES)})")
            found = {root: fs.info(root)}
        else:
            raise CorpusError(f"{spec}: input path not found")
    except CorpusError:
        raise
    except Exception as exc:  # the protocol's package missing (ImportError), credentials, the network
        raise CorpusError(f"{spec}: cannot list the input: {type(exc).__name__}: {exc}") from None
    inputs = []
    for key in sorted(p for p in found if suffix_kind(p) is not None):
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
