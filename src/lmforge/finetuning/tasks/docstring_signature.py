"""The corpus task ``docstring_signature``: pair classification, "does this docstring paragraph
belong to this signature?". Each example is (signature, paragraph), label ``yes`` or ``no``.

The signatures are the clean corpus's metadata, which ``corpus.stdlib`` formats from the ``ast``
(``stdlib.signature``): a function document's ``signature``, a class document's
``method_signatures`` (each method docstring line's key, ``line_key``, to its method's
signature). The text is ``name(a, b=..., /, c, *args, d, e=..., **kwargs)``: the name, the
parameters in signature order, ``/`` after positional-only ones, a bare ``*`` before keyword-only
ones, every default as ``=...``, no annotations, ``self`` and ``cls`` left out; a method's name
is qualified by its class (``Store.put(key, value, *, timeout=...)``, the class from the
document id ``stdlib:<module>:<Class>``), a function's is not (``copy(src, /, dst, **options)``).

The pairs, exactly:

- every paragraph (>= ``min_words`` words, cut to ``max_chars`` characters: ``corpus_paragraphs``)
  of a module-level function's docstring, or of a public method's docstring in a class document,
  gives two examples: its own signature with ``yes`` and another signature with ``no`` (balanced:
  one positive and one negative per paragraph). The class's own paragraphs are left out, and so
  is a line two methods share with different signatures (which one it belongs to is ambiguous);
- the negative signature is drawn by a ``random.Random`` seeded with the task's ``seed`` and the
  paragraph's id (``<doc id>#<line>``), so the draw is deterministic and does not move when
  other documents come or go. It comes from the first non-empty of: the other methods of the
  same class (for a method's paragraph), the other functions and methods of the same module,
  every other function and method; always among the signatures with at least one paragraph in
  the task (so no signature is only ever a negative) and always of a document in the paragraph's
  own split, never another split's (no test signature is seen in training, no train signature
  leaks into test). Same class or module first makes the negatives hard: the module's topic
  does not tell them apart, the parameter names and the content must;
- a signature text is never a negative for a paragraph that a docstring of that text also holds:
  not the paragraph's own signature, not another function's whose docstring has the same
  paragraph, not another module's function with the same signature text (``main()`` of two
  modules); a paragraph every signature holds has no negative and is left out (counted). So
  the ``no`` labels are all true.

Each paragraph is in its document's pretraining split, so test paragraphs (and their
signatures) come from documents unseen in pretraining."""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from .base import SPLIT_NAMES, Example, Task
from .corpus_paragraphs import (check_metadata_read, check_paragraph_options, check_splits, corpus_documents,
                                metadata_method_signatures, metadata_signature, paragraphs)

SIGNATURE_TASK = "docstring_signature"
SIGNATURE_LABELS = ["no", "yes"]
TIERS = ("same_class", "same_module", "same_split")  # where a negative signature came from


@dataclass
class _Signature:
    """One function or method: its signature text and its paragraphs in the task."""

    text: str
    doc_id: str
    module: str
    owner: str | None  # the class document's id, for a method
    paragraphs: list[tuple[int, str]] = field(default_factory=list)


def signature_parameters(signature: str) -> list[str]:
    """The parameter names of a signature text (``stdlib.signature``'s): ``*``, ``**`` and
    ``=...`` dropped, the ``/`` and bare ``*`` markers skipped."""
    inside = signature[signature.index("(") + 1: signature.rindex(")")]
    names = [p.strip().lstrip("*").split("=", 1)[0] for p in inside.split(",")]
    return [n for n in names if n and n != "/"]


def _module_of(doc_id: str, meta: dict) -> str:
    module = meta.get("module")
    return module if isinstance(module, str) else doc_id.split(":")[1] if doc_id.count(":") >= 2 else doc_id


def _signatures_of(doc_id: str, text: str, meta: dict, min_words: int, max_chars: int, directory, counts: Counter
                   ) -> list[_Signature] | None:
    """The functions and methods of a document with their paragraphs, or None when the document has
    no signature metadata (cleaned before it was recorded)."""
    from ...corpus.stdlib import line_key

    module = _module_of(doc_id, meta)
    if meta.get("docstring_of") == "function":
        sig = metadata_signature(meta, doc_id, directory)
        if sig is None:
            return None
        return [_Signature(sig, doc_id, module, None, paragraphs(text, min_words, max_chars))]
    methods = metadata_method_signatures(meta, doc_id, directory)
    if methods is None:
        return None
    own = set(meta.get("own_lines") or ())
    cls = doc_id.rsplit(":", 1)[-1]
    lines = text.split("\n")
    by_text: dict[str, _Signature] = {}
    for line, paragraph in paragraphs(text, min_words, max_chars):
        key = line_key(lines[line])
        sigs = methods.get(key)
        if key in own or not sigs:
            continue
        if len(sigs) > 1:
            counts["ambiguous_method_lines"] += 1
            continue
        qualified = f"{cls}.{sigs[0]}"
        by_text.setdefault(qualified, _Signature(qualified, doc_id, module, doc_id)).paragraphs.append((line, paragraph))
    return list(by_text.values())


