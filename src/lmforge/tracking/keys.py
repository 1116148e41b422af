"""MLflow's limits on keys and values, and the one rule that turns any name into a valid key."""

from __future__ import annotations

import re
from typing import Any

__all__ = ["MAX_KEY_LENGTH", "MAX_PARAM_LENGTH", "MAX_TAG_LENGTH", "safe_key"]

MAX_PARAM_LENGTH = 6000  # MLflow's limit on a param value
MAX_TAG_LENGTH = 8000  # ... and on a tag value
MAX_KEY_LENGTH = 250  # ... and on a param, metric or tag key


def safe_key(key: Any) -> str:
    """A valid MLflow key: characters other than alphanumerics, ``_ - . / :`` and space become
    ``_``; empty, ``.`` and ``..`` path segments are dropped or neutralised; at most 250 chars."""
    text = re.sub(r"[^/\w.\- :]", "_", str(key))
    parts = ["__" if part == ".." else part for part in text.split("/") if part not in ("", ".")]
    return ("/".join(parts) or "_")[:MAX_KEY_LENGTH]
