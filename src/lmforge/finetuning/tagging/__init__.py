"""Tagging's room: its inputs (``features.py``), scorer, metrics and baselines."""

from .family import FAMILY

__all__ = ["FAMILY"]
