"""Denoising (BART): each noise function's invariant, the Poisson span lengths, the composed objective."""

import math

import numpy as np
import pytest
from pydantic import ValidationError

from lmforge.objectives.base import Corpus, Document, ObjectiveError, Vocab, rng_for
from lmforge.objectives.denoising import (
    Denoising,
    add_noise,
    body_length,
    delete_tokens,
    infill_text,
    insert_masks,
    mask_tokens,
    permute_sentences,
    rotate_document,
    sample_span_lengths,
)
from lmforge.objectives.features import pad_batch

SENTINELS = tuple(range(999, 899, -1))
SPECIAL = frozenset({0, 1, 2, 3, 4, *SENTINELS})
VOCAB = Vocab(size=1000, pad=0, eos=1, unk=2, bos=3, mask=4, sentinels=SENTINELS, special_ids=SPECIAL)
MASK = VOCAB.mask
RANDOM_IDS = np.setdiff1d(np.arange(1000), sorted(SPECIAL))


def make_document(rng, index=0, sentences=(5, 40)):
    lengths = rng.integers(*sentences, size=rng.integers(3, 30))
    n = int(lengths.sum())
    sentence_starts = np.zeros(n, dtype=bool)
    sentence_starts[np.concatenate([[0], np.cumsum(lengths)[:-1]])] = True
    word_starts = (rng.random(n) < 0.6) | sentence_starts
    return Document(rng.integers(10, 1000, size=n).astype(np.int64), word_starts, sentence_starts, index)


def make_corpus(n_docs=40, seed=0):
    rng = np.random.default_rng(seed)
    return Corpus([make_document(rng, d) for d in range(n_docs)])


def sentence_order(doc, positions):
    """The original sentence indices, in output order, from permute_sentences' positions;
    asserts that the output is made of whole sentences."""
    bounds = doc.sentences()
    number = {s: k for k, (s, _) in enumerate(bounds)}
    order, cursor = [], 0
    while cursor < len(positions):
        k = number[int(positions[cursor])]
        s, e = bounds[k]
        assert positions[cursor:cursor + e - s].tolist() == list(range(s, e))
        order.append(k)
        cursor += e - s
    return order


def reconstruct_infilled(noised, spans):
    """The original from the noised tokens and the span info: each span's stand-in replaced by
    what it took out, the rest copied."""
    out, cursor = [], 0
    for span in spans:
        out.extend(noised[cursor:span.position].tolist())
        out.extend(span.original.tolist())
        cursor = span.position + span.replaced_by
    out.extend(noised[cursor:].tolist())
    return np.array(out, dtype=np.int64)


# ----------------------------------------------------------------------------- text infilling


def test_span_lengths_are_poisson():
    lengths = sample_span_lengths(30_000, 3.0, np.random.default_rng(0))
    assert lengths.sum() == 30_000
    draws = lengths[:-1]  # the last one is cut to the budget
    assert len(draws) > 9_000
    assert abs(draws.mean() - 3.0) < 0.05  # estimated lambda
    assert abs(draws.var() - 3.0) < 0.15  # Poisson: variance = mean
    assert abs((draws == 0).mean() - math.exp(-3.0)) < 0.006  # zero-length spans: insertions
    lam35 = sample_span_lengths(30_000, 3.5, np.random.default_rng(1))[:-1]
    assert abs(lam35.mean() - 3.5) < 0.06


def test_span_lengths_budget_edge_cases():
    rng = np.random.default_rng(0)
    assert len(sample_span_lengths(0, 3.0, rng)) == 0
    for budget in [1, 2, 7, 50]:
        lengths = sample_span_lengths(budget, 3.0, rng)
        assert lengths.sum() == budget and lengths[-1] >= 1 and (lengths >= 0).all()


def test_infilling_poisson_mean_through_documents():
    """Span lengths estimated from the spans infill_text actually made, over >= 10,000 tokens."""
    rng = np.random.default_rng(42)
    lengths, tokens_seen = [], 0
    while tokens_seen < 40_000:
        tokens = rng.integers(10, 1000, size=int(rng.integers(200, 600)))
        noised, spans = infill_text(tokens, 0.3, 3.0, MASK, rng)
        tokens_seen += len(tokens)
        assert sum(len(s.original) for s in spans) == math.ceil(len(tokens) * 0.3)
        lengths += [len(s.original) for s in spans[:-1]]  # the last span is cut to the budget
    lam = np.mean(lengths)
    assert abs(lam - 3.0) < 0.12, lam
    assert abs(np.mean(np.array(lengths) == 0) - math.exp(-3)) < 0.015


