import numpy as np
import pytest

from lmforge.objectives.base import Corpus, Document, ObjectiveError, Vocab, rng_for
from lmforge.objectives.features import pad_batch
from lmforge.objectives.segments import Segments, row_layout

VOCAB = Vocab(size=1000, pad=0, eos=1, unk=2, bos=3, mask=4, cls=5, sep=6, special_ids=frozenset(range(7)))


def make_corpus(seed: int = 0, documents: int = 60, high: int = 500) -> Corpus:
    rng = np.random.default_rng(seed)
    docs = []
    for d in range(documents):
        n = int(rng.integers(1, high))
        docs.append(Document(rng.integers(7, VOCAB.size, n).astype(np.int64), np.ones(n, bool), np.zeros(n, bool), d))
    return Corpus(docs)


def stream_of(corpus: Corpus) -> np.ndarray:
    return np.concatenate([np.append(corpus[d].tokens, VOCAB.eos) for d in range(len(corpus))])


def all_batches(obj: Segments) -> list[list[dict]]:
    bsz = obj.config.batch_size
    return [[obj.example(t * bsz + b, rng_for(0, 0, t * bsz + b)) for b in range(bsz)] for t in range(len(obj) // bsz)]


@pytest.mark.parametrize("batch_size,segment_length", [(4, 32), (7, 50), (3, 128)])
def test_rows_continue_across_batches(batch_size, segment_length):
    corpus = make_corpus(1)
    stream = stream_of(corpus)
    obj = Segments(corpus, VOCAB, Segments.Config(segment_length=segment_length, batch_size=batch_size))
    steps = len(stream) // batch_size
    assert obj.ordered and len(obj) % batch_size == 0
    batches = all_batches(obj)
    assert len(batches) == -(-(steps - 1) // segment_length)
    total = 0
    for b in range(batch_size):
        # concatenating row b over the batches must give exactly row b of the stream
        inputs = np.concatenate([batch[b]["input_ids"] for batch in batches])
        labels = np.concatenate([batch[b]["labels"] for batch in batches])
        row = stream[b * steps : (b + 1) * steps]
        assert np.array_equal(inputs, row[:-1])
        assert np.array_equal(labels, row[1:])
        total += len(inputs)
    assert total >= 10_000
    for batch in batches:  # every row of a batch has the same length (no padding needed)
        assert len({len(e["input_ids"]) for e in batch}) == 1


def test_labels_are_next_tokens_across_segment_boundaries():
    corpus = make_corpus(2)
    obj = Segments(corpus, VOCAB, Segments.Config(segment_length=16, batch_size=5))
    bsz = obj.config.batch_size
    for t in range(len(obj) // bsz - 1):
        for b in range(bsz):
            cur = obj.example(t * bsz + b, None)
            nxt = obj.example((t + 1) * bsz + b, None)
            assert np.array_equal(cur["labels"][:-1], cur["input_ids"][1:])
            assert cur["labels"][-1] == nxt["input_ids"][0]  # already shifted: do not shift again


def test_eos_separates_documents():
    corpus = make_corpus(3, documents=20, high=40)
    obj = Segments(corpus, VOCAB, Segments.Config(segment_length=8, batch_size=2))
    stats = obj.statistics([obj.example(i, None) for i in range(len(obj))])
    stream = stream_of(corpus)
    assert stats["stream_tokens"] == len(stream)
    assert stats["tokens"] == 2 * (len(stream) // 2 - 1)
    assert stats["eos_fraction"] == pytest.approx(20 / len(stream), rel=0.1)
    assert stats["stream_tokens_dropped"] == len(stream) % 2


def test_row_layout_and_short_corpus():
    assert row_layout(100, 10, 4) == (10, 3)  # 9 pairs per row -> 4 + 4 + 1
    assert row_layout(100, 10, 9) == (10, 1)
    assert row_layout(19, 10, 4) == (1, 0)
    obj = Segments(make_corpus(4, documents=1, high=5), VOCAB)
    assert len(obj) == 0


def test_pad_batch_determinism_and_bounds():
    obj = Segments(make_corpus(5), VOCAB, Segments.Config(segment_length=32, batch_size=4))
    batch = pad_batch([obj.example(i, rng_for(0, 0, i)) for i in range(4)], pad_id=VOCAB.pad)
    assert tuple(batch["input_ids"].shape) == (4, 32) and tuple(batch["labels"].shape) == (4, 32)
    a, b = obj.example(9, rng_for(0, 0, 9)), obj.example(9, rng_for(7, 3, 9))
    assert all(np.array_equal(a[k], b[k]) for k in a)
    with pytest.raises(IndexError):
        obj.example(len(obj), None)


def test_bad_parameters():
    corpus = make_corpus()
    with pytest.raises(ObjectiveError, match="segment_length"):
        Segments(corpus, VOCAB, Segments.Config(segment_length=0))
    with pytest.raises(ObjectiveError, match="batch_size"):
        Segments(corpus, VOCAB, Segments.Config(batch_size=0))
    with pytest.raises(ObjectiveError, match="eos"):
        Segments(corpus, Vocab(size=1000))
    assert Segments.Config().segment_length == 128
