"""The corpus task ``docstring_package``: paragraphs of the clean corpus's docstrings, labelled
with the package they document: ``stdlib`` or the top-level installed package
(``clean.include_site_packages``) the document comes from. It is a topic task: the packages'
subjects (arrays, data frames, estimators, graphs, the standard library's many) differ more than
the module / class / function of ``docstring_kind``. Each paragraph is in its document's
pretraining split, so test paragraphs come from documents unseen in pretraining."""

from __future__ import annotations

from collections import Counter

from .base import SPLIT_NAMES, Example, Task, TaskError
from .corpus_paragraphs import check_paragraph_options, check_splits, corpus_documents, paragraphs

PACKAGE_TASK = "docstring_package"
STDLIB_LABEL = "stdlib"


def package_of(doc_id: str, meta: dict) -> str | None:
    """``stdlib``, the top-level package of a site-packages document, or None (not a docstring document)."""
    module = meta.get("module")
    if meta.get("docstring_of") is None or not isinstance(module, str) or not module:
        return None
    if doc_id.startswith("stdlib:"):
        return STDLIB_LABEL
    if doc_id.startswith("site-packages:"):
        return module.split(".", 1)[0]
    return None


def docstring_package_task(params, *, min_words: int = 8, max_chars: int = 512) -> Task:
    """The task from the clean corpus (see the module docstring); it needs at least one package
    beside the standard library in the corpus."""
    from ...splits import split_of

    check_paragraph_options(PACKAGE_TASK, min_words, max_chars)
    corpus, directory = corpus_documents(params, PACKAGE_TASK)
    splits: dict[str, list[Example]] = {s: [] for s in SPLIT_NAMES}
    doc_counts = Counter()
    labels = Counter()
    for doc_id, text, meta in corpus:
        label = package_of(doc_id, meta)
        if label is None:
            continue
        split = split_of(doc_id, params.split)
        doc_counts[split] += 1
        labels[label] += 1
        for line, paragraph in paragraphs(text, min_words, max_chars):
            splits[split].append(Example(paragraph, None, label, id=f"{doc_id}#{line}"))
    if len(labels) < 2:
        raise TaskError(f"{PACKAGE_TASK}: the clean corpus in {directory} has docstrings of {sorted(labels) or 'nothing'}; "
                        "the task needs the standard library and at least one package: set "
                        "clean.include_site_packages to a list of installed packages and re-run `lmforge clean`")
    label_names = sorted(labels)
    check_splits(PACKAGE_TASK, splits, doc_counts, min_words, directory)
    return Task(
        name=PACKAGE_TASK,
        description=(f"{len(label_names)}-way classification of docstring paragraphs by the package they document "
                     f"({', '.join(label_names)}). Paragraphs of >= {min_words} words, cut to {max_chars} characters; "
                     "split by document id with the pretraining split, so test paragraphs come from documents "
                     "unseen in pretraining."),
        label_names=label_names,
        pair=False,
        splits=splits,
        prefix="docstring package",
        info={"source": str(directory), "documents": dict(doc_counts), "documents_per_label": dict(sorted(labels.items())),
              "min_words": min_words, "max_chars": max_chars},
    )
