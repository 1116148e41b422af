"""Masking primitives of the masked-LM objectives: which positions to predict (tokens, whole
units, n-grams of words; never a special id) and the 80/10/10 rule for what the model sees
there. Pure, seeded NumPy functions; see docs/OBJECTIVES.md.
"""

from __future__ import annotations

import numpy as np

from .base import IGNORE_INDEX


def eligible_positions(input_ids: np.ndarray, special_ids: np.ndarray) -> np.ndarray:
    """(L,) bool: True where the token is not a special id."""
    return ~np.isin(input_ids, special_ids)


def prediction_budget(n_eligible: int, rate: float, max_predictions: int | None) -> int:
    """Google BERT's count of positions to predict: ``min(max_predictions, max(1, round(n * rate)))``,
    0 when nothing is eligible. Rounds half up, as the reference did under Python 2 (Python 3's
    ``round`` would send 2.5 to 2)."""
    if n_eligible <= 0:
        return 0
    k = max(1, int(n_eligible * rate + 0.5))
    if max_predictions is not None:
        k = min(k, max_predictions)
    return min(k, n_eligible)


def choose_tokens(
    eligible: np.ndarray, rate: float, max_predictions: int | None, rng: np.random.Generator, exact: bool = True
) -> np.ndarray:
    """(L,) bool of chosen positions, all eligible.

    ``exact``: exactly ``prediction_budget`` positions, uniformly without replacement (Google
    BERT). Otherwise each eligible position independently with probability ``rate`` (HF's
    collator), then capped at ``max_predictions`` by dropping a random surplus.
    """
    positions = np.flatnonzero(eligible)
    chosen = np.zeros(len(eligible), dtype=bool)
    if exact:
        k = prediction_budget(len(positions), rate, max_predictions)
        chosen[rng.permutation(positions)[:k]] = True
        return chosen
    picked = positions[rng.random(len(positions)) < rate]
    if max_predictions is not None and len(picked) > max_predictions:
        picked = rng.permutation(picked)[:max_predictions]
    chosen[picked] = True
    return chosen


def unit_ids(unit_starts: np.ndarray, eligible: np.ndarray) -> np.ndarray:
    """(L,) int64: the unit each position belongs to (0, 1, ... in order), -1 where not eligible.

    A unit starts at a flagged eligible position, or at the first eligible position after an
    ineligible one (a special token, or the sequence start), so units never span specials.
    """
    previous_eligible = np.concatenate([[False], eligible[:-1]])
    starts = eligible & (unit_starts | ~previous_eligible)
    ids = np.cumsum(starts) - 1
    return np.where(eligible, ids, -1).astype(np.int64)


def choose_units(
    unit_starts: np.ndarray,
    eligible: np.ndarray,
    rate: float,
    max_predictions: int | None,
    rng: np.random.Generator,
    exact: bool = True,
) -> np.ndarray:
    """(L,) bool of chosen positions: whole units only.

    ``exact`` (Google BERT whole-word masking): the token budget is ``prediction_budget`` over
    the eligible tokens; units are visited in random order and taken when they fit, a unit that
    would exceed the budget is skipped in favour of later, shorter ones. If no unit fits at all
    (every unit is longer than the budget) the first unit visited is taken anyway, so an
    example always has a prediction. Otherwise (ERNIE): each unit independently with
    probability ``rate``, so the expected token fraction is ``rate``; a total above
    ``max_predictions`` drops whole units at random until it fits.
    """
    ids = unit_ids(unit_starts, eligible)
    n_units = int(ids.max()) + 1 if len(ids) else 0
    chosen = np.zeros(len(eligible), dtype=bool)
    if n_units == 0:
        return chosen
    lengths = np.bincount(ids[ids >= 0], minlength=n_units)  # (U,) tokens per unit
    if exact:
        budget = prediction_budget(int(lengths.sum()), rate, max_predictions)
        candidates = rng.permutation(n_units)
    else:
        budget = int(lengths.sum()) if max_predictions is None else max_predictions
        candidates = rng.permutation(np.flatnonzero(rng.random(n_units) < rate))
    taken = _fit_units(candidates, lengths, budget)
    if exact and not taken and budget > 0:
        taken = [int(candidates[0])]
    chosen[np.isin(ids, taken)] = True
    return chosen


