"""Hostile corpus files: reading is bounded by ``clean.max_document_bytes`` while it happens, and
every bad record is one error naming the file and line, or a recorded skip, never a traceback.

Each test builds what an attacker would hand the clean stage: a gzip bomb that inflates to one
line with no newline, a JSON number of 5,000 digits, nesting 100,000 deep, a WARC record whose
Content-Length claims a petabyte."""

from __future__ import annotations

import gzip
import json
import re
import resource
import subprocess
import sys
import tracemalloc

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from lmforge.cli import main
from lmforge.corpus.document import CorpusError
from lmforge.corpus.sources import InputReport, iter_documents
from lmforge.testing.documents import page, write_jsonl

DIGITS = '{"text": "A number follows here.", "n": ' + "7" * 5000 + "}\n"
NESTED = '{"text": "Nested lists follow here.", "m": ' + "[" * 100_000 + "]" * 100_000 + "}\n"
PETABYTE = 10**15


def read(*specs, **kw):
    report = InputReport()
    docs = list(iter_documents([str(s) for s in specs], report=report, **kw))
    return docs, report


def wet(records: list[tuple[str, bytes]], length: int | str | None = None) -> bytes:
    """A WET file of ``(record id, payload)`` conversion records; ``length``: the last one's
    Content-Length as claimed (default: its payload's)."""
    out = b"WARC/1.0\r\nWARC-Type: warcinfo\r\nContent-Length: 4\r\n\r\nx: y\r\n\r\n"
    for i, (rid, body) in enumerate(records):
        claimed = length if (length is not None and i == len(records) - 1) else len(body)
        out += (f"WARC/1.0\r\nWARC-Type: conversion\r\nWARC-Record-ID: <{rid}>\r\n"
                f"Content-Length: {claimed}\r\n\r\n").encode() + body + b"\r\n\r\n"
    return out


# ----------------------------------------------------------------------------- the readers


@pytest.mark.parametrize("gz", [False, True])
def test_an_over_long_jsonl_line_is_dropped_and_counted_and_the_next_lines_read(tmp_path, gz):
    lines = [json.dumps({"text": "short one."}), json.dumps({"text": "x" * 5000}), json.dumps({"text": "short two."})]
    data = ("\n".join(lines) + "\n").encode()
    path = tmp_path / ("in.jsonl.gz" if gz else "in.jsonl")
    path.write_bytes(gzip.compress(data) if gz else data)
    docs, report = read(path, max_document_bytes=1000)
    assert [d.text for d in docs] == ["short one.", "short two."]
    assert [d.id for d in docs] == [f"{path.name}:1", f"{path.name}:3"]  # line numbers go on past the long line
    assert report.too_long == {"documents": 1, "bytes": len(lines[1]) + 1,
                               "first": [{"input": str(path), "where": f"{path}:2", "bytes": len(lines[1]) + 1}]}
    # the same line as bad input: an error naming the line, or a recorded skip
    with pytest.raises(CorpusError, match=rf"^{re.escape(str(path))}:2: a document of {len(lines[1]) + 1} bytes, over clean.max_document_bytes \(1000\)$"):
        read(path, max_document_bytes=1000, on_too_long="bad_input")
    docs, report = read(path, max_document_bytes=1000, on_too_long="bad_input", on_bad_input="skip")
    assert [d.text for d in docs] == ["short one."] and report.skipped[0]["documents_read"] == 1
    # a line of exactly the limit (its newline not counted) is read
    docs, _ = read(path, max_document_bytes=len(lines[1]))
    assert len(docs) == 3


def test_an_over_long_line_is_never_held(tmp_path):
    """A 64 MiB line with no newline, read with a 1 MiB limit: Python's peak allocation stays a few MiB."""
    path = tmp_path / "long.jsonl"
    with open(path, "wb") as fh:
        fh.write(b'{"text": "')
        for _ in range(64):
            fh.write(b" " * (1 << 20))
    tracemalloc.start()
    try:
        docs, report = read(path, max_document_bytes=1 << 20)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert docs == [] and report.too_long["documents"] == 1 and report.too_long["bytes"] == path.stat().st_size
    assert peak < 8 << 20


