"""``lmforge status``: never run, done after a recorded run, and after a parameter changes the
stage that reads it and the stages downstream of it stale, those upstream still done."""

from __future__ import annotations

import json
import os
import subprocess

import yaml
from click.testing import CliRunner

from lmforge.cli import main

from .test_dagster import DVC, dvc_init, make_project


def _states(runner) -> dict[str, dict]:
    res = runner.invoke(main, ["status", "--json"])
    assert res.exit_code == 0, res.output
    return {s["name"]: s for s in json.loads(res.output)}


def test_status_follows_runs_and_parameter_changes(tmp_path, monkeypatch):
    root = make_project(tmp_path / "project")
    dvc_init(root)
    monkeypatch.chdir(root)
    runner = CliRunner()
    before = _states(runner)
    assert {s["state"] for s in before.values()} == {"never run"}
    assert {"clean", "tokenizer_bpe", "tokens_bpe", "pretrain_gpt", "report"} <= set(before)

    for command in (["clean"], ["tokenizer", "--kind", "bpe"], ["tokenize", "--kind", "bpe"]):
        res = runner.invoke(main, command)
        assert res.exit_code == 0, res.output
    subprocess.run([DVC, "commit", "--force", "clean", "tokenizer_bpe", "tokens_bpe"], cwd=root, check=True,
                   capture_output=True, env={**os.environ, "DVC_NO_ANALYTICS": "1"})
    done = _states(runner)
    assert [done[n]["state"] for n in ("clean", "tokenizer_bpe", "tokens_bpe")] == ["done"] * 3
    assert done["clean"]["finished"] and done["pretrain_gpt"]["state"] == "never run"

    params = yaml.safe_load((root / "params.yaml").read_text())
    params["tokenizer"]["bpe"]["vocab_size"] += 50
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    after = _states(runner)
    assert after["clean"]["state"] == "done"  # upstream of the change
    assert after["tokenizer_bpe"]["state"] == "stale" and "parameters: tokenizer.bpe" in after["tokenizer_bpe"]["reason"]
    assert after["tokens_bpe"] == {**after["tokens_bpe"], "state": "stale", "reason": "upstream tokenizer_bpe is stale"}
    assert after["pretrain_gpt"]["state"] == "never run"

    table = runner.invoke(main, ["status"]).output.splitlines()
    assert table[0].split() == ["stage", "state", "written", "why"]
    assert any(line.split()[:2] == ["tokenizer_bpe", "stale"] for line in table)
    assert "1 done, 2 stale" in table[-1]
