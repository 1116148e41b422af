"""The clean stage's ingest: inputs read in parallel groups, then cut into the shards one reader
going through the inputs in order would have written."""

import gzip
import json
import random

import pyarrow.parquet as pq
import pytest

from lmforge.cleaning import ingest as ingest_mod
from lmforge.cleaning.ingest import ingest
from lmforge.cleaning.shards import shard_name
from lmforge.config import CleanConfig
from lmforge.corpus.document import CorpusError
from lmforge.corpus.sources import InputReport, iter_documents
from lmforge.executors import LocalExecutor
from lmforge.testing.documents import page, write_jsonl


def _corpus(tmp_path):
    """Files of uneven sizes (so that shards straddle them), a gzipped one, a text file, and in
    the middle a file that fails half way and a spec that does not exist."""
    rng = random.Random(7)
    folder = tmp_path / "in"
    folder.mkdir()
    for i, n in enumerate([5, 17, 1, 0, 9]):
        write_jsonl(folder / f"a{i}.jsonl", [{"id": f"a{i}-{k}", "text": page(rng), "lang": "en" if k % 2 else None}
                                             for k in range(n)])
    with gzip.open(folder / "b.jsonl.gz", "wt", encoding="utf-8") as fh:
        for k in range(6):
            fh.write(json.dumps({"text": page(rng), "url": f"https://b.example/{k}"}) + "\n")
    (folder / "c.txt").write_text(page(rng), encoding="utf-8")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"text": page(rng)}) + "\n" + "{not json\n" + json.dumps({"text": "never read"}) + "\n")
    more = write_jsonl(tmp_path / "more.jsonl", [{"text": page(rng)} for _ in range(4)])
    return [str(folder), str(bad), str(tmp_path / "missing.jsonl"), more]


def _ingest(tmp_path, name, inputs, workers=1, **kw):
    cfg = CleanConfig(inputs=inputs, output=str(tmp_path / name), shard_size=4, on_bad_input="skip", **kw)
    wd = tmp_path / f".{name}.work"
    wd.mkdir()
    logs = []
    with _pool(workers) as ex:
        manifest = ingest(cfg, wd, ex, workers, logs.append)
    return wd, manifest, logs


class _pool:
    """A local executor, closed afterwards (0: in this process)."""

    def __init__(self, processes):
        self.ex = LocalExecutor(processes)

    def __enter__(self):
        return self.ex

    def __exit__(self, *exc):
        self.ex.close()


def _rows(wd, manifest):
    rows = []
    for s in range(manifest["shards"]):
        rows += pq.read_table(wd / "ingest" / f"{shard_name(s)}.parquet").to_pylist()
    return rows


def test_ingest_shards_hold_the_documents_of_one_reader_in_input_order(tmp_path, monkeypatch):
    inputs = _corpus(tmp_path)
    report = InputReport()
    expected = list(iter_documents(inputs, "skip", report))  # one reader, in order

    monkeypatch.setattr(ingest_mod, "_MIN_GROUP_BYTES", 1)  # every file a unit of its own ...
    monkeypatch.setattr(ingest_mod, "_GROUP_BYTES", 1)
    wd, manifest, logs = _ingest(tmp_path, "one", inputs, workers=2)
    rows = _rows(wd, manifest)
    assert [r["id"] for r in rows] == [d.id for d in expected]
    assert [r["text"] for r in rows] == [d.text for d in expected]
    assert [r["ordinal"] for r in rows] == list(range(len(expected)))
    assert [json.loads(r["metadata"]) for r in rows] == [d.metadata for d in expected]
    assert manifest["documents"] == len(expected) and manifest["shards"] == -(-len(expected) // 4)
    assert manifest["bytes"] == sum(len(d.text.encode()) for d in expected)
    assert manifest["inputs"] == report.to_dict()  # documents per input, and the skips in order
    assert [s["input"] for s in report.skipped] == inputs[1:3]
    assert report.skipped[0]["documents_read"] == 1
    plan = json.loads((wd / "ingest" / "plan.json").read_text())["entries"]
    assert len(plan) == 9  # 9 files, each alone but the empty one (with the next), and the missing one
    assert not (wd / "ingest" / "pieces").exists()  # gone once the shards hold everything

    monkeypatch.setattr(ingest_mod, "_MIN_GROUP_BYTES", 1 << 30)  # ... or all files in one unit:
    monkeypatch.setattr(ingest_mod, "_GROUP_BYTES", 1 << 30)  # the same shards, byte for byte
    wd2, manifest2, _ = _ingest(tmp_path, "all", inputs, workers=1)
    assert len(json.loads((wd2 / "ingest" / "plan.json").read_text())["entries"]) == 3  # the files before the skip, after it
    assert manifest2 == manifest
    for s in range(manifest["shards"]):
        name = f"{shard_name(s)}.parquet"
        assert (wd2 / "ingest" / name).read_bytes() == (wd / "ingest" / name).read_bytes()


def test_a_bad_input_fails_naming_it_and_max_documents_is_per_input(tmp_path):
    inputs = _corpus(tmp_path)
    with pytest.raises(CorpusError, match=r"bad\.jsonl:2: not valid JSON"):
        cfg = CleanConfig(inputs=inputs[:2], output=str(tmp_path / "x"), shard_size=4)
        (tmp_path / ".x.work").mkdir()
        with _pool(2) as ex:
            ingest(cfg, tmp_path / ".x.work", ex, 2, lambda m: None)
    wd, manifest, _ = _ingest(tmp_path, "capped", [inputs[0], inputs[3]], max_documents=2)
    per_input = manifest["inputs"]["documents_per_input"]
    assert max(per_input.values()) == 2 and per_input[inputs[3]] == 2
    assert manifest["documents"] == sum(per_input.values())


def test_a_stopped_ingest_reuses_its_finished_units_and_its_grouping(tmp_path, monkeypatch):
    inputs = _corpus(tmp_path)
    monkeypatch.setattr(ingest_mod, "_MIN_GROUP_BYTES", 1)
    monkeypatch.setattr(ingest_mod, "_GROUP_BYTES", 1)
    cut = ingest_mod._cut_shard

    def stop(*args):
        raise KeyboardInterrupt  # the run is stopped after every input was read

    monkeypatch.setattr(ingest_mod, "_cut_shard", stop)
    with pytest.raises(KeyboardInterrupt):
        _ingest(tmp_path, "out", inputs, workers=0)  # in this process, where the stop is patched in
    plan = (tmp_path / ".out.work" / "ingest" / "plan.json").read_text()

    monkeypatch.setattr(ingest_mod, "_cut_shard", cut)
    monkeypatch.setattr(ingest_mod, "_GROUP_BYTES", 1 << 30)  # would group otherwise: the saved plan wins
    monkeypatch.setattr(ingest_mod, "_MIN_GROUP_BYTES", 1 << 30)
    cfg = CleanConfig(inputs=inputs, output=str(tmp_path / "out"), shard_size=4, on_bad_input="skip")
    logs = []
    with _pool(0) as ex:
        manifest = ingest(cfg, tmp_path / ".out.work", ex, 1, logs.append)
    assert (tmp_path / ".out.work" / "ingest" / "plan.json").read_text() == plan
    assert "read inputs: 8 of 8 units already done, reused" in logs
    wd, fresh, _ = _ingest(tmp_path, "fresh", inputs)
    assert manifest == fresh
    assert _rows(tmp_path / ".out.work", manifest) == _rows(wd, fresh)