def _fit_units(order: np.ndarray, lengths: np.ndarray, budget: int) -> list[int]:
    """Units of ``order`` taken greedily while the running total stays within ``budget``."""
    taken, total = [], 0
    for u in order.tolist():
        if total >= budget:
            break
        if total + lengths[u] <= budget:
            taken.append(u)
            total += int(lengths[u])
    return taken


def ngram_probabilities(max_n: int) -> np.ndarray:
    """ALBERT's p(n) proportional to 1/n for n = 1..max_n (6/11, 3/11, 2/11 for max_n = 3)."""
    p = 1.0 / np.arange(1, max_n + 1)
    return p / p.sum()


def ngram_unit_starts(word_starts: np.ndarray, eligible: np.ndarray, max_n: int, rng: np.random.Generator) -> np.ndarray:
    """(L,) bool unit starts that group consecutive words into n-grams, n ~ p(n) proportional to 1/n.

    ALBERT draws an n for each shuffled candidate word and skips n-grams that overlap earlier
    choices; long n-grams collide more, so its realised lengths come out shorter than p(n). We
    tile each run of eligible words once into n-grams with lengths drawn from p(n) (the last
    n-gram of a run is cut to the words left), and ``choose_units`` then picks whole n-grams,
    so the chosen n-grams follow p(n) up to those cuts and the budget fitting at the end: an
    n-gram that would overshoot the budget is skipped for a shorter one, which favours short
    n-grams a little in short sequences (measured: 1-grams ~0.58 instead of 6/11 ~0.545 at 128
    tokens of one-token words, ~0.555 at 512; ALBERT's shrinking of n has the same effect).
    """
    word_ids = unit_ids(word_starts, eligible)
    n_words = int(word_ids.max()) + 1 if len(word_ids) else 0
    starts = np.zeros(len(eligible), dtype=bool)
    if n_words == 0:
        return starts
    first_token = np.flatnonzero(np.diff(np.concatenate([[-1], word_ids])) > 0)  # (W,) first token of each word
    # a run (of words uninterrupted by specials) starts where the word before it is not adjacent
    run_start = np.ones(n_words, dtype=bool)
    run_start[1:] = ~eligible[first_token[1:] - 1]
    run_bounds = np.append(np.flatnonzero(run_start), n_words)
    draws = rng.choice(np.arange(1, max_n + 1), size=n_words, p=ngram_probabilities(max_n))
    for lo, hi in zip(run_bounds[:-1].tolist(), run_bounds[1:].tolist()):
        w, k = lo, 0
        while w < hi:
            starts[first_token[w]] = True
            w += int(draws[lo + k])
            k += 1
    return starts


def replace_chosen(
    input_ids: np.ndarray,
    chosen: np.ndarray,
    mask_id: int,
    random_ids: np.ndarray,
    mask_token_prob: float,
    random_token_prob: float,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """BERT's replacement rule, decided per chosen position: [MASK] with ``mask_token_prob``, a
    uniformly random id from ``random_ids`` (the non-special ids) with ``random_token_prob``,
    unchanged otherwise. Returns ``(input_ids, labels)``, labels = the original id at chosen
    positions and ``IGNORE_INDEX`` elsewhere. A random replacement can draw the original id
    (probability 1 / len(random_ids)); it then reads as unchanged."""
    ids = np.asarray(input_ids, dtype=np.int64)
    labels = np.where(chosen, ids, IGNORE_INDEX).astype(np.int64)
    out = ids.copy()
    positions = np.flatnonzero(chosen)
    u = rng.random(len(positions))
    to_mask = positions[u < mask_token_prob]
    to_random = positions[(u >= mask_token_prob) & (u < mask_token_prob + random_token_prob)]
    out[to_mask] = mask_id
    out[to_random] = random_ids[rng.integers(0, len(random_ids), size=len(to_random))]
    return out, labels
