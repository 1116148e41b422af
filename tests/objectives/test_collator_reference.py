"""The objectives against the ``transformers`` collators that implement the same thing, on the
same token streams, by their defining statistics.

Each statistic is a fraction of n independent trials (positions, words, spans, pairs) and is
checked with binomial bounds: K_SIGMA standard deviations, sqrt(p(1-p)/n) against a nominal
value, sqrt(p(1-p)(1/n1 + 1/n2)) between the two sides. The samples are sized so that the
bounds are tight (a 15% rate is pinned to about +-0.4 points): a mask rate of 0.16 instead of
0.15, or an 80/10/10 split of 0.75/0.15/0.10, fails. Seeds are fixed, so a pass cannot change
between runs.

- MLM 80/10/10: ``DataCollatorForLanguageModeling`` (its Bernoulli per token is our
  ``exact_count=False``; our default is Google BERT's exact count per sequence);
- whole-word masking: ``DataCollatorForLanguageModeling(whole_word_mask=True)`` (transformers 5
  folded ``DataCollatorForWholeWordMask`` into it), with word boundaries given as offsets;
- permutation LM: ``DataCollatorForPermutationLanguageModeling``;
- span corruption: T5's ``random_spans_noise_mask`` is in no installed library: it lives in the
  ``t5`` package (TensorFlow) and, ported to NumPy, in a transformers EXAMPLE script
  (``examples/flax/language-modeling/run_t5_mlm_flax.py``), not in the library. So
  ``t5_random_spans_noise_mask`` below is an independent reference written in this test from
  T5's TensorFlow function (``t5.data.preprocessors.random_spans_noise_mask``), line by line
  and on purpose in T5's own way (a shuffled indicator vector, cumulative sums, segment
  counts), not our ``random_partition``'s.

Known differences, each asserted below:

- MLM: transformers draws a random replacement from the whole vocabulary, special ids
  included; we draw from the non-special ids only. Our default ``exact_count`` masks exactly
  round(0.15 n) positions per sequence where transformers' count is binomial.
- whole-word: transformers cannot combine whole-word masking with 80/10/10 (it sets
  ``mask_replace_prob`` to 1 with a warning); we can, and are compared here at 100% [MASK].
- permutation: transformers (as XLNet's ``_local_perm``) orders the factorisation in two
  halves, every target of the first half before any of the second; we draw one uniform order
  over all targets (docs/OBJECTIVES.md: "we never split the sequence into two halves").
  It also gives the special tokens a place in that order (they see the targets before them);
  ours are context like every non-target. Its spans are 1-5 TOKENS, uniform; ours are 1-5 WORDS with p(w) proportional to 1/w (XLNet's
  ``_sample_mask``), so the span lengths are not compared.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch
from tokenizers import Tokenizer, models
from transformers import DataCollatorForLanguageModeling, DataCollatorForPermutationLanguageModeling, PreTrainedTokenizerFast

from lmforge.objectives.base import IGNORE_INDEX, Corpus, Document, Vocab, rng_for
from lmforge.objectives.mlm import MLM
from lmforge.objectives.permutation import PermutationLM
from lmforge.objectives.span_corruption import SpanCorruption, noise_span_counts, random_spans_noise_mask

K_SIGMA = 4.5
V = 60  # small, so that a random replacement's chance to be a special id (5/60) shows
PAD, UNK, CLS, SEP, MASK = range(5)
VOCAB = Vocab(size=V, pad=PAD, unk=UNK, cls=CLS, sep=SEP, mask=MASK, special_ids=frozenset(range(5)))


def hf_tokenizer() -> PreTrainedTokenizerFast:
    """A word-level tokenizer with our ids (made here, nothing downloaded)."""
    names = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"t{i}" for i in range(5, V)]
    tok = Tokenizer(models.WordLevel({n: i for i, n in enumerate(names)}, unk_token="[UNK]"))
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]",
                                   sep_token="[SEP]", mask_token="[MASK]")


def within(k: int, n: int, p: float) -> bool:
    """k successes of n trials are within K_SIGMA binomial sd of probability p."""
    return abs(k / n - p) <= K_SIGMA * math.sqrt(p * (1 - p) / n)


def same_rate(k1: int, n1: int, k2: int, n2: int) -> bool:
    """Two fractions agree within K_SIGMA sd of their difference (pooled rate)."""
    p = (k1 + k2) / (n1 + n2)
    return abs(k1 / n1 - k2 / n2) <= K_SIGMA * math.sqrt(max(p * (1 - p), 1e-12) * (1 / n1 + 1 / n2))


def make_corpus(seed: int, docs: int, tokens_per_doc: int, unk_rate: float = 0.01) -> Corpus:
    """Documents of random ids (words of 1-3 tokens, a few [UNK]s in the text), one sentence
    each, so that every chunk is full length."""
    rng = np.random.default_rng(seed)
    out = []
    for d in range(docs):
        tokens = rng.integers(5, V, tokens_per_doc).astype(np.int64)
        tokens[rng.random(tokens_per_doc) < unk_rate] = UNK
        word_starts = rng.random(tokens_per_doc) < 0.5  # words of ~2 tokens
        word_starts[0] = True
        sentence_starts = np.zeros(tokens_per_doc, dtype=bool)
        sentence_starts[0] = True
        out.append(Document(tokens, word_starts, sentence_starts, d))
    return Corpus(out)


# ---------------------------------------------------------------------------------------------
# masked LM


def ours_mlm(corpus: Corpus, **config) -> tuple[list[dict], np.ndarray, np.ndarray]:
    """Our examples, and the streams they were drawn from: the original ids (labels where
    predicted, the input elsewhere) and their word starts."""
    obj = MLM(corpus, VOCAB, MLM.Config(max_length=128, **config))
    examples = [obj.example(i, rng_for(7, 0, i)) for i in range(len(obj))]
    original = np.stack([np.where(e["labels"] != IGNORE_INDEX, e["labels"], e["input_ids"]) for e in examples])
    starts = np.stack([np.concatenate([[False], corpus[int(d)].word_starts[s:e], [False]]) for d, s, e in obj.chunks])
    return examples, original, starts


def theirs_mlm(original: np.ndarray, word_starts: np.ndarray | None = None, **collator) -> dict:
    """transformers' collator over the same streams (one batch, all of one length)."""
    special = np.isin(original, list(VOCAB.special_ids)).astype(np.int64)
    features = [{"input_ids": ids.tolist(), "special_tokens_mask": sm.tolist()} for ids, sm in zip(original, special)]
    if word_starts is not None:  # a word boundary is a gap between two tokens' character offsets
        for f, starts in zip(features, word_starts):
            ends = np.cumsum(1 + starts.astype(np.int64))
            f["offset_mapping"] = list(zip((ends - 1).tolist(), ends.tolist()))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # whole-word masking's "mask_replace_prob set to 1"
        c = DataCollatorForLanguageModeling(hf_tokenizer(), seed=11, return_tensors="np", **collator)
    batch = c(features)
    return {"input_ids": batch["input_ids"], "labels": batch["labels"], "special": special.astype(bool)}


