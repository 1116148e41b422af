"""Span corruption (T5): random spans of a chunk become sentinels in the encoder input, and the
target lists the sentinels with the tokens they stand for. Small pure functions
(``noise_span_counts`` -> ``random_partition`` -> ``random_spans_noise_mask`` ->
``corrupt_spans``) compose into ``SpanCorruption``. See docs/OBJECTIVES.md.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..schema import StrictModel
from .base import Corpus, Objective, ObjectiveError, Vocab, check_rate
from .examples import chunk_index

NAME = "span_corruption"


# ----------------------------------------------------------------------------- pure pieces


def noise_span_counts(length: int, noise_density: float, mean_noise_span_length: float) -> tuple[int, int]:
    """(noise tokens, noise spans) for ``length`` raw tokens, as the reference counts them.

    ``noise = round(length * density)`` and ``spans = max(1, round(noise / mean))``. As in the
    reference, noise is kept within ``[1, length - 1]`` so every chunk of two or more tokens has
    a span and a kept token; spans are kept at most the number of kept tokens so every gap is
    non-empty (a limit the defaults never reach). ``round`` is Python's (half to even), as
    ``tf.round``.
    """
    length = max(length, 2)
    noise = min(max(round(length * noise_density), 1), length - 1)
    spans = max(1, round(noise / mean_noise_span_length))
    return noise, min(spans, length - noise)


def random_partition(num_items: int, num_segments: int, rng: np.random.Generator) -> np.ndarray:
    """Lengths of ``num_segments`` non-empty segments summing to ``num_items``, uniformly over
    all such compositions (the segment boundaries are a random subset of the item gaps)."""
    if not 1 <= num_segments <= num_items:
        raise ValueError(f"cannot split {num_items} items into {num_segments} non-empty segments")
    cuts = np.sort(rng.choice(np.arange(1, num_items), size=num_segments - 1, replace=False))
    return np.diff(np.concatenate([[0], cuts, [num_items]])).astype(np.int64)


def random_spans_noise_mask(length: int, noise_density: float, mean_noise_span_length: float,
                            rng: np.random.Generator) -> np.ndarray:
    """Boolean noise mask of ``length`` tokens: gap, span, gap, span, ... (starting with a kept
    gap, ending with a noise span), span and gap lengths from two random partitions."""
    if length == 0:
        return np.zeros(0, dtype=bool)
    if length == 1:  # nothing to corrupt without removing the whole text
        return np.zeros(1, dtype=bool)
    noise, spans = noise_span_counts(length, noise_density, mean_noise_span_length)
    span_lengths = random_partition(noise, spans, rng)
    gap_lengths = random_partition(length - noise, spans, rng)
    interleaved = np.stack([gap_lengths, span_lengths], axis=1).reshape(-1)  # gap0 span0 gap1 span1 ...
    is_noise = np.tile([False, True], spans)
    return np.repeat(is_noise, interleaved)


def corrupt_spans(tokens: np.ndarray, noise_mask: np.ndarray, sentinels: Sequence[int],
                  eos: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(inputs, targets) for ``tokens`` under ``noise_mask``.

    Noise span ``i`` (in text order) becomes ``sentinels[i]`` in the inputs; the targets are
    ``sentinels[i]`` followed by span ``i``'s tokens, for every span, then one more sentinel
    when the text ends with kept tokens. ``eos`` (when given) is appended to both, as T5 does.
    """
    tokens = np.asarray(tokens, dtype=np.int64)
    noise_mask = np.asarray(noise_mask, dtype=bool)
    if tokens.shape != noise_mask.shape:
        raise ValueError(f"tokens {tokens.shape} and noise mask {noise_mask.shape} differ in shape")
    span_start = noise_mask & ~np.concatenate([[False], noise_mask[:-1]])
    num_spans = int(span_start.sum())
    final = len(tokens) > 0 and not noise_mask[-1]
    needed = num_spans + int(final)
    if len(sentinels) < needed:
        raise ObjectiveError(f"{NAME}: {needed} sentinel tokens needed, {len(sentinels)} given")
    ids = np.asarray(sentinels[:needed], dtype=np.int64)

    inputs = tokens.copy()
    inputs[span_start] = ids[:num_spans]
    inputs = inputs[~noise_mask | span_start]  # a span keeps only its first position, now a sentinel

    noise_tokens = tokens[noise_mask]
    starts_in_noise = np.flatnonzero(span_start[noise_mask])  # where each span begins among the noise tokens
    targets = np.insert(noise_tokens, starts_in_noise, ids[:num_spans])
    if final:
        targets = np.append(targets, ids[-1])
    if eos is not None:
        inputs, targets = np.append(inputs, eos), np.append(targets, eos)
    return inputs, targets