@pytest.mark.parametrize("replace_length", [1, 0, -1])
@pytest.mark.parametrize("whole_words", [False, True])
def test_infilling_reconstructs_the_original(replace_length, whole_words):
    rng = np.random.default_rng(7)
    for i in range(60):
        doc = make_document(rng, i)
        noised, spans = infill_text(doc.tokens, 0.3, 3.0, MASK, rng, word_starts=doc.word_starts if whole_words else None,
                                    replace_length=replace_length, random_token_prob=0.1, random_ids=RANDOM_IDS)
        assert np.array_equal(reconstruct_infilled(noised, spans), doc.tokens)
        positions = [s.position for s in spans]
        assert positions == sorted(positions)
        for s in spans:
            stand_in = noised[s.position:s.position + s.replaced_by]
            if len(s.original) == 0:
                assert s.replaced_by == 1  # a zero-length span inserts one mask whatever replace_length
            elif replace_length == 1:
                assert s.replaced_by == 1
            elif replace_length == 0:
                assert s.replaced_by == 0
            else:
                assert s.replaced_by == len(s.original)
            assert all(t == MASK or t in set(RANDOM_IDS.tolist()) for t in stand_in.tolist())


def test_infilling_whole_words():
    rng = np.random.default_rng(3)
    for i in range(40):
        doc = make_document(rng, i)
        starts = doc.word_starts.copy()
        starts[0] = True
        noised, spans = infill_text(doc.tokens, 0.3, 3.0, MASK, rng, word_starts=doc.word_starts)
        # walk the spans in original coordinates: each covers whole words
        units_masked, original_pos, out_pos = 0, 0, 0
        for s in spans:
            original_pos += s.position - out_pos
            b = original_pos + len(s.original)
            if len(s.original):
                assert starts[original_pos] and (b == len(doc.tokens) or starts[b])
                units_masked += int(starts[original_pos:b].sum())
            original_pos, out_pos = b, s.position + s.replaced_by
        assert units_masked == math.ceil(starts.sum() * 0.3)


def test_infilling_one_mask_per_span():
    rng = np.random.default_rng(9)
    tokens = rng.integers(10, 1000, size=500)
    noised, spans = infill_text(tokens, 0.3, 3.0, MASK, rng)
    assert (noised == MASK).sum() == len(spans)
    assert len(noised) == 500 - sum(len(s.original) for s in spans) + len(spans)


# ----------------------------------------------------------------------------- the other noise functions


def test_token_masking_keeps_length_and_masks_the_rate():
    rng = np.random.default_rng(0)
    changed = total = chosen_total = random_total = 0
    for _ in range(40):  # ~20,000 positions
        tokens = rng.integers(10, 1000, size=int(rng.integers(300, 700)))
        noised, chosen = mask_tokens(tokens, 0.15, MASK, rng, random_token_prob=0.1, random_ids=RANDOM_IDS)
        assert len(noised) == len(tokens)
        assert chosen.sum() == math.ceil(len(tokens) * 0.15)
        assert np.array_equal(noised[~chosen], tokens[~chosen])
        changed += int((noised != tokens).sum())
        total += len(tokens)
        chosen_total += int(chosen.sum())
        random_total += int((noised[chosen] != MASK).sum())
    assert total >= 10_000
    assert abs(changed / total - 0.15) < 0.005
    assert abs(random_total / chosen_total - 0.1) < 0.02


def test_token_deletion_removes_the_rate():
    rng = np.random.default_rng(1)
    removed = total = 0
    for _ in range(40):
        tokens = rng.integers(10, 1000, size=int(rng.integers(300, 700)))
        kept, keep = delete_tokens(tokens, 0.2, rng)
        assert len(kept) == len(tokens) - math.ceil(len(tokens) * 0.2)
        assert np.array_equal(kept, tokens[keep])  # an order-preserving subsequence
        removed += len(tokens) - len(kept)
        total += len(tokens)
    assert abs(removed / total - 0.2) < 0.005


def test_mask_insertion():
    rng = np.random.default_rng(2)
    for _ in range(20):
        tokens = rng.integers(10, 1000, size=int(rng.integers(1, 400)))
        noised, inserted = insert_masks(tokens, 0.1, MASK, rng)
        assert inserted.sum() == math.ceil(len(tokens) * 0.1)
        assert np.array_equal(noised[~inserted], tokens)
        assert (noised[inserted] == MASK).all()


