"""Decontamination: evaluation texts planted in a corpus (verbatim, reformatted, inside a longer
page) must all be found, near-misses must all be kept; the windows, the held-out split, the
paragraphs mode and the report, through the real clean stage with every other rule off."""

import json
import random

import numpy as np
import pyarrow.parquet as pq
import pytest

from lmforge.cleaning import decontaminate as dc
from lmforge.cleaning.stage import run_clean
from lmforge.config import CleanConfig, SplitConfig
from lmforge.splits import split_of
from lmforge.testing.documents import write_jsonl

RULES_OFF = dict(
    max_page_length=None, max_word_length=None, citation_pattern=None, end_marks=None, ellipsis=None,
    min_words_per_line=None, lorem_ipsum=False, javascript=False, curly_brace=False, policy_phrases=None,
    min_sentences=None,
)


@pytest.fixture(autouse=True)
def in_process(monkeypatch):
    """The stage's units run in this process (the pool is the same code, and slower to start)."""
    from lmforge.cleaning import stage

    opened = stage.open_executor
    monkeypatch.setattr(stage, "open_executor", lambda cfg, processes, log: opened(cfg, 0, log))


ALL_TRAIN = SplitConfig(validation=0.0, test=0.0)
VOCAB = [f"w{i}" for i in range(4000)]


def config(tmp_path, docs, **decontaminate):
    return CleanConfig(
        inputs=[write_jsonl(tmp_path / "docs.jsonl", docs)], output=str(tmp_path / "out"), workers=1,
        rules=RULES_OFF, language={"enabled": False}, bad_words={"enabled": False}, line_dedup={"mode": "off"},
        urls={"dedup": False}, near_dedup={"enabled": False}, decontaminate=decontaminate,
    )


def kept_texts(tmp_path):
    out = {}
    for f in sorted((tmp_path / "out").glob("shard-*.parquet")):
        t = pq.read_table(f, columns=["id", "text"])
        out.update(zip(t.column("id").to_pylist(), t.column("text").to_pylist()))
    return out


def sentence(rng, n):
    return " ".join(rng.choice(VOCAB) for _ in range(n))


def reformat(text, rng):
    """The same words with another case, punctuation and spacing."""
    words = text.split()
    out = []
    for i, w in enumerate(words):
        w = w.upper() if rng.random() < 0.5 else w.capitalize()
        out.append(w + rng.choice(["", ",", ";", " -", ".", ":"]) + ("\n" if i % 7 == 6 else ""))
    return "(" + " ".join(out) + ")!"


def near_miss(text, rng):
    """Every 10th word replaced: no run of 13 words survives."""
    words = text.split()
    return " ".join(rng.choice(VOCAB) + "x" if i % 10 == 9 else w for i, w in enumerate(words))


def test_windows_are_those_of_each_slice():
    h = dc.WordHashes()(dc.words("a b c d e f g h i j k l m n o p"))
    for k in (1, 5, 13):
        all_windows = dc.windows(h, k)
        assert len(all_windows) == len(h) - k + 1
        assert all(all_windows[i] == dc.windows(h[i:i + k], k)[0] for i in range(len(all_windows)))
    assert len(dc.windows(h, 17)) == 0
    assert len(set(dc.windows(h, 5).tolist())) == len(h) - 4  # distinct runs, distinct hashes


def test_words_ignore_case_and_punctuation():
    assert dc.words("Return the_value, (of) X-ray's 3.14!") == ["return", "the", "value", "of", "x", "ray", "s", "3", "14"]


def test_short_texts_match_whole_and_too_short_ones_are_not_checked():
    wh = dc.WordHashes()
    grams = dc.GramSet(dc.registered(["one two three four five six seven eight nine", "too short to check"],
                                     13, 8, wh))
    assert sorted(grams.by_length) == [9]
    assert dc.scan("x y One, TWO three four five six seven eight NINE z", grams, wh) is not None
    assert dc.scan("one two three four five six seven eight", grams, wh) is None  # 8 of its 9 words
    found = dc.overlap(["too short to check"], grams, 13, 8, wh)
    assert (found.texts, found.too_short, found.overlapping) == (1, 1, 0)


def test_planted_texts_recall_and_near_misses_kept(tmp_path):
    rng = random.Random(7)
    evaluation = [sentence(rng, rng.randint(14, 40)) for _ in range(40)] + \
                 [sentence(rng, rng.randint(8, 12)) for _ in range(10)]  # short ones: matched whole
    docs, planted, misses = [], set(), set()
    for i, text in enumerate(evaluation):
        for form, body in (("verbatim", text), ("reformatted", reformat(text, rng)),
                           ("inside", sentence(rng, 200) + "\n" + text + " " + sentence(rng, 150))):
            docs.append({"id": f"{form}-{i}", "text": body})
            planted.add(f"{form}-{i}")
        if len(text.split()) >= 14:
            docs.append({"id": f"miss-{i}", "text": sentence(rng, 50) + " " + near_miss(text, rng)})
            words = text.split()
            docs.append({"id": f"prefix-{i}", "text": " ".join(words[:12]) + " " + sentence(rng, 30)})
            misses |= {f"miss-{i}", f"prefix-{i}"}
        else:  # a short text with its last word changed
            docs.append({"id": f"miss-{i}", "text": " ".join(text.split()[:-1] + ["zz"]) + " " + sentence(rng, 30)})
            misses.add(f"miss-{i}")
    others = {f"other-{i}" for i in range(100)}
    docs += [{"id": d, "text": sentence(rng, 300)} for d in sorted(others)]
    rng.shuffle(docs)

    result = run_clean(config(tmp_path, docs), log=lambda m: None,
                       evaluation=dc.EvaluationSets(split=ALL_TRAIN, texts={"planted": evaluation}))
    kept = set(kept_texts(tmp_path))
    removed = {d["id"] for d in docs} - kept
    recall = {form: sum(f"{form}-{i}" in removed for i in range(len(evaluation))) / len(evaluation)
              for form in ("verbatim", "reformatted", "inside")}
    assert recall == {"verbatim": 1.0, "reformatted": 1.0, "inside": 1.0}
    assert removed == planted  # no near-miss and no other document dropped
    assert misses <= kept and others <= kept
    assert result.stats["dropped"]["decontaminated"]["documents"] == len(planted)

    report = json.loads((tmp_path / "out" / "decontamination.json").read_text())
    assert report["tasks"]["planted"]["all"] == {"texts": 50, "too_short": 0, "overlapping": 50, "overlapping_after": 0}
    assert report["training_documents_overlapping"] == len(planted)
    assert report["after"] == {"training_documents_scanned": len(kept), "training_documents_overlapping": 0}
    sample = [json.loads(x) for x in (tmp_path / "out" / "dropped" / "decontaminated.jsonl").read_text().splitlines()]
    assert sample and all(s["id"] in planted for s in sample)