def restore_spans(inputs: np.ndarray, targets: np.ndarray, sentinels: Sequence[int],
                  eos: int | None = None) -> np.ndarray:
    """The inverse of ``corrupt_spans``: the original tokens from (inputs, targets). Raw tokens
    must not themselves be sentinel ids."""
    inputs, targets = np.asarray(inputs, dtype=np.int64), np.asarray(targets, dtype=np.int64)
    if eos is not None:
        if not (len(inputs) and inputs[-1] == eos and len(targets) and targets[-1] == eos):
            raise ValueError("inputs and targets must end with eos")
        inputs, targets = inputs[:-1], targets[:-1]
    number = {int(s): i for i, s in enumerate(sentinels)}
    spans: dict[int, list[int]] = {}
    current: list[int] | None = None
    for t in targets.tolist():
        if t in number:
            current = spans.setdefault(number[t], [])
        elif current is None:
            raise ValueError("targets must start with a sentinel")
        else:
            current.append(t)
    out: list[int] = []
    for t in inputs.tolist():
        out.extend(spans[number[t]] if t in number else [t])
    return np.array(out, dtype=np.int64)


def span_corruption_lengths(input_length: int, noise_density: float = 0.15,
                            mean_noise_span_length: float = 3.0) -> tuple[int, int]:
    """(raw tokens to cut, target length) for an encoder input of ``input_length`` tokens: the
    largest raw length whose corrupted input (kept tokens + one sentinel per span + eos) fits,
    and the target length it gives (noise tokens + one sentinel per span + eos).
    ``512 -> (568, 114)`` and ``128 -> (141, 29)`` with the defaults."""

    def lengths(raw: int) -> tuple[int, int]:
        noise, spans = noise_span_counts(raw, noise_density, mean_noise_span_length)
        return raw - noise + spans + 1, noise + spans + 1

    raw = max(input_length - 1, 1)  # input grows by at most one per raw token: start just below
    while lengths(raw + 1)[0] <= input_length:
        raw += 1
    return raw, lengths(raw)[1]


def shift_right(labels: np.ndarray, start_id: int) -> np.ndarray:
    """Decoder inputs for teacher forcing: ``[start_id] + labels[:-1]``."""
    labels = np.asarray(labels, dtype=np.int64)
    return np.concatenate([[start_id], labels[:-1]]).astype(np.int64)


