"""Hugging Face datasets as a corpus source: ``hf:NAME?config=CFG&split=SPLIT``, streamed from the
Hub or read from a folder written by ``save_to_disk``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs

from ..bounded import DEFAULT_MAX_DOCUMENT_BYTES
from .document import CorpusError, Document
from .readers import TooLong, from_record


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
        yield from_record(dict(row), default_id=f"{name}:{split}:{i}", source=f"hf:{name}")
