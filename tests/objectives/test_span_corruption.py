"""Span corruption (T5): the reference lengths, the noise mask's statistics, sentinels, the inverse."""

import numpy as np
import pytest
from pydantic import ValidationError

from lmforge.objectives.base import Corpus, Document, ObjectiveError, Vocab, rng_for
from lmforge.objectives.features import pad_batch
from lmforge.objectives.span_corruption import (
    SpanCorruption,
    corrupt_spans,
    format_text_to_text,
    noise_span_counts,
    random_partition,
    random_spans_noise_mask,
    restore_spans,
    span_corruption_lengths,
)

SENTINELS = tuple(range(999, 899, -1))  # <extra_id_0> = 999, <extra_id_1> = 998, ...
VOCAB = Vocab(size=1000, pad=0, eos=1, unk=2, bos=3, mask=4, sentinels=SENTINELS,
              special_ids=frozenset({0, 1, 2, 3, 4, *SENTINELS}))


def make_corpus(n_docs=30, seed=0, text_ids=(10, 900)):
    """Documents of random sentences (tokens never sentinel ids)."""
    rng = np.random.default_rng(seed)
    docs = []
    for d in range(n_docs):
        lengths = rng.integers(5, 40, size=rng.integers(5, 60))
        n = int(lengths.sum())
        sentence_starts = np.zeros(n, dtype=bool)
        sentence_starts[np.concatenate([[0], np.cumsum(lengths)[:-1]])] = True
        word_starts = (rng.random(n) < 0.7) | sentence_starts
        docs.append(Document(rng.integers(*text_ids, size=n).astype(np.int64), word_starts, sentence_starts, d))
    return Corpus(docs)


def spans_of(mask):
    """(start, end) runs of True."""
    padded = np.concatenate([[False], mask, [False]]).astype(np.int8)
    edges = np.flatnonzero(np.diff(padded))
    return list(zip(edges[::2].tolist(), edges[1::2].tolist()))


# ----------------------------------------------------------------------------- lengths


def test_reference_lengths():
    assert span_corruption_lengths(512) == (568, 114)
    assert span_corruption_lengths(128) == (141, 29)
    assert noise_span_counts(568, 0.15, 3.0) == (85, 28)
    assert noise_span_counts(141, 0.15, 3.0) == (21, 7)


@pytest.mark.parametrize("input_length", [5, 16, 64, 100, 512, 1024])
def test_lengths_are_realised_exactly(input_length):
    raw, target = span_corruption_lengths(input_length)
    tokens = np.arange(10, 10 + raw)
    mask = random_spans_noise_mask(raw, 0.15, 3.0, np.random.default_rng(1))
    inputs, targets = corrupt_spans(tokens, mask, SENTINELS, eos=1)
    assert (len(inputs), len(targets)) == (input_length, target)
    # one more raw token would no longer fit
    inputs_len_next = (raw + 1) - noise_span_counts(raw + 1, 0.15, 3.0)[0] + noise_span_counts(raw + 1, 0.15, 3.0)[1] + 1
    assert inputs_len_next > input_length


# ----------------------------------------------------------------------------- the noise mask


def test_random_partition_is_a_composition():
    rng = np.random.default_rng(0)
    for items, segments in [(85, 28), (10, 1), (10, 10), (483, 28)]:
        parts = random_partition(items, segments, rng)
        assert len(parts) == segments and parts.sum() == items and parts.min() >= 1
    with pytest.raises(ValueError):
        random_partition(3, 4, rng)


def test_noise_mask_shape_and_exact_counts():
    rng = np.random.default_rng(0)
    for _ in range(50):
        mask = random_spans_noise_mask(568, 0.15, 3.0, rng)
        assert mask.dtype == bool and len(mask) == 568
        assert mask.sum() == 85
        runs = spans_of(mask)
        assert len(runs) == 28
        assert not mask[0] and mask[-1]  # starts with a kept gap, ends with a noise span


def test_noise_mask_statistics():
    rng = np.random.default_rng(1234)
    noise = total = 0
    span_lengths = []
    for length in rng.integers(200, 600, size=100):  # ~40,000 positions
        mask = random_spans_noise_mask(int(length), 0.15, 3.0, rng)
        noise += int(mask.sum())
        total += len(mask)
        span_lengths += [e - s for s, e in spans_of(mask)]
    assert total >= 10_000
    assert abs(noise / total - 0.15) < 0.003
    assert abs(np.mean(span_lengths) - 3.0) < 0.1
    # spans come from a uniform random composition: lengths vary, geometric-like (many 1s)
    counts = np.bincount(span_lengths)
    assert counts[1] > counts[2] > counts[3] > counts[5]


