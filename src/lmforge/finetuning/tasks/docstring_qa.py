"""The corpus task ``docstring_qa``: extractive question answering (``family="span_qa"``) on the
clean corpus's function and method docstrings, with answers from the syntax tree.

Each question shows a signature with one parameter name blanked out, and asks for that name;
the context is the docstring of that function or method; the answers are the name's mentions in
the docstring. The signatures are the clean corpus's metadata, which ``corpus.stdlib`` formats
from the ``ast`` (``stdlib.signature``: ``name(a, b=..., /, c, *args, d, e=..., **kwargs)``, no
annotations, ``self`` and ``cls`` left out): a function document's ``signature``, a class
document's ``method_signatures`` (each method docstring line's key, ``line_key``, to the
signatures of the methods whose docstrings hold the line). A method's name is qualified by its
class (``Store.put(key, value, *, timeout=...)``), as ``docstring_signature`` does.

The rule, exactly:

- the context of a function is its document's text; the context of a method is the lines of its
  class document whose ``method_signatures`` hold the method's signature (a line several methods
  share is in each one's context), the class's own lines (``own_lines``) left out. Each line's
  whitespace is folded, the lines are joined with one space, and the result is cut to
  ``max_chars`` characters at the last word boundary that fits (``load_task`` passes 512 unless
  told otherwise). A context of fewer than ``min_words`` words (split on spaces) is left out;
- a question is asked for each parameter name of the signature, in signature order, except
  single-character names (``s``, ``a``: ``a`` would match every article), and a name that does
  not occur in the context as a whole word (case-sensitively, not inside a longer run of word
  characters ``\\w``: ``*path*``, ``path,``, ``self.path`` and ```path``` count, ``paths`` and
  ``filepath`` do not). The question is ``Which parameter is ___ in SIGNATURE?`` with that name
  replaced by ``___`` in the signature, its ``*``, ``**`` or ``=...`` kept
  (``Which parameter is ___ in copy(src, /, ___, *more, follow=..., **options)?``); a name that
  is still a whole word of that question (a function named like its parameter: ``id(id)``) is
  left out, since the question would give it away;
- the answers are every whole-word occurrence of the name in the context, in order, as
  ``Answer(name, start)``; the first is the one training uses, and scoring takes the best over
  all (SQuAD's rule; their texts are all the name). A mention of the name that is plain English
  ("the *mode* argument" and "in text mode" alike) is an answer too: the labels are the
  exact-match rule's, as ``docstring_params``'s are.

So the question is well-defined (one name fills the blank) and its answer is a span of the
context. The other parameter names are in the question, so a word-overlap baseline
(``span_qa.baselines.sliding_window_baseline``) lands on them, not on the answer; the model must
find the docstring word that names a parameter and is not among those shown. Each question is
in its document's pretraining split (``split_of(doc_id, params.split)``: all of a class's
methods go with the class), so test questions come from documents unseen in pretraining."""

from __future__ import annotations

import re
from collections import Counter

from .base import SPLIT_NAMES, Answer, SpanQuestion, Task, TaskError
from .corpus_paragraphs import (check_metadata_read, check_paragraph_options, corpus_documents,
                                metadata_method_signatures, metadata_signature)

QA_TASK = "docstring_qa"
BLANK = "___"


def cut_context(text: str, max_chars: int) -> str:
    """``text`` cut to ``max_chars`` characters at the last word boundary that fits (as
    ``corpus_paragraphs.paragraphs`` cuts a paragraph)."""
    if len(text) <= max_chars:
        return text
    cut = text[: max_chars + 1]
    return cut.rsplit(" ", 1)[0] if " " in cut else text[:max_chars]


def mentions(name: str, text: str) -> list[int]:
    """Where ``name`` starts in ``text`` as a whole word: not preceded or followed by a word
    character (``\\w``), case-sensitive."""
    return [m.start() for m in re.finditer(rf"(?<!\w){re.escape(name)}(?!\w)", text)]


def blank_parameter(signature: str, name: str) -> str:
    """``signature`` (``stdlib.signature``'s text) with the parameter ``name`` replaced by ``BLANK``,
    its ``*``, ``**`` and ``=...`` kept. A name not in the signature is a ValueError."""
    head, inside = signature[: signature.index("(") + 1], signature[signature.index("(") + 1: signature.rindex(")")]
    parts = inside.split(", ") if inside else []
    for i, part in enumerate(parts):
        stars = part[: len(part) - len(part.lstrip("*"))]
        bare, eq, default = part[len(stars):].partition("=")
        if bare == name:
            parts[i] = f"{stars}{BLANK}{eq}{default}"
            return f"{head}{', '.join(parts)}{signature[signature.rindex(')'):]}"
    raise ValueError(f"parameter {name!r} is not in the signature {signature!r}")


def question_text(signature: str, name: str) -> str:
    return f"Which parameter is {BLANK} in {blank_parameter(signature, name)}?"


