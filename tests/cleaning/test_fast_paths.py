"""The fast paths of the clean stage give the same answers as the plain definitions they replace."""

import random
from collections import Counter

import numpy as np

from lmforge.cleaning.dedup import minhash as mh
from lmforge.cleaning.dedup import xxh64
from lmforge.cleaning.dedup.lines import _line_hash, _line_hashes
from lmforge.cleaning.filters import BadWordsFilter
from lmforge.cleaning.text import count_sentences, normalize_for_dedup, normalize_for_dedup_utf8, split_sentences
from lmforge.config import BadWordsConfig
from lmforge.corpus.document import Document

PIECES = ["e.g.", "Dr.", "J.", "a.", "word", "The", "end.", "Why?", "Yes!", '"', "'", ")", "]", "(", "[", "\u201c", "\u201d",
          " ", "  ", "\t", ".", "!", "?", "etc.", "3.4", "É", "_", "-", "\n", "St.", "A.", "42", "İ", "ß", "\u00a0", "日本", "\u212a", "ſt.", "MR.", "Fig.", "x", "ǅ."]


def texts(seed, n, max_pieces=14):
    rng = random.Random(seed)
    return ["".join(rng.choice(PIECES) + rng.choice(["", " "]) for _ in range(rng.randint(0, max_pieces))) for _ in range(n)]


def test_count_sentences_is_the_number_of_sentences():
    for t in texts(0, 20000):
        assert count_sentences(t) == len(split_sentences(t)), repr(t)


def test_normalize_for_dedup_utf8():
    for c in range(128):
        assert normalize_for_dedup_utf8(f"Ab{chr(c)}Cd") == normalize_for_dedup(f"Ab{chr(c)}Cd").encode()
    for t in texts(1, 5000):
        assert normalize_for_dedup_utf8(t) == normalize_for_dedup(t).encode()


def test_shard_signatures_and_band_keys_match_the_per_document_ones():
    seeds = mh.permutation_seeds(112, 1)
    rng = random.Random(2)
    batch = texts(3, 300, max_pieces=60) + ["", " ", "one two", " ".join(f"w{rng.randrange(10**6)}" for _ in range(40000))]
    for ngram in (1, 3, 5):
        sigs, has = mh.shard_signatures(batch, ngram, seeds)
        ref = np.stack([mh.signature(mh.shingle_hashes(t, ngram), seeds) for t in batch])
        assert (sigs == ref).all()
        assert has.tolist() == [mh.shingle_hashes(t, ngram).size > 0 for t in batch]
        docs = np.flatnonzero(has)
        for bands, rows in ((14, 8), (20, 5), (7, 16)):
            keys = mh.shard_band_keys(sigs, docs, bands, rows)
            assert all((keys[i] == mh.band_keys(ref[r], bands, rows)).all() for i, r in enumerate(docs))


def test_xxh64_slices():
    import xxhash

    rng = random.Random(6)
    data = bytes(rng.randrange(256) for _ in range(400))
    lo = np.array([a for n in range(301) for a in range(9)], dtype=np.int64)
    hi = lo + np.array([n for n in range(301) for a in range(9)], dtype=np.int64)
    assert xxh64.xxh64_slices(data, lo, hi).tolist() == [xxhash.xxh64_intdigest(data[a:b]) for a, b in zip(lo.tolist(), hi.tolist())]


def test_line_hashes():
    batch = texts(4, 500)
    hashes, lines, counts = _line_hashes(batch)
    assert lines == [ln for t in batch for ln in t.split("\n")]
    assert counts.tolist() == [len(t.split("\n")) for t in batch]
    assert hashes.tolist() == [_line_hash(ln) for ln in lines]


def test_bad_words_prefilter_agrees_with_the_regex(tmp_path):
    path = tmp_path / "words.txt"
    path.write_text("$foo\na$$\ng-spot\nx y\nbar.\nwe'd\nünï\nb_c\n9 1 1\nzz\nmake me come\n")
    rng = random.Random(5)
    for cfg in (BadWordsConfig(), BadWordsConfig(path=str(path))):
        f = BadWordsFilter(cfg)
        entries = ["$foo", "a$$", "g-spot", "x y", "bar.", "we'd", "ünï", "b_c", "9 1 1", "ZZ", "Make me come", "ass", "2 girls 1 cup"]
        alpha = list("abfoxyzgspt$-._'!9 1\n\tME") + ["ü", "ï", "_"]
        hits = 0
        for _ in range(20000):
            t = "".join(rng.choice(alpha + entries) for _ in range(rng.randint(0, 10)))
            expected = "bad_words" if f.pattern.search(t.lower()) else None
            assert f(Document(id="x", text=t), Counter()) == expected, repr(t)
            hits += expected is not None
        assert hits > 1000


# ----------------------------------------------------------------------------- the C4 rules, dedup's re-check