@pytest.mark.parametrize(("line", "message"), [
    (DIGITS, "JSON that Python cannot read: Exceeds the limit (4300 digits) for integer string conversion: value has 5000 digits"),
    (NESTED, "JSON nested too deeply to read"),
])
def test_json_python_cannot_hold_is_an_error_naming_the_line_or_a_recorded_skip(tmp_path, line, message):
    path = tmp_path / "in.jsonl"
    path.write_text(json.dumps({"text": "Before it."}) + "\n" + line + json.dumps({"text": "After it."}) + "\n")
    with pytest.raises(CorpusError) as err:
        read(path)
    assert str(err.value) == f"{path}:2: {message}"
    docs, report = read(path, on_bad_input="skip")
    assert [d.text for d in docs] == ["Before it."]
    assert report.skipped == [{"input": str(path), "error": f"{path}:2: {message}", "documents_read": 1}]


def test_a_wet_record_claiming_a_petabyte(tmp_path):
    path = tmp_path / "in.warc.wet.gz"
    path.write_bytes(gzip.compress(wet([("urn:a", b"A fine page of text."), ("urn:b", b"short")], length=PETABYTE)))
    with pytest.raises(CorpusError, match=rf"^{re.escape(str(path))} record urn:b: truncated WARC record \(9 of {PETABYTE} bytes\)$"):
        read(path)
    docs, report = read(path, on_bad_input="skip")
    assert [d.text for d in docs] == ["A fine page of text."] and len(report.skipped) == 1
    assert report.too_long["documents"] == 0  # not counted as read: its payload was never there
    # as bad input, refused from its header, before any of the payload is read
    with pytest.raises(CorpusError, match=rf"^{re.escape(str(path))} record urn:b: a document of {PETABYTE} bytes, over clean"):
        read(path, on_too_long="bad_input")


@pytest.mark.parametrize("claimed", ["-1", "+5", "5_0", "", "1" * 40])
def test_a_wet_content_length_must_be_plain_digits(tmp_path, claimed):
    path = tmp_path / "in.warc.wet"
    path.write_bytes(wet([("urn:a", b"A page.")], length=claimed))
    with pytest.raises(CorpusError, match=r"^\S+in.warc.wet record urn:a: WARC record without a valid Content-Length"):
        read(path)


def test_an_over_long_wet_record_is_skipped_over_and_counted(tmp_path):
    path = tmp_path / "in.warc.wet.gz"
    path.write_bytes(gzip.compress(wet([("urn:a", b"x" * 5000), ("urn:b", b"A fine page.")])))
    docs, report = read(path, max_document_bytes=1000)
    assert [d.id for d in docs] == ["urn:b"]
    assert (report.too_long["documents"], report.too_long["bytes"]) == (1, 5000)


def test_an_over_long_wet_header_is_an_error(tmp_path):
    path = tmp_path / "in.warc.wet"
    with open(path, "wb") as fh:
        fh.write(b"WARC/1.0\r\nWARC-Type: conversion\r\nX-Junk: ")
        for _ in range(3):
            fh.write(b"j" * (1 << 20))
    with pytest.raises(CorpusError, match=r"WARC record header longer than 1048576 bytes$"):
        read(path)


def test_parquet_rows_over_the_limit_are_dropped_before_they_are_read(tmp_path):
    path = tmp_path / "in.parquet"
    texts = ["first page.", "y" * 3000, "third page.", "z" * 10]
    meta = ["", "", "", "m" * 3000]  # every string cell of a row counts
    pq.write_table(pa.table({"text": texts, "note": meta}), path)
    docs, report = read(path, max_document_bytes=1000)
    assert [d.id for d in docs] == ["in.parquet:1", "in.parquet:3"]
    assert [f["where"] for f in report.too_long["first"]] == [f"{path}: row 2", f"{path}: row 4"]
    assert report.too_long["bytes"] == 3000 + 3010


