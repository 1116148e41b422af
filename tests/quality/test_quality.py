"""The quality classifier filter: a reference set of one style against a corpus that mixes that
style with another. The classifier tells them apart (held-out accuracy from the run), the
reference-like documents rank first, keep_fraction is exact, every document's score is stored,
the graph without it is today's, and a bad configuration is one clear error."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import yaml
from click.testing import CliRunner

from lmforge import layout
from lmforge.artifacts import atomic_write_json, sha256_file
from lmforge.cleaning.quality import keep_mask
from lmforge.cleaning.quality_stage import run_quality
from lmforge.cleaning.shards import docs_to_table
from lmforge.cleaning.storage import write_parquet
from lmforge.cli import main
from lmforge.config import ConfigError, QualityConfig, parse_params
from lmforge.corpus.document import SCHEMA, Document
from lmforge.stages import KINDS, build_stages, dvc_yaml
from lmforge.testing.documents import page, write_jsonl

from ..orchestration.conftest import REPO, dvc_graph_of, graph_project, tiny_params

# the "manual" style: short imperative sentences about options, files and commands
MANUAL = ("option file command directory argument value returns default sets prints output input mode flag path "
          "name list string number line buffer function variable format device archive permission owner").split()
VERBS = ("use", "set", "give", "pass", "print", "list", "copy", "remove", "read", "write")


def manual_page(rng: random.Random, sentences: int = 6) -> str:
    lines = []
    for _ in range(sentences):
        words = [rng.choice(MANUAL) for _ in range(rng.randint(4, 8))]
        lines.append(f"{rng.choice(VERBS).capitalize()} the {' '.join(words)} with the --{rng.choice(MANUAL)} option.")
    return "\n".join(lines)


def write_clean(folder: Path, docs: list[tuple[str, str]], shard_size: int = 70) -> None:
    """A clean stage's output as the quality stage reads it: shards and stats.json's checksums."""
    folder.mkdir(parents=True)
    shards = {}
    for s, start in enumerate(range(0, len(docs), shard_size)):
        chunk = [Document(id=i, text=t, source="corpus.jsonl", metadata={"n": k})
                 for k, (i, t) in enumerate(docs[start:start + shard_size])]
        name = f"shard-{s:05d}.parquet"
        write_parquet(folder / name, docs_to_table(chunk, [], schema=SCHEMA))
        shards[name] = sha256_file(folder / name)
    atomic_write_json(folder / "stats.json", {"shards": shards, "fingerprint": "test"})


def mixed_corpus(root: Path, manual: int = 60, other: int = 140, reference: int = 120, seed: int = 3) -> Path:
    """``root/clean``: ``manual`` manual-style documents (ids m...) among ``other`` generic ones (g...),
    shuffled; ``root/reference.jsonl``: ``reference`` more manual-style documents."""
    rng = random.Random(seed)
    docs = [(f"m{i:03d}", manual_page(rng)) for i in range(manual)] + [(f"g{i:03d}", page(rng, lines=6)) for i in range(other)]
    rng.shuffle(docs)
    write_clean(root / "clean", docs)
    write_jsonl(root / "reference.jsonl", [{"id": f"r{i}", "text": manual_page(rng)} for i in range(reference)])
    return root


def quality_params(root: Path, **quality) -> object:
    settings = {"enabled": True, "reference": [str(root / "reference.jsonl")], "output": str(root / "quality"),
                "keep_fraction": 0.3, **quality}
    return parse_params({"clean": {"output": str(root / "clean")}, "quality": settings})


def rows(folder: Path) -> list[dict]:
    return [r for f in sorted(folder.glob("shard-*.parquet")) for r in pq.read_table(f).to_pylist()]


def test_the_classifier_separates_the_styles_and_keeps_the_reference_like_documents(tmp_path):
    root = mixed_corpus(tmp_path)
    logs: list[str] = []
    result = run_quality(quality_params(root), log=logs.append)
    stats = result.stats
    v = stats["classifier"]["validation"]
    # held out: the reference against the corpus, 30% of which is reference-like (labelled corpus): a
    # perfect ranking of styles scores (1 + 0.7) / 2 = 0.85 balanced; chance is 0.5
    assert v["balanced_accuracy"] >= 0.75 and v["auc"] >= 0.8, v
    assert v["documents"] == {"reference_train": 96, "reference_held_out": 24, "corpus_train": 160, "corpus_held_out": 40}

    kept = rows(root / "quality")
    assert len(kept) == stats["documents_out"] == 60 and stats["documents_in"] == 200  # round(0.3 * 200), exactly
    manual_kept = sum(r["id"].startswith("m") for r in kept)
    assert manual_kept >= 57, sorted(r["id"] for r in kept)
    # the same columns as the clean shards; the score added to each document's metadata
    assert pq.read_schema(next((root / "quality").glob("shard-*.parquet"))).names == SCHEMA.names
    scores = pq.read_table(root / "quality" / "scores.parquet").to_pylist()
    assert len(scores) == 200 and sum(s["kept"] for s in scores) == 60
    by_id = {s["id"]: s for s in scores}
    for r in kept:
        meta = json.loads(r["metadata"])
        assert meta["quality_score"] == pytest.approx(by_id[r["id"]]["score"], abs=1e-6) and "n" in meta
    lowest_kept = min(s["score"] for s in scores if s["kept"])
    assert all(s["score"] <= lowest_kept for s in scores if not s["kept"])
    assert stats["cut_score"] == pytest.approx(lowest_kept, abs=1e-6)

    # the saved model is the one that scored: loaded, it gives the stored scores
    import joblib

    model = joblib.load(root / "quality" / "model.joblib")
    first = sorted(by_id)[:5]
    texts = {r["id"]: r["text"] for f in sorted((root / "clean").glob("shard-*.parquet")) for r in pq.read_table(f).to_pylist()}
    np.testing.assert_allclose(model.predict_proba([texts[i] for i in first])[:, 1], [by_id[i]["score"] for i in first], atol=1e-6)
    assert stats["classifier"]["sklearn_version"] == __import__("sklearn").__version__

    # samples: kept ones from the top down, dropped ones below them; the n-grams it leans on are the manual's
    kept_samples = [json.loads(x) for x in (root / "quality" / "samples" / "kept.jsonl").read_text().splitlines()]
    dropped_samples = [json.loads(x) for x in (root / "quality" / "samples" / "dropped.jsonl").read_text().splitlines()]
    assert len(kept_samples) == len(dropped_samples) == 20
    assert kept_samples[0]["rank"] == 0 and dropped_samples[-1]["rank"] == 199
    assert kept_samples[0]["id"].startswith("m") and dropped_samples[-1]["id"].startswith("g")
    towards_reference = [g for g, _ in stats["classifier"]["top_features"]["reference"]]
    assert set(towards_reference[:5]) & set(MANUAL + ["option", "the"]), towards_reference
    assert (root / "quality" / "scores.png").stat().st_size > 1000
    assert any("held-out accuracy" in line for line in logs)

    # a second run with nothing changed does nothing
    again = run_quality(quality_params(root), log=logs.append)
    assert again.skipped and again.stats["shards"] == stats["shards"]


def test_keep_fraction_is_exact_with_ties_broken_by_id_and_the_threshold_keeps_by_score():
    scores = np.array([0.9, 0.5, 0.5, 0.5, 0.1, 0.5])
    ids = ["a", "d", "b", "c", "e", "f"]
    cfg = QualityConfig(keep_fraction=0.5)
    assert keep_mask(scores, ids, cfg).tolist() == [True, False, True, True, False, False]  # 3 of 6: a, then b, c
    for fraction, n in ((1.0, 6), (0.01, 1), (0.34, 2)):  # round(f * n), at least one
        assert keep_mask(scores, ids, QualityConfig(keep_fraction=fraction)).sum() == n
    assert keep_mask(scores, ids, QualityConfig(keep_fraction=None, threshold=0.5)).tolist() == [True, True, True, True, False, True]


def test_near_chance_accuracy_is_a_warning_not_a_failure(tmp_path):
    """A reference of the corpus's own style: nothing to learn, and the check says so."""
    rng = random.Random(5)
    write_clean(tmp_path / "clean", [(f"g{i:03d}", page(rng, lines=6)) for i in range(120)])
    write_jsonl(tmp_path / "reference.jsonl", [{"id": f"r{i}", "text": page(rng, lines=6)} for i in range(120)])
    params = quality_params(tmp_path, keep_fraction=0.5)
    stats = run_quality(params, log=lambda _: None).stats
    assert stats["classifier"]["validation"]["balanced_accuracy"] < 0.6
    assert len(rows(tmp_path / "quality")) == 60  # the filter still ran, as configured
    outcomes = {o.name: o for o in KINDS["quality"].check(None, params.model_copy(update={"checks": params.checks.model_copy(
        update={"clean_min_documents": 10})}), tmp_path / "quality")}
    assert outcomes["not_empty"].passed
    assert not outcomes["classifier_accuracy"].passed and outcomes["classifier_accuracy"].severity == "warn"
    assert "chance" in outcomes["classifier_accuracy"].description
    spec = next(s for s in KINDS["quality"].checks if s.name == "classifier_accuracy")
    assert not spec.blocking and spec.severity == "warn"


