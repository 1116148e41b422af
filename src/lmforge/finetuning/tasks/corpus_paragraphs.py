"""The paragraphs of the clean corpus, read for the tasks built from it (``docstring_kind``,
``docstring_package``, ``docstring_signature``, ``docstring_qa``, ...): the corpus's documents in a
stable order, a document's paragraphs, and the checks those tasks share (of the options, the
splits, the signature metadata, whether the documents have the task's metadata at all)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from .base import SPLIT_NAMES, TaskError


def paragraphs(text: str, min_words: int, max_chars: int, keep=None) -> list[tuple[int, str]]:
    """(line number, paragraph) of the lines with at least ``min_words`` words (and, with
    ``keep``, for which ``keep(line)`` holds), each cut to ``max_chars`` characters at the last
    word boundary that fits."""
    out = []
    for i, line in enumerate(text.split("\n")):
        line = " ".join(line.split())
        if not line or len(line.split(" ")) < min_words or (keep is not None and not keep(line)):
            continue
        if len(line) > max_chars:
            cut = line[: max_chars + 1]
            line = cut.rsplit(" ", 1)[0] if " " in cut else line[:max_chars]
        out.append((i, line))
    return out


def corpus_documents(params, task_name: str) -> tuple[list[tuple[str, str, dict]], Path]:
    """((id, text, metadata) of every document of the clean corpus, sorted by id so the order does not
    depend on the sharding; the corpus folder). Errors name the task and the shard."""
    import pyarrow.parquet as pq

    from ...layout import corpus_dir

    directory = corpus_dir(params)
    shards = sorted(directory.glob("shard-*.parquet"))
    if not shards:
        raise TaskError(f"{task_name}: no clean shards (shard-*.parquet) in {directory}; run `lmforge clean` first")
    documents = []
    for shard in shards:
        try:
            table = pq.read_table(shard, columns=["id", "text", "metadata"])
        except Exception as exc:  # pyarrow raises several types for unreadable or schema-less files
            raise TaskError(f"{shard}: cannot read the id, text and metadata columns: {exc}") from None
        for doc_id, text, metadata in zip(*(table.column(c).to_pylist() for c in ("id", "text", "metadata"))):
            try:
                meta = json.loads(metadata) if metadata else {}
            except ValueError as exc:
                raise TaskError(f"{shard}: document {doc_id!r}: metadata is not valid JSON ({exc})") from None
            documents.append((doc_id, text or "", meta if isinstance(meta, dict) else {}))
    documents.sort(key=lambda d: d[0])
    return documents, directory


def check_paragraph_options(task_name: str, min_words: int, max_chars: int) -> None:
    if min_words < 1:
        raise TaskError(f"{task_name}: min_words must be at least 1, got {min_words}")
    if max_chars < 16:
        raise TaskError(f"{task_name}: max_chars must be at least 16, got {max_chars}")


def metadata_signature(meta: dict, doc_id: str, directory, *, closed: bool = False) -> str | None:
    """A function document's ``signature`` metadata (``stdlib.signature``'s text), None when it has
    none (the corpus was cleaned before it was recorded); one that is not such a text (not a string
    with ``(``; with ``closed``, also not ending in ``)``) is a TaskError naming the document."""
    sig = meta.get("signature")
    if sig is None:
        return None
    if not isinstance(sig, str) or "(" not in sig or (closed and not sig.endswith(")")):
        raise TaskError(f"{directory}: document {doc_id!r}: metadata signature is {sig!r}, expected a "
                        "signature such as 'name(a, b=...)'")
    return sig


def metadata_method_signatures(meta: dict, doc_id: str, directory) -> dict[str, list[str]] | None:
    """A class document's ``method_signatures`` metadata (a method docstring line's key to the
    signatures of the methods whose docstrings hold the line), None when it has none; one that is
    not such a mapping is a TaskError naming the document."""
    methods = meta.get("method_signatures")
    if methods is None:
        return None
    if not isinstance(methods, dict) or not all(isinstance(v, list) and all(isinstance(s, str) and "(" in s for s in v)
                                                for v in methods.values()):
        raise TaskError(f"{directory}: document {doc_id!r}: metadata method_signatures is not a mapping of line keys "
                        "to lists of signatures")
    return methods


def check_metadata_read(task_name: str, read: int, without_metadata: int, directory, what: str) -> None:
    """Refuse a corpus of which ``read`` function and class docstring documents were read, none, or
    all ``without_metadata`` the task's metadata (``what`` it holds: "signatures", "parameter
    names"; a corpus cleaned before it was recorded)."""
    if not read:
        raise TaskError(f"{task_name}: no function or class docstring documents (metadata docstring_of) in "
                        f"{directory}; re-run `lmforge clean` on the stdlib corpus (clean.inputs: [stdlib])")
    if without_metadata == read:
        raise TaskError(f"{task_name}: none of the {read} function and class documents in {directory} has {what} "
                        "in its metadata (the corpus was cleaned before they were recorded); re-run `lmforge clean` "
                        "on the stdlib corpus (clean.inputs: [stdlib])")


def check_splits(task_name: str, splits: dict, doc_counts: Counter, min_words: int, directory) -> None:
    for split in SPLIT_NAMES:
        if not splits[split]:
            raise TaskError(f"{task_name}: no paragraphs of >= {min_words} words in the {split} split "
                            f"({doc_counts[split]} documents of {directory} are in it)")
