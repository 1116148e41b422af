"""MinHash near-duplicate detection on a generated, seeded set of planted pairs.

Positives: a document and a copy with 1-3 words replaced (exact 5-gram Jaccard >= 0.8).
Negatives: a document and a copy with 10-16 words replaced (Jaccard between 0.3 and 0.5).
Both run through the real clean stage with every other rule off.
"""

import random

import numpy as np
import pyarrow.parquet as pq

from lmforge.cleaning.dedup import minhash as mh
from lmforge.cleaning.stage import run_clean
from lmforge.cleaning.text import normalize_for_dedup
from lmforge.config import CleanConfig
from lmforge.testing.documents import write_jsonl

N_WORDS = 150


def shingles(text, n=5):
    w = normalize_for_dedup(text).split()
    return {" ".join(w[i : i + n]) for i in range(len(w) - n + 1)}


def jaccard(a, b):
    sa, sb = shingles(a), shingles(b)
    return len(sa & sb) / len(sa | sb)


def word(rng):
    # letters only: normalisation maps digits to 0, so "w123" and "w456" would be the same word
    return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(7))


def random_words(rng, n=N_WORDS):
    return [word(rng) for _ in range(n)]


def mutate(rng, words, m):
    out = list(words)
    for pos in rng.sample(range(len(out)), m):
        out[pos] = word(rng)
    return out


def planted_pairs(seed=0, n_pos=300, n_neg=300):
    rng = random.Random(seed)
    pairs = []
    while sum(1 for p in pairs if p[2]) < n_pos or sum(1 for p in pairs if not p[2]) < n_neg:
        positive = sum(1 for p in pairs if p[2]) < n_pos
        base = random_words(rng)
        copy = mutate(rng, base, rng.randint(1, 3) if positive else rng.randint(10, 16))
        a, b = " ".join(base), " ".join(copy)
        j = jaccard(a, b)
        if (positive and j >= 0.8) or (not positive and 0.3 <= j <= 0.5):
            pairs.append((a, b, positive, j))
    return pairs


RULES_OFF = dict(
    max_page_length=None, max_word_length=None, citation_pattern=None, end_marks=None, ellipsis=None,
    min_words_per_line=None, lorem_ipsum=False, javascript=False, curly_brace=False, policy_phrases=None,
    min_sentences=None,
)


def caught_by_the_stage(tmp_path, pairs, verify=0.7):
    """Which pairs' copy the clean stage (every other rule off) drops, and its stats."""
    tmp_path.mkdir(exist_ok=True)
    docs = []
    for i, (a, b, _, _) in enumerate(pairs):
        docs.append({"id": f"{i}-base", "text": a})
        docs.append({"id": f"{i}-copy", "text": b})
    cfg = CleanConfig(
        inputs=[write_jsonl(tmp_path / "pairs.jsonl", docs)], output=str(tmp_path / "out"), workers=2,
        shard_size=250, rules=RULES_OFF, language={"enabled": False}, bad_words={"enabled": False},
        line_dedup={"mode": "off"}, urls={"dedup": False}, near_dedup={"verify_threshold": verify},
    )
    result = run_clean(cfg, log=lambda m: None)
    kept = set()
    for f in (tmp_path / "out").glob("shard-*.parquet"):
        kept.update(pq.read_table(f, columns=["id"]).column("id").to_pylist())
    assert all(f"{i}-base" in kept for i in range(len(pairs)))  # the first of each cluster stays
    return np.array([f"{i}-copy" not in kept for i in range(len(pairs))]), result.stats


def test_recall_and_false_positives_through_the_stage(tmp_path):
    pairs = planted_pairs()
    caught, stats = caught_by_the_stage(tmp_path, pairs)
    positive = np.array([p[2] for p in pairs])
    recall = caught[positive].mean()
    false_positive = caught[~positive].mean()
    print(f"recall {recall:.3f} on {positive.sum()} pairs, false positives {false_positive:.3%} on {(~positive).sum()} pairs")
    assert recall >= 0.95
    assert false_positive <= 0.01
    assert stats["dropped"]["near_duplicate"]["documents"] == caught.sum()


