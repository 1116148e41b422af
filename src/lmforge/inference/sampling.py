"""The next-token choice of ``lmforge generate`` without beam search: the repetition penalty,
then temperature, top-k and top-p on the logits, then the argmax (greedy) or a draw.

The order and the arithmetic are ``transformers``' logits processors' (``RepetitionPenalty``,
``Temperature``, ``TopK``, ``TopP``, each keeping at least one token), so greedy decoding with a
penalty picks the tokens ``generate`` picks.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .loading import InferenceError


@dataclass(frozen=True)
class Sampling:
    do_sample: bool = False
    temperature: float = 1.0
    top_k: int = 0  # 0: off
    top_p: float = 1.0  # 1.0: off
    repetition_penalty: float = 1.0  # 1.0: off

    def __post_init__(self):
        if self.temperature <= 0:
            raise InferenceError(f"temperature must be > 0, got {self.temperature}")
        if self.top_k < 0:
            raise InferenceError(f"top_k must be >= 0, got {self.top_k}")
        if not 0 < self.top_p <= 1:
            raise InferenceError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.repetition_penalty <= 0:
            raise InferenceError(f"repetition_penalty must be > 0, got {self.repetition_penalty}")

    @property
    def changes_logits(self) -> bool:
        return self.do_sample or self.repetition_penalty != 1.0


def penalise_repeats(logits: torch.Tensor, seen: torch.Tensor, penalty: float) -> torch.Tensor:
    """(V,) logits with every token of ``seen`` made less likely: divided by ``penalty`` where
    positive, multiplied where negative (the CTRL paper's penalty, as transformers applies it)."""
    if penalty == 1.0 or seen.numel() == 0:
        return logits
    out = logits.clone()
    picked = out[seen]
    out[seen] = torch.where(picked < 0, picked * penalty, picked / penalty)
    return out


def warp(logits: torch.Tensor, s: Sampling) -> torch.Tensor:
    """Temperature, then top-k, then top-p (nucleus): filtered tokens get -inf."""
    logits = logits / s.temperature if s.temperature != 1.0 else logits
    if s.top_k > 0:
        k = min(s.top_k, logits.size(-1))
        kth = torch.topk(logits, k).values[-1]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if s.top_p < 1.0:
        ordered, index = torch.sort(logits, descending=False)
        cumulative = ordered.softmax(-1).cumsum(-1)
        drop = cumulative <= (1 - s.top_p)
        drop[-1] = False  # the most likely token always stays
        logits = logits.masked_fill(torch.zeros_like(drop).scatter(0, index, drop), float("-inf"))
    return logits


def choose(logits: torch.Tensor, seen: torch.Tensor, s: Sampling, generator: torch.Generator | None) -> int:
    """The next token from (V,) float logits, ``seen`` the ids the penalty applies to."""
    logits = penalise_repeats(logits, seen, s.repetition_penalty)
    if not s.do_sample:
        return int(logits.argmax())
    probs = warp(logits, s).softmax(-1)
    return int(torch.multinomial(probs, 1, generator=generator))
