"""Helpers shared by the tests and the benchmarks (which import nothing from ``tests/``):
``documents``, seeded generators of English-like documents. Standard library only."""
