"""Per-document cleaning steps.

Each step is small and looks at one :class:`Document`. Calling it returns ``None`` to keep
the document (possibly with its text rewritten) or the name of the reason it is dropped.
Line-level removals are counted in ``line_counts`` under ``line:<reason>``.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Protocol

from ..config import BadWordsConfig, LanguageConfig, LineRules
from ..corpus.document import Document
from . import text as _text
from .text import count_sentences, split_sentences


class Step(Protocol):
    name: str

    def __call__(self, doc: Document, line_counts: Counter) -> str | None: ...


class MaxPageLength:
    """Pages longer than ``max_chars`` characters are dropped before cleaning (C4: 190,000)."""

    name = "max_page_length"

    def __init__(self, max_chars: int):
        self.max_chars = max_chars

    def __call__(self, doc: Document, line_counts: Counter) -> str | None:
        return "too_long_page" if len(doc.text) > self.max_chars else None


_DEFAULT_CITATION = LineRules.model_fields["citation_pattern"].default


class C4LineRules:
    """C4's line and page rules in the reference order (TFDS ``c4_utils.clean_page``).

    Per stripped line: (1) a word longer than ``max_word_length`` drops the line; (2) citation
    markers are removed; (3) the line must end with an end mark and not with an ellipsis;
    (4) it needs ``min_words_per_line`` words; (5) "lorem ipsum" drops the page; (6)
    "javascript" drops the line; (7) ``{`` drops the page; (8) a policy phrase drops the line.
    Then the page needs ``min_sentences`` sentences over its kept lines.

    The order matters and is kept on purpose: a line with ``{`` that has no end mark is
    removed at step 3, so it never reaches step 7 and the page survives.
    """

    name = "c4_rules"

    def __init__(self, rules: LineRules):
        self.r = rules
        self.citation = re.compile(rules.citation_pattern) if rules.citation_pattern else None
        self.end_marks = tuple(rules.end_marks) if rules.end_marks else None
        self.policy = tuple(p.lower() for p in rules.policy_phrases or ())
        # one regex search for "any phrase is in the line" (the same answer as testing each)
        self.policy_re = re.compile("|".join(re.escape(p) for p in self.policy)) if self.policy else None
        # The default citation pattern only matches at a "[": a line without one is left as it is.
        self.citation_needs_bracket = rules.citation_pattern == _DEFAULT_CITATION

    def __call__(self, doc: Document, line_counts: Counter) -> str | None:
        r = self.r
        max_word = r.max_word_length
        citation, needs_bracket = self.citation, self.citation_needs_bracket
        end_marks, ellipsis, min_words = self.end_marks, r.ellipsis, r.min_words_per_line
        after_citation = r.count_words_after_citation_removal
        lorem, javascript, curly, policy = r.lorem_ipsum, r.javascript, r.curly_brace, self.policy_re
        min_sentences = r.min_sentences
        # sentences are only compared with min_sentences: counting stops once it is reached
        # (split_sentences may be swapped for another splitter, as benchmarks/cleaning.py does)
        count = count_sentences if split_sentences is _text.split_sentences else (lambda s: len(split_sentences(s)))
        text = doc.text
        any_phrase = lorem or javascript or policy is not None  # (each looked for in the lower-cased line)
        if any_phrase and self._page_has_no_lower_case_phrase(text):
            any_phrase = lorem = javascript = False
            policy = None
        kept: list[str] = []
        sentences = 0
        for raw in text.splitlines():
            line = raw.strip()
            if not line:
                continue
            words_before = None
            # a word longer than max_word needs a line longer than max_word
            if max_word is not None and len(line) > max_word:
                words_before = line.split()
                if any(len(w) > max_word for w in words_before):
                    line_counts["line:too_long_word"] += 1
                    continue
            stripped = line
            if citation is not None and (not needs_bracket or "[" in line):
                line = citation.sub("", line)
            if end_marks is not None and not line.endswith(end_marks):
                line_counts["line:no_end_mark"] += 1
                continue
            if ellipsis and line.endswith(ellipsis):
                line_counts["line:ellipsis"] += 1
                continue
            if min_words is not None:
                if after_citation or line is stripped:
                    # only compared with min_words: split no further (min_words pieces at most,
                    # as many as the words when there are fewer)
                    n_words = len(line.split(None, min_words - 1))
                else:
                    n_words = len(words_before if words_before is not None else stripped.split())
                if n_words < min_words:
                    line_counts["line:too_few_words"] += 1
                    continue
            if any_phrase:
                lower = line.lower()
                if lorem and "lorem ipsum" in lower:
                    return "lorem_ipsum"
                if javascript and "javascript" in lower:
                    line_counts["line:javascript"] += 1
                    continue
            if curly and "{" in line:
                return "curly_brace"
            if policy is not None and policy.search(lower):
                line_counts["line:policy"] += 1
                continue
            if min_sentences is not None and sentences < min_sentences:
                sentences += count(line)
            kept.append(line)
        if not kept:
            return "no_lines_kept"
        if min_sentences is not None and sentences < min_sentences:
            return "too_few_sentences"
        doc.text = "\n".join(kept)
        return None

    def _page_has_no_lower_case_phrase(self, text: str) -> bool:
        """True where no line of the page can hold "lorem ipsum", "javascript" or a policy phrase
        (in lower case), so that the loop need not look: for an ASCII page whose lines are
        left as they are by the citation rule (there is none, or the default one and no "["),
        each line the loop lower-cases is a piece of the page, lower-cased character by
        character, so a phrase in it is in the lower-cased page too."""
        if not text.isascii() or not (self.citation is None or (self.citation_needs_bracket and "[" not in text)):
            return False
        lower = text.lower()
        r = self.r
        # (policy_re is the phrases, escaped, in an alternation: it matches where one is a substring)
        return not ((r.lorem_ipsum and "lorem ipsum" in lower) or (r.javascript and "javascript" in lower)
                    or any(p in lower for p in self.policy))


class LanguageFilter:
    """Keep pages whose detected language is one of ``languages`` with probability >= threshold.

    C4 used langdetect (English, p >= 0.99). The default backend is CLD2 (``pycld2``), whose
    model is inside its wheel and which is two orders of magnitude faster; its "probability"
    is the top language's share of the text CLD2 attributes to any language (see
    :func:`detect_cld2`), and an unreliable detection counts as 0. ``langdetect`` is available as the reference backend.
    """

    name = "language"

    def __init__(self, cfg: LanguageConfig):
        self.languages = {code.lower() for code in cfg.languages}
        self.threshold = cfg.threshold
        self.backend = cfg.backend
        if self.backend == "langdetect":
            try:
                import langdetect  # noqa: F401
            except ImportError:
                raise RuntimeError(
                    "clean.language.backend=langdetect needs the 'langdetect' package (pip install 'lmforge[langdetect]')"
                ) from None

    def detect(self, text: str) -> tuple[str, float]:
        if self.backend == "langdetect":
            return _detect_langdetect(text)
        return detect_cld2(text)

    def __call__(self, doc: Document, line_counts: Counter) -> str | None:
        lang, prob = self.detect(doc.text)
        doc.metadata["language"] = lang
        doc.metadata["language_score"] = round(prob, 4)
        if lang not in self.languages or prob < self.threshold:
            return "language"
        return None


def detect_cld2(text: str) -> tuple[str, float]:
    import pycld2

    # CLD2 rejects some code points (unpaired surrogates, some controls); drop them for detection only.
    data = text.encode("utf-8", "ignore")
    try:
        reliable, _, details = pycld2.detect(data, isPlainText=True)
    except pycld2.error:
        cleaned = "".join(ch for ch in text if ch.isprintable() or ch in "\n\t")
        try:
            reliable, _, details = pycld2.detect(cleaned.encode("utf-8", "ignore"), isPlainText=True)
        except pycld2.error:
            return "un", 0.0
    name, code, percent, _score = details[0]
    if not reliable or code == "un":
        return code, 0.0
    # CLD2's percentages are shares of the bytes it scored, including a byte it appends, so a
    # short all-English text gets 96 ("The quick brown fox jumps."). Normalised by the total
    # share of detected languages, that text scores 1.0 while a page split 60/40 between two
    # languages still scores 0.6.
    detected = sum(p for _, c, p, _ in details if c != "un")
    return code, percent / detected if detected else 0.0


_LANGDETECT_FACTORY = None


def _detect_langdetect(text: str) -> tuple[str, float]:
    from langdetect import DetectorFactory, detector_factory
    from langdetect.lang_detect_exception import LangDetectException

    global _LANGDETECT_FACTORY
    if _LANGDETECT_FACTORY is None:
        DetectorFactory.seed = 0  # langdetect is randomised; C4 results are only reproducible with a seed
        detector_factory.init_factory()
        _LANGDETECT_FACTORY = detector_factory._factory
    try:
        d = _LANGDETECT_FACTORY.create()
        d.append(text)
        best = d.get_probabilities()[0]
    except LangDetectException:
        return "un", 0.0
    return best.lang.split("-")[0], float(best.prob)


def load_word_list(path: str | Path | None) -> list[str]:
    """Entries of a bad-words file, lower-cased (a capitalised entry must still match)."""
    if path is None:
        from importlib.resources import files

        text = files("lmforge").joinpath("resources/badwords/en.txt").read_text(encoding="utf-8")
    else:
        p = Path(path)
        if not p.is_file():
            raise FileNotFoundError(f"clean.bad_words.path: word list not found: {p}")
        text = p.read_text(encoding="utf-8")
    words = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            words.append(line.lower())
    return sorted(set(words))


def trie_regex(words: list[str]) -> str:
    """A regex matching exactly the given strings, factored by common prefixes."""
    trie: dict = {}
    for w in words:
        node = trie
        for ch in w:
            node = node.setdefault(ch, {})
        node[""] = {}  # end of a word

    def build(node: dict) -> str:
        ends = "" in node
        branches = [re.escape(ch) + build(child) for ch, child in sorted(node.items()) if ch]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        if ends:
            # a shorter entry ends here: the longer continuations are optional
            body = (body if len(branches) == 1 and len(body) == 1 else f"(?:{body})") + "?"
        return body

    return build(trie)


# ASCII \w after lower-casing: letters (upper -> lower case), digits, "_"; anything else -> space
_ASCII_WORDS = bytes(
    (b + 32 if 65 <= b <= 90 else b if (97 <= b <= 122 or 48 <= b <= 57 or b == 95) else 32) for b in range(256)
)


class BadWordsFilter:
    """Drop a page containing any listed word or phrase as whole words, case-insensitively."""

    name = "bad_words"

    def __init__(self, cfg: BadWordsConfig):
        words = load_word_list(cfg.path)
        if not words:
            raise ValueError(f"clean.bad_words.path: the word list {cfg.path} is empty")
        # Whole-word match: not preceded or followed by a word character. The alternation is
        # built as a prefix trie: Python's regex engine tries a flat alternation entry by entry
        # at every position, a trie shares the work (about 10x faster on a 400-entry list).
        self.pattern = re.compile(rf"(?<!\w)(?:{trie_regex(words)})(?!\w)")
        # A prefilter for ASCII pages, which says "no match" only where the regex would not
        # match either: with every character outside \w made a space (and upper case lower, a
        # one-for-one map of ASCII characters), a match of an entry becomes the entry mapped
        # the same way, between spaces (the page is padded with one at each end). Only the
        # search for spaces is fast in Python's regex engine, the lookbehind at every position
        # is not; pages that pass go on to the exact regex.
        marked = sorted({w.encode("utf-8").translate(_ASCII_WORDS).decode("latin-1") for w in words})
        self.prefilter = re.compile(f" (?:{trie_regex(marked)})(?= )")

    def __call__(self, doc: Document, line_counts: Counter) -> str | None:
        text = doc.text
        if text.isascii() and not self.prefilter.search(" " + text.encode("ascii").translate(_ASCII_WORDS).decode("ascii") + " "):
            return None
        return "bad_words" if self.pattern.search(text.lower()) else None


def build_steps(cfg) -> list[Step]:
    """The per-document steps of the clean stage, in order, from a ``CleanConfig``."""
    steps: list[Step] = []
    if cfg.rules.max_page_length is not None:
        steps.append(MaxPageLength(cfg.rules.max_page_length))
    steps.append(C4LineRules(cfg.rules))
    if cfg.language.enabled:
        steps.append(LanguageFilter(cfg.language))
    if cfg.bad_words.enabled:
        steps.append(BadWordsFilter(cfg.bad_words))
    return steps
