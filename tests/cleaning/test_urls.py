import pytest

from lmforge.cleaning.dedup.urls import normalize_url


@pytest.mark.parametrize(
    "url,expected",
    [
        ("https://www.example.com/path/", "example.com/path"),
        ("http://example.com/path", "example.com/path"),
        ("HTTPS://WWW.Example.COM/Path/To/", "example.com/Path/To"),
        ("https://example.com/a?utm_source=x&utm_medium=y", "example.com/a"),
        ("https://example.com/a?ref=home", "example.com/a"),
        ("https://example.com/a?feed=rss", "example.com/a"),
        ("https://example.com/a?id=3&utm_source=x", "example.com/a?id=3&utm_source=x"),  # as the reference: only a leading tracking query
        ("https://example.com/a?id=3", "example.com/a?id=3"),
        ("example.com///", "example.com"),
        ("https://www2.example.com/", "www2.example.com"),
    ],
)
def test_normalize_url(url, expected):
    assert normalize_url(url) == expected


def test_custom_tracking_prefixes():
    assert normalize_url("https://example.com/a?fbclid=1", ["fbclid"]) == "example.com/a"
    assert normalize_url("https://example.com/a?utm_source=1", ["fbclid"]) == "example.com/a?utm_source=1"
