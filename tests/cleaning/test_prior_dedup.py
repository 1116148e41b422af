"""Dedup against an earlier clean output (clean.near_dedup.against): the saved signatures, the
copies a later run drops and why, and the priors it refuses."""

import hashlib
import json
import random
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from lmforge.artifacts import finished
from lmforge.cleaning.dedup.exact import exact_hashes, exact_text
from lmforge.cleaning.dedup.minhash import permutation_seeds, shard_signatures
from lmforge.cleaning.dedup.prior import open_priors
from lmforge.cleaning.stage import _fingerprint, run_clean
from lmforge.config import CleanConfig, ConfigError, load_params
from lmforge.stages import build_stages
from lmforge.testing.documents import page, write_jsonl

REPO = Path(__file__).resolve().parents[2]


def clean(tmp_path, docs, name, **kw):
    kw.setdefault("workers", 1)
    kw.setdefault("line_dedup", {"mode": "off"})  # each run's line dedup would see other documents
    src = tmp_path / f"{name}.jsonl"
    if not src.exists() or src.read_text() != "".join(json.dumps(d) + "\n" for d in docs):  # same input: same mtime
        write_jsonl(src, docs)
    cfg = CleanConfig(inputs=[str(src)], output=str(tmp_path / name), **kw)
    logs = []
    result = run_clean(cfg, log=logs.append)
    rows = []
    for f in sorted((tmp_path / name).glob("shard-*.parquet")):
        rows += pq.read_table(f).to_pylist()
    return result, rows, logs


def tree_digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*"))
            if p.is_file()}


def edited(text: str, word: str) -> str:
    """The text with its middle word replaced: a near copy (5-gram Jaccard about 0.9)."""
    words = text.split(" ")
    words[len(words) // 2] = word
    return " ".join(words)


def corpora(rng):
    a = [{"id": f"a{i}", "text": page(rng, lines=6)} for i in range(10)]
    b = [{"id": "b-verbatim0", "text": a[0]["text"]},
         {"id": "b-verbatim1", "text": a[1]["text"]},
         {"id": "b-respaced", "text": a[2]["text"].replace(" ", "  ")},  # exact once whitespace is normalised
         {"id": "b-near3", "text": edited(a[3]["text"], "xylophone")},
         {"id": "b-near4", "text": edited(a[4]["text"], "marmalade")}]
    b += [{"id": f"b-new{i}", "text": page(rng, lines=6)} for i in range(5)]
    return a, b


@pytest.fixture
def prior(tmp_path):
    """Corpus A cleaned (its folder), and corpus B."""
    a, b = corpora(random.Random(41))
    result, rows, _ = clean(tmp_path, a, "A", shard_size=4)
    assert len(rows) == 10 and result.stats["deduped_against"] == []
    return tmp_path / "A", b


def test_the_output_saves_its_kept_documents_signatures_and_exact_hashes(tmp_path, prior):
    out, _ = prior
    manifest = json.loads((out / "dedup" / "manifest.json").read_text())
    assert manifest["near_dedup"] == {"ngram": 5, "bands": 14, "rows": 8, "seed": 1}
    assert manifest["documents"] == 10 and [s["documents"] for s in manifest["shards"]] == [4, 4, 2]
    texts = pq.read_table(out / "shard-00001.parquet").column("text").to_pylist()
    sigs = np.load(out / "dedup" / "sig-shard-00001.npy")
    assert sigs.shape == (4, 14 * 8) and sigs.dtype == np.uint32  # each MinHash value's low 32 bits
    full, _ = shard_signatures(texts, 5, permutation_seeds(14 * 8, 1))
    assert np.array_equal(sigs, full & 0xFFFFFFFF)
    assert np.array_equal(np.load(out / "dedup" / "exact-shard-00001.npy"), exact_hashes(texts))
    stats = json.loads((out / "stats.json").read_text())
    assert set(stats["dedup_index"]) == {"dedup/manifest.json"} | {f"dedup/{k}-shard-0000{s}.npy" for k in ("sig", "exact")
                                                                    for s in range(3)}
    assert exact_text(" A\u0301  b\n c ") == "\u00c1 b c".encode()  # NFC, whitespace runs as one space, stripped


def test_a_later_corpus_drops_the_exact_and_near_copies_of_the_prior_and_keeps_the_new(tmp_path, prior):
    out, b = prior
    before = tree_digest(out)
    result, rows, logs = clean(tmp_path, b, "B", shard_size=3, near_dedup={"against": str(out)})
    assert sorted(r["id"] for r in rows) == [f"b-new{i}" for i in range(5)]
    s = result.stats
    assert {r: d["documents"] for r, d in s["dropped"].items()} == {"prior_exact_duplicate": 3, "prior_near_duplicate": 2}
    assert s["deduped_against"] == [{"path": str(out), "documents": 10,
                                     "fingerprint": json.loads((out / "stats.json").read_text())["fingerprint"]}]
    assert "dedup against 1 prior output(s): 3 exact and 2 near copies" in logs
    samples = {}
    for reason in ("prior_exact_duplicate", "prior_near_duplicate"):
        for line in (tmp_path / "B" / "dropped" / f"{reason}.jsonl").read_text().splitlines():
            sample = json.loads(line)
            samples[sample["id"]] = (reason, sample["metadata"]["prior_duplicate_of"])
    assert {i: (r, of["id"]) for i, (r, of) in samples.items()} == {
        "b-verbatim0": ("prior_exact_duplicate", "a0"), "b-verbatim1": ("prior_exact_duplicate", "a1"),
        "b-respaced": ("prior_exact_duplicate", "a2"),
        "b-near3": ("prior_near_duplicate", "a3"), "b-near4": ("prior_near_duplicate", "a4")}
    near3 = samples["b-near3"][1]
    assert near3["output"] == str(out) and near3["shard"] == "shard-00000.parquet" and near3["row"] == 3
    assert 0.7 <= near3["similarity"] < 1.0
    assert tree_digest(out) == before  # the prior is only read
    # B's own output can be deduped against in turn: it saved its five kept documents
    assert json.loads((tmp_path / "B" / "dedup" / "manifest.json").read_text())["documents"] == 5


def test_a_changed_prior_reruns_the_stage(tmp_path, prior):
    out, b = prior
    first, _, _ = clean(tmp_path, b, "B", near_dedup={"against": str(out)})
    cfg = CleanConfig.model_validate(first.stats["params"])

    def up_to_date() -> bool:  # what run_clean asks before it runs
        return finished(tmp_path / "B" / "stats.json", _fingerprint(cfg, open_priors(cfg))) is not None

    assert not first.skipped and up_to_date()
    a, _ = corpora(random.Random(41))
    clean(tmp_path, a[1:], "A", shard_size=4)  # A again, without a0: B's copy of it is new now
    assert not up_to_date()


def test_a_prior_with_other_signature_settings_is_refused_naming_both(tmp_path, prior):
    out, b = prior
    with pytest.raises(ConfigError) as err:
        clean(tmp_path, b, "B", near_dedup={"against": [str(out)], "ngram": 3})
    msg = str(err.value)
    assert msg.startswith("clean.near_dedup.against: ") and str(out) in msg
    assert "ngram=5, bands=14, rows=8, seed=1" in msg and "ngram=3, bands=14, rows=8, seed=1" in msg
    assert not (tmp_path / "B").exists()


def test_a_missing_or_unfinished_prior_is_one_clear_error(tmp_path):
    _, b = corpora(random.Random(41))
    with pytest.raises(ConfigError, match=r"^clean.near_dedup.against: \S*nowhere does not exist$"):
        clean(tmp_path, b, "B", near_dedup={"against": str(tmp_path / "nowhere")})
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / "shard-00000.parquet").write_bytes(b"")
    with pytest.raises(ConfigError, match="half is not a finished clean output"):
        clean(tmp_path, b, "B", near_dedup={"against": str(tmp_path / "half")})
    assert not (tmp_path / "B").exists() and not (tmp_path / ".B.work").exists()


