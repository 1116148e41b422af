import numpy as np
import pytest

from lmforge.objectives.base import IGNORE_INDEX, Corpus, Document, ObjectiveError, Vocab, rng_for
from lmforge.objectives.bilm import BidirectionalLM, lm_labels, sentence_pieces
from lmforge.objectives.features import pad_batch
from lmforge.chars import BOS_CHAR, EOS_CHAR, char_table

WORDS = ["<pad>", "<unk>", "<S>", "</S>"] + [f"w{i}" + "x" * (i % 7) for i in range(996)]
TABLE = char_table(WORDS, 12, "<S>", "</S>")
VOCAB = Vocab(size=len(WORDS), pad=0, unk=1, bos=2, eos=3, special_ids=frozenset(range(4)), char_table=TABLE)


def make_corpus(seed: int = 0, documents: int = 30, sentence_rate: float = 1 / 15) -> Corpus:
    rng = np.random.default_rng(seed)
    docs = []
    for d in range(documents):
        n = int(rng.integers(1, 600))
        tokens = rng.integers(4, len(WORDS), n).astype(np.int64)
        tokens[rng.random(n) < 0.02] = VOCAB.unk
        sentence_starts = rng.random(n) < sentence_rate
        sentence_starts[0] = True
        docs.append(Document(tokens, np.ones(n, bool), sentence_starts, d))
    return Corpus(docs)


def test_sentences_wrapped_and_covered():
    corpus = make_corpus(1)
    obj = BidirectionalLM(corpus, VOCAB, BidirectionalLM.Config(max_length=20))
    examples = [obj.example(i, rng_for(0, 0, i)) for i in range(len(obj))]
    # stripping the markers and concatenating gives back every document, in order
    words = np.concatenate([e["input_ids"][(e["input_ids"] != VOCAB.bos) & (e["input_ids"] != VOCAB.eos)] for e in examples])
    assert np.array_equal(words, np.concatenate([corpus[d].tokens for d in range(len(corpus))]))
    assert len(words) >= 8_000 and sum(len(e["input_ids"]) for e in examples) >= 10_000
    assert all(len(e["input_ids"]) <= 20 for e in examples)
    sentences = sum(len(corpus[d].sentences()) for d in range(len(corpus)))
    ids = np.concatenate([e["input_ids"] for e in examples])
    assert (ids == VOCAB.bos).sum() == (ids == VOCAB.eos).sum() == sentences
    # a sentence that fits is one example <S> ... </S>
    s, e = corpus[0].sentences()[0]
    if e - s <= 18:
        assert np.array_equal(examples[0]["input_ids"], np.r_[VOCAB.bos, corpus[0].tokens[s:e], VOCAB.eos])


def test_forward_and_backward_targets():
    obj = BidirectionalLM(make_corpus(2), VOCAB)
    checked = 0
    for i in range(len(obj)):
        ex = obj.example(i, None)
        ids, fwd, bwd = ex["input_ids"], ex["labels"], ex["backward_labels"]
        assert np.array_equal(fwd[:-1], ids[1:]) and fwd[-1] == IGNORE_INDEX
        # the backward LM reads the reversed sequence and predicts its next token
        rev = ids[::-1]
        assert np.array_equal(bwd[::-1][:-1], rev[1:]) and bwd[0] == IGNORE_INDEX
        checked += len(ids)
    assert checked >= 10_000
    f, b = lm_labels(np.array([2, 10, 11, 3]))
    assert f.tolist() == [10, 11, 3, IGNORE_INDEX] and b.tolist() == [IGNORE_INDEX, 2, 10, 11]