# ----------------------------------------------------------------------------- the graph


def test_disabled_the_graph_and_dvc_yaml_are_todays(tmp_path):
    """quality.enabled false (the default): whatever else the section says, no quality stage, the
    tokenizers read the clean output, and dvc.yaml is the committed one."""
    default = build_stages(root=REPO)
    assert "quality" not in default.stages
    assert dvc_yaml(default) == (REPO / "dvc.yaml").read_text(encoding="utf-8")
    data = yaml.safe_load((REPO / "params.yaml").read_text(encoding="utf-8"))
    data["quality"].update(reference=["somewhere/manual"], keep_fraction=0.2, output="data/elsewhere")
    params = parse_params(data)
    assert layout.corpus_dir(params) == layout.clean_dir(params)
    assert dvc_yaml(build_stages(params, root=REPO)) == dvc_yaml(default)


def test_enabled_the_stages_after_clean_read_its_output(tmp_path):
    graph_root = tmp_path
    (graph_root / "manual").mkdir()
    params = graph_project(graph_root, quality={"enabled": True, "reference": ["manual"]},
                           evaluate={"harness": ["docstring_next"]}, finetune={"tasks": ["docstring_kind"]})
    graph = build_stages(params, root=graph_root)
    names = list(graph.stages)
    assert names[:2] == ["clean", "quality"]
    q = graph["quality"]
    assert q.upstream == ("clean",) and q.deps[:2] == ("data/clean", "manual") and q.paths[0] == "data/quality"
    assert graph["tokenizer_bpe"].upstream == ("quality",) and graph["tokenizer_bpe"].deps[0] == "data/quality"
    assert graph["tokens_bpe"].upstream[0] == "quality" and "data/quality" in graph["tokens_bpe"].deps
    assert "quality" in graph["finetune_gpt_docstring_kind"].upstream
    assert "data/quality" in graph["finetune_gpt_docstring_kind"].deps
    assert "quality" in graph["evaluate_gpt"].upstream
    assert layout.corpus_dir(params) == Path("data/quality")
    # DVC derives the same edges from the paths as the graph declares
    from lmforge.stages import dvc_stages

    nodes, edges = dvc_graph_of(dvc_stages(graph)["stages"])
    assert ("clean", "quality") in edges and ("quality", "tokenizer_bpe") in edges and ("clean", "tokenizer_bpe") not in edges
    assert edges == graph.edges()