def test_noise_mask_short_and_degenerate_lengths():
    rng = np.random.default_rng(0)
    assert random_spans_noise_mask(0, 0.15, 3.0, rng).shape == (0,)
    assert not random_spans_noise_mask(1, 0.15, 3.0, rng).any()
    mask = random_spans_noise_mask(2, 0.15, 3.0, rng)
    assert mask.tolist() == [False, True]  # noise clipped to [1, length - 1]
    # more spans than kept tokens would allow: spans capped, every gap still non-empty
    mask = random_spans_noise_mask(20, 0.9, 1.0, rng)
    assert not mask[0] and len(spans_of(mask)) == 2


def test_noise_mask_is_deterministic_per_seed():
    a = random_spans_noise_mask(500, 0.15, 3.0, rng_for(7, 0, 3))
    b = random_spans_noise_mask(500, 0.15, 3.0, rng_for(7, 0, 3))
    c = random_spans_noise_mask(500, 0.15, 3.0, rng_for(7, 1, 3))
    assert np.array_equal(a, b) and not np.array_equal(a, c)


# ----------------------------------------------------------------------------- inputs and targets


def test_corrupt_spans_hand_example():
    tokens = np.array([10, 11, 12, 13, 14, 15, 16, 17, 18])
    mask = np.array([0, 0, 1, 1, 0, 0, 1, 0, 0], dtype=bool)
    inputs, targets = corrupt_spans(tokens, mask, SENTINELS, eos=1)
    assert inputs.tolist() == [10, 11, 999, 14, 15, 998, 17, 18, 1]
    assert targets.tolist() == [999, 12, 13, 998, 16, 997, 1]  # final sentinel: text ends with kept tokens
    # the reference mask ends with noise: no final sentinel
    inputs, targets = corrupt_spans(tokens[:7], mask[:7], SENTINELS)
    assert inputs.tolist() == [10, 11, 999, 14, 15, 998]
    assert targets.tolist() == [999, 12, 13, 998, 16]


def test_sentinels_in_order_counting_down_from_the_top():
    rng = np.random.default_rng(5)
    tokens = rng.integers(10, 900, size=568)
    inputs, targets = corrupt_spans(tokens, random_spans_noise_mask(568, 0.15, 3.0, rng), VOCAB.sentinels, eos=1)
    in_sentinels = inputs[inputs >= 900].tolist()
    out_sentinels = targets[targets >= 900].tolist()
    assert in_sentinels == out_sentinels == list(range(999, 999 - 28, -1))
    assert in_sentinels[0] == VOCAB.size - 1
    assert targets[0] == VOCAB.size - 1  # the target starts with <extra_id_0>


def test_inputs_and_targets_reconstruct_the_original():
    rng = np.random.default_rng(11)
    for length in [2, 3, 10, 141, 568, 1000]:
        for _ in range(20):
            tokens = rng.integers(10, 900, size=length)
            mask = random_spans_noise_mask(length, 0.15, 3.0, rng)
            inputs, targets = corrupt_spans(tokens, mask, SENTINELS, eos=1)
            assert np.array_equal(restore_spans(inputs, targets, SENTINELS, eos=1), tokens)
    # any mask, including ones starting with noise or without noise
    for mask in [np.ones(6, bool), np.zeros(6, bool), np.array([1, 0, 1, 1, 0, 1], bool)]:
        tokens = np.arange(20, 26)
        inputs, targets = corrupt_spans(tokens, mask, SENTINELS)
        assert np.array_equal(restore_spans(inputs, targets, SENTINELS), tokens)


def test_too_few_sentinels():
    mask = np.array([0, 1, 0, 1, 0, 1], dtype=bool)
    with pytest.raises(ObjectiveError, match="sentinel"):
        corrupt_spans(np.arange(10, 16), mask, SENTINELS[:2])


# ----------------------------------------------------------------------------- text to text


def test_format_text_to_text():
    prefix = [50, 51, 52]  # "translate English to German:"
    inputs, targets = format_text_to_text(prefix, [60, 61, 62], [70, 71], eos=1)
    assert inputs.tolist() == [50, 51, 52, 60, 61, 62, 1]
    assert targets.tolist() == [70, 71, 1]
    inputs, targets = format_text_to_text(prefix, [60, 61, 62], [70, 71], eos=1, max_input_length=5, max_target_length=2)
    assert inputs.tolist() == [50, 51, 52, 60, 1]
    assert targets.tolist() == [70, 1]
    with pytest.raises(ObjectiveError, match="max_input_length"):
        format_text_to_text(prefix, [60], [70], eos=1, max_input_length=0)


# ----------------------------------------------------------------------------- the objective


