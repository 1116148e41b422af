"""Reading untrusted files in bounded pieces: a line, or a record of a stated length, is never
held whole when it is longer than the reader's limit; it is consumed in chunks and only its size
is kept. What a caller does with an over-long line (drop it and count it, or call it bad input)
is the caller's.

A leaf module (the standard library only), shared by the corpus readers and the fine-tuning
task files.
"""

from __future__ import annotations

from typing import IO, AnyStr

CHUNK = 1 << 20  # what is held at once while an over-long line or record is consumed
DEFAULT_MAX_DOCUMENT_BYTES = 4 << 20  # ``clean.max_document_bytes``'s default; the task files' line limit


def is_cut(line: AnyStr, limit: int) -> bool:
    """Whether ``line``, read by ``readline(limit + 1)``, is the start of a line longer than
    ``limit`` (bytes in a binary file, characters in a text one): it filled the read and has no
    line end. A line of exactly ``limit`` plus its ``\\n`` is whole (a binary file's ``\\r`` counts
    as one of its bytes)."""
    return len(line) > limit and line[-1:] not in ("\n", b"\n", "\r")


def rest_of_line(fh: IO[AnyStr]) -> int:
    """Consume the rest of the current line (through its line end, or to the end of the file) in
    chunks; how many bytes (or characters) that was."""
    n = 0
    while True:
        piece = fh.readline(CHUNK)
        n += len(piece)
        if len(piece) < CHUNK or piece[-1:] in ("\n", b"\n", "\r"):
            return n


def skip(fh: IO[bytes], n: int) -> int:
    """Consume ``n`` bytes in chunks; how many there were (fewer at the end of the file)."""
    done = 0
    while done < n:
        piece = fh.read(min(CHUNK, n - done))
        if not piece:
            break
        done += len(piece)
    return done


def rest_of_file(fh: IO[AnyStr]) -> int:
    """Consume the rest of the file in chunks; how many bytes (or characters) that was."""
    n = 0
    while piece := fh.read(CHUNK):
        n += len(piece)
    return n
