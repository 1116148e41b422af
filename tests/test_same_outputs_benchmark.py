"""benchmarks/same_outputs.py: two runs' outputs compared, the timing fields left out."""

from __future__ import annotations

import json

from .conftest import load_benchmark


def _write(root, rel, content):
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content if isinstance(content, bytes) else content.encode())


def test_runs_that_differ_only_in_timing_are_the_same_and_a_changed_loss_is_named(tmp_path):
    same = load_benchmark("same_outputs")
    a, b = tmp_path / "a", tmp_path / "b"
    for root, seconds, loss in ((a, 1.5, 2.25), (b, 9.0, 2.25)):
        _write(root, "data/clean/stats.json", json.dumps({"kept": 10, "seconds": seconds, "path": str(root / "data")}))
        _write(root, "models/gpt/pretrain/history.csv", f"step,loss,tokens_per_second\n1,{loss},{seconds * 100}\n")
        _write(root, "models/gpt/pretrain/model.bin", b"\x00\x01")
        _write(root, "models/gpt/.pretrain.attempts/x/last.ckpt", str(seconds))
    _write(b, "models/gpt/pretrain/metrics.json", json.dumps({"loss": 2.5, "timings": {"fit": 3}}))
    _write(a, "models/gpt/pretrain/metrics.json", json.dumps({"loss": 2.25, "timings": {"fit": 1}}))
    result = same.compare(a, b, ["data", "models"])
    assert result["identical"] == ["models/gpt/pretrain/model.bin"]
    assert sorted(result["same values"]) == ["data/clean/stats.json", "models/gpt/pretrain/history.csv"]
    assert result["differs"] == ["models/gpt/pretrain/metrics.json: /loss: 2.25 vs 2.5"]
    assert same.main([str(a), str(b)]) == 1
    _write(b, "models/gpt/pretrain/metrics.json", json.dumps({"loss": 2.25, "timings": {"fit": 3}}))
    assert same.main([str(a), str(b)]) == 0