def split_counts(inputs: np.ndarray, labels: np.ndarray, special: np.ndarray) -> dict:
    chosen = labels != IGNORE_INDEX
    shown = inputs[chosen]
    original = labels[chosen]
    return {
        "eligible": int((~special).sum()), "chosen": int(chosen.sum()),
        "chosen_special": int((chosen & special).sum()),
        "mask": int((shown == MASK).sum()), "same": int((shown == original).sum()),
        "other": int(((shown != MASK) & (shown != original)).sum()),
        "other_special": int(((shown != MASK) & (shown != original) & np.isin(shown, list(VOCAB.special_ids))).sum()),
    }


@pytest.fixture(scope="module")
def mlm_streams():
    corpus = make_corpus(1, docs=40, tokens_per_doc=126 * 50)  # 2,000 sequences of 128, ~250k eligible
    return corpus, *ours_mlm(corpus, exact_count=False)


def test_mlm_80_10_10_matches_the_collator(mlm_streams):
    _, examples, original, _ = mlm_streams
    assert original.shape == (2000, 128)
    ours = split_counts(np.stack([e["input_ids"] for e in examples]), np.stack([e["labels"] for e in examples]),
                        np.stack([e["special_tokens_mask"] for e in examples]).astype(bool))
    b = theirs_mlm(original, mlm_probability=0.15)
    theirs = split_counts(b["input_ids"], b["labels"], b["special"])
    assert ours["eligible"] == theirs["eligible"] > 240_000  # the same streams
    for s in (ours, theirs):
        assert s["chosen_special"] == 0
        assert within(s["chosen"], s["eligible"], 0.15), s
        assert within(s["mask"], s["chosen"], 0.8), s
        # unchanged: the 10% left alone, and a random draw that hit the original id
        assert within(s["same"] + s["other"], s["chosen"], 0.2), s
    # the random draw: ours from the 55 non-special ids, theirs from all 60
    assert within(ours["same"], ours["chosen"], 0.1 + 0.1 / (V - 5))
    assert within(theirs["same"], theirs["chosen"], 0.1 + 0.1 / V)
    assert same_rate(ours["chosen"], ours["eligible"], theirs["chosen"], theirs["eligible"])
    for key in ("mask", "same", "other"):
        assert same_rate(ours[key], ours["chosen"], theirs[key], theirs["chosen"]), key
    # known difference: a random replacement is a special id 5/60 of the time for transformers, never for us
    assert ours["other_special"] == 0
    assert theirs["other_special"] > 0 and within(theirs["other_special"], theirs["other"], 5 / (V - 1))


