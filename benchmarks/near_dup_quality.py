"""Near-duplicate detection quality: lmforge's MinHash near dedup and datatrove's, scored on a
seeded corpus of planted pairs whose true Jaccard is known, and both tools' drops on the
40,000 generated pages of ``clean_executors.py`` measured against the exact Jaccard.

    python3 -m venv ../dtvenv && ../dtvenv/bin/pip install 'datatrove[processing]==0.10.1' spacy orjson aiohttp
    .venv/bin/python benchmarks/near_dup_quality.py --datatrove-python ../dtvenv/bin/python \\
        --json benchmarks/results/near_dup_quality.json

(aiohttp: datatrove's bad-words filter, in the rerun of ``clean_executors.py``'s pipeline.)

**The planted corpus.** Base pages are runs of consecutive paragraphs of the embedded stdlib
docstring corpus (``lmforge.corpus.stdlib``), 100-400 words each, every paragraph used once;
pages that share 10% or more of their 5-gram shingles with an earlier page are left out. For
each similarity bin (5-gram Jaccard in [0.9, 1], [0.8, 0.9), [0.7, 0.8), [0.6, 0.7), [0.5, 0.6),
[0.3, 0.5)) ``--per-bin`` base pages get one planted copy: edits (a word replaced, inserted or
deleted, or a span of 3-12 words rewritten with words of another page) applied one at a time
until the copy's true Jaccard with its base falls to a target drawn in the bin. Known
non-duplicates: ``--unrelated`` pages with no copy, and ``--template`` pages (hard negatives)
that share one of three site templates (a header and a footer of about 35 words each) with
each other. All documents are shuffled.

**The true Jaccard** is that of the sets of word 5-grams of lmforge's normalised text
(``normalize_for_dedup``: lower case, punctuation to spaces, digits to 0; the same shingles as
lmforge's MinHash), computed exactly from the sets (for the corpus-wide nearest neighbours: of
the sets of the 64-bit xxHash of each 5-gram string, the hashes lmforge's MinHash starts from).
datatrove splits words differently (``simplify_text`` then spaCy's English tokenizer): its
words of every planted document are fetched and the planted pairs' Jaccard by its shingles is
reported beside ours.

**Ground truth.** A pair is a duplicate when its true Jaccard is >= 0.8 (``--threshold``):
14 bands x 8 rows put the LSH's 50% point at (1/14)^(1/8) = 0.72 and its 92% point at 0.8, so
both tools, configured alike, are built to catch 0.8 and let 0.5 go. Every bin is reported.

**Runs** (each with every ``--seeds`` value as the MinHash seed): (a) lmforge's clean stage
with every rule but near dedup off (``verify_threshold: 0.7``, the default); (b) the same with
``verify_threshold: null`` (every LSH candidate pair kept, as datatrove does); (c) datatrove's
four MinHash stages (5-grams, 14 buckets x 8 hashes, ``_datatrove_minhash.py`` in its own venv).

**Scores.** Recall per bin: planted pairs of which one page was dropped / planted pairs.
Precision: dropped documents whose true Jaccard to some kept document is >= the threshold /
dropped documents (also at 0.7). False-positive rate: dropped / known non-duplicates.

**The 40,000 generated pages** (``make_corpus`` of ``clean_stage.py``, seed 0; ``--generated 0``
skips them): lmforge near dedup alone and with every default step (the 85 of BENCHMARKS.md),
each verified and not; datatrove's MinHash alone, and ``clean_executors.py``'s datatrove
pipeline (C4 filters + MinHash, the 498 of BENCHMARKS.md; counts only). Each drop's exact
Jaccard to the nearest kept page, how many pages have a near-copy at each level, and how many
LSH candidates the banding formula expects of them.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from itertools import combinations
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
NGRAM = 5
BINS = [(0.9, 1.0), (0.8, 0.9), (0.7, 0.8), (0.6, 0.7), (0.5, 0.6), (0.3, 0.5)]
BASE_OVERLAP = 0.1  # base pages sharing this much (Jaccard) with an earlier one are left out

# Three site templates: a header and a footer each, shared by the template pages (hard negatives).
TEMPLATES = [
    ("Skip to main content. Home | Library reference | Language reference | Tutorials | Glossary | Search. "
     "You are reading the documentation of an older release; the page below may describe behaviour that has "
     "since changed.",
     "Found a mistake on this page? Report it on the issue tracker or suggest a change. This page was last "
     "updated on the date of the release. Copyright the Python Software Foundation and its contributors; "
     "licensed under the terms of the license agreement. Privacy policy | Terms of use | Contact."),
    ("Welcome to the community wiki! Log in or create an account to edit pages, follow changes and take part "
     "in the discussion. Navigation: Main page | Recent changes | Random page | Help | Donate.",
     "Retrieved from the community wiki. Text is available under the Creative Commons Attribution-ShareAlike "
     "license; additional terms may apply. By using this site, you agree to the terms of use and the privacy "
     "policy. About the wiki | Disclaimers | Mobile view | Developers."),
    ("Subscribe to our weekly newsletter and never miss a tutorial: enter your email address below and press "
     "the button. Categories: Programming | Python | Standard library | Tips and tricks.",
     "Share this article on social media if you found it useful. Related posts: ten things you did not know "
     "about the standard library; how to write better documentation. Leave a comment below; comments are "
     "moderated and may take a day to appear. All rights reserved."),
]


# ----------------------------------------------------------------------------- shingles and Jaccard


def words(text: str) -> list[str]:
    from lmforge.cleaning.text import normalize_for_dedup

    return normalize_for_dedup(text).split()


def shingles_of(tokens: list[str], n: int = NGRAM) -> set[str]:
    """The set of word n-grams (a text shorter than n words is one n-gram, as lmforge's MinHash has it)."""
    if len(tokens) < n:
        return {" ".join(tokens)} if tokens else set()
    return {" ".join(tokens[i : i + n]) for i in range(len(tokens) - n + 1)}


def shingles(text: str, n: int = NGRAM) -> set[str]:
    return shingles_of(words(text), n)


def jaccard(a: set, b: set) -> float:
    union = len(a | b)
    return len(a & b) / union if union else 1.0


def shared_pairs(hash_sets: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every pair of documents (i < j) that shares a shingle, and its exact Jaccard, from each
    document's distinct shingle hashes: an inverted index (shingle -> documents), counted."""
    sizes = np.array([h.size for h in hash_sets], dtype=np.int64)
    h = np.concatenate(hash_sets) if hash_sets else np.zeros(0, dtype=np.uint64)
    doc = np.repeat(np.arange(len(hash_sets), dtype=np.int64), sizes)
    order = np.lexsort((doc, h))
    h, doc = h[order], doc[order]
    starts = np.flatnonzero(np.r_[True, h[1:] != h[:-1]]) if h.size else np.zeros(0, dtype=np.int64)
    ends = np.r_[starts[1:], h.size]
    codes = []
    n = len(hash_sets)
    for lo, hi in zip(starts[ends - starts >= 2].tolist(), ends[ends - starts >= 2].tolist()):
        members = doc[lo:hi]
        if hi - lo == 2:
            codes.append(members[0] * n + members[1])
        else:
            a, b = np.array(list(combinations(members.tolist(), 2))).T
            codes.append(a * n + b)
    if not codes:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, np.zeros(0)
    code, inter = np.unique(np.concatenate([np.atleast_1d(c) for c in codes]), return_counts=True)
    i, j = code // n, code % n
    return i, j, inter / (sizes[i] + sizes[j] - inter)


def hash_set(text: str) -> np.ndarray:
    from lmforge.cleaning.dedup.minhash import shingle_hashes

    return np.unique(shingle_hashes(text, NGRAM))


def nearest(n: int, pairs: tuple[np.ndarray, np.ndarray, np.ndarray], among: np.ndarray | None = None) -> np.ndarray:
    """Each document's largest exact Jaccard with another document (only those ``among`` marks,
    when given); 0 where it shares no shingle with any."""
    i, j, jac = pairs
    best = np.zeros(n)
    for a, b in ((i, j), (j, i)):
        keep = np.ones(a.size, dtype=bool) if among is None else among[b]
        np.maximum.at(best, a[keep], jac[keep])
    return best


# ----------------------------------------------------------------------------- the planted corpus


def stdlib_texts() -> list[str]:
    """The embedded corpus's documents (stdlib docstrings), in the order of their ids."""
    from lmforge.corpus.stdlib import stdlib_documents

    return [d.text for d in sorted(stdlib_documents(), key=lambda d: d.id)]


def base_pages(texts: list[str] | None = None, min_words: int = 100, max_words: int = 400, seed: int = 0) -> list[str]:
    """Pages of consecutive paragraphs (lines) of ``texts`` (default: the stdlib docstrings),
    ``min_words``-``max_words`` words of normalised text each (a target of at most 250 drawn
    per page), every distinct paragraph used once; pages that overlap an earlier one (Jaccard
    >= BASE_OVERLAP) are left out."""
    rng = random.Random(seed)
    seen: set[str] = set()
    pages: list[str] = []
    current: list[str] = []
    count, target = 0, rng.randint(min_words, min(max_words, 250))
    for text in stdlib_texts() if texts is None else texts:
        for para in text.split("\n"):
            key = " ".join(words(para))
            n = len(key.split())
            if n < 3 or n > max_words or key in seen:
                continue
            seen.add(key)
            if count + n > max_words:  # would overflow: close the page if it is long enough
                if count >= min_words:
                    pages.append("\n".join(current))
                current, count, target = [], 0, rng.randint(min_words, min(max_words, 250))
            current.append(para.strip())
            count += n
            if count >= target:
                pages.append("\n".join(current))
                current, count, target = [], 0, rng.randint(min_words, min(max_words, 250))
    sets = [hash_set(p) for p in pages]
    i, j, jac = shared_pairs(sets)
    drop = set()
    for a, b in sorted(zip(i[jac >= BASE_OVERLAP].tolist(), j[jac >= BASE_OVERLAP].tolist()), key=lambda p: p[1]):
        if a not in drop:
            drop.add(b)
    return [p for k, p in enumerate(pages) if k not in drop]


def _edit(rng: random.Random, lines: list[list[str]], donor: list[str]) -> None:
    """One random edit in place: a word replaced (40%), inserted (20%) or deleted (20%), or a
    span of 3-12 words rewritten with a run of the donor page's words (20%)."""
    line = rng.choice([k for k, ln in enumerate(lines) if ln])
    toks = lines[line]
    kind = rng.choices(["replace", "insert", "delete", "span"], weights=[4, 2, 2, 2])[0]
    pos = rng.randrange(len(toks))
    if kind == "replace":
        toks[pos] = rng.choice(donor)
    elif kind == "insert":
        toks.insert(pos, rng.choice(donor))
    elif kind == "delete" and sum(map(len, lines)) > 20:
        del toks[pos]
    else:
        k = rng.randint(3, 12)
        start = rng.randrange(max(1, len(donor) - k))
        toks[pos : pos + k] = donor[start : start + rng.randint(3, 12)]


def plant_copy(rng: random.Random, page: str, lo: float, hi: float, donor: str, tries: int = 50) -> tuple[str, float] | None:
    """A copy of ``page`` whose true Jaccard with it lies in [lo, hi) ([lo, 1] for hi = 1):
    edits one at a time until the Jaccard falls to a target drawn in the bin."""
    base = shingles(page)
    donor_words = donor.split()
    for _ in range(tries):
        target = rng.uniform(lo, hi)
        lines = [ln.split() for ln in page.split("\n")]
        j = 1.0
        while j > target:
            _edit(rng, lines, donor_words)
            j = jaccard(base, shingles("\n".join(" ".join(ln) for ln in lines)))
        if lo <= j and (j < hi or hi == 1.0):
            return "\n".join(" ".join(ln) for ln in lines), j
    return None


def planted_corpus(seed: int = 0, per_bin: int = 100, unrelated: int = 250, template: int = 120,
                   texts: list[str] | None = None) -> tuple[list[dict], dict]:
    """The documents (id, text), shuffled, and the truth: ``pairs`` (base id, copy id, bin
    index, true Jaccard), ``unrelated`` and ``template`` (ids of the known non-duplicates).
    Base pages from ``texts`` (default: the stdlib docstrings)."""
    rng = random.Random(seed)
    pool = base_pages(texts, seed=seed)
    rng.shuffle(pool)
    need = per_bin * len(BINS) + unrelated + template
    if len(pool) < need:
        raise SystemExit(f"near_dup_quality: the texts give {len(pool)} base pages; {need} are needed "
                         "(lower --per-bin, --unrelated or --template)")
    docs: list[dict] = []
    pairs = []
    k = 0
    for b, (lo, hi) in enumerate(BINS):
        for _ in range(per_bin):
            page, k = pool[k], k + 1
            copy = None
            while copy is None:  # a page too short for the bin's edits: the next one
                copy = plant_copy(rng, page, lo, hi, donor=rng.choice(pool))
                if copy is None:
                    page, k = pool[k], k + 1
            a, c = f"b{b}-{len(pairs)}-base", f"b{b}-{len(pairs)}-copy"
            docs += [{"id": a, "text": page}, {"id": c, "text": copy[0]}]
            pairs.append((a, c, b, copy[1]))
    unrelated_ids = []
    for u in range(unrelated):
        unrelated_ids.append(f"u-{u}")
        docs.append({"id": unrelated_ids[-1], "text": pool[k]})
        k += 1
    template_ids = []
    for t in range(template):
        head, foot = TEMPLATES[t % len(TEMPLATES)]
        template_ids.append(f"t{t % len(TEMPLATES)}-{t}")
        docs.append({"id": template_ids[-1], "text": f"{head}\n{pool[k]}\n{foot}"})
        k += 1
    rng.shuffle(docs)
    return docs, {"pairs": pairs, "unrelated": unrelated_ids, "template": template_ids}


# ----------------------------------------------------------------------------- the runs


def near_dedup_only(inputs: str, output: str, seed: int, verify: float | None, every_step: bool = False):
    """lmforge's clean stage with every step but near dedup off (or, ``every_step``, the defaults)."""
    from lmforge.config import CleanConfig

    nd = {"seed": seed, "verify_threshold": verify}
    if every_step:
        return CleanConfig(inputs=[inputs], output=output, workers=1, near_dedup=nd)
    rules_off = dict(max_page_length=None, max_word_length=None, citation_pattern=None, end_marks=None, ellipsis=None,
                     min_words_per_line=None, lorem_ipsum=False, javascript=False, curly_brace=False, policy_phrases=None,
                     min_sentences=None)
    return CleanConfig(inputs=[inputs], output=output, workers=1, rules=rules_off, language={"enabled": False},
                       bad_words={"enabled": False}, line_dedup={"mode": "off"}, urls={"dedup": False}, near_dedup=nd)


def run_lmforge(corpus: Path, tmp: Path, seed: int, verify: float | None, every_step: bool = False) -> dict:
    """The ids lmforge keeps and what its stats say."""
    from lmforge.cleaning.stage import run_clean

    out = tmp / f"lm-{seed}-{verify}-{every_step}"
    t0 = time.perf_counter()
    result = run_clean(near_dedup_only(str(corpus), str(out), seed, verify, every_step), log=lambda m: None)
    wall = time.perf_counter() - t0
    kept: set[str] = set()
    for f in out.glob("shard-*.parquet"):
        kept.update(pq.read_table(f, columns=["id"]).column("id").to_pylist())
    dropped = result.stats["dropped"]
    return {"kept": kept, "wall_s": wall, "near_duplicates": dropped.get("near_duplicate", {}).get("documents", 0),
            "dropped": {k: v["documents"] for k, v in dropped.items()}}


def run_datatrove(python: str, corpus: Path, tmp: Path, seed: int, tokens_for: list[str] | None = None,
                  tokens_only: bool = False) -> dict:
    """datatrove's four MinHash stages on ``corpus`` (``_datatrove_minhash.py`` under ``python``);
    with ``tokens_for``, its words of those documents too (``tokens_only``: only them)."""
    name = f"{corpus.stem}-{seed}{'-tokens' if tokens_only else ''}"
    work, res = tmp / f"dt-work-{name}", tmp / f"dt-{name}.json"
    cmd = [python, str(ROOT / "benchmarks" / "_datatrove_minhash.py"), "--input", str(corpus), "--work", str(work),
           "--seed", str(seed), "--result", str(res)]
    if tokens_for is not None:
        ids = tmp / f"dt-ids-{name}.json"
        ids.write_text(json.dumps(tokens_for))
        cmd += ["--tokens-for", str(ids)] + (["--tokens-only"] if tokens_only else [])
    log = tmp / f"dt-{name}.log"
    with open(log, "w") as fh:
        rc = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, env={**os.environ, "HF_HUB_OFFLINE": "1"}).returncode
    if rc != 0:
        tail = "".join(log.read_text(errors="replace").splitlines(keepends=True)[-20:])
        raise SystemExit(f"near_dup_quality: datatrove failed (rc {rc}); {log} ends:\n{tail}")
    return json.loads(res.read_text())


# ----------------------------------------------------------------------------- scoring


def score(ids: list[str], dropped: set[str], truth: dict, near: dict[str, np.ndarray], threshold: float) -> dict:
    """Recall per bin, precision at ``threshold`` and at 0.7, false positives on non-duplicates.
    ``near``: 'pairs' (the shared_pairs of ``ids``)."""
    is_dropped = np.array([d in dropped for d in ids])
    to_kept = nearest(len(ids), near["pairs"], among=~is_dropped)[is_dropped]
    recall = []
    for b in range(len(BINS)):
        pairs = [p for p in truth["pairs"] if p[2] == b]
        caught = sum(1 for a, c, _, _ in pairs if a in dropped or c in dropped)
        both = sum(1 for a, c, _, _ in pairs if a in dropped and c in dropped)
        recall.append({"bin": list(BINS[b]), "pairs": len(pairs), "caught": caught, "both_dropped": both,
                       "recall": caught / len(pairs) if pairs else None})
    n_drop = int(is_dropped.sum())
    fp = {kind: sum(1 for d in truth[kind] if d in dropped) for kind in ("unrelated", "template")}
    return {
        "dropped": n_drop,
        "recall": recall,
        "precision": float((to_kept >= threshold).mean()) if n_drop else None,
        "precision_at_0.7": float((to_kept >= 0.7).mean()) if n_drop else None,
        "dropped_by_true_jaccard": jaccard_histogram(to_kept),
        "false_positives": {k: {"dropped": v, "of": len(truth[k]), "rate": v / len(truth[k]) if truth[k] else None}
                            for k, v in fp.items()},
    }


EDGES = [0.0, 0.3, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0001]


def jaccard_histogram(values: np.ndarray) -> dict[str, int]:
    counts, _ = np.histogram(values, bins=EDGES)
    return {f"[{lo:.1f}, {min(hi, 1.0):.1f}{']' if hi > 1 else ')'}": int(c) for lo, hi, c in zip(EDGES[:-1], EDGES[1:], counts)}


def tokenizer_comparison(docs: list[dict], dt_tokens: dict[str, list[str]], truth: dict) -> dict:
    """How datatrove's words differ from lmforge's, and the planted pairs' Jaccard by each."""
    text = {d["id"]: d["text"] for d in docs}
    same = sum(1 for i, toks in dt_tokens.items() if toks == words(text[i]))
    diffs, moved = [], 0
    examples = Counter()
    for i, toks in dt_tokens.items():
        ours = words(text[i])
        if toks != ours:
            examples.update(set(toks) ^ set(ours))
    for a, c, b, j in truth["pairs"]:
        if a in dt_tokens and c in dt_tokens:
            jd = jaccard(shingles_of(dt_tokens[a]), shingles_of(dt_tokens[c]))
            diffs.append(jd - j)
            lo, hi = BINS[b]
            moved += not (lo <= jd and (jd < hi or hi == 1.0))
    d = np.abs(np.array(diffs)) if diffs else np.zeros(1)
    return {"documents": len(dt_tokens), "same_words": same, "pairs": len(diffs),
            "pair_jaccard_abs_difference_mean": float(d.mean()), "pair_jaccard_abs_difference_max": float(d.max()),
            "pairs_out_of_their_bin_by_datatrove_words": moved,
            "words_in_one_split_only": [w for w, _ in examples.most_common(15)]}


# ----------------------------------------------------------------------------- the 40,000 generated pages


def generated_analysis(n: int, tmp: Path, dt_python: str | None) -> dict:
    sys.path.insert(0, str(ROOT))
    from benchmarks.clean_stage import make_corpus

    corpus = tmp / f"generated-{n}.jsonl"
    make_corpus(corpus, n)
    rows = [json.loads(line) for line in open(corpus, encoding="utf-8")]
    ids = [r["id"] for r in rows]
    t0 = time.perf_counter()
    sets = [hash_set(r["text"]) for r in rows]
    pairs = shared_pairs(sets)
    i, j, jac = pairs
    # the true near-copies: pages with an earlier page at each level (the copies make_corpus planted)
    earlier = np.zeros(len(ids))
    np.maximum.at(earlier, j, jac)  # i < j: j's best match among earlier pages
    truth_counts = {f">= {t}": int((earlier >= t).sum()) for t in (0.9, 0.8, 0.7, 0.6, 0.5, 0.3)}
    # what LSH alone (14 bands x 8 rows) should make candidates of: 1 - (1 - s^8)^14 per page
    expected = float((1 - (1 - earlier[earlier > 0] ** 8) ** 14).sum())
    out: dict = {"documents": n, "pages_with_an_earlier_page_at_jaccard": truth_counts,
                 "expected_lsh_candidates": round(expected, 1),
                 "earlier_page_jaccard_histogram": jaccard_histogram(earlier[earlier > 0]),
                 "exact_jaccard_seconds": round(time.perf_counter() - t0, 1), "runs": {}}
    runs = {"lmforge near dedup only, verify 0.7": lambda: run_lmforge(corpus, tmp, 1, 0.7),
            "lmforge near dedup only, verify null": lambda: run_lmforge(corpus, tmp, 1, None),
            "lmforge, every default step": lambda: run_lmforge(corpus, tmp, 1, 0.7, every_step=True),
            "lmforge, every default step, verify null": lambda: run_lmforge(corpus, tmp, 1, None, every_step=True)}
    for name, run in runs.items():
        print(f"  {name} ...", flush=True)
        r = run()
        dropped = set(ids) - r["kept"]
        out["runs"][name] = _generated_row(ids, dropped, pairs, earlier, r["near_duplicates"], r["wall_s"])
    if dt_python:
        print("  datatrove MinHash only ...", flush=True)
        r = run_datatrove(dt_python, corpus, tmp, 1)
        dropped = set(r["removed"])
        row = _generated_row(ids, dropped, pairs, earlier, len(dropped), r["wall_s"])
        # each removed page against its cluster's kept page (datatrove's own pairing)
        kept_of = {}
        for d, c in r["clusters"].items():
            if d not in dropped:
                kept_of[c] = d
        index = {d: k for k, d in enumerate(ids)}
        to_rep = [jaccard_from_sets(sets[index[d]], sets[index[kept_of[r["clusters"][d]]]]) for d in dropped
                  if r["clusters"].get(d) in kept_of]
        row["to_cluster_kept_page_histogram"] = jaccard_histogram(np.array(to_rep))
        row["to_cluster_kept_page_median"] = float(np.median(to_rep)) if to_rep else None
        # datatrove's words of its removed pages and their kept pages: the same Jaccard?
        tok = run_datatrove(dt_python, corpus, tmp, 1, tokens_for=sorted(set(r["clusters"])), tokens_only=True)["tokens"]
        diffs = [abs(jaccard(shingles_of(tok[d]), shingles_of(tok[kept_of[r["clusters"][d]]]))
                     - jaccard_from_sets(sets[index[d]], sets[index[kept_of[r["clusters"][d]]]]))
                 for d in dropped if r["clusters"].get(d) in kept_of and d in tok and kept_of[r["clusters"][d]] in tok]
        row["jaccard_by_datatrove_words_abs_difference_max"] = float(max(diffs)) if diffs else None
        out["runs"]["datatrove MinHash only"] = row
        # clean_executors.py's datatrove pipeline (C4QualityFilter, bad words, MinHash), which
        # gave the 498 of BENCHMARKS.md: it reports counts only
        print("  datatrove, C4 filters + MinHash (clean_executors.py's pipeline) ...", flush=True)
        from benchmarks.clean_executors import run_datatrove as run_datatrove_clean

        folder = tmp / "generated-folder"
        folder.mkdir()
        os.link(corpus, folder / corpus.name)
        c = run_datatrove_clean(tmp, dt_python, folder, 1, False)
        out["datatrove_c4_and_minhash"] = {"documents_after_filters": c["documents_after_filters"],
                                           "near_duplicates": c["documents_after_filters"] - c["documents_out"],
                                           "wall_s": round(c["wall_s"], 1), "steps": c["steps"], "notes": c["notes"]}
    return out


def jaccard_from_sets(a: np.ndarray, b: np.ndarray) -> float:
    inter = np.intersect1d(a, b, assume_unique=True).size
    return inter / (a.size + b.size - inter)


def _generated_row(ids: list[str], dropped: set[str], pairs, earlier: np.ndarray, near: int, wall: float) -> dict:
    is_dropped = np.array([d in dropped for d in ids])
    to_kept = nearest(len(ids), pairs, among=~is_dropped)[is_dropped]
    row = {"near_duplicates": near, "dropped": int(is_dropped.sum()), "wall_s": round(wall, 1),
           "dropped_true_jaccard_to_nearest_kept_page": jaccard_histogram(to_kept),
           "median_true_jaccard_of_drops": float(np.median(to_kept)) if to_kept.size else None}
    for t in (0.8, 0.7, 0.5):
        has = earlier >= t
        row[f"recall_of_pages_with_an_earlier_page_>= {t}"] = float(is_dropped[has].mean()) if has.any() else None
        row[f"precision_at_{t}"] = float((to_kept >= t).mean()) if to_kept.size else None
    return row


# ----------------------------------------------------------------------------- report


def fmt(x: float | None, pct: bool = False) -> str:
    if x is None:
        return "-"
    return f"{x:.1%}" if pct else f"{x:.3f}"


def markdown(report: dict) -> str:
    out = []
    p = report["planted"]
    th = report["threshold"]
    out.append(f"Planted corpus: {p['documents']:,} documents ({p['pairs']} planted pairs, {p['per_bin']} per bin; "
               f"{p['unrelated']} unrelated pages; {p['template']} template pages), seeds {report['seeds']}. "
               "Recall: pairs of which one page was dropped, mean over the seeds (lowest-highest).\n")
    names = list(report["runs"])
    out.append("| true 5-gram Jaccard of the pair | pairs | LSH alone, expected | " + " | ".join(names) + " |")
    out.append("|---|---:|---:|" + "---:|" * len(names))
    for b, (lo, hi) in enumerate(BINS):
        js = np.array(p["pair_jaccard_by_bin"][b])  # 1 - (1 - s^8)^14 over the bin's pairs
        cells = [f"{np.mean(1 - (1 - js ** 8) ** 14):.3f}" if js.size else "-"]
        for name in names:
            vals = [s["recall"][b]["recall"] for s in report["runs"][name]["per_seed"]]
            cells.append(f"{np.mean(vals):.3f} ({min(vals):.2f}-{max(vals):.2f})")
        label = f"[{lo}, {hi}]" if hi == 1.0 else f"[{lo}, {hi})"
        out.append(f"| {label} | {p['per_bin']} | " + " | ".join(cells) + " |")

    def row(label: str, get) -> None:
        cells = []
        for name in names:
            vals = [get(s) for s in report["runs"][name]["per_seed"]]
            vals = [v for v in vals if v is not None]
            cells.append(f"{np.mean(vals):.3f}" if vals else "-")
        out.append(f"| {label} | | | " + " | ".join(cells) + " |")

    row(f"recall, pairs >= {th}", lambda s: s["recall_at_threshold"])
    row("recall, pairs >= 0.7", lambda s: s["recall_at_0.7"])
    row(f"precision (drops with a kept page at >= {th})", lambda s: s["precision"])
    row("precision (drops with a kept page at >= 0.7)", lambda s: s["precision_at_0.7"])
    row("pages dropped, mean", lambda s: s["dropped"])
    for kind in ("unrelated", "template"):
        row(f"false positives, {kind} pages ({report['runs'][names[0]]['per_seed'][0]['false_positives'][kind]['of']})",
            lambda s, k=kind: s["false_positives"][k]["rate"])
    out.append("")
    if report.get("tokenizers"):
        t = report["tokenizers"]
        out.append(f"datatrove's words against lmforge's, planted corpus: {t['same_words']:,} of {t['documents']:,} documents "
                   f"split into the same words; planted pairs' Jaccard by datatrove's words differs by {t['pair_jaccard_abs_difference_mean']:.4f} "
                   f"on average (at most {t['pair_jaccard_abs_difference_max']:.4f}); {t['pairs_out_of_their_bin_by_datatrove_words']} "
                   f"of {t['pairs']} pairs fall out of their bin by datatrove's words; words in one split only: "
                   f"{', '.join(t['words_in_one_split_only'][:10])}\n")
    g = report.get("generated")
    if g:
        out.append(f"The {g['documents']:,} generated pages: pages with an earlier page at true Jaccard >= t: "
                   + ", ".join(f"{k}: {v:,}" for k, v in g["pages_with_an_earlier_page_at_jaccard"].items())
                   + f"; LSH candidates expected of them, 1 - (1 - s^8)^14 summed: {g['expected_lsh_candidates']}\n")
        cols = list(next(iter(g["runs"].values()))["dropped_true_jaccard_to_nearest_kept_page"])
        out.append("Drops by their true Jaccard to the nearest kept page:\n")
        out.append("| run | near-dups dropped | " + " | ".join(cols) + " | median | recall >= 0.8 | recall >= 0.7 | recall >= 0.5 | precision at 0.8 | precision at 0.7 |")
        out.append("|---|---:|" + "---:|" * (len(cols) + 6))
        for name, r in g["runs"].items():
            h = r["dropped_true_jaccard_to_nearest_kept_page"]
            out.append(f"| {name} | {r['near_duplicates']:,} | " + " | ".join(str(h[c]) for c in cols)
                       + f" | {fmt(r['median_true_jaccard_of_drops'])} | {fmt(r['recall_of_pages_with_an_earlier_page_>= 0.8'])} "
                       f"| {fmt(r['recall_of_pages_with_an_earlier_page_>= 0.7'])} | {fmt(r['recall_of_pages_with_an_earlier_page_>= 0.5'])} "
                       f"| {fmt(r['precision_at_0.8'])} | {fmt(r['precision_at_0.7'])} |")
        c = g.get("datatrove_c4_and_minhash")
        if c:
            out.append(f"\ndatatrove with C4QualityFilter and C4BadWordsFilter before its MinHash (clean_executors.py's "
                       f"pipeline): {c['documents_after_filters']:,} pages after the filters, {c['near_duplicates']:,} near-duplicates")
        dt = g["runs"].get("datatrove MinHash only")
        if dt:
            out.append(f"\ndatatrove's removed pages against their cluster's kept page: {dt['to_cluster_kept_page_histogram']} "
                       f"(median {fmt(dt['to_cluster_kept_page_median'])}); by datatrove's own words the Jaccard differs by at most "
                       f"{fmt(dt['jaccard_by_datatrove_words_abs_difference_max'])}")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=0, help="the planted corpus's seed")
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3], help="MinHash seeds, each tool")
    ap.add_argument("--per-bin", type=int, default=100)
    ap.add_argument("--unrelated", type=int, default=250)
    ap.add_argument("--template", type=int, default=120)
    ap.add_argument("--threshold", type=float, default=0.8, help="true Jaccard from which a pair is a duplicate")
    ap.add_argument("--generated", type=int, default=40_000, help="pages of make_corpus to analyse (0: none)")
    ap.add_argument("--datatrove-python", default=str(ROOT.parent / "dtvenv" / "bin" / "python"))
    ap.add_argument("--skip-datatrove", action="store_true")
    ap.add_argument("--json", help="write the report here")
    args = ap.parse_args()

    sys.path.insert(0, str(ROOT))
    from benchmarks.clean_executors import datatrove_ok  # the same venv as clean_executors.py's

    dt_python = None if args.skip_datatrove else args.datatrove_python
    why = datatrove_ok(dt_python) if dt_python else "--skip-datatrove"
    if why:
        print(f"datatrove left out: {why}", flush=True)
        dt_python = None
    os.environ.setdefault("LMFORGE_VERBOSITY", "quiet")  # no progress lines from the stage
    t_start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        docs, truth = planted_corpus(args.seed, args.per_bin, args.unrelated, args.template)
        corpus = tmp / "planted.jsonl"
        corpus.write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
        ids = [d["id"] for d in docs]
        near = {"pairs": shared_pairs([hash_set(d["text"]) for d in docs])}
        closest = nearest(len(ids), near["pairs"])
        index = {d: k for k, d in enumerate(ids)}
        nondup = [index[d] for d in truth["unrelated"] + truth["template"]]
        print(f"planted corpus: {len(docs):,} documents; non-duplicates' largest true Jaccard with any page: "
              f"{closest[nondup].max():.3f}", flush=True)
        runs: dict[str, dict] = {}
        tools = {"lmforge (verify 0.7)": lambda s: set(ids) - run_lmforge(corpus, tmp, s, 0.7)["kept"],
                 "lmforge (verify null)": lambda s: set(ids) - run_lmforge(corpus, tmp, s, None)["kept"]}
        dt_tokens = None
        if dt_python:
            def dt(s):
                nonlocal dt_tokens
                r = run_datatrove(dt_python, corpus, tmp, s, tokens_for=ids if dt_tokens is None else None)
                dt_tokens = dt_tokens or r["tokens"]
                return set(r["removed"])
            tools["datatrove"] = dt
        for name, run in tools.items():
            per_seed = []
            for s in args.seeds:
                sc = score(ids, run(s), truth, near, args.threshold)
                sc["seed"] = s
                per_seed.append(sc)
                print(f"  {name}, seed {s}: dropped {sc['dropped']}, precision {fmt(sc['precision'])}", flush=True)
            runs[name] = {"per_seed": per_seed}
        # recall on the pairs at or above the threshold (and 0.7), whichever bins they are in
        for name in runs:
            for sc in runs[name]["per_seed"]:
                for key, t in (("recall_at_threshold", args.threshold), ("recall_at_0.7", 0.7)):
                    pos = [b for b in range(len(BINS)) if BINS[b][0] >= t]
                    caught = sum(sc["recall"][b]["caught"] for b in pos)
                    total = sum(sc["recall"][b]["pairs"] for b in pos)
                    sc[key] = caught / total if total else None
        report = {
            "threshold": args.threshold, "seeds": args.seeds, "corpus_seed": args.seed,
            "planted": {"documents": len(docs), "pairs": len(truth["pairs"]), "per_bin": args.per_bin,
                        "unrelated": args.unrelated, "template": args.template,
                        "non_duplicates_max_true_jaccard": float(closest[nondup].max()),
                        "pair_jaccard_by_bin": [[round(p[3], 4) for p in truth["pairs"] if p[2] == b] for b in range(len(BINS))]},
            "runs": runs,
            "tokenizers": tokenizer_comparison(docs, dt_tokens, truth) if dt_tokens else None,
        }
        if args.generated:
            print(f"the {args.generated:,} generated pages ...", flush=True)
            report["generated"] = generated_analysis(args.generated, tmp, dt_python)
    report["machine"] = {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform()}
    report["wall_s"] = round(time.perf_counter() - t_start, 1)
    print()
    print(markdown(report))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(report, indent=1))
        print(f"\nwrote {args.json}")


if __name__ == "__main__":
    main()
