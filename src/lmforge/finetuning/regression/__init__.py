"""Regression's room: its scorer (``scorer.py``), metrics (``metrics.py``) and baselines (``baselines.py``); its inputs are ``finetuning/features.py``'s."""

from .family import FAMILY

__all__ = ["FAMILY"]