def test_sentence_permutation_moves_whole_sentences():
    rng = np.random.default_rng(4)
    moved = 0
    for i in range(50):
        doc = make_document(rng, i)
        sentences = [doc.tokens[s:e].tolist() for s, e in doc.sentences()]
        noised, positions = permute_sentences(doc.tokens, doc.sentence_starts, 1.0, rng)
        assert np.array_equal(noised, doc.tokens[positions])
        assert sorted(positions.tolist()) == list(range(len(doc)))  # a permutation of positions
        assert sorted(noised.tolist()) == sorted(doc.tokens.tolist())  # multiset kept
        order = sentence_order(doc, positions)  # the output is whole original sentences
        assert sorted(order) == list(range(len(sentences)))  # each exactly once
        assert [t for k in order for t in sentences[k]] == noised.tolist()
        moved += order != sorted(order)
    assert moved >= 45  # ratio 1.0 shuffles all sentences


def test_sentence_permutation_ratio_limits_the_moved_sentences():
    rng = np.random.default_rng(5)
    for i in range(30):
        doc = make_document(rng, i)
        n = len(doc.sentences())
        _, positions = permute_sentences(doc.tokens, doc.sentence_starts, 0.3, rng)
        order = sentence_order(doc, positions)
        assert sum(k != place for place, k in enumerate(order)) <= math.ceil(n * 0.3)
    # no sentence starts at 0: the leading text is a sentence of its own
    starts = np.zeros(10, dtype=bool)
    starts[4] = True
    noised, positions = permute_sentences(np.arange(10, 20), starts, 1.0, np.random.default_rng(0))
    assert positions.tolist() in ([0, 1, 2, 3, 4, 5, 6, 7, 8, 9], [4, 5, 6, 7, 8, 9, 0, 1, 2, 3])


def test_document_rotation():
    rng = np.random.default_rng(6)
    offsets = []
    for _ in range(200):
        tokens = rng.integers(10, 1000, size=int(rng.integers(2, 50)))
        rotated, offset = rotate_document(tokens, rng)
        assert len(tokens) > offset >= 1
        assert np.array_equal(rotated, np.roll(tokens, -offset))
        offsets.append(offset / len(tokens))
    assert 0.35 < np.mean(offsets) < 0.65
    assert rotate_document(np.array([7]), rng)[1] == 0


def test_noise_functions_are_deterministic_per_seed():
    tokens = np.random.default_rng(0).integers(10, 1000, size=300)
    for fn in (lambda r: mask_tokens(tokens, 0.3, MASK, r)[0], lambda r: delete_tokens(tokens, 0.3, r)[0],
               lambda r: infill_text(tokens, 0.3, 3.0, MASK, r)[0], lambda r: insert_masks(tokens, 0.3, MASK, r)[0],
               lambda r: rotate_document(tokens, r)[0]):
        assert np.array_equal(fn(rng_for(1, 0, 5)), fn(rng_for(1, 0, 5)))
        assert not np.array_equal(fn(rng_for(1, 0, 5)), fn(rng_for(1, 1, 5)))


def test_add_noise_composes_in_the_reference_order():
    """Permutation then infilling: the infilled text, rebuilt from the spans, is the permuted text."""
    rng = np.random.default_rng(8)
    cfg = Denoising.Config()
    for i in range(20):
        doc = make_document(rng, i)
        noised, trace = add_noise(doc.tokens, doc.word_starts, doc.sentence_starts, cfg, MASK, RANDOM_IDS, rng)
        permuted = doc.tokens[trace.permuted]
        assert np.array_equal(reconstruct_infilled(noised, trace.infill_spans), permuted)
        assert trace.rotation == 0 and trace.inserted == 0 and trace.deleted == 0


# ----------------------------------------------------------------------------- the objective


def test_objective_examples():
    corpus = make_corpus()
    obj = Denoising(corpus, VOCAB)
    assert obj.name == "denoising" and obj.family == "encoder_decoder"
    for i in range(len(obj)):
        e = obj.example(i, rng_for(0, 0, i))
        assert set(e) == {"input_ids", "labels", "decoder_input_ids"}
        d, s, t = obj.index[i]
        assert e["labels"].tolist() == [VOCAB.bos, *corpus[d].tokens[s:t].tolist(), VOCAB.eos]  # target = original
        assert e["decoder_input_ids"].tolist() == [VOCAB.eos, *e["labels"][:-1].tolist()]
        assert e["input_ids"][0] == VOCAB.bos and e["input_ids"][-1] == VOCAB.eos
        assert len(e["input_ids"]) <= 512 and len(e["labels"]) <= 512
        assert (e["input_ids"] == MASK).any()


