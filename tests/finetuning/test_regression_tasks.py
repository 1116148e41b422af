"""Regression tasks (GLUE's STS-B: a 0-5 similarity score per sentence pair) from GLUE's own files,
a folder of CSV / JSONL and ``hf:glue/stsb``; MNLI's mismatched dev set from a folder named
``MNLI-mm``; each family's headline metric."""

from __future__ import annotations

import json

import pytest

from lmforge.finetuning.tasks import Example, TaskError, load_task
from lmforge.finetuning.tasks.glue import FAMILY_METRICS, task_metric
from lmforge.finetuning.tasks.hf import task_from_hf

# GLUE's STS-B/train.tsv and dev.tsv: this header, tab-separated, the score with three decimals;
# test.tsv has no score column
STSB_HEADER = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore"
STSB_ROWS = [
    ("main-captions", "MSRvid", "2012test", "A plane is taking off.", "An air plane is taking off.", "5.000"),
    ("main-captions", "MSRvid", "2012test", "A man is playing a large flute.", "A man is playing a flute.", "3.800"),
    ("main-captions", "MSRvid", "2012test", "A man is spreading shreded cheese on a pizza.",
     "A man is spreading shredded cheese on an uncooked pizza.", "3.800"),
    ("main-captions", "MSRvid", "2012test", "Three men are playing chess.", "Two men are playing chess.", "2.600"),
    ("main-captions", "MSRvid", "2012test", "A man is playing the cello.", "A man seated is playing the cello.",
     "4.250"),
    ("main-news", "headlines", "2013", "Obama signs budget deal", "Senate passes budget deal", "0.500"),
]


def _write(path, lines):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def stsb_folder(root, name="STS-B", n_train=30):
    d = root / name
    rows = [STSB_ROWS[i % len(STSB_ROWS)] for i in range(n_train)]
    _write(d / "train.tsv", [STSB_HEADER] + [f"{i}\t{g}\t{f}\t{y}\t{i:04d}\tnone\tnone\t{a} ({i})\t{b}\t{s}"
                                             for i, (g, f, y, a, b, s) in enumerate(rows)])
    _write(d / "dev.tsv", [STSB_HEADER] + [f"{i}\t{g}\t{f}\t{y}\t{i:04d}\tnone\tnone\t{a}\t{b}\t{s}"
                                           for i, (g, f, y, a, b, s) in enumerate(STSB_ROWS)])
    _write(d / "test.tsv", [STSB_HEADER.rsplit("\t", 1)[0]] + [f"{i}\t{g}\t{f}\t{y}\t{i:04d}\tnone\tnone\t{a}\t{b}"
                                                             for i, (g, f, y, a, b, s) in enumerate(STSB_ROWS)])
    return d


def test_glue_stsb_files_make_a_regression_task(tmp_path):
    d = stsb_folder(tmp_path)
    task = load_task(str(d), max_train=None)
    assert task.family == "regression" and task.label_names == [] and task.pair
    assert task.info["metric"] == "pearson" and task.info["glue_files"] == "stsb" and task.info["target"] == "score"
    test = task.splits["test"]  # dev.tsv, tested on (test.tsv has no scores)
    assert [e.label for e in test] == [5.0, 3.8, 3.8, 2.6, 4.25, 0.5]
    assert test[0] == Example("A plane is taking off.", "An air plane is taking off.", 5.0, id=f"{d / 'dev.tsv'}:1")
    assert len(task.splits["train"]) + len(task.splits["validation"]) == 30 and task.info["validation_carved_from_train"]
    assert all(isinstance(e.label, float) for s in task.splits.values() for e in s)
    assert "regression (score from 0.5 to 5)" in task.description and "(test.tsv has no labels)" in task.description
    assert task.summary()["family"] == "regression" and task.label_counts("test") == {}
    capped = load_task(str(d), max_train=10, max_eval=3)
    assert len(capped.splits["train"]) == 10 and len(capped.splits["test"]) == 3