def _contexts_of(doc_id: str, text: str, meta: dict, directory) -> list[tuple[str, list[str]]] | None:
    """(signature, its docstring lines) of each function or method of a document, in the text's
    order; None when the document has no signature metadata (cleaned before it was recorded)."""
    from ...corpus.stdlib import line_key

    lines = text.split("\n")
    if meta.get("docstring_of") == "function":
        sig = metadata_signature(meta, doc_id, directory, closed=True)  # blank_parameter needs its ``)``
        if sig is None:
            return None
        return [(sig, lines)]
    methods = metadata_method_signatures(meta, doc_id, directory)
    if methods is None:
        return None
    own = set(meta.get("own_lines") or ())
    cls = doc_id.rsplit(":", 1)[-1]
    by_signature: dict[str, list[str]] = {}
    for line in lines:
        key = line_key(line)
        if not line.strip() or key in own:
            continue
        for sig in methods.get(key, ()):
            by_signature.setdefault(f"{cls}.{sig}", []).append(line)
    return list(by_signature.items())


def questions_of(signature: str, lines: list[str], doc_id: str, min_words: int, max_chars: int,
                 counts: Counter) -> list[SpanQuestion]:
    """The questions on one function's or method's docstring (the rule of the module docstring)."""
    from .docstring_signature import signature_parameters

    context = cut_context(" ".join(" ".join(line.split()) for line in lines if line.strip()), max_chars)
    if len(context.split()) < min_words:
        counts["short_contexts"] += 1
        return []
    out = []
    name = signature[: signature.index("(")]
    for parameter in signature_parameters(signature):
        if len(parameter) < 2:
            counts["single_character_parameters"] += 1
            continue
        starts = mentions(parameter, context)
        if not starts:
            counts["parameters_not_in_context"] += 1
            continue
        question = question_text(signature, parameter)
        if mentions(parameter, question):
            counts["answer_in_question"] += 1
            continue
        out.append(SpanQuestion(question, context, tuple(Answer(parameter, s) for s in starts),
                                id=f"{doc_id}#{name}/{parameter}"))
    return out


def docstring_qa_task(params, *, min_words: int = 8, max_chars: int = 512) -> Task:
    """The task from the clean corpus (see the module docstring for the rule)."""
    from ...splits import split_of

    check_paragraph_options(QA_TASK, min_words, max_chars)
    corpus, directory = corpus_documents(params, QA_TASK)
    splits: dict[str, list[SpanQuestion]] = {s: [] for s in SPLIT_NAMES}
    counts = Counter()
    kinds = Counter()  # function / class documents read
    without_metadata = 0
    doc_counts, context_counts = Counter(), Counter()
    questions_from = Counter()  # questions on function / method docstrings
    for doc_id, text, meta in corpus:
        kind = meta.get("docstring_of")
        if kind not in ("function", "class"):
            continue
        kinds[kind] += 1
        found = _contexts_of(doc_id, text, meta, directory)
        if found is None:
            without_metadata += 1
            continue
        split = split_of(doc_id, params.split)
        asked = 0
        for signature, lines in found:
            questions = questions_of(signature, lines, doc_id, min_words, max_chars, counts)
            splits[split] += questions
            asked += len(questions)
            context_counts[split] += bool(questions)
            questions_from["function" if kind == "function" else "method"] += len(questions)
        doc_counts[split] += bool(asked)
    check_metadata_read(QA_TASK, sum(kinds.values()), without_metadata, directory, "signatures")
    for split in SPLIT_NAMES:
        if not splits[split]:
            raise TaskError(f"{QA_TASK}: no questions in the {split} split ({doc_counts[split]} documents of "
                            f"{directory} give questions there)")
    return Task(
        name=QA_TASK,
        description=("Extractive QA on Python docstrings: given a function's or method's signature (from the syntax "
                     "tree) with one parameter name blanked out (Which parameter is ___ in copy(src, ___, *more)?) "
                     "and the docstring as the context, find the blanked name in the docstring; every whole-word "
                     "mention of it is a gold answer. Names of two or more characters that the docstring "
                     f"mentions; contexts of >= {min_words} words, cut to {max_chars} characters. Split by document "
                     "id with the pretraining split, so test questions come from documents unseen in pretraining."),
        label_names=[],
        pair=False,
        splits=splits,
        prefix="question",
        info={"source": str(directory), "documents": dict(doc_counts), "documents_read": dict(kinds),
              "without_signature_metadata": without_metadata, "contexts": dict(context_counts),
              "questions": {s: len(splits[s]) for s in SPLIT_NAMES}, "questions_from": dict(questions_from),
              "answers": {s: sum(len(q.answers) for q in splits[s]) for s in SPLIT_NAMES},
              "skipped": {k: counts[k] for k in ("short_contexts", "single_character_parameters",
                                                 "parameters_not_in_context", "answer_in_question")},
              "min_words": min_words, "max_chars": max_chars},
        family="span_qa",
    )
