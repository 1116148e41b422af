"""Regression metrics (STS-B-style similarity scores): correlations and squared error.

``correlations`` gives

- ``pearson``: the linear correlation of predictions and gold values (``scipy.stats.pearsonr``);
- ``spearman``: the rank correlation (``scipy.stats.spearmanr``: Pearson's of the ranks, ties
  given their mean rank);
- ``mse``: the mean over examples of (prediction - gold) squared;
- ``examples``: how many pairs.

A correlation is undefined when either side is constant (zero variance); it is reported as 0.0,
"no linear / monotonic relation", rather than SciPy's NaN, so that a model that predicts one value
scores 0 and averages stay numbers. The correlations lie in [-1, 1]; ``mse`` is in the targets'
squared units.
"""

from __future__ import annotations

from collections.abc import Sequence


def correlations(pred: Sequence[float], gold: Sequence[float]) -> dict[str, float | int]:
    """Pearson, Spearman (0.0 where a side is constant), MSE and the example count of ``pred``
    against ``gold``. Raises ValueError when the lengths differ, there are fewer than 2 pairs or
    a value is not a finite number."""
    import numpy as np
    from scipy.stats import pearsonr, spearmanr

    if len(pred) != len(gold):
        raise ValueError(f"correlations: {len(pred)} predictions for {len(gold)} gold values")
    if len(gold) < 2:
        raise ValueError(f"correlations: {len(gold)} examples, a correlation needs at least 2")
    try:
        p = np.asarray(pred, dtype=float)
        g = np.asarray(gold, dtype=float)
    except (TypeError, ValueError) as error:
        raise ValueError(f"correlations: values must be numbers ({error})") from None
    if p.ndim != 1 or g.ndim != 1:
        raise ValueError("correlations: expected one number per example")
    if not (np.isfinite(p).all() and np.isfinite(g).all()):
        raise ValueError("correlations: values must be finite (no NaN or infinity)")
    constant = p.min() == p.max() or g.min() == g.max()
    return {
        "pearson": 0.0 if constant else float(pearsonr(p, g).statistic),
        "spearman": 0.0 if constant else float(spearmanr(p, g).statistic),
        "mse": float(np.mean((p - g) ** 2)),
        "examples": len(g),
    }
