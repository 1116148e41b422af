"""benchmarks/near_dup_quality.py's planted corpus, on the docstrings of a few stdlib modules:
the planted pairs' true Jaccard lies in their bins, the known non-duplicates lie below the lowest
bin, and the corpus-wide exact Jaccard (an inverted index) agrees with a brute-force one."""

from __future__ import annotations

import ast
import sysconfig
from itertools import combinations
from pathlib import Path

import numpy as np
import pytest

from lmforge.cleaning.text import normalize_for_dedup
from lmforge.corpus.stdlib import _documents_in

from .conftest import load_benchmark

MODULES = ["argparse", "subprocess", "typing", "pathlib", "tarfile", "zipfile", "logging", "enum", "dataclasses",
           "functools", "inspect", "pickle", "threading", "socket", "shutil", "datetime"]


def five_grams(text):  # written again here, not the benchmark's: the check must not share its code
    w = normalize_for_dedup(text).split()
    return {tuple(w[i : i + 5]) for i in range(len(w) - 4)}


def true_jaccard(a, b):
    sa, sb = five_grams(a), five_grams(b)
    return len(sa & sb) / len(sa | sb)


@pytest.fixture(scope="module")
def ndq():
    return load_benchmark("near_dup_quality")


@pytest.fixture(scope="module")
def texts():
    root = Path(sysconfig.get_paths()["stdlib"])
    out = []
    for name in MODULES:
        path = root / f"{name}.py"
        if not path.is_file():  # a package in this Python (zipfile is one from 3.12)
            path = root / name / "__init__.py"
        out += [text for _, text, _, _ in _documents_in(ast.parse(path.read_text(encoding="utf-8")), name)]
    return out


@pytest.fixture(scope="module")
def corpus(ndq, texts):
    return ndq.planted_corpus(seed=3, per_bin=3, unrelated=5, template=6, texts=texts)


def test_base_pages_are_100_to_400_words_and_unrelated(ndq, texts):
    pages = ndq.base_pages(texts, seed=3)
    assert len(pages) >= 6 * 3 + 5 + 6
    lengths = [len(normalize_for_dedup(p).split()) for p in pages]
    assert min(lengths) >= 100 and max(lengths) <= 400
    worst = max(true_jaccard(a, b) for a, b in combinations(pages[:40], 2))
    assert worst < ndq.BASE_OVERLAP


def test_planted_pairs_lie_in_their_bins(ndq, corpus):
    docs, truth = corpus
    text = {d["id"]: d["text"] for d in docs}
    assert len(truth["pairs"]) == 3 * len(ndq.BINS)
    assert sorted(b for _, _, b, _ in truth["pairs"]) == sorted(list(range(len(ndq.BINS))) * 3)
    for base, copy, b, j in truth["pairs"]:
        lo, hi = ndq.BINS[b]
        measured = true_jaccard(text[base], text[copy])
        assert measured == pytest.approx(j)
        assert lo <= measured and (measured < hi or hi == 1.0), (base, measured, ndq.BINS[b])
        assert measured < 1.0  # an edited copy, not the page itself


def test_non_duplicates_lie_below_the_lowest_bin(ndq, corpus):
    docs, truth = corpus
    text = {d["id"]: d["text"] for d in docs}
    lowest = min(lo for lo, _ in ndq.BINS)
    for d in truth["unrelated"] + truth["template"]:
        assert max(true_jaccard(text[d], other["text"]) for other in docs if other["id"] != d) < lowest
    # the template pages are hard negatives: pages of the same template share their header and footer
    same = [(a, b) for a, b in combinations(truth["template"], 2) if a.split("-")[0] == b.split("-")[0]]
    assert same and min(true_jaccard(text[a], text[b]) for a, b in same) > 0.05


def test_inverted_index_jaccard_is_the_brute_force_one(ndq, corpus):
    docs, _ = corpus
    i, j, jac = ndq.shared_pairs([ndq.hash_set(d["text"]) for d in docs])
    found = {(a, b): x for a, b, x in zip(i.tolist(), j.tolist(), jac.tolist())}
    for a, b in combinations(range(len(docs)), 2):
        expected = true_jaccard(docs[a]["text"], docs[b]["text"])
        assert found.get((a, b), 0.0) == pytest.approx(expected)
    best = ndq.nearest(len(docs), (i, j, jac))
    assert best.max() <= 1.0 and np.all(best >= 0)


def test_scores_on_a_known_drop_set(ndq, corpus):
    docs, truth = corpus
    ids = [d["id"] for d in docs]
    near = {"pairs": ndq.shared_pairs([ndq.hash_set(d["text"]) for d in docs])}
    # drop the copy of every pair in the two top bins and one unrelated page
    dropped = {c for _, c, b, _ in truth["pairs"] if b <= 1} | {truth["unrelated"][0]}
    s = ndq.score(ids, dropped, truth, near, 0.8)
    assert [r["recall"] for r in s["recall"]] == [1.0, 1.0, 0.0, 0.0, 0.0, 0.0]
    assert s["dropped"] == 7 and s["precision"] == pytest.approx(6 / 7)
    assert s["false_positives"]["unrelated"] == {"dropped": 1, "of": 5, "rate": 0.2}
    assert s["false_positives"]["template"]["dropped"] == 0
