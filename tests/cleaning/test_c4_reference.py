"""The C4 line and page rules against datatrove's own ``C4QualityFilter`` on generated pages.

Both sides read the same pages (``corpus_gen.rule_page``: every rule with cases on both sides of
its threshold). Our side runs with its DEFAULTS, except for the switches that choose between
the two references (listed below); datatrove's side gets the TFDS constants written here, from
docs/CLEANING.md, not read from our config: a default that drifts off them fails the test.

Known differences (each shown by its own test below):

1. End marks: datatrove also accepts a line ending in ``'``; TFDS (our default) does not.
2. Word count: datatrove counts a line's words before removing citation markers, TFDS (our
   default) after, so ``Four words here [1] now.`` has 5 words for datatrove, 4 for us.
3. With the sentence rule off (ours ``None``, datatrove's ``-1``) a page with no kept line is
   dropped by us (``no_lines_kept``) and kept, empty, by datatrove. With the rule on, both drop
   it (a page with no line has no sentence); only the reason's name differs, as do
   ``curly_brace`` / ``curly_bracket``.
4. Sentence counter: datatrove counts English sentences with spaCy's sentencizer (spaCy is not
   installed here: a large install for one call), TFDS with NLTK's Punkt. Here datatrove is
   handed OUR splitter through its ``WordTokenizer`` hook, so this file compares the rules
   alone; the splitter is compared with Punkt in ``test_sentence_reference.py``.
5. The page-length cap (190,000 characters) is a separate step of ours (``MaxPageLength``);
   datatrove's C4 filter has none. Its defaults (5 sentences, 3 words a line) differ from
   TFDS's; it is given TFDS's here.
6. The final strip: TFDS and datatrove strip the joined page; we do not, so a page whose first
   kept line began with a citation marker (``[1] Text ...``) keeps the space the marker left.
   Lines are stripped before the rules, so that space is the only whitespace the strip can meet.
"""

from __future__ import annotations

import random
from collections import Counter

import pytest
from datatrove.data import Document as DTDocument
from datatrove.pipeline.filters import C4QualityFilter
from datatrove.utils.word_tokenizers import WordTokenizer

from lmforge.cleaning.filters import C4LineRules
from lmforge.cleaning.text import sentence_spans, split_sentences
from lmforge.config import LineRules
from lmforge.corpus.document import Document

from .corpus_gen import rule_page

# TFDS c4_utils.clean_page's constants (docs/CLEANING.md), written out: not read from LineRules
TFDS_MIN_SENTENCES = 3
TFDS_MIN_WORDS_PER_LINE = 5
TFDS_MAX_WORD_LENGTH = 1000

# our switches that choose datatrove's side of differences 1 and 2
AS_DATATROVE = {"end_marks": [".", "?", "!", '"', "'"], "count_words_after_citation_removal": False}

PAGES = 4000


class OurSplitter(WordTokenizer):
    """datatrove's tokenizer hook, answering with lmforge's sentence splitter (difference 4)."""

    def word_tokenize(self, text: str) -> list[str]:
        return text.split()

    def sent_tokenize(self, text: str) -> list[str]:
        return split_sentences(text)

    def span_tokenize(self, text: str) -> list[tuple[int, int]]:
        return sentence_spans(text)


SPLITTER = OurSplitter("en")


def datatrove_filter(**overrides) -> C4QualityFilter:
    kw = dict(min_num_sentences=TFDS_MIN_SENTENCES, min_words_per_line=TFDS_MIN_WORDS_PER_LINE,
              max_word_length=TFDS_MAX_WORD_LENGTH, language=SPLITTER)
    return C4QualityFilter(**(kw | overrides))


def theirs(f: C4QualityFilter, text: str) -> tuple[bool, str]:
    """(kept, kept text or the reason) from datatrove's filter."""
    doc = DTDocument(text=text, id="p")
    out = f.filter(doc)
    if out is True:
        return True, doc.text
    return False, out[1]


def ours(step: C4LineRules, text: str, counts: Counter | None = None) -> tuple[bool, str]:
    doc = Document(id="p", text=text)
    reason = step(doc, counts if counts is not None else Counter())
    return (True, doc.text) if reason is None else (False, reason)


REASONS = {"lorem_ipsum": "lorem_ipsum", "curly_brace": "curly_bracket",
           "too_few_sentences": "too_few_sentences", "no_lines_kept": "too_few_sentences"}


@pytest.fixture(scope="module")
def pages() -> list[str]:
    rng = random.Random(45)
    return [rule_page(rng) for _ in range(PAGES)]