def held_out_ids(split, n):
    ids = (f"doc-{i}" for i in range(10_000))
    return [i for i in ids if split_of(i, split) == "test"][:n]


def test_held_out_documents_are_evaluation_texts_and_stay(tmp_path):
    split = SplitConfig(validation=0.1, test=0.1)
    rng = random.Random(3)
    test_ids = held_out_ids(split, 3)
    paragraphs = [sentence(rng, 20) for _ in range(3)]
    docs = [{"id": t, "text": sentence(rng, 30) + "\n" + p} for t, p in zip(test_ids, paragraphs)]
    train_ids = [f"train-{i}" for i in range(30) if split_of(f"train-{i}", split) == "train"][:6]
    # two training documents quote a held-out paragraph, one only 12 of its words
    docs.append({"id": train_ids[0], "text": sentence(rng, 40) + "\n" + paragraphs[0].upper()})
    docs.append({"id": train_ids[1], "text": paragraphs[2] + "\n" + sentence(rng, 40)})
    docs.append({"id": train_ids[2], "text": " ".join(paragraphs[1].split()[:12]) + " " + sentence(rng, 40)})
    docs += [{"id": i, "text": sentence(rng, 60)} for i in train_ids[3:]]

    run_clean(config(tmp_path, docs), log=lambda m: None, evaluation=dc.EvaluationSets(split=split))
    kept = set(kept_texts(tmp_path))
    assert kept == {d["id"] for d in docs} - {train_ids[0], train_ids[1]}
    assert set(test_ids) <= kept

    # without the held-out split registered nothing is removed
    run_clean(config(tmp_path, docs, held_out=False), log=lambda m: None, evaluation=dc.EvaluationSets(split=split))
    assert set(kept_texts(tmp_path)) == {d["id"] for d in docs}


def test_paragraphs_mode_removes_only_the_overlapping_lines(tmp_path):
    rng = random.Random(5)
    text = sentence(rng, 20)
    before, after = sentence(rng, 30), sentence(rng, 30)
    docs = [{"id": "a", "text": f"{before}\n{text}\n{after}"}, {"id": "b", "text": text},
            {"id": "c", "text": sentence(rng, 30)}]
    result = run_clean(config(tmp_path, docs, mode="paragraphs"), log=lambda m: None,
                       evaluation=dc.EvaluationSets(split=ALL_TRAIN, texts={"t": [text]}))
    kept = kept_texts(tmp_path)
    assert kept["a"] == f"{before}\n{after}"
    assert "b" not in kept and kept["c"] == docs[2]["text"]  # nothing left of b: dropped
    assert result.stats["lines_removed"]["line:decontaminated"] == 2
    assert result.stats["dropped"]["decontaminated"]["documents"] == 1


def test_changed_evaluation_texts_rerun_the_stage(tmp_path):
    rng = random.Random(9)
    docs = [{"id": f"d{i}", "text": sentence(rng, 30)} for i in range(5)]
    cfg = config(tmp_path, docs)
    first = run_clean(cfg, log=lambda m: None, evaluation=dc.EvaluationSets(split=ALL_TRAIN, texts={"t": ["a b c"]}))
    again = run_clean(cfg, log=lambda m: None, evaluation=dc.EvaluationSets(split=ALL_TRAIN, texts={"t": ["a b c"]}))
    assert not first.skipped and again.skipped
    changed = run_clean(cfg, log=lambda m: None,
                        evaluation=dc.EvaluationSets(split=ALL_TRAIN, texts={"t": [docs[0]["text"]]}))
    assert not changed.skipped and "d0" not in kept_texts(tmp_path)


def test_min_words_above_ngram_is_refused():
    with pytest.raises(ValueError, match="min_words"):
        CleanConfig(decontaminate={"ngram": 5, "min_words": 8})


def test_gram_set_round_trip(tmp_path):
    grams = dc.GramSet({13: np.array([3, 1, 2], dtype=np.uint64), 9: np.array([7], dtype=np.uint64)})
    grams.save(tmp_path / "g.npz")
    back = dc.GramSet.load(tmp_path / "g.npz")
    assert {k: v.tolist() for k, v in back.by_length.items()} == {13: [3, 1, 2], 9: [7]}