def _reference_c4(rules, doc, line_counts):
    """C4LineRules.__call__ as it was written before its fast paths: every line lower-cased and
    looked at for each phrase, words counted in full."""
    import re

    from lmforge.cleaning.filters import _DEFAULT_CITATION

    r = rules
    citation = re.compile(r.citation_pattern) if r.citation_pattern else None
    needs_bracket = r.citation_pattern == _DEFAULT_CITATION
    end_marks = tuple(r.end_marks) if r.end_marks else None
    policy_phrases = tuple(p.lower() for p in r.policy_phrases or ())
    policy = re.compile("|".join(re.escape(p) for p in policy_phrases)) if policy_phrases else None
    kept, sentences = [], 0
    for raw in doc.text.splitlines():
        line = raw.strip()
        if not line:
            continue
        words_before = None
        if r.max_word_length is not None and len(line) > r.max_word_length:
            words_before = line.split()
            if any(len(w) > r.max_word_length for w in words_before):
                line_counts["line:too_long_word"] += 1
                continue
        stripped = line
        if citation is not None and (not needs_bracket or "[" in line):
            line = citation.sub("", line)
        if end_marks is not None and not line.endswith(end_marks):
            line_counts["line:no_end_mark"] += 1
            continue
        if r.ellipsis and line.endswith(r.ellipsis):
            line_counts["line:ellipsis"] += 1
            continue
        if r.min_words_per_line is not None:
            if r.count_words_after_citation_removal or line is stripped:
                n_words = len(line.split())
            else:
                n_words = len(words_before if words_before is not None else stripped.split())
            if n_words < r.min_words_per_line:
                line_counts["line:too_few_words"] += 1
                continue
        lower = line.lower()
        if r.lorem_ipsum and "lorem ipsum" in lower:
            return "lorem_ipsum"
        if r.javascript and "javascript" in lower:
            line_counts["line:javascript"] += 1
            continue
        if r.curly_brace and "{" in line:
            return "curly_brace"
        if policy is not None and policy.search(lower):
            line_counts["line:policy"] += 1
            continue
        if r.min_sentences is not None and sentences < r.min_sentences:
            sentences += len(split_sentences(line))
        kept.append(line)
    if not kept:
        return "no_lines_kept"
    if r.min_sentences is not None and sentences < r.min_sentences:
        return "too_few_sentences"
    doc.text = "\n".join(kept)
    return None


C4_PIECES = ["Lorem Ipsum", "lorem", "ipsum", "JavaScript", "java script", "Privacy Policy", "terms of use", "uses\ncookies",
             "cookie", "lorem[1] ipsum", "java[edit]script", "privacy[citation needed] policy", "uses[] cookies", "[1]", "[edit]", "[", "]", "[citation needed]", "{", "}", "İ", "\u212a", "é", "Σ", "...", "e.g.", "Dr.",
             "the", "word", "end.", "Why?", "Yes!", '"', "a.", "\n", "\r\n", "\u2028", " ", "  ", "\t", "x" * 12]


def _c4_pages(seed, n):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        lines = []
        for _ in range(rng.randint(1, 7)):
            words = [rng.choice(C4_PIECES if rng.random() < 0.3 else ["one", "two", "make", "how", "long", "time"])
                     for _ in range(rng.randint(0, 14))]
            lines.append(" ".join(words) + rng.choice([".", ".", "!", "?", "", "...", " [2].", '"']))
        out.append("\n".join(lines))
    return out


def test_c4_rules_fast_paths_match_the_reference():
    from lmforge.cleaning.filters import C4LineRules
    from lmforge.config import LineRules

    variants = [LineRules(), LineRules(min_words_per_line=1), LineRules(min_words_per_line=9, min_sentences=1),
                LineRules(citation_pattern=None), LineRules(citation_pattern=r"\(\d+\)"),
                LineRules(count_words_after_citation_removal=False, max_word_length=10),
                LineRules(policy_phrases=["make how", "ΣΑ"], lorem_ipsum=False), LineRules(javascript=False, policy_phrases=None),
                LineRules(lorem_ipsum=False, javascript=False, policy_phrases=None), LineRules(end_marks=None, min_words_per_line=None)]
    pages = _c4_pages(7, 3000)
    reasons = Counter()
    for rules in variants:
        step = C4LineRules(rules)
        for text in pages:
            a, b = Document(id="x", text=text), Document(id="x", text=text)
            ca, cb = Counter(), Counter()
            assert step(a, ca) == _reference_c4(rules, b, cb), repr(text)
            assert (a.text, ca) == (b.text, cb), repr(text)
            reasons[_reference_c4(rules, Document(id="x", text=text), Counter())] += 1
    assert {"lorem_ipsum", "curly_brace", None, "too_few_sentences", "no_lines_kept"} <= set(reasons)