def test_same_rules_same_decisions(pages):
    """Our defaults with datatrove's end marks and word count: every decision, every kept text
    and every page-level reason is datatrove's, on pages that reach every rule."""
    step, ref = C4LineRules(LineRules(**AS_DATATROVE)), datatrove_filter()
    counts, outcomes = Counter(), Counter()
    for text in pages:
        mine, theirs_ = ours(step, text, counts), theirs(ref, text)
        if mine[0]:
            assert theirs_ == (True, mine[1].strip()), f"kept by us, not so by datatrove: {text!r}"  # difference 6
        else:
            assert theirs_ == (False, REASONS[mine[1]]), f"dropped by us ({mine[1]}): {text!r}"
        outcomes[mine[0] or mine[1]] += 1
    # the generated pages reach every rule, and both decisions, often
    for reason in ("too_long_word", "no_end_mark", "ellipsis", "too_few_words", "javascript", "policy"):
        assert counts[f"line:{reason}"] >= 50, (reason, counts)
    for outcome in (True, "lorem_ipsum", "curly_brace", "too_few_sentences", "no_lines_kept"):
        assert outcomes[outcome] >= 30, (outcome, outcomes)


def _disagreements(pages, step, ref) -> list[str]:
    """Pages on which the decision or the kept text differ (a reason's name is not a difference,
    nor the final strip: difference 6)."""
    out = []
    for t in pages:
        mine, theirs_ = ours(step, t), theirs(ref, t)
        mine = (True, mine[1].strip()) if mine[0] else mine
        if mine != theirs_ and not (mine[0] is False and theirs_ == (False, REASONS[mine[1]])):
            out.append(t)
    return out


def _kept_lines(text: str) -> list[str]:
    return [ln.strip() for ln in text.splitlines() if ln.strip()]


def test_difference_1_the_quote_end_mark(pages):
    """Only the end marks differ: every disagreement is a page with a line ending in ' (after
    citation removal), and there are such pages."""
    step = C4LineRules(LineRules(count_words_after_citation_removal=False))  # our end marks
    differ = _disagreements(pages, step, datatrove_filter())
    assert len(differ) >= 20
    for t in differ:
        assert any(ln.endswith("'") for ln in _kept_lines(t)), t
    assert ours(step, "One two three four five six.'\nThe cat sat on the mat. The dog ran far away. The sun is out today.")[1] == "The cat sat on the mat. The dog ran far away. The sun is out today."


def test_difference_2_words_counted_before_citation_removal(pages):
    """Only the word count differs: every disagreement is a page with a citation marker."""
    step = C4LineRules(LineRules(end_marks=AS_DATATROVE["end_marks"]))  # words after removal
    differ = _disagreements(pages, step, datatrove_filter())
    assert len(differ) >= 20
    for t in differ:
        assert "[" in t and "]" in t, t
    text = "Four words here [1] now.\nThe cat sat on the mat. The dog ran far away. The sun is out today."
    assert ours(step, text) == (True, "The cat sat on the mat. The dog ran far away. The sun is out today.")
    assert theirs(datatrove_filter(), text) == (True, "Four words here  now.\nThe cat sat on the mat. The dog ran far away. The sun is out today.")


def test_difference_3_no_line_kept_without_a_sentence_rule():
    text = "no end mark here\nshort."
    assert ours(C4LineRules(LineRules(min_sentences=None)), text) == (False, "no_lines_kept")
    assert theirs(datatrove_filter(min_num_sentences=-1), text) == (True, "")
    # with the rule on, both drop it
    assert ours(C4LineRules(LineRules()), text) == (False, "no_lines_kept")
    assert theirs(datatrove_filter(), text) == (False, "too_few_sentences")


def test_difference_6_the_final_strip(pages):
    text = "[1] Five words are here now.\nThe cat sat on the mat. The dog ran far away. The sun is out today."
    assert ours(C4LineRules(LineRules()), text) == (True, " Five words are here now.\nThe cat sat on the mat. The dog ran far away. The sun is out today.")
    assert theirs(datatrove_filter(), text) == (True, "Five words are here now.\nThe cat sat on the mat. The dog ran far away. The sun is out today.")
    # on the generated pages it is the only difference in kept text, and it happens
    step, ref = C4LineRules(LineRules(**AS_DATATROVE)), datatrove_filter()
    stripped = [t for t in pages if (m := ours(step, t))[0] and m[1] != m[1].strip()]
    assert len(stripped) >= 5
    for t in stripped:
        assert ours(step, t)[1].startswith(" ") and theirs(ref, t)[1] == ours(step, t)[1].strip()
