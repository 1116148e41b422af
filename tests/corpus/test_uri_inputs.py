"""Inputs named by URI (an object store through fsspec): listed, read and reported as local
files are; fsspec's in-memory filesystem stands in for S3 here, ``file://`` for a mounted one."""

import gzip
import io
import json
import random

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lmforge.cleaning.stage import _fingerprint, run_clean
from lmforge.config import CleanConfig
from lmforge.corpus.document import CorpusError
from lmforge.corpus.sources import InputReport, iter_documents
from lmforge.testing.documents import page


def _files(rng) -> dict[str, bytes]:
    rows = [{"id": f"r{k}", "text": page(rng), "url": f"https://x.example/{k}", "topic": k % 3} for k in range(5)]
    jsonl = "".join(json.dumps(r) + "\n" for r in rows).encode()
    table = io.BytesIO()
    pq.write_table(pa.Table.from_pylist([{"text": page(rng), "lang": "en"} for _ in range(3)]), table)
    return {"a/one.jsonl": jsonl, "a/two.jsonl.gz": gzip.compress(jsonl), "b/three.parquet": table.getvalue(),
            "b/four.txt": page(rng).encode(), "b/ignored.csv": b"x,y\n"}


@pytest.fixture
def store(tmp_path):
    """The same files on local disk and in fsspec's memory filesystem."""
    fs = fsspec.filesystem("memory")
    root = f"/corpus-{tmp_path.name}"
    for name, data in _files(random.Random(3)).items():
        (tmp_path / "local" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "local" / name).write_bytes(data)
        fs.pipe(f"{root}/{name}", data)
    yield f"memory://{root}", tmp_path / "local"
    fs.rm(root, recursive=True)


def test_a_uri_folder_reads_as_the_same_folder_on_disk(store):
    uri, local = store
    remote_report, local_report = InputReport(), InputReport()
    remote = list(iter_documents([uri], report=remote_report))
    disk = list(iter_documents([str(local)], report=local_report))
    assert len(remote) == 5 + 5 + 3 + 1
    assert [(d.id, d.text, d.url, d.metadata) for d in remote] == [(d.id, d.text, d.url, d.metadata) for d in disk]
    assert remote[0].source == f"{uri}/a/one.jsonl" and remote[-1].source == f"{uri}/b/three.parquet"
    assert list(remote_report.documents) == [f"{uri}/{n}" for n in ("a/one.jsonl", "a/two.jsonl.gz", "b/four.txt", "b/three.parquet")]
    one = list(iter_documents([f"{uri}/a/two.jsonl.gz"]))  # one file by its URI
    assert [d.text for d in one] == [d.text for d in remote[5:10]] and one[0].id == "r0"


def test_bad_uris_are_one_line_errors_naming_them(store):
    uri, _ = store
    with pytest.raises(CorpusError, match=r"^memory://nowhere/x: input path not found$"):
        list(iter_documents(["memory://nowhere/x"]))
    with pytest.raises(CorpusError, match=r"^nosuch://bucket/x: cannot list the input: ValueError: Protocol not known: nosuch$"):
        list(iter_documents(["nosuch://bucket/x"]))
    with pytest.raises(CorpusError, match=r"ignored\.csv: unsupported file type"):
        list(iter_documents([f"{uri}/b/ignored.csv"]))
    fsspec.filesystem("memory").pipe(uri.removeprefix("memory://") + "/c/bad.jsonl", b'{"text": "ok"}\n{oops\n')
    with pytest.raises(CorpusError, match=r"^memory://.*/c/bad\.jsonl:2: not valid JSON"):
        list(iter_documents([f"{uri}/c"]))


def test_the_fingerprint_follows_a_uri_inputs_content(store, tmp_path):
    uri, _ = store
    cfg = CleanConfig(inputs=[uri], output=str(tmp_path / "out"))
    before = _fingerprint(cfg)
    assert _fingerprint(cfg) == before
    fsspec.filesystem("memory").pipe(uri.removeprefix("memory://") + "/a/one.jsonl", b'{"text": "changed"}\n')
    assert _fingerprint(cfg) != before


def test_the_clean_stage_reads_file_uris_in_its_workers(store, tmp_path):
    """A pool of processes reads ``file://`` inputs where it runs; the output is the local run's
    but for each document's source."""
    _, local = store
    outputs = {}
    for name, spec in (("uri", local.absolute().as_uri()), ("path", str(local))):
        cfg = CleanConfig(inputs=[spec], output=str(tmp_path / name), workers=2, shard_size=4)
        run_clean(cfg, log=lambda m: None)
        rows = pq.read_table(tmp_path / name / "shard-00000.parquet").to_pylist()
        outputs[name] = [{k: v for k, v in r.items() if k != "source"} for r in rows]
        assert rows and all(r["source"].startswith("file:///" if name == "uri" else str(local)) for r in rows)
    assert outputs["uri"] == outputs["path"]
