"""Credentials out of what is shown or kept: a URI's user and password (``scheme://user:pw@host``)
are removed before the URI is logged, written into a lock record, a spool line, an MLflow param
or tag, or an error message.

``redact_uri`` takes one URI; ``redact`` any text (a command line, an error message) and removes
the user part of every URI in it; ``redact_data`` does the same through nested dicts and lists;
``redact_log_records`` through every log record of the process (a library's own warnings, such
as MLflow's about a request that failed, name the URL they called). The credentials themselves
are only ever held by the object that makes the connection.
"""

from __future__ import annotations

import logging
import re
import threading
from typing import Any

__all__ = ["has_credentials", "redact", "redact_data", "redact_log_records", "redact_uri"]

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


_FACTORY_LOCK = threading.Lock()
_installed = False


def redact_log_records() -> None:
    """From now on, every log record this process makes (any logger, any thread) has the user
    and password of the URIs in its message and traceback removed before a handler sees it.
    Installed once (a wrapper around the current ``logging`` record factory); records without a
    URI's credentials are left as they are."""
    global _installed
    with _FACTORY_LOCK:
        if _installed:
            return
        base = logging.getLogRecordFactory()

        def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
            record = base(*args, **kwargs)
            try:
                message = record.getMessage()
            except Exception:  # noqa: BLE001 - a bad format is the handler's to report, as before
                return record
            clean = redact(message)
            if clean != message:
                record.msg, record.args = clean, None
            if record.exc_info and record.exc_info[1] is not None and not record.exc_text:
                text = logging.Formatter().formatException(record.exc_info)
                if redact(text) != text:
                    record.exc_text = redact(text)  # what formatters print in place of the traceback
            return record

        logging.setLogRecordFactory(factory)
        _installed = True
