"""Our scorer as an lm-eval model: an ``lm_eval.api.model.LM`` whose ``loglikelihood`` requests
are answered by :class:`~lmforge.evaluation.harness.CausalScorer`, so
``lm_eval.simple_evaluate(model=ScorerLM(scorer), tasks=[...])`` scores our models offline.

Imports lm-eval at the top: import this module only through
:func:`lmforge.evaluation.lm_eval_run.require_lm_eval` (the ``eval`` extra)."""

from __future__ import annotations

from lm_eval.api.model import LM

from .harness import CausalScorer


class ScorerLM(LM):
    """Zero-shot log-likelihood tasks only (multiple choice and the like)."""

    def __init__(self, scorer: CausalScorer, name: str = "lmforge"):
        super().__init__()
        self.scorer, self.name = scorer, name

    @property
    def tokenizer_name(self) -> str:
        return self.name

    def loglikelihood(self, requests, disable_tqdm: bool = False) -> list[tuple[float, bool]]:
        return self.scorer.loglikelihood([tuple(r.args) for r in requests])

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False):
        raise NotImplementedError("lmforge's harness scores log-likelihood (multiple-choice) tasks only; "
                                  "perplexity tasks (loglikelihood_rolling) are not wired")

    def generate_until(self, requests, disable_tqdm: bool = False):
        raise NotImplementedError("lmforge's harness scores log-likelihood (multiple-choice) tasks only; "
                                  "generation tasks (generate_until) are not wired: use `lmforge generate`")
