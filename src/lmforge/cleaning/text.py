"""Text primitives shared by the cleaning rules and the deduplicators."""

from __future__ import annotations

import re

# Sentence boundaries: an end mark (optionally followed by closing quotes or brackets), then
# whitespace, then a word, quote or bracket. C4 counted sentences with NLTK's Punkt model,
# whose data is a download; like Punkt, this splits before a lower-case word too ("... the
# repl.  repl can be"), unless the word before the period is a known abbreviation or an
# initial.
_BOUNDARY = re.compile(r"(?<=[.!?])[\"'\u201d\u2019)\]]*\s+(?=[\"'\u201c\u2018(\[]?\w)")
_ABBREVIATIONS = frozenset(
    "mr mrs ms dr prof sr jr st vs etc e.g i.e cf al fig figs no nos vol pp ed eds approx dept est inc ltd co "
    "corp a.m p.m jan feb mar apr jun jul aug sep sept oct nov dec".split()
)


def split_sentences(text: str) -> list[str]:
    """Split ``text`` into sentences (non-empty, stripped)."""
    pieces: list[str] = []
    start = 0
    for m in _BOUNDARY.finditer(text):
        candidate = text[start : m.start()]
        last_word = candidate.rsplit(None, 1)[-1] if candidate.strip() else ""
        token = last_word.rstrip(".!?\"')]\u201d\u2019").lower()
        # "e.g." / "Dr." / a single-letter initial ("J. Smith") do not end a sentence.
        if last_word.endswith(".") and (token in _ABBREVIATIONS or (len(token) == 1 and token.isalpha())):
            continue
        if candidate.strip():
            pieces.append(candidate.strip())
        start = m.end()
    tail = text[start:].strip()
    if tail:
        pieces.append(tail)
    return pieces


_NON_WORD = re.compile(r"[^\w\s]+")
_DIGIT = re.compile(r"\d")
_SPACE = re.compile(r"\s+")


def normalize_for_dedup(text: str) -> str:
    """Lower case, no punctuation, digits -> 0, collapsed whitespace (the MinHash shingle text)."""
    text = text.lower()
    text = _NON_WORD.sub(" ", text)
    text = text.replace("_", " ")
    text = _DIGIT.sub("0", text)
    return _SPACE.sub(" ", text).strip()
