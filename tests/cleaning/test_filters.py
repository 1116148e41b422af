"""Every C4 rule, with the exact reason it drops, in the reference order."""

from collections import Counter

import pytest

from lmforge.cleaning.filters import BadWordsFilter, C4LineRules, LanguageFilter, MaxPageLength, load_word_list
from lmforge.cleaning.text import normalize_for_dedup, split_sentences
from lmforge.config import BadWordsConfig, LanguageConfig, LineRules
from lmforge.corpus.document import Document

GOOD = [
    "The quick brown fox jumps over the lazy dog.",
    "A second sentence follows here with enough words.",
    "Finally a third line closes the page with a period.",
]


def run(text, **rules):
    doc = Document(id="d", text=text)
    counts = Counter()
    reason = C4LineRules(LineRules(**rules))(doc, counts)
    return reason, doc.text, counts


def page(*extra):
    return "\n".join(GOOD + list(extra))


def test_clean_page_is_kept_unchanged():
    reason, text, counts = run(page())
    assert reason is None
    assert text == "\n".join(GOOD)
    assert sum(counts.values()) == 0


def test_long_word_drops_the_line():
    reason, text, counts = run(page("This line has a " + "x" * 1001 + " word in it."))
    assert reason is None and "xxx" not in text
    assert counts == {"line:too_long_word": 1}
    # exactly at the limit is fine
    reason, text, counts = run(page("This line has a " + "x" * 1000 + " word in it."))
    assert "x" * 1000 in text and not counts


def test_citations_are_removed():
    reason, text, _ = run(page("Paris is the capital of France[1] and a big city[citation needed]."))
    assert reason is None
    assert "Paris is the capital of France and a big city." in text.splitlines()


def test_end_marks_and_ellipsis():
    for line, why in [
        ("This line has no end mark at all", "line:no_end_mark"),
        ("This line ends with a colon here:", "line:no_end_mark"),
        ("This line trails off into an ellipsis...", "line:ellipsis"),
    ]:
        reason, text, counts = run(page(line))
        assert reason is None and line not in text and counts == {why: 1}, line
    for line in ["Does this question line stay here?", "What a line this is to keep!", 'He said it was "five words long."']:
        reason, text, counts = run(page(line))
        assert line in text.splitlines(), line


def test_min_words_per_line():
    reason, text, counts = run(page("Only four words here."))
    assert counts == {"line:too_few_words": 1}


def test_citation_marker_and_five_words_after_removal():
    # The reference counts words after removing citations: 5 words remain, so the line stays...
    keep = "One two three four [1] five."
    reason, text, counts = run(page(keep))
    assert "One two three four  five." in text.splitlines() and not counts
    # ...while a line with 4 words and a separate marker (5 tokens before removal) is dropped,
    drop = "One two three [12] four."
    reason, text, counts = run(page(drop))
    assert counts == {"line:too_few_words": 1}
    # unless words are counted before removal, as datatrove does.
    reason, text, counts = run(page(drop), count_words_after_citation_removal=False)
    assert not counts and "One two three  four." in text.splitlines()


def test_lorem_ipsum_drops_the_page():
    reason, _, _ = run(page("Lorem Ipsum dolor sit amet, consectetur adipiscing elit."))
    assert reason == "lorem_ipsum"


def test_javascript_drops_the_line():
    reason, text, counts = run(page("Please enable JavaScript to view this page properly."))
    assert reason is None and counts == {"line:javascript": 1}


def test_one_curly_brace_drops_the_page():
    reason, _, _ = run(page("The mapping {a: 1} is shown in this sentence."))
    assert reason == "curly_brace"


def test_curly_brace_on_an_already_dropped_line_does_not_drop_the_page():
    # Order dependence in the reference: the end-mark rule runs before the brace rule, so a
    # brace on a line without an end mark never reaches it; likewise "javascript" comes first.
    reason, text, counts = run(page("function f() { return 1 }"))
    assert reason is None and counts == {"line:no_end_mark": 1}
    reason, text, counts = run(page("The javascript object {a: 1} is shown in this sentence."))
    assert reason is None and counts == {"line:javascript": 1}
    reason, _, counts = run(page("So {a}."))  # too few words: removed before the brace check
    assert reason is None and counts == {"line:too_few_words": 1}


def test_policy_phrases_drop_the_line():
    for phrase in ["Terms of Use", "privacy policy", "cookie policy", "uses cookies", "use of cookies", "use cookies"]:
        reason, text, counts = run(page(f"Please read our {phrase} before you continue here."))
        assert reason is None and counts == {"line:policy": 1}, phrase


def test_min_sentences():
    reason, _, _ = run("\n".join(GOOD[:2]))
    assert reason == "too_few_sentences"
    # two sentences on one line count as two
    reason, _, _ = run(GOOD[0] + " " + GOOD[1] + "\n" + GOOD[2])
    assert reason is None
    reason, _, _ = run("\n".join(GOOD[:2]), min_sentences=2)
    assert reason is None


def test_page_with_no_surviving_line():
    reason, _, _ = run("no end mark\nanother one")
    assert reason == "no_lines_kept"


