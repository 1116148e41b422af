"""What each noising objective promises, next to what its dataset's ``stats.json`` measures: the
realised mask / noise / target rate against the configured one (the dataset stage's check), and
the span lengths against the configured mean (its ``masking.png``)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Noise:
    rate: str                                  # the realised rate, a key of a split's statistics
    configured_rate: Callable[[Any], float]    # the objective's config -> the rate it asks for
    spans: Callable[[dict], dict | None] | None = None  # the statistics -> span length -> spans (or share)
    span_unit: str = "tokens"
    span_mean: Callable[[dict], float | None] | None = None  # the statistics -> the realised mean span length
    configured_span: Callable[[Any], float] | None = None  # the config -> the mean span length it asks for
    configured_span_label: str = "configured mean"
    configured_spans: Callable[[Any], dict[str, float]] | None = None  # the config -> the span-length distribution it draws from

    def figures(self, stats: dict, config: Any) -> dict[str, Any]:
        """The numbers ``charts.datasets.noise`` draws, from a split's statistics and the config."""
        realised = stats.get(self.rate)
        spans = self.spans(stats) if self.spans else None
        return {
            "rate_name": self.rate, "realised": None if realised is None else float(realised),
            "configured": float(self.configured_rate(config)),
            "spans": spans or None, "span_unit": self.span_unit,
            "realised_mean": self.span_mean(stats) if self.span_mean else None,
            "configured_mean": float(self.configured_span(config)) if self.configured_span else None,
            "configured_label": self.configured_span_label,
            "configured_spans": self.configured_spans(config) if self.configured_spans else None,
        }


def poisson(mean: float, up_to: int = 15) -> dict[str, float]:
    """P(k) of a Poisson distribution with ``mean`` for k = 0..up_to."""
    return {str(k): math.exp(-mean + k * math.log(mean) - math.lgamma(k + 1)) for k in range(up_to + 1)}


_MASKING = Noise("mask_rate", lambda c: c.mask_rate, spans=lambda s: s.get("masked_run_lengths"),
                 span_mean=lambda s: s.get("masked_run_length_mean"))

NOISE: dict[str, Noise] = {
    "mlm": _MASKING,
    "mlm_nsp": _MASKING,
    "mlm_sop": _MASKING,
    "knowledge_mlm": _MASKING,
    "span_corruption": Noise("noise_fraction", lambda c: c.noise_density, spans=lambda s: s.get("noise_span_lengths"),
                             span_mean=lambda s: s.get("mean_noise_span_length"), configured_span=lambda c: c.mean_noise_span_length),
    "denoising": Noise("estimated_masked_fraction", lambda c: c.infill_ratio,
                       span_mean=lambda s: s.get("estimated_infill_span_length_mean"), configured_span=lambda c: c.poisson_lambda,
                       configured_span_label="configured Poisson mean",
                       configured_spans=lambda c: poisson(c.poisson_lambda)),
    "permutation": Noise("target_fraction", lambda c: 1.0 / c.partial_prediction_k,
                         spans=lambda s: (s.get("target_run_tokens") or {}).get("histogram"),
                         span_mean=lambda s: (s.get("target_run_tokens") or {}).get("mean"),
                         configured_span=lambda c: c.max_span_length,
                         configured_span_label="configured maximum (words)"),
}