def test_verification_drops_few_pairs_below_the_bands_aim(tmp_path):
    """Pairs at 5-gram Jaccard 0.5-0.7, below the 0.8 that 14 bands x 8 rows aim at: the LSH
    alone makes 5-40% of them candidates (1 - (1 - s^8)^14), which every-candidate dedup drops
    (datatrove's way); verifying the signature similarity at 0.7 keeps most of them (29% dropped
    against 6% with this seed)."""
    rng = random.Random(5)
    pairs = []
    while len(pairs) < 150:
        base = random_words(rng)
        copy = mutate(rng, base, rng.randint(5, 9))
        a, b = " ".join(base), " ".join(copy)
        if 0.5 <= jaccard(a, b) < 0.7:
            pairs.append((a, b, False, jaccard(a, b)))
    verified, _ = caught_by_the_stage(tmp_path / "verified", pairs)
    every, stats = caught_by_the_stage(tmp_path / "every", pairs, verify=None)
    print(f"dropped: verified {verified.mean():.3f}, every candidate {every.mean():.3f}")
    assert verified.mean() <= 0.1
    assert every.mean() >= 0.15 and every.mean() >= 3 * verified.mean()
    assert stats["dropped"]["near_duplicate"]["documents"] == every.sum()


def test_candidate_probability_matches_the_banding_formula():
    # Without verification, P(candidate) = 1 - (1 - s^r)^b; check at s ~ 0.5 where it is ~5%.
    rng = random.Random(1)
    seeds = mh.permutation_seeds(14 * 8, 1)
    hits, total, js = 0, 400, []
    for _ in range(total):
        base = random_words(rng)
        copy = mutate(rng, base, 10)
        a, b = " ".join(base), " ".join(copy)
        js.append(jaccard(a, b))
        ka = mh.band_keys(mh.signature(mh.shingle_hashes(a, 5), seeds), 14, 8)
        kb = mh.band_keys(mh.signature(mh.shingle_hashes(b, 5), seeds), 14, 8)
        hits += bool((ka == kb).any())
    expected = np.mean([1 - (1 - j**8) ** 14 for j in js])
    observed = hits / total
    # binomial standard error at p ~ 0.05, n = 400 is ~0.011; allow 3 of them
    assert abs(observed - expected) < 0.035, (observed, expected)


def test_signature_similarity_estimates_jaccard():
    rng = random.Random(2)
    seeds = mh.permutation_seeds(256, 3)
    errors = []
    for m in (2, 6, 12, 25):
        base = random_words(rng)
        a, b = " ".join(base), " ".join(mutate(rng, base, m))
        est = mh.similarity(mh.signature(mh.shingle_hashes(a, 5), seeds), mh.signature(mh.shingle_hashes(b, 5), seeds))
        errors.append(abs(est - jaccard(a, b)))
    assert max(errors) < 0.1  # 256 permutations: standard error <= 0.031


def test_union_find_roots_are_the_smallest_ordinal():
    uf = mh.UnionFind()
    for a, b in [(5, 3), (3, 9), (9, 1), (20, 21)]:
        uf.union(a, b)
    assert {uf.find(x) for x in (1, 3, 5, 9)} == {1} and uf.find(21) == 20 and uf.find(7) == 7


def test_cluster_sizes_count_each_kept_document_with_its_copies():
    # clusters {0, 3, 7}, {2, 5} and {4, 6} (each near-duplicate maps to its cluster's first document)
    drops = {3: 0, 7: 0, 5: 2, 6: 4}
    assert mh.cluster_sizes(drops) == {2: 2, 3: 1}
    assert mh.cluster_sizes({}) == {}
