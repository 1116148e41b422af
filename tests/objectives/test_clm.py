import numpy as np
import pytest

from lmforge.objectives.base import IGNORE_INDEX, Corpus, Document, ObjectiveError, Vocab, rng_for
from lmforge.objectives.clm import CausalLM, TokenStream
from lmforge.objectives.features import pad_batch

VOCAB = Vocab(size=1000, pad=0, eos=1, unk=2, bos=3, mask=4, cls=5, sep=6, special_ids=frozenset(range(7)))


def make_corpus(seed: int = 0, documents: int = 40, low: int = 1, high: int = 400) -> Corpus:
    rng = np.random.default_rng(seed)
    docs = []
    for d in range(documents):
        n = int(rng.integers(low, high))
        tokens = rng.integers(7, VOCAB.size, n).astype(np.int64)
        docs.append(Document(tokens, np.ones(n, bool), rng.random(n) < 0.1, d))
    return Corpus(docs)


def expected_stream(corpus: Corpus, eos: int) -> np.ndarray:
    return np.concatenate([np.append(corpus[d].tokens, eos) for d in range(len(corpus))])


def test_token_stream_matches_concatenation_and_slices():
    corpus = make_corpus(1)
    stream = TokenStream(corpus, VOCAB.eos)
    full = expected_stream(corpus, VOCAB.eos)
    assert len(stream) == len(full)
    assert np.array_equal(stream.to_array(), full)
    rng = np.random.default_rng(0)
    for _ in range(200):
        a, b = sorted(rng.integers(0, len(full) + 1, 2))
        assert np.array_equal(stream.slice(int(a), int(b)), full[a:b])
    with pytest.raises(IndexError):
        stream.slice(0, len(full) + 1)


def test_blocks_are_contiguous_and_cover_the_stream():
    corpus = make_corpus(2, documents=80)
    obj = CausalLM(corpus, VOCAB, CausalLM.Config(block_size=64))
    full = expected_stream(corpus, VOCAB.eos)
    assert len(obj) == len(full) // 64
    blocks = [obj.example(i, rng_for(0, 0, i)) for i in range(len(obj))]
    assert all(len(b["input_ids"]) == 64 for b in blocks)
    joined = np.concatenate([b["input_ids"] for b in blocks])
    assert len(joined) >= 10_000
    assert np.array_equal(joined, full[: len(joined)])  # in order, no gap, no overlap
    assert len(full) - len(joined) < 64  # only the short tail is dropped
    for b in blocks:
        assert np.array_equal(b["labels"], b["input_ids"])  # the model shifts once, internally


def test_eos_between_documents_stays_in_labels_even_when_pad_is_eos():
    vocab = Vocab(size=1000, pad=1, eos=1, unk=2, special_ids=frozenset({1, 2}))
    corpus = make_corpus(3, documents=30, high=50)
    obj = CausalLM(corpus, vocab, CausalLM.Config(block_size=32))
    labels = np.concatenate([obj.example(i, None)["labels"] for i in range(len(obj))])
    n_eos = int((labels == vocab.eos).sum())
    # every document boundary inside the kept blocks is an eos target
    boundaries = np.cumsum([len(corpus[d]) + 1 for d in range(len(corpus))]) - 1
    assert n_eos == int((boundaries < len(labels)).sum()) > 10
    assert not (labels == IGNORE_INDEX).any()
    batch = pad_batch([obj.example(0, None), obj.example(1, None)], pad_id=vocab.pad)
    assert (batch["labels"] == vocab.eos).sum() == sum((obj.example(i, None)["labels"] == 1).sum() for i in (0, 1))


def test_pad_batch_and_statistics():
    obj = CausalLM(make_corpus(4), VOCAB, CausalLM.Config(block_size=128))
    examples = [obj.example(i, rng_for(0, 0, i)) for i in range(8)]
    batch = pad_batch(examples, pad_id=VOCAB.pad)
    assert tuple(batch["input_ids"].shape) == (8, 128)
    assert bool((batch["labels"] == batch["input_ids"]).all())
    assert int(batch["attention_mask"].sum()) == 8 * 128
    stats = obj.statistics(examples)
    assert stats["blocks"] == 8 and stats["tokens"] == 8 * 128
    ids = np.concatenate([e["input_ids"] for e in examples])
    assert stats["eos_fraction"] == pytest.approx((ids == VOCAB.eos).mean(), abs=1e-6)
    assert 0 < stats["eos_fraction"] < 0.05
    assert stats["labels_equal_inputs"] is True


def test_determinism_and_bounds():
    obj = CausalLM(make_corpus(5), VOCAB, CausalLM.Config(block_size=50))
    a = obj.example(3, rng_for(1, 0, 3))
    b = obj.example(3, rng_for(2, 5, 3))
    assert all(np.array_equal(a[k], b[k]) for k in a)
    with pytest.raises(IndexError):
        obj.example(len(obj), None)


def test_short_corpus_has_no_blocks():
    obj = CausalLM(make_corpus(6, documents=2, high=10), VOCAB)
    assert len(obj) == 0


def test_bad_parameters():
    with pytest.raises(ObjectiveError, match="block_size"):
        CausalLM(make_corpus(), VOCAB, CausalLM.Config(block_size=1))
    with pytest.raises(ObjectiveError, match="eos"):
        CausalLM(make_corpus(), Vocab(size=1000, pad=0))
    assert CausalLM.Config().block_size == 512
    with pytest.raises(ValueError):
        CausalLM.Config(block_size=64, nonsense=1)
