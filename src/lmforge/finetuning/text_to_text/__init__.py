"""Tagging and span QA written as text: the pairs (``pairs.py``), the scorer that reads the written text back, and ``Written``, the family that wraps tagging's or span QA's own."""

from .family import Written

__all__ = ["Written"]
