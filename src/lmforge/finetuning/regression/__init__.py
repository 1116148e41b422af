"""Regression's room: its scorer (``scorer.py``), metrics (``metrics.py``) and baselines
(``baselines.py``); its inputs are ``finetuning/features.py``'s, one output per example."""

from .family import FAMILY

__all__ = ["FAMILY"]