def test_mlm_exact_count_differs_from_the_collators_binomial_count(mlm_streams):
    corpus, _, original, _ = mlm_streams
    exact, _, _ = ours_mlm(corpus)  # the default: Google BERT's exact count
    b = theirs_mlm(original, mlm_probability=0.15)
    eligible = (~b["special"]).sum(axis=1)
    ours_k = np.array([(e["labels"] != IGNORE_INDEX).sum() for e in exact])
    theirs_k = (b["labels"] != IGNORE_INDEX).sum(axis=1)
    assert (ours_k == np.maximum(1, (eligible * 0.15 + 0.5).astype(int))).all()  # round half up, every sequence
    # theirs: binomial counts, variance n p (1 - p) (~16 at n = 125); the sample variance of
    # 2,000 counts has a relative sd of sqrt(2 / 2000) ~ 0.032: 0.15 is ~4.7 of them
    var = float(np.var(theirs_k - eligible * 0.15))
    assert abs(var / float(np.mean(eligible * 0.15 * 0.85)) - 1) < 0.15
    assert within(int(ours_k.sum()), int(eligible.sum()), 0.15) and within(int(theirs_k.sum()), int(eligible.sum()), 0.15)


def test_whole_word_masking_matches_the_collator():
    corpus = make_corpus(2, docs=40, tokens_per_doc=126 * 50)
    examples, original, starts = ours_mlm(corpus, masking="whole_word", exact_count=False,
                                          mask_token_prob=1.0, random_token_prob=0.0)
    b = theirs_mlm(original, starts, mlm_probability=0.15, whole_word_mask=True)
    sides = {"ours": (np.stack([e["labels"] for e in examples]), np.stack([e["input_ids"] for e in examples])),
             "theirs": (b["labels"], b["input_ids"])}
    special = b["special"]
    stats = {}
    for side, (labels, inputs) in sides.items():
        chosen = labels != IGNORE_INDEX
        assert not (chosen & special).any()
        assert (inputs[chosen] == MASK).all() and (inputs[~chosen] == original[~chosen]).all()
        # words: a unit starts at a flagged token or after a special one; a chosen unit is chosen whole
        eligible = ~special
        prev_eligible = np.concatenate([np.zeros((len(eligible), 1), bool), eligible[:, :-1]], axis=1)
        unit_start = eligible & (starts | ~prev_eligible)
        unit = np.where(eligible, np.cumsum(unit_start, axis=1), -1) + np.arange(len(eligible))[:, None] * 1000
        words = np.unique(unit[eligible])
        word_chosen, word_tokens = np.unique(unit[chosen], return_counts=True)
        partial = set(np.unique(unit[eligible & ~chosen]).tolist()) & set(word_chosen.tolist())
        assert not partial, f"{side}: {len(partial)} words partly masked"
        stats[side] = (len(word_chosen), len(words), word_tokens)
    for chosen_words, words, _ in stats.values():
        assert words > 100_000
        assert within(chosen_words, words, 0.15)
    (k1, n1, len1), (k2, n2, len2) = stats["ours"], stats["theirs"]
    assert n1 == n2 and same_rate(k1, n1, k2, n2)
    # tokens per chosen word: a word is chosen whatever its length, so the mean is the corpus's
    # (~1.9 here) on both sides, within K_SIGMA standard errors of the difference
    assert abs(len1.mean() - len2.mean()) <= K_SIGMA * math.sqrt(len1.var() / k1 + len2.var() / k2)
    assert abs(len1.mean() - len2.mean()) < 0.1


