"""URL normalisation and URL deduplication (C4 keeps the newest crawl of each URL)."""

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


def newer(a: tuple[str, int], b: tuple[str, int]) -> bool:
    """Is crawl ``a`` = (timestamp, ordinal) preferred over ``b``? Newest timestamp wins;
    on a tie (or no timestamps) the earlier document in input order wins, so the result is
    deterministic."""
    if a[0] != b[0]:
        return a[0] > b[0]
    return a[1] < b[1]
