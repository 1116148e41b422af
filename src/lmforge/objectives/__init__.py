"""Pretraining objectives: one module per family, pure seeded functions from token ids to examples."""
