"""Every corpus source, and every kind of bad input: a clear error naming the file, or a counted skip."""

import gzip
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lmforge.corpus.document import CorpusError
from lmforge.corpus.huggingface import parse_hf_spec
from lmforge.corpus.sources import InputReport, iter_documents


def docs_of(*specs, **kw):
    return list(iter_documents([str(s) for s in specs], **kw))


def wet_record(uri, date, text, rtype="conversion", rid="urn:uuid:1"):
    body = text.encode("utf-8")
    head = (
        f"WARC/1.0\r\nWARC-Type: {rtype}\r\nWARC-Target-URI: {uri}\r\nWARC-Date: {date}\r\n"
        f"WARC-Record-ID: <{rid}>\r\nContent-Type: text/plain\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    return head + body + b"\r\n\r\n"


def write_wet(path, records, multi_member=True):
    info = (
        b"WARC/1.0\r\nWARC-Type: warcinfo\r\nContent-Length: 12\r\n\r\nsoftware: x\n\r\n\r\n"
    )
    chunks = [info] + [wet_record(*r) for r in records]
    with open(path, "wb") as fh:
        if multi_member:  # Common Crawl gzips each record separately
            for c in chunks:
                fh.write(gzip.compress(c))
        else:
            fh.write(gzip.compress(b"".join(chunks)))


def test_text_file_is_one_document(tmp_path):
    (tmp_path / "a.txt").write_text("Hello there.\nSecond line.", encoding="utf-8")
    (docs,) = docs_of(tmp_path / "a.txt")
    assert docs.id == "a.txt" and docs.text == "Hello there.\nSecond line."


def test_directory_is_read_recursively_in_sorted_order(tmp_path):
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "z.txt").write_text("z", encoding="utf-8")
    (tmp_path / "a.txt").write_text("a", encoding="utf-8")
    (tmp_path / "notes.md").write_text("ignored: not a corpus format", encoding="utf-8")
    assert [d.id for d in docs_of(tmp_path)] == ["a.txt", "b/z.txt"]


@pytest.mark.parametrize("gz", [False, True])
def test_jsonl(tmp_path, gz):
    rows = [
        {"text": "first", "url": "https://a.com/x", "id": "A", "timestamp": "2020-01-01", "lang": "en"},
        {"text": "second"},
    ]
    data = "".join(json.dumps(r) + "\n" for r in rows).encode()
    path = tmp_path / ("c.jsonl.gz" if gz else "c.jsonl")
    path.write_bytes(gzip.compress(data) if gz else data)
    a, b = docs_of(path)
    assert (a.id, a.text, a.url, a.timestamp, a.metadata) == ("A", "first", "https://a.com/x", "2020-01-01", {"lang": "en"})
    assert b.id == f"{path.name}:2" and b.url is None


def test_parquet(tmp_path):
    path = tmp_path / "c.parquet"
    pq.write_table(pa.table({"text": ["one", "two"], "url": ["u1", None], "score": [1.5, 2.5]}), path)
    a, b = docs_of(path)
    assert a.text == "one" and a.url == "u1" and a.metadata == {"score": 1.5} and b.id == "c.parquet:2"


@pytest.mark.parametrize("multi_member", [True, False])
def test_wet(tmp_path, multi_member):
    path = tmp_path / "CC-MAIN-x.warc.wet.gz"
    write_wet(
        path,
        [
            ("https://example.com/a", "2019-04-18T12:00:00Z", "Page one text.\nWith a second line.", "conversion", "urn:uuid:a"),
            ("https://example.com/b", "2019-04-19T12:00:00Z", "Página dos — ünïcode.", "conversion", "urn:uuid:b"),
        ],
        multi_member,
    )
    a, b = docs_of(path)
    assert (a.id, a.url, a.timestamp) == ("urn:uuid:a", "https://example.com/a", "2019-04-18T12:00:00Z")
    assert a.text == "Page one text.\nWith a second line." and b.text == "Página dos — ünïcode."


def test_stdlib_source_has_stable_ids():
    first = [d.id for d in iter_documents(["stdlib"], max_documents=50)]
    again = [d.id for d in iter_documents(["stdlib"], max_documents=50)]
    assert first == again and len(set(first)) == 50 and all(i.startswith("stdlib:") for i in first)


def test_max_documents_caps_each_input(tmp_path):
    (tmp_path / "c.jsonl").write_text("".join(json.dumps({"text": str(i)}) + "\n" for i in range(10)))
    assert len(docs_of(tmp_path / "c.jsonl", max_documents=3)) == 3