def test_a_score_column_or_a_folder_named_stsb_is_regression(tmp_path):
    d = tmp_path / "similarity"  # a generic folder: the 'score' column is the signal
    d.mkdir()
    (d / "train.csv").write_text("sentence1,sentence2,score\n" + "".join(f"a {i},b {i},{i / 7:.3f}\n" for i in range(20)),
                                 encoding="utf-8")
    (d / "test.csv").write_text("sentence1,sentence2,score\nc,d,1.25\ne,f,4\n", encoding="utf-8")
    task = load_task(str(d), max_train=None)
    assert task.family == "regression" and task.info["metric"] == "pearson"
    assert [e.label for e in task.splits["test"]] == [1.25, 4.0]

    hf_written = tmp_path / "stsb"  # Hugging Face's glue/stsb written as JSONL: a float 'label'
    rows = [{"sentence1": f"x {i}", "sentence2": f"y {i}", "label": i / 4, "idx": i} for i in range(12)]
    hf_written.mkdir()
    for split, part in (("train", rows), ("validation", rows[:3]), ("test", rows[3:6])):
        (hf_written / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in part), encoding="utf-8")
    task = load_task(str(hf_written), max_train=None)
    assert task.family == "regression" and task.info["target"] == "label"
    assert [e.label for e in task.splits["validation"]] == [0.0, 0.25, 0.5]

    other = tmp_path / "scores_as_labels"  # a 'label' column of non-integer numbers, no signal: no class
    other.mkdir()
    (other / "train.csv").write_text("sentence,label\na,0.5\nb,1.5\n", encoding="utf-8")
    (other / "test.csv").write_text("sentence,label\na,0.5\n", encoding="utf-8")
    with pytest.raises(TaskError, match=r"train\.csv: row 1: label 0\.5 is not a class \(a regression task's target "
                                        r"goes in a 'score' column"):
        load_task(str(other), max_train=None)


@pytest.mark.parametrize("bad, message", [
    ("n/a", r"STS-B/train\.tsv: row 4: target 'n/a' is not a number"),
    ("inf", r"STS-B/train\.tsv: row 4: target 'inf' is not a finite number"),
    ("", r"STS-B/train\.tsv: row 4: missing target"),
])
def test_bad_scores_name_the_file_and_row(tmp_path, bad, message):
    d = stsb_folder(tmp_path)
    lines = (d / "train.tsv").read_text(encoding="utf-8").splitlines()
    lines[4] = lines[4].rsplit("\t", 1)[0] + "\t" + bad
    _write(d / "train.tsv", lines)
    with pytest.raises(TaskError, match=message):
        load_task(str(d), max_train=None)


def test_hf_glue_stsb_float_labels_and_hidden_test_scores():
    datasets = pytest.importorskip("datasets")
    features = datasets.Features({"sentence1": datasets.Value("string"), "sentence2": datasets.Value("string"),
                                  "label": datasets.Value("float32"), "idx": datasets.Value("int32")})

    def ds(labels):
        n = len(labels)
        return datasets.Dataset.from_dict({"sentence1": [f"a {i}" for i in range(n)], "sentence2": [f"b {i}" for i in range(n)],
                                           "label": labels, "idx": list(range(n))}, features=features)

    dd = datasets.DatasetDict({"train": ds([i / 4 for i in range(20)]), "validation": ds([5.0, 3.8, 0.0, 2.5]),
                               "test": ds([-1.0] * 3)})
    task = task_from_hf(dd, name="glue/stsb", source="hf:glue/stsb")
    assert task.family == "regression" and task.label_names == [] and task.pair
    assert [e.label for e in task.splits["test"]] == pytest.approx([5.0, 3.8, 0.0, 2.5])
    assert task.info["test_from_validation"] and task.info["unlabelled_rows_dropped"]["test"] == 3
    assert task_metric("hf:glue/stsb", task.label_names, family=task.family) == "pearson"
    integral = datasets.DatasetDict({"train": ds([float(i % 2) for i in range(10)]), "test": ds([1.0, 0.0])})
    assert task_from_hf(integral, name="binary").family == "classification"  # floats that are classes


