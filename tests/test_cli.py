"""The lmforge CLI: flags override params.yaml, errors are one clear line, stats are printed."""

import json
import random

from click.testing import CliRunner

from lmforge.cli import main

from .cleaning.corpus_gen import page, write_jsonl


def test_clean_flags_override_params(tmp_path):
    rng = random.Random(0)
    src = write_jsonl(tmp_path / "c.jsonl", [{"id": f"d{i}", "text": page(rng)} for i in range(5)])
    params = tmp_path / "params.yaml"
    params.write_text("clean:\n  output: should-not-be-used\n  workers: 1\n")
    out = tmp_path / "out"
    res = CliRunner().invoke(main, ["clean", "-i", src, "-o", str(out), "--params", str(params), "--set", "clean.near_dedup.enabled=false"])
    assert res.exit_code == 0, res.output
    assert "documents: 5 in, 5 out" in res.output
    stats = json.loads((out / "stats.json").read_text())
    assert stats["params"]["inputs"] == [src] and stats["params"]["near_dedup"]["enabled"] is False
    assert not (tmp_path / "should-not-be-used").exists()


def test_clean_errors_are_clear(tmp_path):
    runner = CliRunner()
    res = runner.invoke(main, ["clean", "-i", str(tmp_path / "missing.jsonl"), "-o", str(tmp_path / "o"), "--params", str(tmp_path / "none.yaml")])
    assert res.exit_code == 2 and "parameters file not found" in res.output
    res = runner.invoke(main, ["clean", "-i", str(tmp_path / "missing.jsonl"), "-o", str(tmp_path / "o")])
    assert res.exit_code == 2 and "missing.jsonl: input path not found" in res.output
    res = runner.invoke(main, ["clean", "--set", "clean.rules.min_sentences=zero", "-o", str(tmp_path / "o")])
    assert res.exit_code == 2 and "clean.rules.min_sentences" in res.output
    assert not (tmp_path / "o" / "stats.json").exists()
