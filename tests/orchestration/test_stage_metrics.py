"""The data stages' statistics as DVC metrics: ``<output>.metrics.json`` holds the numbers of
the record the stage wrote (no text, lists or histograms), and a stage run writes it."""

from __future__ import annotations

import json

from lmforge.stages.metrics import metrics_path, write_stage_metrics


def test_the_numbers_of_the_record_beside_the_output(tmp_path):
    out = tmp_path / "data" / "datasets" / "mlm"
    out.mkdir(parents=True)
    (out / "stats.json").write_text(json.dumps({
        "objective": "mlm", "fingerprint": "abc", "config": {"mask_rate": 0.15},
        "splits": {"train": {"examples": 10, "mask_rate": 0.149, "exact": True, "lengths": [1, 2],
                             "input_length_histogram": {"<8": 3}, "input_length": {"mean": 7.5, "max": float("nan")}}},
    }), encoding="utf-8")
    path = write_stage_metrics("dataset", out)
    assert path == metrics_path(out) == tmp_path / "data" / "datasets" / "mlm.metrics.json"
    assert json.loads(path.read_text(encoding="utf-8")) == {
        "train": {"examples": 10, "mask_rate": 0.149, "input_length": {"mean": 7.5}}}
    assert write_stage_metrics("pretrain", out) is None  # training stages report through their own metrics


def test_clean_metrics_count_each_drop_reason(tmp_path):
    out = tmp_path / "clean"
    out.mkdir()
    (out / "stats.json").write_text(json.dumps({
        "documents_in": 10, "documents_out": 7, "documents_kept_fraction": 0.7, "bytes_in": 100, "bytes_out": 60,
        "bytes_kept_fraction": 0.6, "dropped": {"bad_words": {"documents": 2, "bytes": 30},
                                                "too_few_sentences": {"documents": 1, "bytes": 10}},
        "lines_removed": {"line:too_few_words": 4}, "params": {"output": "clean"},
    }), encoding="utf-8")
    m = json.loads(write_stage_metrics("clean", out).read_text(encoding="utf-8"))
    assert m["documents_out"] == 7 and m["dropped_documents"] == {"bad_words": 2, "too_few_sentences": 1}
    assert m["lines_removed"] == {"line:too_few_words": 4} and "params" not in m
