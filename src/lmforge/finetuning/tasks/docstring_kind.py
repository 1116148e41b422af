"""The demo task, ``docstring_kind`` (the default): paragraphs of the clean stdlib corpus's
docstrings, labelled with what the docstring documents (module, class or function), each in its
document's pretraining split. A class document also holds its methods' docstrings; only the
class's own paragraphs (its ``own_lines`` metadata) are labelled "class"."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from .base import SPLIT_NAMES, Example, Task, TaskError

DEFAULT_TASK = "docstring_kind"
DOCSTRING_LABELS = ["module", "class", "function"]


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


def docstring_kind_task(params, *, min_words: int = 8, max_chars: int = 512) -> Task:
    """The default task from the clean corpus (see the module docstring and docs/FINETUNING.md)."""
    from ...corpus.stdlib import line_key
    from ...splits import split_of

    check_paragraph_options(DEFAULT_TASK, min_words, max_chars)
    corpus, directory = corpus_documents(params, DEFAULT_TASK)
    documents: list[tuple[str, str, str, set | None]] = []  # (id, label, text, a class's own lines)
    unlabelled = 0
    for doc_id, text, meta in corpus:
        label = meta.get("docstring_of")
        if label is None:
            unlabelled += 1
            continue
        if label not in DOCSTRING_LABELS:
            raise TaskError(f"{directory}: document {doc_id!r}: metadata docstring_of is {label!r}, "
                            f"expected one of {DOCSTRING_LABELS}")
        own = meta.get("own_lines") if label == "class" else None
        documents.append((doc_id, label, text, set(own) if own is not None else None))
    if not documents:
        raise TaskError(f"{DEFAULT_TASK}: none of the {unlabelled} documents in {directory} has 'docstring_of' in its "
                        "metadata; re-run `lmforge clean` on the stdlib corpus (clean.inputs: [stdlib])")
    splits: dict[str, list[Example]] = {s: [] for s in SPLIT_NAMES}
    doc_counts = Counter()
    for doc_id, label, text, own in documents:
        split = split_of(doc_id, params.split)
        doc_counts[split] += 1
        keep = (lambda line, own=own: line_key(line) in own) if own is not None else None
        for line, paragraph in paragraphs(text, min_words, max_chars, keep):
            splits[split].append(Example(paragraph, None, label, id=f"{doc_id}#{line}"))
    task = Task(
        name=DEFAULT_TASK,
        description=("3-way classification of Python-stdlib docstring paragraphs: is this paragraph from a "
                     "module's, a class's (its own, not its methods') or a function's docstring? "
                     f"Paragraphs of >= {min_words} words, cut to {max_chars} characters; split by document id "
                     "with the pretraining split, so test paragraphs come from documents unseen in pretraining."),
        label_names=list(DOCSTRING_LABELS),
        pair=False,
        splits=splits,
        prefix="docstring kind",
        info={"source": str(directory), "documents": dict(doc_counts), "unlabelled_documents": unlabelled,
              "min_words": min_words, "max_chars": max_chars},
    )
    check_splits(DEFAULT_TASK, splits, doc_counts, min_words, directory)
    return task