def test_char_ids_are_the_table_rows():
    obj = BidirectionalLM(make_corpus(3, documents=5), VOCAB)
    for i in range(len(obj)):
        ex = obj.example(i, None)
        assert ex["char_ids"].shape == (len(ex["input_ids"]), 12)
        assert np.array_equal(ex["char_ids"], TABLE[ex["input_ids"]])
    ex = obj.example(0, None)
    assert ex["char_ids"][0, 1] == BOS_CHAR  # <S> is the sentence marker, not the bytes of "<S>"
    last = obj.example(len(obj) - 1, None)
    assert last["char_ids"][-1, 1] == EOS_CHAR


def test_long_sentences_are_cut_without_fake_boundaries():
    assert sentence_pieces(0, 3, 5) == [(0, 3, True, True)]
    assert sentence_pieces(0, 4, 5) == [(0, 3, True, False), (3, 4, False, True)]
    assert sentence_pieces(0, 12, 5) == [(0, 4, True, False), (4, 9, False, False), (9, 12, False, True)]
    for n in range(1, 60):
        pieces = sentence_pieces(10, 10 + n, 7)
        assert pieces[0][0] == 10 and pieces[-1][1] == 10 + n
        assert all(a[1] == b[0] for a, b in zip(pieces, pieces[1:]))
        assert all(e - s + bos + eos <= 7 and e > s for s, e, bos, eos in pieces)
        assert [p[2] for p in pieces] == [True] + [False] * (len(pieces) - 1)
        assert [p[3] for p in pieces] == [False] * (len(pieces) - 1) + [True]
    corpus = make_corpus(4, documents=10, sentence_rate=1 / 40)
    obj = BidirectionalLM(corpus, VOCAB, BidirectionalLM.Config(max_length=10))
    stats = obj.statistics([obj.example(i, None) for i in range(len(obj))])
    assert stats["whole_sentence_fraction"] < 0.5
    assert stats["mean_length"] <= 10


def test_pad_batch_statistics_and_determinism():
    obj = BidirectionalLM(make_corpus(5), VOCAB)
    examples = [obj.example(i, rng_for(0, 0, i)) for i in range(16)]
    batch = pad_batch(examples, pad_id=VOCAB.pad)
    L = max(len(e["input_ids"]) for e in examples)
    assert tuple(batch["char_ids"].shape) == (16, L, 12)
    for j, e in enumerate(examples):
        n = len(e["input_ids"])
        assert bool((batch["labels"][j, n - 1 :] == IGNORE_INDEX).all())
        assert bool((batch["backward_labels"][j, n:] == IGNORE_INDEX).all())
    stats = obj.statistics(examples)
    assert stats["forward_targets"] == stats["backward_targets"] == sum(len(e["input_ids"]) - 1 for e in examples)
    words = [int(t) for e in examples for t in e["input_ids"] if t not in (VOCAB.bos, VOCAB.eos)]
    assert stats["words"] == len(words)
    unk = sum(t == VOCAB.unk for t in words)
    assert unk > 0 and stats["unk_fraction"] == round(unk / len(words), 6)  # the corpus's 2% of <unk>
    a, b = obj.example(3, rng_for(0, 0, 3)), obj.example(3, rng_for(9, 9, 3))
    assert all(np.array_equal(a[k], b[k]) for k in a)


def test_bad_parameters_and_missing_table():
    corpus = make_corpus(6, documents=2)
    with pytest.raises(ObjectiveError, match="max_length"):
        BidirectionalLM(corpus, VOCAB, BidirectionalLM.Config(max_length=2))
    with pytest.raises(ObjectiveError, match="char_table"):
        BidirectionalLM(corpus, Vocab(size=len(WORDS), pad=0, unk=1, bos=2, eos=3))
    with pytest.raises(ObjectiveError, match="char_table"):
        BidirectionalLM(corpus, Vocab(size=5000, pad=0, unk=1, bos=2, eos=3, char_table=TABLE))
    with pytest.raises(ObjectiveError, match="bos"):
        BidirectionalLM(corpus, Vocab(size=len(WORDS), pad=0, unk=1, eos=3, char_table=TABLE))
    assert BidirectionalLM.Config().max_length == 64
