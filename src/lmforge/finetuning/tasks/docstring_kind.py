"""The demo task, ``docstring_kind`` (the default): paragraphs of the clean stdlib corpus's
docstrings, labelled with what the docstring documents (module, class or function), each in its
document's pretraining split. A class document also holds its methods' docstrings; only the
class's own paragraphs (its ``own_lines`` metadata) are labelled "class"."""

from __future__ import annotations

from collections import Counter

from .base import SPLIT_NAMES, Example, Task, TaskError
from .corpus_paragraphs import check_paragraph_options, check_splits, corpus_documents, paragraphs

DEFAULT_TASK = "docstring_kind"
DOCSTRING_LABELS = ["module", "class", "function"]


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