def test_rules_can_be_turned_off():
    text = page("The mapping {a: 1} is shown in this sentence.", "Lorem ipsum dolor sit amet is here.", "short")
    reason, out, _ = run(text, curly_brace=False, lorem_ipsum=False, end_marks=None, min_words_per_line=None, min_sentences=None)
    assert reason is None and out.splitlines()[-1] == "short"


def test_max_page_length():
    step = MaxPageLength(190_000)
    assert step(Document(id="a", text="x" * 190_000), Counter()) is None
    assert step(Document(id="a", text="x" * 190_001), Counter()) == "too_long_page"


@pytest.mark.parametrize(
    "text,n",
    [
        ("One sentence here. Another one there! And a third? Yes.", 4),
        ("Dr. Smith met Mr. Jones at 5 p.m. today. They talked.", 2),
        ("Use e.g. this or i.e. that. Then stop.", 2),
        ("J. R. R. Tolkien wrote books. He was English.", 2),
        ('He said "Stop." Then he left.', 2),
        ("no terminal punctuation", 1),
        ("Start the repl.  repl can be used later.", 2),  # Punkt splits before a lower-case word too
        ("It takes (args). 'args' is a list.", 2),
        ("Values are approx. ten or so.", 1),
    ],
)
def test_sentence_counts(text, n):
    assert len(split_sentences(text)) == n


def test_normalize_for_dedup():
    assert normalize_for_dedup("Hello,   World! It's 2024.\nNew-line") == "hello world it s 0000 new line"


def test_bad_words_whole_word_case_insensitive(tmp_path):
    words = tmp_path / "words.txt"
    words.write_text("# comment\nBadWord\ntwo words\n", encoding="utf-8")
    f = BadWordsFilter(BadWordsConfig(path=str(words)))
    assert load_word_list(words) == ["badword", "two words"]  # a capitalised entry still matches
    drop = ["This has a BADWORD in it.", "ends with badword", "Two Words appear here.", "(badword)"]
    keep = ["badwords is another word.", "abadword is not it.", "two-words is not the phrase either.", "twowords."]
    for text in drop:
        assert f(Document(id="x", text=text), Counter()) == "bad_words", text
    for text in keep:
        assert f(Document(id="x", text=text), Counter()) is None, text


def test_packaged_bad_words_list():
    words = load_word_list(None)
    assert len(words) > 300 and all(w == w.lower() for w in words)
    f = BadWordsFilter(BadWordsConfig())
    assert f(Document(id="x", text="Nothing to see here."), Counter()) is None


def test_bad_words_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="clean.bad_words.path"):
        BadWordsFilter(BadWordsConfig(path=str(tmp_path / "nope.txt")))


ENGLISH = (
    "The committee met on Tuesday to discuss the new budget for the public library. "
    "Several members argued that more money should go to the children's section, while others "
    "wanted to extend the opening hours during the winter months."
)
GERMAN = (
    "Der Ausschuss traf sich am Dienstag, um den neuen Haushalt der öffentlichen Bibliothek zu besprechen. "
    "Mehrere Mitglieder meinten, dass mehr Geld in die Kinderabteilung fließen sollte, während andere die "
    "Öffnungszeiten in den Wintermonaten verlängern wollten."
)


@pytest.mark.parametrize("backend", ["cld2", "langdetect"])
def test_language_filter(backend):
    f = LanguageFilter(LanguageConfig(backend=backend))
    doc = Document(id="en", text=ENGLISH)
    assert f(doc, Counter()) is None and doc.metadata["language"] == "en"
    doc = Document(id="de", text=GERMAN)
    assert f(doc, Counter()) == "language" and doc.metadata["language"] == "de"
    assert LanguageFilter(LanguageConfig(backend=backend, languages=["de"]))(Document(id="de", text=GERMAN), Counter()) is None


def test_language_threshold_is_applied():
    mixed = ENGLISH + " " + GERMAN
    strict = LanguageFilter(LanguageConfig(threshold=0.99))
    loose = LanguageFilter(LanguageConfig(threshold=0.3))
    assert strict(Document(id="m", text=mixed), Counter()) == "language"
    doc = Document(id="m", text=mixed)
    loose(doc, Counter())
    assert 0.3 <= doc.metadata["language_score"] < 0.99


def test_short_english_is_english_with_cld2():
    # CLD2's raw percentage for a short text tops out below 99; the normalised share does not.
    doc = Document(id="s", text="The quick brown fox jumps over the lazy dog.")
    assert LanguageFilter(LanguageConfig())(doc, Counter()) is None and doc.metadata["language_score"] == 1.0


def test_language_handles_unencodable_text():
    f = LanguageFilter(LanguageConfig())
    assert f(Document(id="s", text="\ud800 lone surrogate " + ENGLISH), Counter()) is None


def test_trie_regex_matches_exactly_the_entries():
    import re

    from lmforge.cleaning.filters import trie_regex

    entries = ["a", "ab", "abc", "b", "ba", "x-y", "s&m", "two words"]
    exact = re.compile(f"^(?:{trie_regex(entries)})$")
    assert all(exact.match(w) for w in entries)
    assert not any(exact.match(w) for w in ["", "ac", "abcd", "x", "bab", "s&", "two"])
    words = load_word_list(None)
    exact = re.compile(f"^(?:{trie_regex(words)})$")
    assert all(exact.match(w) for w in words)