def _draw_negative(rng: random.Random, tiers: list[list[_Signature]], excluded) -> tuple[_Signature, str] | None:
    """A signature of the first tier with one that ``excluded`` does not rule out, and the tier's
    name; a big tier is sampled by rejection (a few tries), then filtered."""
    for name, tier in zip(TIERS, tiers):
        if not tier:
            continue
        for _ in range(8 if len(tier) > 64 else 0):
            pick = tier[rng.randrange(len(tier))]
            if not excluded(pick):
                return pick, name
        allowed = [s for s in tier if not excluded(s)]
        if allowed:
            return allowed[rng.randrange(len(allowed))], name
    return None


def docstring_signature_task(params, *, min_words: int = 8, max_chars: int = 512, seed: int = 0) -> Task:
    """The task from the clean corpus (see the module docstring for the rule)."""
    from ...splits import split_of

    check_paragraph_options(SIGNATURE_TASK, min_words, max_chars)
    corpus, directory = corpus_documents(params, SIGNATURE_TASK)
    counts = Counter()
    kinds = Counter()  # function / class documents read
    without_metadata = 0
    signatures: dict[str, list[_Signature]] = {s: [] for s in SPLIT_NAMES}  # those with a paragraph, by split
    doc_counts = Counter()
    for doc_id, text, meta in corpus:
        kind = meta.get("docstring_of")
        if kind not in ("function", "class"):
            continue
        kinds[kind] += 1
        found = _signatures_of(doc_id, text, meta, min_words, max_chars, directory, counts)
        if found is None:
            without_metadata += 1
            continue
        found = [s for s in found if s.paragraphs]
        if found:
            split = split_of(doc_id, params.split)
            doc_counts[split] += 1
            signatures[split] += found
    check_metadata_read(SIGNATURE_TASK, sum(kinds.values()), without_metadata, directory, "signatures")
    holders: dict[str, set[str]] = defaultdict(set)  # a paragraph -> the signature texts whose docstrings hold it
    for sigs in signatures.values():
        for s in sigs:
            for _, paragraph in s.paragraphs:
                holders[paragraph].add(s.text)
    splits: dict[str, list[Example]] = {s: [] for s in SPLIT_NAMES}
    tiers_used = {s: Counter() for s in SPLIT_NAMES}
    for split in SPLIT_NAMES:
        by_owner, by_module = defaultdict(list), defaultdict(list)
        for s in signatures[split]:
            if s.owner is not None:
                by_owner[s.owner].append(s)
            by_module[s.module].append(s)
        for s in signatures[split]:
            tiers = [by_owner[s.owner] if s.owner is not None else [], by_module[s.module], signatures[split]]
            for line, paragraph in s.paragraphs:
                pid = f"{s.doc_id}#{line}"
                rng = random.Random(f"{seed}:{SIGNATURE_TASK}:{pid}")
                drawn = _draw_negative(rng, tiers, lambda o, p=paragraph: o.text in holders[p])  # its own included
                if drawn is None:
                    counts["paragraphs_without_a_negative"] += 1
                    continue
                negative, tier = drawn
                tiers_used[split][tier] += 1
                splits[split].append(Example(s.text, paragraph, "yes", id=pid))
                splits[split].append(Example(negative.text, paragraph, "no", id=f"{pid}/{negative.doc_id}"))
    check_splits(SIGNATURE_TASK, splits, doc_counts, min_words, directory)
    return Task(
        name=SIGNATURE_TASK,
        description=("Pair classification of Python docstring paragraphs: does this paragraph (of a function's or "
                     "method's docstring) belong to this signature (name(a, b=..., *args, key=..., **kwargs), a "
                     "method's as Class.name(...), from the syntax tree)? One positive and one negative per "
                     f"paragraph of >= {min_words} words (cut to {max_chars} characters); the negative signature "
                     "is drawn (seeded) from the same class, else the same module, else anywhere, always from a "
                     "document of the paragraph's own split. Split by document id with the pretraining split, "
                     "so test paragraphs and signatures come from documents unseen in pretraining."),
        label_names=list(SIGNATURE_LABELS),
        pair=True,
        splits=splits,
        prefix="docstring signature",
        info={"source": str(directory), "documents": dict(doc_counts), "documents_read": dict(kinds),
              "without_signature_metadata": without_metadata,
              "signatures": {s: len(signatures[s]) for s in SPLIT_NAMES},
              "negatives_from": {s: {t: tiers_used[s][t] for t in TIERS} for s in SPLIT_NAMES},
              "ambiguous_method_lines": counts["ambiguous_method_lines"],
              "paragraphs_without_a_negative": counts["paragraphs_without_a_negative"],
              "min_words": min_words, "max_chars": max_chars, "seed": seed},
    )
