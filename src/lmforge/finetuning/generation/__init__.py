"""Generation's room: its inputs (``features.py``: source/target pairs), scorer (what the model
writes), metrics and baselines."""

from .family import FAMILY

__all__ = ["FAMILY"]
