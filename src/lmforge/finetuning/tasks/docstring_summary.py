"""The corpus task ``docstring_summary``: generation (``family="generation"``, kind
``summarization``), summarise a docstring into its first sentence, the summary line PEP 257 asks
for.

The examples, exactly:

- the docstring of each module and function document of the clean corpus, and of each class
  document the class's own docstring (the lines from the document's start while they are among
  its ``own_lines`` metadata, so the methods' docstrings that follow are left out; a class
  without a docstring of its own gives nothing). Its lines (one per paragraph: the corpus
  reflows docstrings) with whitespace folded, empty lines dropped;
- the target is the first sentence (``split_sentences``) of the first line; the source is the
  rest: the first line's later sentences and every later line, joined by single spaces, cut to
  ``max_chars`` characters at the last word boundary that fits (as the other corpus tasks cut
  their paragraphs);
- a document is kept when its source, before the cut, has at least ``max(min_words,
  min_source_words)`` words (``MIN_SOURCE_WORDS``: 20 by default, so the source is never a
  one-liner to copy), and its target at most ``MAX_TARGET_WORDS`` words (a first "sentence"
  that long is a paragraph without sentence ends, not a summary line);
- one example per document, its id the document id, in its document's pretraining split
  (``split_of``), so test docstrings come from documents unseen in pretraining.

``split_sentences``' rule: a sentence ends after ``.``, ``!`` or ``?`` followed by whitespace and
then an uppercase letter (``str.isupper``), or at the end of the text. No abbreviation list: "e.g.
The" is split after "e.g.", and "version 3.4 is" is not split. The generation baselines
(``finetuning.generation.baselines``) use the same rule.

The clean corpus dropped some lines (those without an end mark, too short, duplicates); a
docstring whose original summary line was dropped has its first kept line as the target.
"""

from __future__ import annotations

import re
from collections import Counter

from .base import SPLIT_NAMES, Task, TaskError, TextPair
from .corpus_paragraphs import check_paragraph_options, corpus_documents

SUMMARY_TASK = "docstring_summary"
MIN_SOURCE_WORDS = 20
MAX_TARGET_WORDS = 60
DOCUMENT_KINDS = ("module", "class", "function")
_END = re.compile(r"[.!?]\s+")


def split_sentences(text: str) -> list[str]:
    """The sentences of ``text`` by the rule in the module docstring, each stripped; empty ones
    dropped (so an empty text has none)."""
    out, start = [], 0
    for m in _END.finditer(text):
        if m.end() < len(text) and text[m.end()].isupper():
            out.append(text[start:m.start() + 1].strip())
            start = m.end()
    out.append(text[start:].strip())
    return [s for s in out if s]


def _cut(text: str, max_chars: int) -> str:
    """``text`` cut to ``max_chars`` characters at the last word boundary that fits."""
    if len(text) <= max_chars:
        return text
    cut = text[: max_chars + 1]
    return cut.rsplit(" ", 1)[0] if " " in cut else text[:max_chars]


def docstring_lines(text: str, kind: str, own_lines=None) -> list[str]:
    """A document's docstring lines, whitespace folded, empty ones dropped: every line of a module
    or function document; of a class document the leading lines whose ``line_key`` is in
    ``own_lines`` (its own docstring, before its methods')."""
    from ...corpus.stdlib import line_key

    lines = [" ".join(line.split()) for line in text.split("\n")]
    lines = [line for line in lines if line]
    if kind != "class":
        return lines
    own = set(own_lines or ())
    kept = []
    for line in lines:
        if line_key(line) not in own:
            break
        kept.append(line)
    return kept


def summary_pair(lines: list[str]) -> tuple[str, str] | None:
    """(source, target) of a docstring's lines: the first line's first sentence is the target, the
    rest the source (uncut); None when nothing is left for the source."""
    if not lines:
        return None
    first = split_sentences(lines[0])
    if not first:
        return None
    source = " ".join([*first[1:], *lines[1:]])
    return (source, first[0]) if source.strip() else None


def docstring_summary_task(params, *, min_words: int = 8, max_chars: int = 512,
                           min_source_words: int = MIN_SOURCE_WORDS) -> Task:
    """The task from the clean corpus (see the module docstring for the rule); the source needs
    ``max(min_words, min_source_words)`` words."""
    from ...splits import split_of

    check_paragraph_options(SUMMARY_TASK, min_words, max_chars)
    least = max(min_words, min_source_words)
    corpus, directory = corpus_documents(params, SUMMARY_TASK)
    splits: dict[str, list[TextPair]] = {s: [] for s in SPLIT_NAMES}
    kinds = Counter()  # documents read, by kind
    kept_kinds = Counter()
    skipped = Counter()
    cut = 0
    for doc_id, text, meta in corpus:
        kind = meta.get("docstring_of")
        if kind is None:
            continue
        if kind not in DOCUMENT_KINDS:
            raise TaskError(f"{directory}: document {doc_id!r}: metadata docstring_of is {kind!r}, "
                            f"expected one of {list(DOCUMENT_KINDS)}")
        kinds[kind] += 1
        pair = summary_pair(docstring_lines(text, kind, meta.get("own_lines")))
        if pair is None:
            skipped["no_source"] += 1
            continue
        source, target = pair
        if len(source.split()) < least:
            skipped["short_source"] += 1
            continue
        if len(target.split()) > MAX_TARGET_WORDS:
            skipped["long_target"] += 1
            continue
        short = _cut(source, max_chars)
        cut += short != source
        splits[split_of(doc_id, params.split)].append(TextPair(short, target, id=doc_id))
        kept_kinds[kind] += 1
    if not kinds:
        raise TaskError(f"{SUMMARY_TASK}: no document in {directory} has 'docstring_of' in its metadata; re-run "
                        "`lmforge clean` on the stdlib corpus (clean.inputs: [stdlib])")
    for split in SPLIT_NAMES:
        if not splits[split]:
            raise TaskError(f"{SUMMARY_TASK}: no docstring with a source of >= {least} words after its first "
                            f"sentence in the {split} split of {directory} ({sum(kinds.values())} docstrings read)")
    task = Task(
        name=SUMMARY_TASK,
        description=("Summarise a Python-stdlib docstring into its first sentence (PEP 257's summary line): the "
                     "source is the docstring after its first sentence (module, function and a class's own "
                     f"docstrings; >= {least} words, cut to {max_chars} characters), the target its first sentence "
                     "(ending at . ! or ? followed by an uppercase letter); split by document id with the "
                     "pretraining split, so test docstrings come from documents unseen in pretraining."),
        label_names=[],
        pair=False,
        splits=splits,
        prefix="summarize",
        info={"generation_kind": "summarization", "source": str(directory),
              "documents": {s: len(splits[s]) for s in SPLIT_NAMES}, "documents_read": dict(kinds),
              "documents_kept": dict(kept_kinds), "skipped": dict(skipped), "sources_cut": cut,
              "min_source_words": least, "max_target_words": MAX_TARGET_WORDS, "max_chars": max_chars},
        family="generation",
    )
    return task