# ----------------------------------------------------------------------------- bad input


def bad_inputs(tmp_path):
    good = b"".join(json.dumps({"text": f"doc {i}"}).encode() + b"\n" for i in range(200))
    trunc = tmp_path / "truncated.jsonl.gz"
    trunc.write_bytes(gzip.compress(good)[:-30])
    binary = tmp_path / "binary.txt"
    binary.write_bytes(b"\x7fELF\x00\x00\x01binary stuff")
    badutf = tmp_path / "latin1.txt"
    badutf.write_bytes("caf\xe9 au lait".encode("latin-1"))
    badjson = tmp_path / "bad.jsonl"
    badjson.write_text('{"text": "ok"}\n{"text": broken\n')
    notext = tmp_path / "notext.jsonl"
    notext.write_text('{"body": "no text field"}\n')
    badwet = tmp_path / "bad.warc.wet.gz"
    badwet.write_bytes(gzip.compress(b"this is not a warc file\n"))
    badparquet = tmp_path / "bad.parquet"
    badparquet.write_bytes(b"PAR1 not really")
    return {
        trunc: "truncated gzip",
        binary: "binary file",
        badutf: "invalid UTF-8",
        badjson: ":2: not valid JSON",
        notext: ":1: expected an object with a string field 'text'",
        badwet: "not a WARC/WET file",
        badparquet: "not a readable Parquet file",
        tmp_path / "missing.jsonl": "input path not found",
        tmp_path / "data.csv": "unsupported file type",
    }


def test_bad_inputs_fail_with_a_message_naming_the_file(tmp_path):
    (tmp_path / "data.csv").write_text("a,b\n")
    for path, message in bad_inputs(tmp_path).items():
        with pytest.raises(CorpusError) as err:
            docs_of(path)
        assert str(path) in str(err.value) and message in str(err.value), (path, str(err.value))


def test_bad_inputs_are_counted_when_skipped(tmp_path):
    (tmp_path / "data.csv").write_text("a,b\n")
    good = tmp_path / "good.jsonl"
    good.write_text(json.dumps({"text": "kept"}) + "\n")
    bad = bad_inputs(tmp_path)
    report = InputReport()
    docs = list(iter_documents([str(p) for p in bad] + [str(good)], on_bad_input="skip", report=report))
    assert len(report.skipped) == len(bad)
    assert {s["input"] for s in report.skipped} == {str(p) for p in bad}
    # what was read before a file turned out bad is kept and counted, never silently lost
    trunc = next(s for s in report.skipped if "truncated" in s["error"])
    assert trunc["documents_read"] > 0
    assert docs[-1].text == "kept"
    assert len(docs) == sum(report.documents.values())


# ----------------------------------------------------------------------------- Hugging Face


def test_hf_spec_parsing():
    assert parse_hf_spec("hf:allenai/c4?config=en&split=validation") == ("allenai/c4", "en", "validation")
    assert parse_hf_spec("hf:wikitext") == ("wikitext", None, "train")
    with pytest.raises(CorpusError, match="unknown option"):
        parse_hf_spec("hf:x?revision=1")


def test_hf_dataset_saved_to_disk(tmp_path):
    datasets = pytest.importorskip("datasets")
    ds = datasets.Dataset.from_dict({"text": [f"row {i}" for i in range(7)], "url": [f"https://x/{i}" for i in range(7)]})
    datasets.DatasetDict({"train": ds}).save_to_disk(str(tmp_path / "saved"))
    docs = docs_of(f"hf:{tmp_path / 'saved'}?split=train", max_documents=5)
    assert [d.text for d in docs] == [f"row {i}" for i in range(5)] and docs[0].url == "https://x/0"


def test_hf_dataset_streamed_from_local_files(tmp_path):
    pytest.importorskip("datasets")
    (tmp_path / "ds").mkdir()
    pq.write_table(pa.table({"text": [f"streamed {i}" for i in range(4)]}), tmp_path / "ds" / "train.parquet")
    docs = docs_of(f"hf:{tmp_path / 'ds'}?split=train")
    assert [d.text for d in docs] == [f"streamed {i}" for i in range(4)]
    assert docs[0].id.endswith(":train:0")


def test_hf_missing_dataset_is_a_clear_error(tmp_path):
    pytest.importorskip("datasets")
    with pytest.raises(CorpusError, match="could not open the dataset"):
        docs_of(f"hf:{tmp_path / 'nothing-here'}")
