"""One writer per output: while a stage runs it holds an exclusive lock on its output.

The lock is ``<output>.lock`` beside the output (an OS lock through ``filelock``: the operating
system drops it when its process dies, so a lock left by a killed run is taken over by the next
one), and ``<output>.lock.json`` says who holds it: pid, host, command (a URI's user and password
removed) and start time. A second writer of the same output either fails at once with one line
naming the holder (``orchestrate.on_locked: fail``) or says whom it waits for and waits (``wait``).

Only rank 0 of a distributed launch takes the lock: the other ranks write nothing there.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from filelock import FileLock, Timeout

from .artifacts import atomic_write_json, read_json
from .errors import LmforgeError
from .ranks import is_rank_zero
from .redact import redact

__all__ = ["OutputLocked", "holder", "lock_file", "output_lock"]


class OutputLocked(LmforgeError):
    """Another process is writing the output."""


def lock_file(output: str | os.PathLike) -> Path:
    output = Path(output)
    return output.with_name(output.name + ".lock")


def _holder_file(output: Path) -> Path:
    return output.with_name(output.name + ".lock.json")


def holder(output: str | os.PathLike) -> dict | None:
    """What ``<output>.lock.json`` says about the process that holds (or last held) the lock."""
    return read_json(_holder_file(Path(output)))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def _describe(info: dict | None) -> str:
    if not info:
        return "another process"
    return (f"pid {info.get('pid')} on {info.get('host')} since {info.get('started')} "
            f"({info.get('command')})")


def _wait_for_holder(output: Path, seconds: float = 2.0) -> dict | None:
    """The holder's record; it writes it just after taking the lock, so give it a moment."""
    deadline = time.monotonic() + seconds
    while (current := holder(output)) is None and time.monotonic() < deadline:
        time.sleep(0.02)
    return current


@contextlib.contextmanager
def output_lock(output: str | os.PathLike, *, wait: bool = False, command: str | None = None,
                log: Callable[[str], None] | None = None, poll_seconds: float = 1.0) -> Iterator[None]:
    """Hold the exclusive lock on ``output`` for the block. Held elsewhere: ``OutputLocked`` naming
    the holder, or, with ``wait``, a line saying whom it waits for and then the wait."""
    output = Path(output)
    if not is_rank_zero():
        yield
        return
    output.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(lock_file(output)), thread_local=False)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        current = _wait_for_holder(output)
        if not wait:
            raise OutputLocked(f"{output} is being written by {_describe(current)}; wait for it to finish "
                               f"(or set orchestrate.on_locked=wait)") from None
        if log is not None:
            log(f"{output}: waiting for {_describe(current)} to finish writing it")
        lock.acquire(poll_interval=poll_seconds)
    try:
        previous = holder(output)
        here = socket.gethostname()
        if previous and previous.get("host") == here and isinstance(previous.get("pid"), int) \
                and previous["pid"] != os.getpid() and not _alive(previous["pid"]) and log is not None:
            log(f"{output}: took over the lock left by pid {previous['pid']} (no longer running, "
                f"started {previous.get('started')})")
        atomic_write_json(_holder_file(output), {
            "pid": os.getpid(), "host": here, "command": redact(command or " ".join(sys.argv)),  # no URI's password in the record
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
        yield
    finally:
        with contextlib.suppress(OSError):
            mine = holder(output)
            if mine and mine.get("pid") == os.getpid() and mine.get("host") == socket.gethostname():
                _holder_file(output).unlink()
        lock.release()
