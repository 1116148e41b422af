"""Tagging and span QA written as text: the pairs (``pairs.py``), the scorer that reads the
written text back (``scorer.py``), and ``Written``, the family that wraps tagging's or span QA's
own (``family.py``)."""

from .family import Written

__all__ = ["Written"]
