"""Text primitives shared by the cleaning rules and the deduplicators."""

from __future__ import annotations

import re

# Sentence boundaries: an end mark (optionally followed by closing quotes or brackets), then
# whitespace, then a word, quote or bracket. C4 counted sentences with NLTK's Punkt model,
# whose data is a download; like Punkt, this splits before a lower-case word too ("... the
# repl.  repl can be"), unless the word before the period is a known abbreviation or an
# initial.
_BOUNDARY = re.compile(r"(?<=[.!?])[\"'\u201d\u2019)\]]*\s+(?=[\"'\u201c\u2018(\[]?\w)")
# The same boundaries, each found one character earlier, at its end mark: the match starts at
# the mark instead of looking behind for it, and ends where _BOUNDARY's does (from the mark on,
# the two patterns are the same). A match of either ends with whitespace, never with a mark,
# so the next match of _BOUNDARY looks behind at a mark past the previous match: the mark this
# pattern starts at. Python's regex engine jumps from one of ".!?" to the next (a pattern that
# starts with a character set) but tries a lookbehind at every position: about twice as fast.
_BOUNDARY_AT_MARK = re.compile(r"[.!?][\"'\u201d\u2019)\]]*\s+(?=[\"'\u201c\u2018(\[]?\w)")
_ABBREVIATIONS = frozenset(
    "mr mrs ms dr prof sr jr st vs etc e.g i.e cf al fig figs no nos vol pp ed eds approx dept est inc ltd co "
    "corp a.m p.m jan feb mar apr jun jul aug sep sept oct nov dec".split()
)


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) character spans of the sentences of one line of text, whitespace trimmed."""
    spans: list[tuple[int, int]] = []
    start = 0
    for m in _BOUNDARY.finditer(text):
        candidate = text[start : m.start()]
        last_word = candidate.rsplit(None, 1)[-1] if candidate.strip() else ""
        token = last_word.rstrip(".!?\"')]\u201d\u2019").lower()
        # "e.g." / "Dr." / a single-letter initial ("J. Smith") do not end a sentence.
        if last_word.endswith(".") and (token in _ABBREVIATIONS or (len(token) == 1 and token.isalpha())):
            continue
        _add_span(text, start, m.start(), spans)
        start = m.end()
    _add_span(text, start, len(text), spans)
    return spans


def _add_span(text: str, start: int, end: int, spans: list[tuple[int, int]]) -> None:
    piece = text[start:end]
    if piece.strip():
        lead = len(piece) - len(piece.lstrip())
        trail = len(piece) - len(piece.rstrip())
        spans.append((start + lead, end - trail))


def count_sentences(text: str) -> int:
    """``len(split_sentences(text))`` without building the sentences.

    Every piece between two accepted boundaries is non-blank (the first ends with the end mark,
    the others start at the word the boundary looks ahead to), and whether a boundary is
    accepted depends only on the word just before it, so the count is one more than the
    accepted boundaries of a non-blank text.
    """
    if not text or text.isspace():
        return 0
    n, start = 1, 0
    for m in _BOUNDARY_AT_MARK.finditer(text):
        end = m.start() + 1  # where the _BOUNDARY match starts
        if text[end - 1] == ".":  # only a period can follow an abbreviation or an initial
            token = text[start:end].rsplit(None, 1)[-1].rstrip(".!?\"')]\u201d\u2019").lower()
            if token in _ABBREVIATIONS or (len(token) == 1 and token.isalpha()):
                continue
        n += 1
        start = m.end()
    return n


def split_sentences(text: str) -> list[str]:
    """Split ``text`` (one line) into sentences (non-empty, stripped)."""
    return [text[s:e] for s, e in sentence_spans(text)]


def sentence_starts(text: str) -> list[int]:
    """Character offsets where sentences start in a multi-line text (each line is a paragraph)."""
    starts: list[int] = []
    pos = 0
    for line in text.split("\n"):
        starts.extend(pos + s for s, _ in sentence_spans(line))
        pos += len(line) + 1
    return starts


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


# normalize_for_dedup on ASCII text is a map of single characters (upper -> lower case, digit ->
# 0, anything else not a letter -> space: a run of punctuation and a run of spaces both end up
# as one space) followed by collapsing whitespace, which bytes.translate and split do at once.
_ASCII_NORMALIZE = bytes(
    (b + 32 if 65 <= b <= 90 else b if 97 <= b <= 122 else 48 if 48 <= b <= 57 else 32) for b in range(256)
)


def normalize_for_dedup_utf8(text: str) -> bytes:
    """``normalize_for_dedup(text).encode("utf-8")``, faster for ASCII text."""
    if text.isascii():
        return b" ".join(text.encode("ascii").translate(_ASCII_NORMALIZE).split())
    return normalize_for_dedup(text).encode("utf-8")
