"""Which process of a distributed launch this is. A leaf module: stdlib only, so every layer may
ask (the output locks, tracking, training)."""

from __future__ import annotations

import os


def is_rank_zero() -> bool:
    """True on global rank 0 or outside distributed training: the first of ``RANK``,
    ``SLURM_PROCID`` and ``LOCAL_RANK`` that is set decides (global ranks first)."""
    for var in ("RANK", "SLURM_PROCID", "LOCAL_RANK"):
        value = os.environ.get(var, "").strip()
        if value:
            try:
                return int(value) == 0
            except ValueError:
                continue
    return True
