"""The corpus task ``docstring_params``: word tagging of the clean corpus's function and method
docstrings, with labels from the syntax tree. Each paragraph of a module-level function's
docstring, or of a public method's docstring in a class document, is a sentence; a word is
``B-PARAM`` when it is one of that function's (method's) parameter names, else ``O``. The names
are the clean corpus's metadata, which ``corpus.stdlib`` reads from the ``ast`` of the
signatures: a function document's ``parameters``, a class document's ``method_parameters`` (each
method docstring line's key, ``line_key``, to its method's names; the class's own paragraphs
have none and are left out).

The rule, exactly:

- words: the paragraph split by ``WORD`` (``\\w+|[^\\w\\s]+``): a run of letters, digits and
  underscores is a word, a run of other non-space characters is another, so punctuation around
  a name is its own word (``*path*`` -> ``*``, ``path``, ``*``; ``(key,`` -> ``(``, ``key``,
  ``,``; ``**kwargs`` -> ``**``, ``kwargs``; ``self.path`` -> ``self``, ``.``, ``path``);
- a word is ``B-PARAM`` when it equals (case-sensitively) a parameter name of the paragraph's
  function (method), ``self`` and ``cls`` excepted (the metadata leaves them out) and single-character
  names (``s``, ``a``, ``x``) excepted: ``a`` would tag every article. Every other word is ``O``.
  Parameter names are single words, so there is no ``I-PARAM``.

Every paragraph of a function or method that has at least one taggable parameter name is kept,
with or without a tagged word: the model sees only the paragraph, never the signature, so
it must tell from context whether ``path`` or ``key`` names a parameter here, while the
most-frequent-tag baseline can only memorise words. Labels are the exact-match rule's, so a
word that names a parameter and is also used as plain English (``file``, ``data``) is tagged
wherever it occurs in that function's docstring, and only in the docstrings of functions
that take it. Each paragraph is in its document's
pretraining split, so test paragraphs come from documents unseen in pretraining."""

from __future__ import annotations

import re
from collections import Counter

from .base import SPLIT_NAMES, Task, TaggedSentence, TaskError
from .corpus_paragraphs import check_metadata_read, check_paragraph_options, check_splits, corpus_documents, paragraphs

PARAMS_TASK = "docstring_params"
PARAM_TAG = "B-PARAM"
PARAM_TAGS = ["O", PARAM_TAG]
WORD = re.compile(r"\w+|[^\w\s]+")


def split_words(text: str) -> tuple[str, ...]:
    """The words of ``text`` by ``WORD``: runs of word characters, and runs of punctuation apart."""
    return tuple(WORD.findall(text))


def taggable(parameters) -> set[str]:
    """The parameter names that are tagged: all but ``self``, ``cls`` and single characters."""
    return {p for p in parameters if isinstance(p, str) and len(p) > 1 and p not in ("self", "cls")}


def tag_words(words: tuple[str, ...], names: set[str]) -> tuple[str, ...]:
    """``B-PARAM`` for each word in ``names`` (``taggable``'s), ``O`` for the others."""
    return tuple(PARAM_TAG if w in names else "O" for w in words)


def _names_of_lines(doc_id: str, meta: dict, directory):
    """(line -> the taggable parameter names of the function or method whose docstring it is), or
    None when the document has no parameter metadata (not a function or class document, or cleaned
    before it was recorded)."""
    from ...corpus.stdlib import line_key

    if meta.get("docstring_of") == "function":
        parameters = meta.get("parameters")
        if parameters is None:
            return None
        if not isinstance(parameters, list):
            raise TaskError(f"{directory}: document {doc_id!r}: metadata parameters is {parameters!r}, "
                            "expected a list of names")
        names = taggable(parameters)
        return lambda line: names
    methods = meta.get("method_parameters")
    if methods is None:
        return None
    if not isinstance(methods, dict) or not all(isinstance(v, list) for v in methods.values()):
        raise TaskError(f"{directory}: document {doc_id!r}: metadata method_parameters is not a mapping of line keys "
                        "to lists of names")
    return lambda line: taggable(methods.get(line_key(line), ()))


def docstring_params_task(params, *, min_words: int = 8, max_chars: int = 512) -> Task:
    """The task from the clean corpus (see the module docstring for the rule)."""
    from ...splits import split_of

    check_paragraph_options(PARAMS_TASK, min_words, max_chars)
    corpus, directory = corpus_documents(params, PARAMS_TASK)
    splits: dict[str, list[TaggedSentence]] = {s: [] for s in SPLIT_NAMES}
    doc_counts = Counter()
    kinds = Counter()  # function / class documents read
    without_metadata = 0
    sentences_of = Counter()  # sentences from function docstrings / from method docstrings
    tagged_sentences = Counter()
    for doc_id, text, meta in corpus:
        kind = meta.get("docstring_of")
        if kind not in ("function", "class"):
            continue
        kinds[kind] += 1
        names_of = _names_of_lines(doc_id, meta, directory)
        if names_of is None:
            without_metadata += 1
            continue
        lines = text.split("\n")
        sentences = []
        for line, paragraph in paragraphs(text, min_words, max_chars):
            names = names_of(lines[line])
            if names:
                words = split_words(paragraph)
                sentences.append(TaggedSentence(words, tag_words(words, names), id=f"{doc_id}#{line}"))
        if not sentences:
            continue
        split = split_of(doc_id, params.split)
        doc_counts[split] += 1
        splits[split] += sentences
        sentences_of[kind] += len(sentences)
        tagged_sentences[split] += sum(PARAM_TAG in s.tags for s in sentences)
    check_metadata_read(PARAMS_TASK, sum(kinds.values()), without_metadata, directory, "parameter names")
    check_splits(PARAMS_TASK, splits, doc_counts, min_words, directory)
    return Task(
        name=PARAMS_TASK,
        description=("Tagging of Python docstring paragraphs of functions and methods: which words name one of the "
                     "function's parameters (B-PARAM, from its signature in the syntax tree; the model sees only the "
                     "paragraph)? Words are runs of word characters, punctuation runs apart (\\w+|[^\\w\\s]+); a "
                     "word is B-PARAM when it equals a parameter name case-sensitively, self, cls and single-character "
                     f"names never tagged. Every paragraph of >= {min_words} words (cut to {max_chars} characters) of "
                     "a function or method with a taggable parameter, tagged or not; split by document id with the "
                     "pretraining split, so test paragraphs come from documents unseen in pretraining."),
        label_names=list(PARAM_TAGS),
        pair=False,
        splits=splits,
        prefix="docstring params",
        info={"source": str(directory), "documents": dict(doc_counts), "documents_read": dict(kinds),
              "without_parameters_metadata": without_metadata, "sentences_from": dict(sentences_of),
              "sentences_with_a_parameter": dict(tagged_sentences), "min_words": min_words, "max_chars": max_chars},
        family="tagging",
    )
