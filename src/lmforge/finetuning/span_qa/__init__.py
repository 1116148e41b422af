"""Span QA's room: its inputs (``features.py``: a context's windows), scorer, metrics and baselines."""

from .family import FAMILY

__all__ = ["FAMILY"]