MNLI_HEADER = "index\tpromptID\tpairID\tgenre\tsentence1\tsentence2\tlabel1\tgold_label"
NLI = ("entailment", "neutral", "contradiction")


def mnli_files(d):
    """GLUE's MNLI folder: train.tsv, dev_matched.tsv, dev_mismatched.tsv and the unlabelled
    test_matched.tsv / test_mismatched.tsv."""
    def rows(prefix, n, genre):
        return [MNLI_HEADER] + [f"{i}\t{i}\t{i}n\t{genre}\t{prefix} premise {i} .\t{prefix} hypothesis {i} .\t"
                                f"{NLI[i % 3]}\t{NLI[i % 3]}" for i in range(n)]
    _write(d / "train.tsv", rows("train", 30, "fiction"))
    _write(d / "dev_matched.tsv", rows("matched", 6, "fiction"))
    _write(d / "dev_mismatched.tsv", rows("mismatched", 9, "letters"))
    for variant in ("matched", "mismatched"):
        _write(d / f"test_{variant}.tsv", [MNLI_HEADER.rsplit("\t", 2)[0]] +
               [f"{i}\t{i}\t{i}n\tfiction\tt {i} .\tu {i} ." for i in range(3)])
    return d


@pytest.mark.parametrize("name, dev", [("MNLI", "matched"), ("MNLI-mm", "mismatched"), ("mnli_mismatched", "mismatched")])
def test_a_folder_named_mnli_mm_is_tested_on_the_mismatched_dev_set(tmp_path, name, dev):
    d = mnli_files(tmp_path / name)
    task = load_task(str(d), max_train=None)
    assert task.family == "classification" and task.label_names == sorted(NLI) and task.info["metric"] == "accuracy"
    assert len(task.splits["test"]) == {"matched": 6, "mismatched": 9}[dev]
    assert task.splits["test"][0].text == f"{dev} premise 0 ."
    assert task.info["files"]["validation"].endswith(f"dev_{dev}.tsv")
    assert task.info["files"]["test"].endswith(f"test_{dev}.tsv") and task.info["validation_carved_from_train"]


def test_hf_glue_mnli_mismatched_reads_mnli_with_its_mismatched_splits(monkeypatch):
    datasets = pytest.importorskip("datasets")
    asked = []

    def ds(prefix, n, labelled=True):
        return datasets.Dataset.from_dict({"premise": [f"{prefix} {i}" for i in range(n)],
                                           "hypothesis": [f"h {i}" for i in range(n)],
                                           "label": [i % 3 if labelled else -1 for i in range(n)]})

    def load_dataset(name, config):
        asked.append((name, config))
        return datasets.DatasetDict({"train": ds("train", 20), "validation_matched": ds("matched", 4),
                                     "validation_mismatched": ds("mismatched", 5),
                                     "test_matched": ds("t", 2, False), "test_mismatched": ds("t", 2, False)})

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    task = load_task("hf:glue/mnli_mismatched", max_train=None)
    assert asked == [("glue", "mnli")] and task.name == "glue/mnli_mismatched"
    assert [e.text for e in task.splits["test"]] == [f"mismatched {i}" for i in range(5)]
    assert task.info["hf_splits"]["validation"] == "validation_mismatched"
    assert load_task("hf:glue/mnli", max_train=None).splits["test"][0].text == "matched 0"


@pytest.mark.parametrize("family, metric", [("regression", "pearson"), ("tagging", "f1"), ("span_qa", "f1")])
def test_each_family_has_its_headline_metric(family, metric):
    assert FAMILY_METRICS[family] == metric
    assert task_metric("anything", [], family=family) == metric
    assert task_metric("hf:glue/mrpc", ["0", "1", "2"], family=family) == metric
    assert task_metric("hf:glue/cola", []) == "mcc" and task_metric("my_folder", []) == "accuracy"
