"""Waiting for an event in a test: poll for it until a deadline, never sleep a fixed time and then
look. The deadline only bounds a test that would otherwise hang; it is generous because the suite
runs with two workers on two shared cores, and reaching it is a failure naming what never came."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

DEADLINE_S = 120.0


def wait_for(condition: Callable[[], T], what: str, timeout: float = DEADLINE_S, interval: float = 0.02,
             alive: Callable[[], object] | None = None) -> T:
    """Call ``condition`` every ``interval`` seconds until it returns something true, and return
    that. ``alive`` (optional) is checked too: when it returns something false (a process that
    ended, a thread that stopped) the wait fails at once rather than at the deadline. Reaching the
    deadline fails the test with ``what`` (the event that never happened)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if alive is not None and not alive():
            value = condition()  # it may have come just before the end
            if value:
                return value
            raise AssertionError(f"gave up waiting for {what}: what should bring it about has ended")
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not seen within {timeout:g} s")
        time.sleep(interval)