def test_a_page_the_c4_rules_keep_has_min_sentences_as_dedup_counts_them():
    """dedup_apply re-counts sentences only where it changed a page (see lines._FILTER_KEPT_SENTENCES)."""
    from lmforge.cleaning.dedup.lines import _fewer_sentences
    from lmforge.cleaning.filters import C4LineRules
    from lmforge.config import LineRules

    pages = _c4_pages(8, 3000) + texts(9, 3000, max_pieces=40)
    for rules in (LineRules(), LineRules(min_sentences=1, min_words_per_line=1), LineRules(min_sentences=6, end_marks=None),
                  LineRules(citation_pattern=r"\d", min_words_per_line=None)):
        step = C4LineRules(rules)
        kept = 0
        for text in pages:
            doc = Document(id="x", text=text)
            if step(doc, Counter()) is None:
                kept += 1
                assert not _fewer_sentences(doc.text, rules.min_sentences), repr(text)
        assert kept > 50


def test_count_sentences_boundaries_found_at_the_mark():
    from lmforge.cleaning.text import _BOUNDARY, _BOUNDARY_AT_MARK

    for t in texts(10, 20000) + _c4_pages(11, 2000):
        assert [(m.start() + 1, m.end()) for m in _BOUNDARY_AT_MARK.finditer(t)] == [m.span() for m in _BOUNDARY.finditer(t)], repr(t)


# ----------------------------------------------------------------------------- bytes and JSON


def test_words_at_every_byte():
    rng = random.Random(12)
    for n in list(range(40)) + [1000, 4097]:
        data = bytes(rng.randrange(256) for _ in range(n))
        raw = np.frombuffer(data + bytes(8), dtype=np.uint8)
        ref = np.ascontiguousarray(np.lib.stride_tricks.as_strided(raw, shape=(raw.size - 7, 8), strides=(1, 1))).view("<u8").ravel()
        got = xxh64._words_at_every_byte(data)
        assert got.dtype == ref.dtype and got.tolist() == ref.tolist()


def test_metadata_json_as_json_dumps_writes_it():
    import json

    from lmforge.cleaning.shards import _METADATA_ENCODER, docs_to_table, table_to_docs

    rng = random.Random(13)
    values = ["é", "日本", "\u2028", "a\"b", None, True, 1.5, float("inf"), 10**30, [], {"z": 1, "a": [1, {"b": "ü"}]}]
    metas = [{rng.choice(["url_normalized", "language", "z", "A", "é", "1"]): rng.choice(values) for _ in range(rng.randint(0, 4))}
             for _ in range(500)]
    for m in metas:
        assert _METADATA_ENCODER.encode(m) == json.dumps(m, sort_keys=True, ensure_ascii=False)
    docs = [Document(id=str(i), text="t", metadata=m) for i, m in enumerate(metas)]
    back, _ = table_to_docs(docs_to_table(docs, list(range(len(docs)))))
    assert [d.metadata for d in back] == [json.loads(json.dumps(m, sort_keys=True, ensure_ascii=False)) if m else {} for m in metas]
    assert len({id(d.metadata) for d in back}) == len(back)  # each document its own dict (the steps add keys)


def test_dedup_apply_reads_the_line_hashes_dedup_map_saved(tmp_path):
    """_line_decisions with the hashes dedup_map kept, and without them (work of an earlier version)."""
    from lmforge.cleaning.dedup import lines as L
    from lmforge.cleaning.shards import docs_to_table
    from lmforge.cleaning.storage import write_parquet

    rng = random.Random(14)
    pool = ["Same line here.", "same LINE here. ", "Other one!", "", " x", "É é", "a\tb"]
    docs = [Document(id=str(i), text="\n".join(rng.choice(pool) for _ in range(rng.randint(1, 6))), url=f"u{i % 7}")
            for i in range(300)]
    (tmp_path / "filter").mkdir()
    (tmp_path / "dedup").mkdir()
    write_parquet(tmp_path / "filter" / "shard-00000.parquet", docs_to_table(docs, list(range(100, 400))))
    assert L.dedup_map(str(tmp_path), 0, "lines", 3, 2)
    saved = L._line_hashes_path(tmp_path, 0)
    hashes, _, counts = L._line_hashes([d.text for d in docs])
    assert np.load(saved).tolist() == hashes.tolist()
    pairs = list(zip(np.repeat(np.arange(100, 400), counts).tolist(), hashes.tolist()))
    owned = set(rng.sample(pairs, len(pairs) // 2))
    with_saved = L._line_decisions(tmp_path, 0, owned)
    saved.unlink()
    assert L._line_decisions(tmp_path, 0, owned) == with_saved
    assert sum(v[2] for v in with_saved.values()) > 0 and sum(v[3] for v in with_saved.values()) > 0


def test_mix_pairs_is_mix_of_the_xor_matrix():
    rng = np.random.default_rng(15)
    for n, p in ((0, 5), (1, 1), (37, 112), (500, 7)):
        h = rng.integers(0, 2**64 - 1, size=n, dtype=np.uint64, endpoint=True)
        edges = np.array([0, 2**64 - 1, 1 << 63, (1 << 30) - 1, 1 << 30], dtype=np.uint64)[:n]
        h[: edges.size] = edges
        s = mh.permutation_seeds(p, n)
        assert (mh._mix_pairs(h, s) == mh._mix(h[:, None] ^ s[None, :])).all()
