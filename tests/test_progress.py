"""lmforge.progress: plain lines at an interval off a terminal, a tqdm bar on one."""

from __future__ import annotations

import io

import pytest

from lmforge.progress import Progress


class _Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_off_a_terminal_a_line_every_interval_and_one_at_the_end():
    out, clock = io.StringIO(), _Clock()
    with Progress(100, "embed", "texts", stream=out, every=10, clock=clock) as p:
        for done in range(10, 101, 10):
            clock.now += 4  # a batch of 10 every 4 s: 2.5 texts/s
            p.update(done)
    lines = out.getvalue().splitlines()
    # at 12 s, 24 s, 36 s (the 10 s interval passed), then the closing line at 40 s
    assert lines == ["embed: 30/100 texts (2.5 texts/s, 0:28 left, 0:12 elapsed)",
                     "embed: 60/100 texts (2.5 texts/s, 0:16 left, 0:24 elapsed)",
                     "embed: 90/100 texts (2.5 texts/s, 0:04 left, 0:36 elapsed)",
                     "embed: 100/100 texts (2.5 texts/s, 0:40 elapsed)"]


def test_a_failed_loop_prints_no_closing_line():
    out = io.StringIO()
    with pytest.raises(ValueError):
        with Progress(5, "embed", stream=out):
            raise ValueError("bad text")
    assert out.getvalue() == ""


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_on_a_terminal_a_bar_with_rate_and_count():
    out = _Terminal()
    with Progress(4, "embed", "texts", stream=out) as p:
        for done in range(1, 5):
            p.update(done)
    text = out.getvalue()
    assert "embed" in text and "4/4" in text and "texts/s" in text


def test_an_unknown_total_gives_the_count_alone():
    out, clock = io.StringIO(), _Clock()
    with Progress(None, "token store bpe", "documents", stream=out, every=10, clock=clock) as p:
        clock.now = 12
        p.update(300)
        clock.now = 15
        p.update(360)
    assert out.getvalue().splitlines() == ["token store bpe: 300 documents (25.0 documents/s, 0:12 elapsed)",
                                           "token store bpe: 360 documents (24.0 documents/s, 0:15 elapsed)"]


def test_a_terminal_that_reports_no_size_still_gets_a_bar(monkeypatch):
    # a bare pseudo-terminal (script, docker exec -t) reports 0 columns; tqdm drew an empty bar there
    import os
    import pty

    monkeypatch.delenv("COLUMNS", raising=False)
    master, slave = pty.openpty()
    assert os.get_terminal_size(slave).columns == 0
    with open(slave, "w", encoding="utf-8", closefd=True) as stream:
        progress = Progress(10, "pretrain gpt", "steps", stream=stream)
        progress.update(3, "loss 5.000")
        progress.close()
    # one read returns what the pty has buffered so far, which may be a part; read until the closed
    # slave side gives end of file (EIO on Linux)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    text = b"".join(chunks).decode("utf-8", "replace")
    assert "pretrain gpt" in text and "3/10" in text and "loss 5.000" in text, text