def test_bos_and_eos_never_touched():
    """Every noise at high rates: <s> first, </s> last, neither anywhere else."""
    cfg = Denoising.Config(max_length=64, infill_ratio=0.6, token_mask_ratio=0.5, delete_ratio=0.2, insert_ratio=0.3,
                           rotate_ratio=1.0, random_token_prob=0.5, replace_length=-1)
    obj = Denoising(make_corpus(20), VOCAB, cfg)
    for i in range(len(obj)):
        x = obj.example(i, rng_for(0, 0, i))["input_ids"]
        assert x[0] == VOCAB.bos and x[-1] == VOCAB.eos and len(x) <= 64
        assert not np.isin(x[1:-1], [VOCAB.bos, VOCAB.eos, VOCAB.pad]).any()


def test_objective_determinism():
    obj = Denoising(make_corpus(5), VOCAB)
    a, b, c = (obj.example(1, rng_for(s, 0, 1)) for s in (2, 2, 3))
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert not np.array_equal(a["input_ids"], c["input_ids"])
    assert np.array_equal(a["labels"], c["labels"])


def test_statistics():
    obj = Denoising(make_corpus(60, seed=1), VOCAB, Denoising.Config(max_length=128))
    examples = [obj.example(i, rng_for(0, 0, i)) for i in range(len(obj))]
    assert sum(len(e["labels"]) for e in examples) >= 10_000
    stats = obj.statistics(examples)
    assert abs(stats["estimated_masked_fraction"] - 0.3) < 0.03
    assert stats["input_to_label_length"] < 1
    # whole words: ~1.67 tokens per word in these documents, so token spans are longer than lambda
    assert 3.5 < stats["estimated_infill_span_length_mean"] < 6.5
    subword = Denoising(make_corpus(60, seed=1), VOCAB, Denoising.Config(max_length=128, whole_words=False))
    stats = subword.statistics([subword.example(i, rng_for(0, 0, i)) for i in range(len(subword))])
    assert abs(stats["estimated_masked_fraction"] - 0.3) < 0.02
    assert abs(stats["estimated_infill_span_length_mean"] - 3.0) < 0.4


def test_pad_batch():
    obj = Denoising(make_corpus(5), VOCAB, Denoising.Config(max_length=64))
    examples = [obj.example(i, rng_for(0, 0, i)) for i in range(4)]
    batch = pad_batch(examples, pad_id=VOCAB.pad)
    for row, e in enumerate(examples):
        n, m = len(e["input_ids"]), len(e["labels"])
        assert batch["attention_mask"][row].sum() == n
        assert (batch["input_ids"][row, n:] == VOCAB.pad).all()
        assert (batch["labels"][row, m:] == -100).all()
        assert batch["decoder_input_ids"][row, 0] == VOCAB.eos
        assert batch["decoder_attention_mask"][row].sum() == m


def test_body_length_leaves_room_for_insertions():
    assert body_length(512, 0.0) == 510
    n = body_length(512, 0.1)
    assert n + math.ceil(n * 0.1) <= 510 < (n + 1) + math.ceil((n + 1) * 0.1)


# ----------------------------------------------------------------------------- errors


@pytest.mark.parametrize("field, value", [
    ("infill_ratio", 1.5), ("token_mask_ratio", -0.1), ("delete_ratio", 2.0), ("insert_ratio", -1.0),
    ("permute_sentences", 1.1), ("rotate_ratio", -0.5), ("random_token_prob", 1.2),
    ("poisson_lambda", 0.0), ("replace_length", 2), ("max_length", 2),
])
def test_bad_parameters_name_themselves(field, value):
    with pytest.raises(ObjectiveError, match=field):
        Denoising(make_corpus(2), VOCAB, Denoising.Config(**{field: value}))


@pytest.mark.parametrize("role", ["bos", "eos", "mask", "pad"])
def test_tokenizer_without_needed_tokens(role):
    vocab = Vocab(**{"size": 1000, "pad": 0, "eos": 1, "bos": 3, "mask": 4, role: None})
    with pytest.raises(ObjectiveError, match=role):
        Denoising(make_corpus(2), vocab)


def test_config_defaults_are_bart_large():
    c = Denoising.Config()
    assert (c.infill_ratio, c.random_token_prob, c.poisson_lambda, c.replace_length) == (0.3, 0.1, 3.0, 1)
    assert (c.permute_sentences, c.rotate_ratio, c.insert_ratio, c.delete_ratio, c.token_mask_ratio) == (1.0, 0, 0, 0, 0)
    with pytest.raises(ValidationError, match=r"mask\n  Extra inputs are not permitted"):
        Denoising.Config(mask=0.3)