def format_text_to_text(prefix_ids: Sequence[int], input_ids: Sequence[int], target_ids: Sequence[int],
                        eos: int, *, max_input_length: int | None = None,
                        max_target_length: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """A T5 fine-tuning pair: inputs ``prefix + input + </s>``, targets ``target + </s>``.

    ``prefix_ids`` is the tokenised task prefix (e.g. ``"translate English to German: "``, or
    ``"mnli hypothesis: "``); a task with several fields concatenates them, each after its
    tokenised field name, into ``input_ids`` (``... premise: ...``). Each side is cut to
    ``max_*_length`` before its eos is appended, so eos always survives (T5's trim-then-eos).
    """
    inputs = [*prefix_ids, *input_ids]
    targets = list(target_ids)
    for name, seq, limit in (("max_input_length", inputs, max_input_length), ("max_target_length", targets, max_target_length)):
        if limit is not None:
            if limit < 1:
                raise ObjectiveError(f"text_to_text: {name} must be at least 1, got {limit}")
            del seq[limit - 1:]
    return np.array([*inputs, eos], dtype=np.int64), np.array([*targets, eos], dtype=np.int64)


# ----------------------------------------------------------------------------- the objective


class SpanCorruption(Objective):
    """T5's pretraining objective over chunks of the corpus (see docs/OBJECTIVES.md)."""

    name = NAME
    tokenizer_kind = "unigram"  # T5, Switch
    family = "encoder_decoder"

    class Config(StrictModel):
        input_length: int = 512  # encoder length after corruption (raw chunks are longer: 568)
        noise_density: float = 0.15
        mean_noise_span_length: float = 3.0

    def __init__(self, corpus: Corpus, vocab: Vocab, config=None):
        super().__init__(corpus, vocab, config)
        cfg = self.config
        self.raw_length, self.target_length = validate(cfg, vocab)
        self.max_spans = noise_span_counts(self.raw_length, cfg.noise_density, cfg.mean_noise_span_length)[1]
        self.sentinels = np.asarray(vocab.sentinels[: self.max_spans + 1], dtype=np.int64)
        self.index = chunk_index(corpus, self.raw_length, min_tokens=2)

    def __len__(self) -> int:
        return len(self.index)

    def example(self, index: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        cfg = self.config
        d, start, end = (int(v) for v in self.index[index])
        tokens = self.corpus[d].tokens[start:end]
        mask = random_spans_noise_mask(len(tokens), cfg.noise_density, cfg.mean_noise_span_length, rng)
        inputs, targets = corrupt_spans(tokens, mask, self.sentinels, eos=self.vocab.eos)
        return {"input_ids": inputs, "labels": targets, "decoder_input_ids": shift_right(targets, self.vocab.pad)}

    def statistics(self, examples: list[dict[str, np.ndarray]]) -> dict:
        """Realised noise fraction and span length, and the target lengths, from the examples
        (sentinels are told apart from text by id; eos is the last position of each side)."""
        if not examples:
            return {}
        sentinel = np.zeros(self.vocab.size, dtype=bool)
        sentinel[list(self.vocab.sentinels)] = True
        noise = spans = raw = 0
        target_lengths = []
        span_lengths = np.zeros(1, dtype=np.int64)  # span length -> spans
        for e in examples:
            inputs, labels = np.asarray(e["input_ids"])[:-1], np.asarray(e["labels"])[:-1]
            n_spans = int(sentinel[inputs].sum())
            n_noise = len(labels) - int(sentinel[labels].sum())
            spans += n_spans
            noise += n_noise
            raw += len(inputs) - n_spans + n_noise
            target_lengths.append(len(labels) + 1)
            # the targets are <sentinel> span <sentinel> span ...: a span's length is the gap
            # between consecutive sentinels
            marks = np.flatnonzero(sentinel[labels])
            lengths = np.diff(np.append(marks, len(labels))) - 1
            counted = np.bincount(lengths[lengths > 0])
            if len(counted) > len(span_lengths):
                span_lengths = np.pad(span_lengths, (0, len(counted) - len(span_lengths)))
            span_lengths[: len(counted)] += counted
        tl = np.array(target_lengths)
        return {
            "noise_density": self.config.noise_density,
            "noise_fraction": round(noise / max(raw, 1), 6),
            "mean_noise_span_length": round(noise / max(spans, 1), 4),
            "noise_spans_per_example": round(spans / len(examples), 3),
            "noise_span_lengths": {str(n): int(c) for n, c in enumerate(span_lengths.tolist()) if c},
            "raw_length": self.raw_length,
            "expected_target_length": self.target_length,
            "target_length_distribution": {
                "mean": round(float(tl.mean()), 3), "min": int(tl.min()), "p5": int(np.percentile(tl, 5)),
                "p50": int(np.percentile(tl, 50)), "p95": int(np.percentile(tl, 95)), "max": int(tl.max()),
            },
        }


def validate(config: SpanCorruption.Config, vocab: Vocab) -> tuple[int, int]:
    """Check the parameters against each other and the tokenizer; return (raw length, target length)."""
    check_rate(NAME, "noise_density", config.noise_density)
    if not config.mean_noise_span_length >= 1:
        raise ObjectiveError(f"{NAME}: mean_noise_span_length must be at least 1, got {config.mean_noise_span_length}")
    if config.input_length < 3:
        raise ObjectiveError(f"{NAME}: input_length must be at least 3 (a kept token, a sentinel, eos), got {config.input_length}")
    raw, target = span_corruption_lengths(config.input_length, config.noise_density, config.mean_noise_span_length)
    if round(raw * config.noise_density) < 1:
        raise ObjectiveError(f"{NAME}: input_length {config.input_length} is too short for one noise span at "
                             f"noise_density {config.noise_density} ({raw} raw tokens)")
    vocab.require(NAME, "eos", "pad")
    vocab.require_sentinels(NAME, noise_span_counts(raw, config.noise_density, config.mean_noise_span_length)[1])
    return raw, target
