"""Model architectures: one readable file per family, built from the shared blocks in layers.py (torch only)."""
