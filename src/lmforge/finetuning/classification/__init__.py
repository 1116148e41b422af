"""Classification's room: its inputs (``finetuning/features.py``'s layouts), scorer, metrics and baselines."""

from .family import FAMILY

__all__ = ["FAMILY"]