def test_an_over_long_text_file_is_dropped(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.txt").write_text("a" * 2000)
    (tmp_path / "d" / "b.txt").write_text("A short file.")
    docs, report = read(tmp_path / "d", max_document_bytes=1000)
    assert [d.id for d in docs] == ["b.txt"] and report.too_long["bytes"] == 2000


# ----------------------------------------------------------------------------- the clean stage


def _good(path, n=60):
    import random

    rng = random.Random(3)
    return write_jsonl(path, [{"id": f"d{i}", "text": page(rng)} for i in range(n)])


@pytest.mark.parametrize("name,content", [("digits.jsonl", DIGITS.encode()), ("nested.jsonl", NESTED.encode()),
                                          ("huge.warc.wet", wet([("urn:b", b"short")], length=PETABYTE))])
def test_clean_fails_on_each_with_one_line(tmp_path, name, content):
    (tmp_path / name).write_bytes(content)
    res = CliRunner().invoke(main, ["clean", "-i", str(tmp_path / name), "-o", str(tmp_path / "out"), "--workers", "1"])
    assert res.exit_code == 1, res.output
    assert res.stderr.startswith(f"error: {tmp_path / name}") and len(res.stderr.splitlines()) == 1
    assert "Traceback" not in res.output and not (tmp_path / "out").exists()


@pytest.mark.slow
def test_clean_skips_each_and_records_it(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    _good(raw / "a-good.jsonl")
    (raw / "b-digits.jsonl").write_text(DIGITS)
    (raw / "c-nested.jsonl").write_text(NESTED)
    (raw / "d-huge.warc.wet").write_bytes(wet([("urn:b", b"short")], length=PETABYTE))
    (raw / "e-long.jsonl").write_text(json.dumps({"text": "x" * 300_000}) + "\n")  # the nesting's line: 200,044 bytes
    res = CliRunner().invoke(main, ["clean", "-i", str(raw), "-o", str(tmp_path / "out"), "--workers", "1",
                                    "--set", "clean.on_bad_input=skip", "--set", "clean.max_document_bytes=250000",
                                    "--set", "clean.near_dedup.enabled=false"])
    assert res.exit_code == 0, res.output
    stats = json.loads((tmp_path / "out" / "stats.json").read_text())
    assert [(s["input"], s["error"].split(": ", 1)[0]) for s in stats["inputs"]["skipped_inputs"]] == [
        (str(raw / "b-digits.jsonl"), f"{raw / 'b-digits.jsonl'}:1"),
        (str(raw / "c-nested.jsonl"), f"{raw / 'c-nested.jsonl'}:1"),
        (str(raw / "d-huge.warc.wet"), f"{raw / 'd-huge.warc.wet'} record urn:b"),
    ]
    assert stats["dropped"]["too_long_input"] == {"documents": 1, "bytes": 300_000 + len('{"text": ""}\n')}
    assert stats["documents_in"] == 61 == stats["documents_out"] + sum(d["documents"] for d in stats["dropped"].values())
    assert sum(stats["length_histogram"]["documents_in"]) == 61
    assert stats["inputs"]["too_long"]["first"][0]["where"] == f"{raw / 'e-long.jsonl'}:1"


def _limit_address_space(limit: int):
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    return apply


@pytest.mark.slow
def test_a_gzip_bomb_with_no_newline_is_dropped_under_an_address_space_limit(tmp_path):
    """A 1.25 GiB line (1.3 MB gzipped) under a 1 GiB address-space limit for the whole run:
    read whole it cannot fit; bounded, it is dropped and counted, and the run goes on."""
    raw = tmp_path / "raw"
    raw.mkdir()
    _good(raw / "a-good.jsonl")
    member = gzip.compress(b" " * (16 << 20), compresslevel=9)  # gzip members concatenated are one stream
    with open(raw / "b-bomb.jsonl.gz", "wb") as fh:
        fh.write(gzip.compress(b'{"text": "'))
        for _ in range(80):
            fh.write(member)
    inflated = len('{"text": "') + 80 * (16 << 20)
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "lmforge.cli", "clean", "-i", str(raw), "-o", str(out), "--workers", "1",
         "--set", "clean.near_dedup.enabled=false"],
        capture_output=True, text=True, timeout=600, preexec_fn=_limit_address_space(1 << 30))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "MemoryError" not in proc.stderr and "Traceback" not in proc.stderr
    stats = json.loads((out / "stats.json").read_text())
    assert stats["dropped"]["too_long_input"] == {"documents": 1, "bytes": inflated}
    assert stats["inputs"]["too_long"]["first"] == [{"input": str(raw / "b-bomb.jsonl.gz"),
                                                    "where": f"{raw / 'b-bomb.jsonl.gz'}:1", "bytes": inflated}]
