"""Weighted mixtures of the corpus's sources in the token store's train split (tokenize.mixture)."""

import json
import random
from types import SimpleNamespace

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lmforge.artifacts import fingerprint, sha256_file
from lmforge.config import MixtureRule, Params, parse_params
from lmforge.corpus.document import SCHEMA
from lmforge.errors import ConfigError
from lmforge.stages.kinds.tokens import metadata
from lmforge.stages.metrics import write_stage_metrics
from lmforge.testing.documents import page
from lmforge.tokenization.mixture import plan, rule_of
from lmforge.tokenization.store import TokenStore
from lmforge.tokenization.tokenizer_stage import run_tokenizer
from lmforge.tokenization.tokens_stage import run_tokens
from lmforge.tokenization.train import tokenizer_sha256

SPLITS = ("train", "validation", "test")
# 160 documents from one source, 120 + 80 from two files under one folder
SOURCES = {"alpha": 160, "beta/x.jsonl": 120, "beta/y.jsonl": 80}


def _corpus(directory):
    rng = random.Random(3)
    ids, texts, sources = [], [], []
    for source, n in SOURCES.items():
        for i in range(n):
            ids.append(f"{source}#{i}")
            texts.append(page(rng, lines=rng.randint(1, 4)))
            sources.append(source)
    order = list(range(len(ids)))
    random.Random(5).shuffle(order)  # the sources interleaved, over two shards
    directory.mkdir(parents=True)
    shards = {}
    for k, part in enumerate((order[: len(order) // 2], order[len(order) // 2:])):
        n = len(part)
        table = pa.Table.from_pydict({"id": [ids[i] for i in part], "text": [texts[i] for i in part], "url": [None] * n,
                                      "timestamp": [None] * n, "source": [sources[i] for i in part],
                                      "metadata": ["{}"] * n}, schema=SCHEMA)
        path = directory / f"shard-{k:05d}.parquet"
        pq.write_table(table, path)
        shards[path.name] = sha256_file(path)
    (directory / "stats.json").write_text(json.dumps({"shards": shards}))
    return dict(zip(ids, sources))


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """A two-shard clean corpus of three sources and a trained BPE tokenizer; ``build(name, mixture)``
    builds the store into its own output folder and returns (store, log lines)."""
    tmp = tmp_path_factory.mktemp("mix")
    source_of = _corpus(tmp / "clean")
    base = {"clean": {"output": str(tmp / "clean")}, "split": {"validation": 0.15, "test": 0.15},
            "tokenizer": {"output": str(tmp / "tokenizers"), "kinds": ["bpe"], "bpe": {"vocab_size": 400}}}
    run_tokenizer(Params.model_validate(base), ["bpe"], log=lambda m: None)

    def params(name, mixture=None, seed=0):
        tokenize = {"output": str(tmp / "tokens" / name), "batch_size": 50}
        if mixture is not None:
            tokenize.update(mixture=mixture, mixture_seed=seed)
        return Params.model_validate({**base, "tokenize": tokenize})

    def build(name, mixture=None, seed=0):
        logs = []
        run_tokens(params(name, mixture, seed), "bpe", log=logs.append)
        return TokenStore(tmp / "tokens" / name / "bpe"), logs

    return SimpleNamespace(tmp=tmp, source_of=source_of, params=params, build=build, plain=build("plain")[0])


def counted(store, source_of, split="train"):
    """Documents and tokens per source, counted from the store's arrays and ids."""
    arrays = store.split(split)
    lengths = np.diff(np.asarray(arrays.doc_offsets))
    docs, tokens = {}, {}
    for doc_id, n in zip(arrays.doc_ids(), lengths):
        s = source_of[doc_id]
        docs[s] = docs.get(s, 0) + 1
        tokens[s] = tokens.get(s, 0) + int(n)
    return docs, tokens


def files(store, split):
    return {name: f["sha256"] for name, f in store.manifest["splits"][split]["files"].items()}


def test_no_mixture_keeps_the_store_and_its_fingerprint_as_they_were(project):
    m = project.plain.manifest
    tok = project.tmp / "tokenizers" / "bpe"
    shards = json.loads((project.tmp / "clean" / "stats.json").read_text())["shards"]
    # the fingerprint of a store built before mixtures existed: an existing store stays up to date
    assert m["fingerprint"] == fingerprint("bpe", tokenizer_sha256(tok), shards, m["split"])
    assert "mixture" not in m
    assert sorted(p.name for p in project.plain.path.iterdir()) == ["manifest.json", "test", "train", "validation"]
    assert sorted(p.name for p in (project.plain.path / "train").iterdir()) == \
        ["doc_ids.jsonl", "doc_offsets.bin", "flags.bin", "tokens.bin"]


def test_weights_of_one_give_the_store_without_a_mixture(project):
    store, _ = project.build("ones", {"alpha": {"weight": 1}, "beta": {"weight": 1.0}})
    for split in SPLITS:
        assert files(store, split) == files(project.plain, split)
    assert store.manifest["fingerprint"] != project.plain.manifest["fingerprint"]  # the parameters differ
    assert {n: e["realised_share"] for n, e in store.manifest["mixture"]["sources"].items()} == \
        {n: e["share_before"] for n, e in store.manifest["mixture"]["sources"].items()}


def test_weight_two_doubles_a_source_exactly_and_leaves_validation_and_test_alone(project):
    store, logs = project.build("double", {"alpha": {"weight": 2}})
    docs0, tokens0 = counted(project.plain, project.source_of)
    docs, tokens = counted(store, project.source_of)
    assert docs["alpha"] == 2 * docs0["alpha"] and tokens["alpha"] == 2 * tokens0["alpha"]
    assert (docs["beta/x.jsonl"], tokens["beta/y.jsonl"]) == (docs0["beta/x.jsonl"], tokens0["beta/y.jsonl"])
    assert store.manifest["splits"]["train"]["tokens"] == project.plain.manifest["splits"]["train"]["tokens"] + tokens0["alpha"]
    for split in ("validation", "test"):
        assert files(store, split) == files(project.plain, split)
    # the first pass is the corpus as it was: the copies follow it
    plain_train = project.plain.split("train")
    n = len(plain_train.tokens)
    assert np.array_equal(store.split("train").tokens[:n], plain_train.tokens)
    assert any("tokenize.mixture sampled and wrote the train split" in line for line in logs)
    summary = store.summary().splitlines()
    assert summary[4].startswith("  train split by source (tokenize.mixture")
    row = next(line for line in summary if line.strip().startswith("alpha"))
    assert row.split()[1:6] == ["2", "-", f"{docs0['alpha']:,}", f"{docs['alpha']:,}", f"{tokens0['alpha']:,}"]


def test_an_objective_reads_a_weighted_store(project):
    from lmforge.datasets.open import ObjectiveDataset, open_objective

    store, _ = project.build("double", {"alpha": {"weight": 2}})
    sizes = {}
    for name in ("plain", "double"):
        params = project.params(name, {"alpha": {"weight": 2}} if name == "double" else None)
        data = ObjectiveDataset(open_objective(params, "clm"), seed=0)
        sizes[name] = len(data)
        assert data[len(data) - 1]["input_ids"].size > 0
    blocks = sizes["double"] / sizes["plain"]
    assert blocks == pytest.approx(store.manifest["splits"]["train"]["tokens"]
                                   / project.plain.manifest["splits"]["train"]["tokens"], rel=0.05)


def test_half_a_source_is_a_deterministic_half_of_its_documents(project):
    a, _ = project.build("half", {"alpha": {"weight": 0.5}})
    b, _ = project.build("half-again", {"alpha": {"weight": 0.5}})
    c, _ = project.build("half-seed", {"alpha": {"weight": 0.5}}, seed=7)
    docs0, _ = counted(project.plain, project.source_of)
    docs, _ = counted(a, project.source_of)
    assert docs["alpha"] == round(docs0["alpha"] / 2)
    assert docs["beta/x.jsonl"] == docs0["beta/x.jsonl"]
    assert files(a, "train") == files(b, "train")  # same parameters, same bytes
    ids = {s: set(x.split("train").doc_ids()) for s, x in (("a", a), ("c", c))}
    assert ids["a"] != ids["c"] and len(ids["a"]) == len(ids["c"])  # another seed, another half
    assert len(set(a.split("train").doc_ids())) == a.split("train").documents  # no document twice


def test_max_tokens_caps_a_source_in_its_order(project):
    cap = 1500
    store, _ = project.build("cap", {"beta/x.jsonl": {"max_tokens": cap}})
    _, tokens = counted(store, project.source_of)
    _, tokens0 = counted(project.plain, project.source_of)
    arrays = project.plain.split("train")
    longest = int(np.diff(np.asarray(arrays.doc_offsets)).max())
    assert tokens0["beta/x.jsonl"] > cap >= tokens["beta/x.jsonl"] > cap - longest
    assert tokens["alpha"] == tokens0["alpha"]
    entry = store.manifest["mixture"]["sources"]["beta/x.jsonl"]
    assert entry["tokens_after"] == tokens["beta/x.jsonl"] and entry["max_tokens"] == cap


def test_the_manifests_shares_match_a_count_of_the_store(project):
    store, _ = project.build("mixed", {"alpha": {"weight": 2.5}, "beta": {"weight": 0.3, "max_tokens": 2000}})
    docs, tokens = counted(store, project.source_of)
    docs0, tokens0 = counted(project.plain, project.source_of)
    mixture = store.manifest["mixture"]["sources"]
    assert sorted(mixture) == ["alpha", "beta"]  # a folder's sources together
    assert mixture["beta"]["sources"] == ["beta/x.jsonl", "beta/y.jsonl"]
    beta = tokens["beta/x.jsonl"] + tokens["beta/y.jsonl"]
    total = tokens["alpha"] + beta
    assert total == store.manifest["splits"]["train"]["tokens"]
    assert mixture["alpha"]["realised_share"] == pytest.approx(tokens["alpha"] / total, abs=1e-6)
    assert mixture["beta"]["realised_share"] == pytest.approx(beta / total, abs=1e-6)
    assert mixture["alpha"]["documents_after"] == docs["alpha"] == docs0["alpha"] * 2 + round(docs0["alpha"] / 2)
    assert mixture["alpha"]["tokens_before"] == tokens0["alpha"]
    target_beta = min(0.3 * (tokens0["beta/x.jsonl"] + tokens0["beta/y.jsonl"]), 2000)
    assert mixture["beta"]["target_share"] == pytest.approx(target_beta / (2.5 * tokens0["alpha"] + target_beta), abs=1e-6)
    # the chart beside the store, Dagster's table and DVC's metrics
    assert (store.path / "mixture.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    meta = metadata(SimpleNamespace(key={"kind": "bpe"}), None, store.path)
    assert [row[0] for row in meta["train_by_source"].rows] == ["alpha", "beta"]
    assert meta["train_by_source"].rows[0][-1] == f"{mixture['alpha']['realised_share']:.1%}"
    assert meta["mixture"].path == store.path / "mixture.png"
    metrics = json.loads(write_stage_metrics("tokens", store.path).read_text())
    assert metrics["mixture"]["alpha"]["realised_share"] == mixture["alpha"]["realised_share"]


def test_an_unknown_source_is_refused_naming_the_known_ones(project):
    with pytest.raises(ConfigError, match=r"unknown source 'gamma'; the clean corpus's sources are 'alpha', "
                                          r"'beta/x.jsonl', 'beta/y.jsonl'"):
        project.build("unknown", {"alpha": {"weight": 2}, "gamma": {"weight": 2}})
    assert not (project.tmp / "tokens" / "unknown").exists()  # refused before any work


def test_a_changed_weight_rebuilds_the_store(project):
    _, logs = project.build("again", {"alpha": {"weight": 2}})
    _, logs = project.build("again", {"alpha": {"weight": 2}})
    assert logs == ["token store bpe: up to date"]
    store, logs = project.build("again", {"alpha": {"weight": 3}})
    assert logs != ["token store bpe: up to date"]
    assert store.manifest["mixture"]["sources"]["alpha"]["weight"] == 3


def test_the_rules_are_validated():
    for bad in ({"alpha": {}}, {"alpha": {"weight": -1}}, {"alpha": {"max_tokens": 0}}, {"alpha": {"wieght": 2}},
                {" alpha": {"weight": 2}}):
        with pytest.raises(ConfigError, match=r"params.yaml: invalid .*tokenize\.mixture"):
            parse_params({"tokenize": {"mixture": bad}}, "params.yaml")


def test_plan_takes_fractions_of_a_source_exactly():
    ids = [f"d{i}" for i in range(101)]
    copies, report = plan(ids, ["a"] * 101, np.full(101, 10), {"a": MixtureRule(weight=2.5)}, seed=0)
    assert set(copies.tolist()) == {2, 3} and int((copies == 3).sum()) == 51  # round(0.5 * 101), half up
    assert report["a"]["tokens_after"] == 10 * int(copies.sum()) == 2530
    copies, _ = plan(ids, ["a"] * 101, np.full(101, 10), {"a": MixtureRule(weight=0.0)}, seed=0)
    assert not copies.any()
    # a cap through the passes: every first copy (1010 tokens), then second copies up to 1500
    copies, _ = plan(ids, ["a"] * 101, np.full(101, 10), {"a": MixtureRule(weight=3, max_tokens=1505)}, seed=0)
    assert int(copies.sum()) == 150 and set(copies.tolist()) == {1, 2}


def test_a_source_falls_under_the_longest_key_that_names_it():
    keys = ["data", "data/web", "data/web/a.jsonl"]
    assert rule_of("data/web/a.jsonl", keys) == "data/web/a.jsonl"
    assert rule_of("data/web/b.jsonl", keys) == "data/web"
    assert rule_of("data/books.txt", keys) == "data"
    assert rule_of("database.txt", keys) is None and rule_of("stdlib", keys) is None
