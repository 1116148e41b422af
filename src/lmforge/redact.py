"""Credentials out of what is shown or kept: a URI's user and password (``scheme://user:pw@host``)
are removed before the URI is logged, written into a lock record, a spool line, an MLflow param
or tag, or an error message.

``redact_uri`` takes one URI; ``redact`` any text (a command line, an error message) and removes
the user part of every URI in it; ``redact_data`` does the same through nested dicts and lists.
The credentials themselves are only ever held by the object that makes the connection.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["has_credentials", "redact", "redact_data", "redact_uri"]

# scheme "://" userinfo "@": the userinfo runs to the last "@" before the host part ends ("/",
# "?", "#", whitespace or a quote), so a password holding a raw "@" or ":" goes whole
_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/?#\s'\"<>@]*(?:@[^/?#\s'\"<>@]*)*)@")


def _strip(match: re.Match) -> str:
    return match["scheme"]


def redact(text: str) -> str:
    """``text`` with the user and password of every URI in it removed
    (``http://u:pw@host:5000/x`` -> ``http://host:5000/x``)."""
    if "@" not in text or "://" not in text:
        return text
    return _USERINFO.sub(_strip, text)


def redact_uri(uri: str | None) -> str | None:
    """One URI without its user and password (None stays None)."""
    return None if uri is None else redact(str(uri))


def has_credentials(uri: str) -> bool:
    """Whether ``uri`` names a user or a password."""
    return redact(uri) != uri


def redact_data(value: Any) -> Any:
    """``value`` with every string in it (nested dicts, lists and tuples included) redacted."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redact_data(k) if isinstance(k, str) else k: redact_data(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(redact_data(v) for v in value)
    return value
