"""Text-generation metrics against one reference text per prediction.

- ``rouge``: ``rouge1``, ``rouge2``, ``rougeL``: the mean over examples of each pair's F-measure
  from ``rouge_score.rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)``
  (its tokenizer: lower-cased, non-alphanumerics as separators, Porter-stemmed): unigram and
  bigram overlap, and the longest common subsequence of tokens (sentence-level, not ``rougeLsum``);
- ``bleu``: ``bleu`` and ``chrf``: sacrebleu's corpus BLEU (``corpus_bleu``: 13a tokenisation,
  up to 4-grams, exponential smoothing, brevity penalty) and corpus chrF (``corpus_chrf``:
  character 6-grams, beta 2) over all pairs at once, not a mean of sentence scores. sacrebleu
  reports 0-100; the values here are divided by 100 (and clipped to [0, 1] against its last-bit
  rounding). Smoothing: the k-th n-gram order with no match counts as 1 / (2^k * its n-grams),
  so a corpus with no 4-gram shared still scores; one that shares no word at all, or whose
  predictions have no 4-gram, scores 0;
- ``exact_match``: the share of predictions equal to their reference after
  ``spans.normalize_answer`` (SQuAD's normalisation: case, punctuation, articles, whitespace);
- ``generation_scores``: the named ones of these in one flat dict.

All scores are fractions in [0, 1].
"""

from __future__ import annotations

from collections.abc import Sequence

from ..span_qa.metrics import normalize_answer

METRICS = ("rouge", "bleu", "exact_match")


def _check_pairs(function: str, predictions: Sequence[str], references: Sequence[str]) -> None:
    if len(predictions) != len(references):
        raise ValueError(f"{function}: {len(predictions)} predictions for {len(references)} references")
    if not predictions:
        raise ValueError(f"{function}: no examples")
    for i, (p, r) in enumerate(zip(predictions, references)):
        if not isinstance(p, str) or not isinstance(r, str):
            raise ValueError(f"{function}: example {i} is not a pair of strings (one reference per prediction)")


def rouge(predictions: Sequence[str], references: Sequence[str]) -> dict[str, float]:
    """Mean ROUGE-1, ROUGE-2 and ROUGE-L F-measure of each prediction against its reference."""
    from rouge_score.rouge_scorer import RougeScorer

    _check_pairs("rouge", predictions, references)
    kinds = ("rouge1", "rouge2", "rougeL")
    scorer = RougeScorer(list(kinds), use_stemmer=True)
    totals = dict.fromkeys(kinds, 0.0)
    for p, r in zip(predictions, references):
        scores = scorer.score(r, p)  # (target, prediction)
        for kind in kinds:
            totals[kind] += float(scores[kind].fmeasure)
    return {kind: total / len(predictions) for kind, total in totals.items()}


def bleu(predictions: Sequence[str], references: Sequence[str]) -> dict[str, float]:
    """sacrebleu's corpus BLEU and chrF of ``predictions`` against ``references``, in [0, 1]."""
    import sacrebleu

    _check_pairs("bleu", predictions, references)
    hyps, refs = list(predictions), [list(references)]
    return {
        "bleu": min(1.0, max(0.0, sacrebleu.corpus_bleu(hyps, refs).score / 100)),
        "chrf": min(1.0, max(0.0, sacrebleu.corpus_chrf(hyps, refs).score / 100)),
    }


def exact_match(predictions: Sequence[str], references: Sequence[str]) -> float:
    """The share of predictions whose normalised text equals their normalised reference."""
    _check_pairs("exact_match", predictions, references)
    same = sum(normalize_answer(p) == normalize_answer(r) for p, r in zip(predictions, references))
    return same / len(predictions)


def generation_scores(predictions: Sequence[str], references: Sequence[str], metrics: Sequence[str]) -> dict[str, float]:
    """The ``metrics`` named (any of "rouge", "bleu", "exact_match") in one dict: ``rouge1``,
    ``rouge2``, ``rougeL`` for "rouge", ``bleu`` and ``chrf`` for "bleu", ``exact_match``.
    Raises ValueError on an unknown name (listing the known ones) or on no name at all."""
    if isinstance(metrics, str):
        metrics = [metrics]
    unknown = [m for m in metrics if m not in METRICS]
    if unknown:
        raise ValueError(f"generation_scores: unknown metric(s) {unknown}; known: {', '.join(METRICS)}")
    if not metrics:
        raise ValueError(f"generation_scores: no metric named; known: {', '.join(METRICS)}")
    out: dict[str, float] = {}
    if "rouge" in metrics:
        out.update(rouge(predictions, references))
    if "bleu" in metrics:
        out.update(bleu(predictions, references))
    if "exact_match" in metrics:
        out["exact_match"] = exact_match(predictions, references)
    return out