def test_objective_examples():
    corpus = make_corpus()
    obj = SpanCorruption(corpus, VOCAB, SpanCorruption.Config(input_length=128))
    assert (obj.raw_length, obj.target_length) == (141, 29)
    assert obj.name == "span_corruption" and obj.family == "encoder_decoder"
    assert len(obj) > 50
    for i in range(len(obj)):
        e = obj.example(i, rng_for(0, 0, i))
        assert set(e) == {"input_ids", "labels", "decoder_input_ids"}
        assert all(v.dtype == np.int64 and v.ndim == 1 for v in e.values())
        assert len(e["input_ids"]) <= 128 and len(e["labels"]) <= 29
        assert e["input_ids"][-1] == VOCAB.eos and e["labels"][-1] == VOCAB.eos
        assert e["decoder_input_ids"].tolist() == [VOCAB.pad] + e["labels"][:-1].tolist()
        d, s, t = obj.index[i]
        assert np.array_equal(restore_spans(e["input_ids"], e["labels"], SENTINELS, eos=1), corpus[d].tokens[s:t])
    # a full-length chunk gives exactly the reference lengths
    full = [i for i in range(len(obj)) if obj.index[i][2] - obj.index[i][1] == 141]
    if full:
        e = obj.example(full[0], rng_for(0, 0, full[0]))
        assert (len(e["input_ids"]), len(e["labels"])) == (128, 29)


def test_objective_determinism():
    obj = SpanCorruption(make_corpus(5), VOCAB, SpanCorruption.Config(input_length=64))
    a, b, c = (obj.example(2, rng_for(s, 0, 2)) for s in (3, 3, 4))
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert not np.array_equal(a["input_ids"], c["input_ids"])


def test_statistics():
    obj = SpanCorruption(make_corpus(60, seed=3), VOCAB, SpanCorruption.Config(input_length=128))
    examples = [obj.example(i, rng_for(0, 0, i)) for i in range(len(obj))]
    raw = sum(int(t - s) for _, s, t in obj.index)
    assert raw >= 10_000
    stats = obj.statistics(examples)
    assert abs(stats["noise_fraction"] - 0.15) < 0.01
    assert abs(stats["mean_noise_span_length"] - 3.0) < 0.25
    spans = {int(n): c for n, c in stats["noise_span_lengths"].items()}  # the histogram of the same spans
    assert sum(spans.values()) == round(stats["noise_spans_per_example"] * len(examples))
    assert sum(n * c for n, c in spans.items()) / sum(spans.values()) == pytest.approx(stats["mean_noise_span_length"], abs=1e-4)
    assert min(spans) >= 1 and len(spans) > 2
    dist = stats["target_length_distribution"]
    assert dist["max"] <= 29 and dist["min"] >= 2 and dist["p50"] <= dist["p95"]
    assert stats["expected_target_length"] == 29 and stats["raw_length"] == 141


def test_pad_batch():
    obj = SpanCorruption(make_corpus(5), VOCAB, SpanCorruption.Config(input_length=64))
    examples = [obj.example(i, rng_for(0, 0, i)) for i in range(4)]
    batch = pad_batch(examples, pad_id=VOCAB.pad)
    width = max(len(e["input_ids"]) for e in examples)
    assert tuple(batch["input_ids"].shape) == (4, width)
    for row, e in enumerate(examples):
        n, m = len(e["input_ids"]), len(e["labels"])
        assert batch["attention_mask"][row].sum() == n
        assert batch["decoder_attention_mask"][row].sum() == m
        assert (batch["labels"][row, m:] == -100).all() and (batch["decoder_input_ids"][row, m:] == VOCAB.pad).all()
        assert batch["labels"][row, :m].tolist() == e["labels"].tolist()


# ----------------------------------------------------------------------------- errors


@pytest.mark.parametrize("field, value", [
    ("noise_density", 0.0), ("noise_density", 1.0), ("noise_density", -0.1),
    ("mean_noise_span_length", 0.5), ("input_length", 2), ("input_length", 4),
])
def test_bad_parameters_name_themselves(field, value):
    with pytest.raises(ObjectiveError, match=field):
        SpanCorruption(make_corpus(2), VOCAB, SpanCorruption.Config(**{field: value}))


@pytest.mark.parametrize("missing, match", [
    ({"eos": None}, "eos"), ({"pad": None}, "pad"), ({"sentinels": tuple(range(999, 979, -1))}, "sentinel"),
])
def test_tokenizer_without_needed_tokens(missing, match):
    base = {"size": 1000, "pad": 0, "eos": 1, "sentinels": SENTINELS}
    with pytest.raises(ObjectiveError, match=match):
        SpanCorruption(make_corpus(2), Vocab(**{**base, **missing}))  # 512: needs 28 sentinels


def test_config_is_strict():
    with pytest.raises(ValidationError, match=r"noise_densty\n  Extra inputs are not permitted"):
        SpanCorruption.Config(noise_densty=0.2)
    assert SpanCorruption.Config().model_dump() == {"input_length": 512, "noise_density": 0.15, "mean_noise_span_length": 3.0}
