"""The paragraphs of the clean corpus, read for the tasks built from it (``docstring_kind``,
``docstring_package``): the corpus's documents in a stable order, a document's paragraphs, and
the checks those tasks share."""

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


def check_splits(task_name: str, splits: dict, doc_counts: Counter, min_words: int, directory) -> None:
    for split in SPLIT_NAMES:
        if not splits[split]:
            raise TaskError(f"{task_name}: no paragraphs of >= {min_words} words in the {split} split "
                            f"({doc_counts[split]} documents of {directory} are in it)")
