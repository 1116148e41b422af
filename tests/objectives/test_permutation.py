import numpy as np
import pytest

from lmforge.objectives.base import IGNORE_INDEX, Corpus, Document, ObjectiveError, Vocab, rng_for
from lmforge.objectives.features import pad_batch
from lmforge.objectives.permutation import (
    PermutationLM,
    factorisation_ranks,
    permutation_mask,
    sample_target_spans,
    span_length_probabilities,
)

VOCAB = Vocab(size=1000, pad=0, eos=1, unk=2, bos=3, mask=4, cls=5, sep=6, special_ids=frozenset(range(7)))
SPECIAL = np.arange(7)


def make_corpus(seed: int = 0, documents: int = 12, low: int = 600, high: int = 1500,
                word_start_rate: float = 1.0, unk_rate: float = 0.02) -> Corpus:
    rng = np.random.default_rng(seed)
    docs = []
    for d in range(documents):
        n = int(rng.integers(low, high))
        tokens = rng.integers(7, VOCAB.size, n).astype(np.int64)
        tokens[rng.random(n) < unk_rate] = VOCAB.unk  # specials inside the text: never targets
        word_starts = rng.random(n) < word_start_rate
        word_starts[0] = True
        docs.append(Document(tokens, word_starts, rng.random(n) < 0.02, d))
    return Corpus(docs)


def span_words(word_starts: np.ndarray, start: int, end: int) -> int:
    return 1 + int(word_starts[start + 1 : end].sum())


