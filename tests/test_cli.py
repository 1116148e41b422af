"""The lmforge CLI: flags override params.yaml, errors are one clear line, stats are printed."""

import json
import random
import subprocess
import sys

import pytest
from click.testing import CliRunner

from lmforge.cli import main
from lmforge.testing.documents import page, write_jsonl


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
    assert res.exit_code == 2 and "parameters file not found" in res.output  # a usage error: nothing ran
    res = runner.invoke(main, ["clean", "-i", str(tmp_path / "missing.jsonl"), "-o", str(tmp_path / "o")])
    assert res.exit_code == 1 and "missing.jsonl: input path not found" in res.output  # the clean stage failed
    res = runner.invoke(main, ["clean", "--set", "clean.rules.min_sentences=zero", "-o", str(tmp_path / "o")])
    assert res.exit_code == 2 and "clean.rules.min_sentences" in res.output
    assert not (tmp_path / "o" / "stats.json").exists()


def test_tokenizer_and_tokenize_commands(tmp_path):
    from .tokenization.conftest import small_corpus, write_clean

    write_clean(tmp_path / "clean", small_corpus(80))
    params = tmp_path / "params.yaml"
    params.write_text(
        f"clean: {{output: {tmp_path / 'clean'}}}\n"
        f"tokenizer: {{output: {tmp_path / 'tok'}, bpe: {{vocab_size: 400}}}}\n"
        f"tokenize: {{output: {tmp_path / 'tokens'}}}\n"
    )
    runner = CliRunner()
    res = runner.invoke(main, ["tokenizer", "--kind", "bpe", "--params", str(params)])
    assert res.exit_code == 0, res.output
    assert "bpe" in res.output and "round trip" in res.output
    res = runner.invoke(main, ["tokenize", "--kind", "bpe", "--params", str(params)])
    assert res.exit_code == 0, res.output
    assert "token store bpe" in res.output and "train" in res.output
    res = runner.invoke(main, ["tokenize", "--kind", "wordpiece", "--params", str(params)])
    assert res.exit_code == 1 and "no trained wordpiece tokenizer" in res.output  # the tokenize stage failed
    res = runner.invoke(main, ["tokenizer", "--kind", "bogus", "--params", str(params)])
    assert res.exit_code == 2 and "bogus" in res.output


@pytest.mark.slow
def test_run_executes_every_stage_end_to_end(tmp_path):
    """`lmforge run` as `make run` calls it, on a small corpus: clean, tokenizers, token stores, datasets."""
    rng = random.Random(1)
    src = write_jsonl(tmp_path / "c.jsonl", [{"id": f"d{i}", "text": page(rng)} for i in range(150)])
    (tmp_path / "params.yaml").write_text(
        f"clean: {{inputs: [{src}], workers: 1}}\n"
        "tokenizer: {bpe: {vocab_size: 500}, wordpiece: {vocab_size: 400}, unigram: {vocab_size: 300, sentinels: 10}, char: {word_vocab_size: 200}}\n"
        "dataset: {span_corruption: {input_length: 128}, segments: {batch_size: 4}, statistics_examples: 50}\n"
        "train: {architectures: []}\n"  # the data stages only; tests/training runs the training stages
    )
    res = subprocess.run([sys.executable, "-m", "lmforge.cli", "run"], cwd=tmp_path, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert "documents: 150 in" in res.stdout
    for kind in ("bpe", "wordpiece", "unigram", "char"):
        assert (tmp_path / "data" / "tokenizers" / kind / "tokenizer.json").exists()
        manifest = json.loads((tmp_path / "data" / "tokens" / kind / "manifest.json").read_text())
        assert sum(s["documents"] for s in manifest["splits"].values()) == json.loads(
            (tmp_path / "data" / "clean" / "stats.json").read_text())["documents_out"]
    again = subprocess.run([sys.executable, "-m", "lmforge.cli", "run"], cwd=tmp_path, capture_output=True, text=True)
    for name in ("clm", "mlm", "mlm_nsp", "mlm_sop", "knowledge_mlm", "span_corruption", "denoising", "permutation", "segments", "bilm"):
        stats = json.loads((tmp_path / "data" / "datasets" / name / "stats.json").read_text())
        assert stats["splits"]["train"]["examples_per_epoch"] > 0, name
    assert again.returncode == 0 and again.stderr.count("up to date") == 19  # clean + 4 tokenizers + 4 stores + 10 datasets


def test_quiet_keeps_the_results_and_the_errors_only(tmp_path, monkeypatch):
    import random
    import re

    from lmforge.testing.documents import page, write_jsonl

    monkeypatch.setenv("LMFORGE_VERBOSITY", "normal")  # the option sets it; restored after the test
    rng = random.Random(5)
    write_jsonl(tmp_path / "in.jsonl", [{"id": f"d{i}", "text": page(rng)} for i in range(60)])
    runner = CliRunner()
    common = ["clean", "-i", str(tmp_path / "in.jsonl"), "--workers", "1", "--set", "clean.near_dedup.enabled=false"]
    loud = runner.invoke(main, [*common, "-o", str(tmp_path / "a")])
    assert loud.exit_code == 0 and "clean: filter shard: 1/1 units (" in loud.stderr and "ingest:" in loud.stderr
    quiet = runner.invoke(main, [*common, "-o", str(tmp_path / "b"), "--quiet"])
    timeless = lambda text: re.sub(r" in [\d.]+s", "", text)  # noqa: E731
    assert quiet.exit_code == 0 and quiet.stderr == ""
    assert timeless(quiet.stdout) == timeless(loud.stdout).replace("/a", "/b")  # the same results
    bad = runner.invoke(main, ["clean", "-i", str(tmp_path / "missing.jsonl"), "-o", str(tmp_path / "c"), "-q"])
    assert bad.exit_code == 1 and bad.stderr.startswith("error: ") and len(bad.stderr.splitlines()) == 1


def test_finetune_refuses_an_architecture_named_for_a_family_it_does_not_take(tmp_path, monkeypatch):
    """bert named for a generation task is one error; from the defaults the pair is skipped with a line."""
    from lmforge.cli import stages as stage_commands

    monkeypatch.chdir(tmp_path)
    (tmp_path / "params.yaml").write_text("train:\n  architectures: [bert, t5]\n", encoding="utf-8")
    res = CliRunner().invoke(main, ["finetune", "bert", "--task", "docstring_summary"])
    assert res.exit_code == 2
    assert "bert does not fine-tune on docstring_summary, a generation task" in res.output
    ran: list = []
    monkeypatch.setattr(stage_commands, "_run_stages", lambda params, select=None, force=False: ran.append(params.train.architectures))
    res = CliRunner().invoke(main, ["finetune", "--task", "docstring_summary"])
    assert res.exit_code == 0 and ran == [["bert", "t5"]]  # the graph leaves bert's stage out
    assert "finetune: skipped: bert does not fine-tune on docstring_summary" in res.output
