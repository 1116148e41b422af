"""Progress of a long loop: on a terminal a live bar with the rate and the time left (``tqdm``);
elsewhere (Dagster, CI, ``nohup``) a plain line every ``every`` seconds with the same figures,
and one at the end, so that logs stay readable."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import TextIO


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def bar_on_terminal(stream: TextIO | None = None) -> bool:
    """Whether a live bar is drawn: ``stream`` (stderr) is a terminal and ``lmforge --quiet`` is
    not in force. The tokenizer trainers ask this for their own bars too."""
    stream = stream if stream is not None else sys.stderr
    return not _quiet() and bool(getattr(stream, "isatty", lambda: False)())


def _quiet() -> bool:
    return os.environ.get("LMFORGE_VERBOSITY") == "quiet"


def _bar_size(stream: TextIO) -> dict:
    """tqdm's width options: following the terminal's width; a terminal that reports no size
    (a bare pseudo-terminal: ``script``, ``docker exec -t``) would get an empty bar, so there
    the fixed width ``COLUMNS`` (default 100)."""
    try:
        if os.get_terminal_size(stream.fileno()).columns > 0:
            return {"dynamic_ncols": True}
    except (OSError, ValueError, AttributeError):
        pass
    try:
        columns, lines = int(os.environ.get("COLUMNS", 100)), int(os.environ.get("LINES", 24))
    except ValueError:
        columns, lines = 100, 24
    return {"ncols": max(columns, 40), "nrows": max(lines, 2)}


class Progress:
    """``update(done)`` with the count done so far (of ``total`` ``unit``, None when unknown);
    ``close()`` at the end (or use it as a context manager)."""

    def __init__(self, total: int | None, label: str, unit: str = "items", *, initial: int = 0, stream: TextIO | None = None,
                 every: float = 10.0, clock: Callable[[], float] = time.monotonic):
        self.total, self.label, self.unit = total, label, unit
        self.stream = stream if stream is not None else sys.stderr
        self.every, self.clock = every, clock
        self.start = self.last_line = clock()
        self.initial = self.done = initial  # a resumed loop: the rate counts this run's work only
        self.note = ""
        self.bar = None
        self.silent = _quiet()  # `lmforge --quiet`: no progress at all
        if bar_on_terminal(self.stream):
            from tqdm import tqdm

            self.bar = tqdm(total=total, initial=initial, desc=label, unit=f" {unit}", file=self.stream, leave=True,
                            **_bar_size(self.stream))

    def line(self) -> str:
        elapsed = max(self.clock() - self.start, 1e-9)
        rate = (self.done - self.initial) / elapsed
        of = f"/{self.total}" if self.total else ""  # an unknown total: the count alone
        text = f"{self.label}: {self.done}{of} {self.unit} ({rate:.1f} {self.unit}/s"
        if self.total and 0 < self.done < self.total and rate > 0:
            text += f", {_duration((self.total - self.done) / rate)} left"
        text += f", {_duration(elapsed)} elapsed)"
        return f"{text} {self.note}" if self.note else text

    def update(self, done: int, note: str | None = None) -> None:
        """``done`` so far; ``note`` (e.g. the last loss) is shown after the figures."""
        step, self.done = done - self.done, done
        if note is not None:
            self.note = note
        if self.bar is not None:
            if note is not None:
                self.bar.set_postfix_str(note, refresh=False)
            self.bar.update(step)
        elif not self.silent and self.clock() - self.last_line >= self.every and (not self.total or done < self.total):
            self.last_line = self.clock()
            print(self.line(), file=self.stream, flush=True)

    def close(self, finished: bool = True) -> None:
        """End the bar; without one, print the last line (not when the loop failed: its error is
        the line to read)."""
        if self.bar is not None:
            self.bar.close()
        elif finished and not self.silent:
            print(self.line(), file=self.stream, flush=True)

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, exc_type, *exc) -> None:
        self.close(finished=exc_type is None)