def test_span_sampler_counts_and_shapes():
    rng = np.random.default_rng(0)
    n, goal = 510, 85
    spans_all, words_all, fill = [], [], 0
    first_half = 0
    for _ in range(40):  # 40 * 510 = 20,400 positions
        word_starts = rng.random(n) < 0.6
        word_starts[0] = True
        candidates = rng.random(n) > 0.03
        spans = sample_target_spans(word_starts, candidates, goal, 5, 6.0, rng)
        target = np.zeros(n, bool)
        for s, e in spans:
            assert not target[s:e].any()  # disjoint
            target[s:e] = True
        assert target.sum() == goal
        assert not (target & ~candidates).any()
        boundary = word_starts.copy()
        boundary[1:] |= ~candidates[:-1]
        for s, e in spans:
            if not (boundary[s] and (e == n or boundary[e] or not candidates[e])):
                assert e - s == 1  # only the filler tokens may cut a word
                fill += 1
                continue
            words = span_words(boundary, s, e)
            assert 5 >= words >= 1
            words_all.append(words)
        spans_all += [e - s for s, e in spans]
        first_half += int(target[: n // 2].sum())
    # p(w) ~ 1/w: mean 5 / H_5 = 2.19 before budget cuts
    assert np.mean(words_all) == pytest.approx(5 / sum(1 / w for w in range(1, 6)), abs=0.25)
    assert fill < 0.1 * 40 * goal
    assert first_half / (40 * goal) == pytest.approx(0.5, abs=0.05)  # targets spread over the piece
    assert np.allclose(span_length_probabilities(3), np.array([6, 3, 2]) / 11)


def test_span_sampler_fill_and_limits():
    rng = np.random.default_rng(1)
    ws = np.ones(12, bool)
    spans = sample_target_spans(ws, np.ones(12, bool), 12, 5, 6.0, rng)  # everything a target
    assert sum(e - s for s, e in spans) == 12
    assert len(sample_target_spans(ws, np.ones(12, bool), 0, 5, 6.0, rng)) == 0
    with pytest.raises(ValueError):
        sample_target_spans(ws, np.zeros(12, bool), 1, 5, 6.0, rng)


def test_permutation_mask_from_ranks():
    ranks = np.array([-1, 2, -1, 0, 1])
    m = permutation_mask(ranks)
    expected = np.array([
        [0, 1, 0, 1, 1],
        [0, 1, 0, 0, 0],
        [0, 1, 0, 1, 1],
        [0, 1, 0, 1, 1],
        [0, 1, 0, 0, 1],
    ])
    assert np.array_equal(m, expected)
    r = factorisation_ranks(np.array([True, False, True, True]), np.random.default_rng(0))
    assert r[1] == -1 and sorted(r[[0, 2, 3]]) == [0, 1, 2]


def check_example(ex: dict, num_predict: int) -> np.ndarray:
    """All the structural invariants of one example; returns the target positions."""
    ids, pm, tm, labels = ex["input_ids"], ex["perm_mask"], ex["target_mapping"], ex["labels"]
    L = len(ids)
    assert pm.shape == (L, L) and tm.shape == (num_predict, L) and labels.shape == (num_predict,)
    real = labels != IGNORE_INDEX
    assert np.array_equal(tm.sum(axis=1), real.astype(tm.dtype))  # one-hot rows, zero padding rows
    assert real[: real.sum()].all()  # padding rows at the end
    positions = tm[real].argmax(axis=1)
    assert np.all(np.diff(positions) > 0)  # position order
    assert np.array_equal(labels[real], ids[positions])  # labels are the (unchanged) inputs
    is_target = np.zeros(L, bool)
    is_target[positions] = True
    assert not np.isin(ids[positions], SPECIAL).any()  # specials are never targets
    # non-targets are visible to everyone; the query stream never sees its own content
    assert not pm[:, ~is_target].any()
    assert pm[positions, positions].all()
    # one factorisation order: a target's rank = how many targets it can see
    T = len(positions)
    ranks = np.full(L, -1)
    ranks[positions] = (pm[np.ix_(positions, positions)] == 0).sum(axis=1)
    assert sorted(ranks[positions]) == list(range(T))
    assert np.array_equal(pm, permutation_mask(ranks))
    return positions


def test_examples_follow_one_factorisation_order():
    corpus = make_corpus(2)
    obj = PermutationLM(corpus, VOCAB)
    assert obj.num_predict == 85 and obj.family == "encoder"
    text = targets = 0
    runs = []
    for i in range(len(obj)):
        ex = obj.example(i, rng_for(0, 0, i))
        ids = ex["input_ids"]
        assert len(ids) <= 512
        assert ids[-2] == VOCAB.sep and ids[-1] == VOCAB.cls  # XLNet: <sep> <cls> at the END
        assert np.array_equal(ex["token_type_ids"], np.r_[np.zeros(len(ids) - 1), 2])
        positions = check_example(ex, 85)
        text += int((~np.isin(ids, SPECIAL)).sum())
        targets += len(positions)
        runs += [len(r) for r in np.split(positions, np.flatnonzero(np.diff(positions) != 1) + 1)]
    assert text >= 10_000
    assert targets / text == pytest.approx(1 / 6, abs=0.01)
    assert max(runs) <= 5  # one token per word here, so spans <= 5 tokens
    stats = obj.statistics([obj.example(i, rng_for(0, 0, i)) for i in range(len(obj))])
    assert stats["special_targets"] == 0
    assert stats["target_fraction"] == pytest.approx(targets / text, abs=1e-6)
    assert stats["target_run_tokens"]["max"] <= 5
    assert 3.0 > stats["target_run_tokens"]["mean"] > 1.5


def test_order_is_uniform_over_targets():
    obj = PermutationLM(make_corpus(3, documents=4), VOCAB, PermutationLM.Config(max_length=64))
    first_before_last = []
    for i in range(len(obj)):
        for seed in range(20):
            ex = obj.example(i, rng_for(seed, 0, i))
            pos = ex["target_mapping"][ex["labels"] != IGNORE_INDEX].argmax(axis=1)
            if len(pos) >= 2:
                # the first target can see the last one iff it comes later in the order
                first_before_last.append(ex["perm_mask"][pos[0], pos[-1]] == 1)
    assert len(first_before_last) > 1000
    assert np.mean(first_before_last) == pytest.approx(0.5, abs=0.05)


def test_subword_spans_odd_length_and_short_examples():
    corpus = make_corpus(4, documents=6, low=5, high=900, word_start_rate=0.6)
    obj = PermutationLM(corpus, VOCAB, PermutationLM.Config(max_length=101, add_special_tokens=False))
    assert obj.num_predict == round(101 / 6)
    short = 0
    for i in range(len(obj)):
        ex = obj.example(i, rng_for(1, 0, i))
        assert "token_type_ids" not in ex and len(ex["input_ids"]) <= 101
        positions = check_example(ex, obj.num_predict)
        n = int((~np.isin(ex["input_ids"], SPECIAL)).sum())
        assert len(positions) == min(obj.num_predict, max(1, round(n / 6)))
        short += len(positions) < obj.num_predict
    assert short > 0


def test_pad_batch_pads_perm_mask_with_ones():
    obj = PermutationLM(make_corpus(5, documents=3, low=20, high=200), VOCAB, PermutationLM.Config(max_length=64))
    examples = [obj.example(i, rng_for(0, 0, i)) for i in range(len(obj))]
    batch = pad_batch(examples, pad_id=VOCAB.pad)
    L = max(len(e["input_ids"]) for e in examples)
    assert tuple(batch["perm_mask"].shape) == (len(examples), L, L)
    assert tuple(batch["target_mapping"].shape) == (len(examples), obj.num_predict, L)
    for j, e in enumerate(examples):
        n = len(e["input_ids"])
        assert bool((batch["perm_mask"][j, :, n:] == 1).all())  # nobody sees padding
        assert bool((batch["target_mapping"][j, :, n:] == 0).all())
        assert int(batch["attention_mask"][j].sum()) == n


def test_determinism_per_seed():
    obj = PermutationLM(make_corpus(6, documents=3), VOCAB)
    a, b = obj.example(2, rng_for(0, 0, 2)), obj.example(2, rng_for(0, 0, 2))
    assert all(np.array_equal(a[k], b[k]) for k in a)
    c = obj.example(2, rng_for(0, 1, 2))  # the next epoch re-draws
    assert not np.array_equal(a["perm_mask"], c["perm_mask"])


def test_bad_parameters():
    corpus = make_corpus(7, documents=1)
    for field, value in [("max_length", 2), ("max_span_length", 0), ("num_predict", 0), ("num_predict", 600)]:
        with pytest.raises(ObjectiveError, match=field):
            PermutationLM(corpus, VOCAB, PermutationLM.Config(**{field: value}))
    with pytest.raises(ObjectiveError, match="partial_prediction_k"):
        PermutationLM(corpus, VOCAB, PermutationLM.Config(partial_prediction_k=1.0))
    with pytest.raises(ObjectiveError, match="sep, cls"):
        PermutationLM(corpus, Vocab(size=1000, pad=0, special_ids=frozenset({0})))
    PermutationLM(corpus, Vocab(size=1000, pad=0), PermutationLM.Config(add_special_tokens=False))