def test_a_prior_without_saved_signatures_or_the_output_itself_is_refused(tmp_path, prior):
    out, b = prior
    with pytest.raises(ConfigError, match="is .* this run's output"):
        clean(tmp_path, b, "A", near_dedup={"against": str(out)})
    clean(tmp_path, b[:3], "plain", near_dedup={"enabled": False})
    with pytest.raises(ConfigError, match=r"plain has no saved signatures \(dedup/manifest.json\)"):
        clean(tmp_path, b, "B", near_dedup={"against": str(tmp_path / "plain")})


def test_against_config_forms_and_the_stage_graph_reads_the_priors():
    assert CleanConfig(near_dedup={"against": None}).near_dedup.against == []
    assert CleanConfig(near_dedup={"against": "old/clean"}).near_dedup.against == ["old/clean"]
    assert CleanConfig(near_dedup={"against": ["x", "y"]}).near_dedup.against == ["x", "y"]
    with pytest.raises(ValueError, match="against needs enabled: true"):
        CleanConfig(near_dedup={"against": "x", "enabled": False})
    params = load_params(REPO / "params.yaml")
    assert params.clean.near_dedup.against == []
    clean_cfg = params.clean.model_copy(update={"near_dedup": params.clean.near_dedup.model_copy(update={"against": ["data/old"]})})
    graph = build_stages(params.model_copy(update={"clean": clean_cfg}), root=REPO)
    assert graph["clean"].deps[0] == "data/old"  # a DVC dependency: a changed prior re-runs the stage


def test_the_drop_rate_check_leaves_out_the_copies_of_earlier_outputs(tmp_path):
    from lmforge.stages import KINDS

    params = load_params(REPO / "params.yaml")  # at most 80% by one reason, at least 10% kept
    stats = {"documents_in": 1000, "documents_out": 80, "dropped": {
        "prior_exact_duplicate": {"documents": 850, "bytes": 1}, "prior_near_duplicate": {"documents": 50, "bytes": 1},
        "language": {"documents": 20, "bytes": 1}}}
    (tmp_path / "stats.json").write_text(json.dumps(stats))
    _, rates, _decontaminated = KINDS["clean"].check(None, params, tmp_path)
    assert rates.passed and "kept 80.0% of the 100 documents not copies of an earlier output" in rates.description
    assert rates.metadata["dropped_language"] == 0.2 and "dropped_prior_exact_duplicate" not in rates.metadata
    stats["dropped"]["language"]["documents"], stats["documents_out"] = 90, 10
    (tmp_path / "stats.json").write_text(json.dumps(stats))
    _, rates, _decontaminated = KINDS["clean"].check(None, params, tmp_path)
    assert not rates.passed and "largest drop reason language removed 90.0%" in rates.description
