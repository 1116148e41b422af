"""The fast paths of the clean stage give the same answers as the plain definitions they replace."""

import random
from collections import Counter

import numpy as np

from lmforge.cleaning.dedup import minhash as mh
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
    assert mh.xxh64_slices(data, lo, hi).tolist() == [xxhash.xxh64_intdigest(data[a:b]) for a, b in zip(lo.tolist(), hi.tolist())]


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
