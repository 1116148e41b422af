"""Reading the clean corpus (cleaning/output.py): every kept document once, shard by shard
in name order, and the shard checksums a later stage's fingerprint depends on."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq

from lmforge.config import Params
from lmforge.corpus.document import SCHEMA
from lmforge.cleaning.output import clean_shards, iter_clean


def _shard(path, ids):
    n = len(ids)
    pq.write_table(pa.Table.from_pydict({"id": ids, "text": [f"text of {i}" for i in ids], "url": [None] * n,
                                         "timestamp": [None] * n, "source": ["test"] * n, "metadata": ["{}"] * n},
                                        schema=SCHEMA), path, row_group_size=2)


def test_iter_clean_streams_every_document_shard_by_shard(tmp_path):
    _shard(tmp_path / "shard-00001.parquet", ["d", "e"])
    _shard(tmp_path / "shard-00000.parquet", ["a", "b", "c"])
    _shard(tmp_path / "shard-00010.parquet", ["f"])
    _shard(tmp_path / "rejected.parquet", ["x"])  # not a shard: not read
    got = list(iter_clean(tmp_path, batch_size=2))
    assert got == [(i, f"text of {i}") for i in "abcdef"]
    assert list(iter_clean(tmp_path / "missing")) == []


def test_clean_shards_are_the_stats_checksums_of_the_corpus_read(tmp_path):
    clean, other = tmp_path / "clean", tmp_path / "other"
    params = Params.model_validate({"clean": {"output": str(clean)}, "tokenizer": {"output": str(tmp_path / "tok")}})
    assert clean_shards(params) is None  # no clean output yet
    clean.mkdir()
    (clean / "stats.json").write_text(json.dumps({"documents": 3, "shards": {"shard-00000.parquet": "ab" * 32}}))
    assert clean_shards(params) == {"shard-00000.parquet": "ab" * 32}
    # tokenizer.input names another corpus: its checksums, not the clean stage's
    other.mkdir()
    (other / "stats.json").write_text(json.dumps({"shards": {"shard-00000.parquet": "cd" * 32}}))
    moved = Params.model_validate({**params.model_dump(mode="json"),
                                   "tokenizer": {"output": str(tmp_path / "tok"), "input": str(other)}})
    assert clean_shards(moved) == {"shard-00000.parquet": "cd" * 32}
