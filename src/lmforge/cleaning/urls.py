"""URL normalisation (C4 normalises URLs before keeping the newest crawl of each)."""

from __future__ import annotations

import re

_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")


def normalize_url(url: str, tracking_query_prefixes: tuple[str, ...] | list[str] = ("utm_", "ref", "feed")) -> str:
    """Normalise a URL the way C4 did before deduplicating.

    The scheme and a leading ``www.`` are removed, a query string that starts with a tracking
    parameter (``?utm_...``, ``?ref...``, ``?feed...``) is removed with everything after it,
    and trailing slashes are stripped. The host is lower-cased (hosts are case-insensitive;
    paths are not, so they are left alone).
    """
    url = url.strip()
    url = _SCHEME.sub("", url)
    if url.lower().startswith("www."):
        url = url[4:]
    q = url.find("?")
    if q >= 0 and url[q + 1 :].startswith(tuple(tracking_query_prefixes)):
        url = url[:q]
    slash = url.find("/")
    host, rest = (url, "") if slash < 0 else (url[:slash], url[slash:])
    return (host.lower() + rest).rstrip("/")
