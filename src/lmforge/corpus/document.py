"""The one document type every source yields and every cleaning step sees."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from ..errors import LmforgeError

# Column layout of every Parquet shard the corpus and cleaning stages write.
SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("text", pa.string()),
        ("url", pa.string()),
        ("timestamp", pa.string()),
        ("source", pa.string()),
        ("metadata", pa.string()),  # JSON object
    ]
)


@dataclass(slots=True)
class Document:
    id: str
    text: str
    url: str | None = None
    timestamp: str | None = None  # ISO 8601 where known; compared as text (ISO sorts chronologically)
    source: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)


class CorpusError(LmforgeError, RuntimeError):
    """Bad input: an unreadable, truncated, binary or undecodable file, a missing path, an empty corpus."""