# ----------------------------------------------------------------------------- bad configuration


@pytest.mark.parametrize("quality, message", [
    ({"enabled": True}, "quality: enabled, but no reference documents"),
    ({"keep_fraction": 0}, "quality.keep_fraction: Input should be greater than 0"),
    ({"keep_fraction": 1.5}, "quality.keep_fraction: Input should be less than or equal to 1"),
    ({"threshold": 0.7}, "quality: set exactly one of keep_fraction and threshold"),
    ({"keep_fraction": None}, "quality: set exactly one of keep_fraction and threshold"),
    ({"refrence": ["x"]}, "quality.refrence: unknown key"),
])
def test_a_bad_quality_section_is_one_clear_error(quality, message):
    with pytest.raises(ConfigError) as err:
        parse_params({"quality": quality}, source="params.yaml")
    text = str(err.value)
    assert message in text and "\n" not in text, text


def test_a_missing_reference_or_clean_corpus_is_one_error_naming_it(tmp_path):
    from lmforge.cleaning.quality import QualityError

    params = quality_params(tmp_path)
    with pytest.raises(QualityError, match=r"clean: no clean corpus .*run `lmforge clean` first"):
        run_quality(params, log=lambda _: None)
    write_clean(tmp_path / "clean", [("a", "one document"), ("b", "another document")])
    with pytest.raises(QualityError, match=r"^quality.reference: .*reference.jsonl: input path not found$"):
        run_quality(params, log=lambda _: None)
    write_jsonl(tmp_path / "reference.jsonl", [{"id": "r", "text": "a single reference document"}])
    with pytest.raises(QualityError, match=r"the reference \(quality.reference\) has 1 non-empty document"):
        run_quality(params, log=lambda _: None)
    assert not (tmp_path / "quality").exists()


def test_the_command_runs_the_stage_and_refuses_when_disabled(tmp_path, monkeypatch):
    root = mixed_corpus(tmp_path, manual=40, other=60, reference=60)
    settings = tiny_params(clean={"output": "clean"}, quality={"reference": ["reference.jsonl"], "output": "quality"},
                           train={"architectures": []})
    (root / "params.yaml").write_text(yaml.safe_dump(settings, sort_keys=False), encoding="utf-8")
    monkeypatch.chdir(root)
    runner = CliRunner()
    res = runner.invoke(main, ["quality"])
    assert res.exit_code == 2 and "quality.enabled is false" in res.output and res.output.count("\n") == 1, res.output
    res = runner.invoke(main, ["quality", "--set", "quality.enabled=true", "--set", "quality.keep_fraction=0.25"])
    assert res.exit_code == 0, res.output
    assert "classifier (held out): accuracy" in res.output and "100 in, 25 kept (top 0.25" in res.output
    metrics = json.loads((root / "quality.metrics.json").read_text())  # DVC's metrics file beside the output
    assert metrics["documents_out"] == 25 and 0.5 < metrics["validation"]["auc"] <= 1
    shown = KINDS["quality"].metadata(None, None, root / "quality")
    assert shown["documents_out"] == 25 and "scores" in shown and shown["top_features"].rows
    # the stages after it read the filtered corpus: the token store holds its 25 documents
    enabled = ["--set", "quality.enabled=true", "--set", "quality.keep_fraction=0.25"]
    assert runner.invoke(main, ["tokenizer", "--kind", "bpe", *enabled]).exit_code == 0
    res = runner.invoke(main, ["tokenize", "--kind", "bpe", *enabled])
    assert res.exit_code == 0, res.output
    splits = json.loads((root / "data/tokens/bpe/manifest.json").read_text())["splits"]
    assert sum(split["documents"] for split in splits.values()) == 25