# ---------------------------------------------------------------------------------------------
# permutation LM


def test_permutation_matches_the_collator():
    corpus = make_corpus(3, docs=20, tokens_per_doc=126 * 40)
    obj = PermutationLM(corpus, VOCAB, PermutationLM.Config(max_length=128))
    examples = [obj.example(i, rng_for(5, 0, i)) for i in range(len(obj))]
    ids = np.stack([e["input_ids"] for e in examples])  # text <sep> <cls>: 128, even, as the collator needs
    assert ids.shape == (800, 128)
    with torch.random.fork_rng():
        torch.manual_seed(13)
        b = DataCollatorForPermutationLanguageModeling(hf_tokenizer(), plm_probability=1 / 6, max_span_length=5)(
            [row.tolist() for row in ids])
    special = np.isin(ids, list(VOCAB.special_ids))
    text = int((~special).sum())
    L = ids.shape[1]

    def sides():
        for e in examples:
            real = e["labels"] != IGNORE_INDEX
            target = np.zeros(L, bool)
            target[e["target_mapping"][real].argmax(axis=1)] = True
            yield "ours", target, e["perm_mask"].astype(bool)
        for labels, perm in zip(b["labels"].numpy(), b["perm_mask"].numpy()):
            yield "theirs", labels != IGNORE_INDEX, perm.astype(bool)

    targets = {"ours": 0, "theirs": 0}
    before = {"ours": [0, 0], "theirs": [0, 0], "theirs_cross": [0, 0]}  # [a before b, pairs]
    pair_rng = np.random.default_rng(0)
    for (side, target, blocked), row in zip(sides(), list(range(len(examples))) * 2):
        assert not (target & special[row]).any()
        targets[side] += int(target.sum())
        # the same rule on both sides: j is hidden from i iff j is a target and rank(i) <= rank(j);
        # a non-target sees no target and is seen by all; a target does not see itself
        t = np.flatnonzero(target)
        assert not blocked[:, ~target].any()
        # (known difference: transformers gives <sep>/<cls>/<unk> a place in the order, so they
        # see the targets before them; ours are plain context, like every non-target)
        context = ~target if side == "ours" else ~target & ~special[row]
        assert blocked[np.ix_(context, target)].all()
        sub = blocked[np.ix_(t, t)]
        assert sub.diagonal().all() and ((sub ^ sub.T) | np.eye(len(t), dtype=bool)).all()  # a strict order
        rank = sub.sum(axis=1)  # targets it cannot see: those at or after it
        # who precedes whom, for random pairs of targets (a earlier in the text than b)
        for a, c in pair_rng.choice(len(t), size=(min(20, len(t)), 2)):
            if a == c:
                continue
            a, c = min(a, c), max(a, c)
            first = rank[a] > rank[c]  # a comes first in the order
            key = side if side == "ours" or (t[a] < L // 2) == (t[c] < L // 2) else "theirs_cross"
            before[key][0] += int(first)
            before[key][1] += 1
    assert within(targets["ours"], text, 1 / 6) and within(targets["theirs"], text, 1 / 6), (targets, text)
    assert same_rate(targets["ours"], text, targets["theirs"], text)
    # a uniform order: a pair of targets in either order with probability 1/2 ...
    assert before["ours"][1] > 5000 and within(*before["ours"], 0.5)
    assert before["theirs"][1] > 2000 and within(*before["theirs"], 0.5)
    # ... except, for transformers (known difference), across the two halves: the first half always first
    assert before["theirs_cross"][1] > 2000 and before["theirs_cross"][0] == before["theirs_cross"][1]


# ---------------------------------------------------------------------------------------------
# span corruption


def t5_random_spans_noise_mask(length: int, noise_density: float, mean_noise_span_length: float,
                               rng: np.random.Generator) -> np.ndarray:
    """T5's ``random_spans_noise_mask`` (t5/data/preprocessors.py), from TensorFlow to NumPy."""
    orig_length = length
    length = max(length, 2)  # "increase length to avoid degeneracy"
    num_noise_tokens = int(np.round(length * noise_density))
    num_noise_tokens = min(max(num_noise_tokens, 1), length - 1)
    num_noise_spans = int(np.round(num_noise_tokens / mean_noise_span_length))
    num_noise_spans = max(num_noise_spans, 1)
    num_nonnoise_tokens = length - num_noise_tokens

    def random_segmentation(num_items: int, num_segments: int) -> np.ndarray:
        first_in_segment = np.pad(rng.permutation((np.arange(num_items - 1) < num_segments - 1).astype(np.int64)), [1, 0])
        segment_id = np.cumsum(first_in_segment)
        return np.bincount(segment_id)  # tf.math.segment_sum(ones, segment_id)

    noise_span_lengths = random_segmentation(num_noise_tokens, num_noise_spans)
    nonnoise_span_lengths = random_segmentation(num_nonnoise_tokens, num_noise_spans)
    interleaved = np.reshape(np.stack([nonnoise_span_lengths, noise_span_lengths], axis=1), [num_noise_spans * 2])
    span_starts = np.cumsum(interleaved)[:-1]
    span_start_indicator = np.bincount(span_starts, minlength=length)  # unsorted_segment_sum(ones, starts, length)
    span_num = np.cumsum(span_start_indicator)
    is_noise = span_num % 2 == 1
    return is_noise[:orig_length]


def runs(mask: np.ndarray) -> np.ndarray:
    edges = np.diff(np.concatenate([[0], mask.astype(np.int8), [0]]))
    return np.flatnonzero(edges == -1) - np.flatnonzero(edges == 1)


def test_span_corruption_noise_mask_matches_t5():
    corpus = make_corpus(4, docs=10, tokens_per_doc=141 * 30, unk_rate=0.0)
    obj = SpanCorruption(corpus, Vocab(size=V + 20, pad=PAD, eos=UNK, sentinels=tuple(range(V + 19, V - 1, -1)),
                                       special_ids=frozenset({PAD, UNK, *range(V, V + 20)})),
                         SpanCorruption.Config(input_length=128))
    lengths = (obj.index[:, 2] - obj.index[:, 1]).tolist()
    assert set(lengths) == {141}
    # the counts are deterministic: the same for every length
    for n in range(2, 600):
        ref = t5_random_spans_noise_mask(n, 0.15, 3.0, np.random.default_rng(n))
        assert (int(ref.sum()), len(runs(ref))) == noise_span_counts(n, 0.15, 3.0), n
    # the placement is random: 6,000 masks of the objective's 141 tokens from each side
    draws = 6_000
    ours_rng, ref_rng = np.random.default_rng(21), np.random.default_rng(22)
    ours = np.stack([random_spans_noise_mask(141, 0.15, 3.0, ours_rng) for _ in range(draws)])
    ref = np.stack([t5_random_spans_noise_mask(141, 0.15, 3.0, ref_rng) for _ in range(draws)])
    for m in (ours, ref):
        assert (m.sum(axis=1) == 21).all() and (~m[:, 0]).all() and m[:, -1].all()  # round(141 * 0.15); gap first; span last
    # P(position i is noise), position by position
    for i in range(1, 140):
        k1, k2 = int(ours[:, i].sum()), int(ref[:, i].sum())
        assert same_rate(k1, draws, k2, draws), (i, k1, k2)
    # span lengths: their distribution, over 42,000 spans a side
    ours_spans = np.concatenate([runs(m) for m in ours])
    ref_spans = np.concatenate([runs(m) for m in ref])
    assert len(ours_spans) == len(ref_spans) == draws * 7
    assert ours_spans.mean() == ref_spans.mean() == 3.0  # 21 noise tokens in 7 spans, always
    for length in range(1, 9):
        assert same_rate(int((ours_spans == length).sum()), len(ours_spans),
                         int((ref_spans == length).sum()), len(ref_spans)), length
    # the kept gaps (the first gap and the ones between spans): their lengths' distribution
    ours_gaps = np.concatenate([runs(~m) for m in ours])
    ref_gaps = np.concatenate([runs(~m) for m in ref])
    for length in range(1, 30, 3):
        assert same_rate(int((ours_gaps == length).sum()), len(ours_gaps),
                         int((ref_gaps == length).sum()), len(ref_gaps)), length
