"""GLUE's classification metrics: Matthews correlation and the positive label's F1 on fixed
inputs (hand-computed, and scikit-learn's), every task scored on them, and each GLUE task's own
metric chosen from its name (``hf:glue/<task>`` or a folder named as GLUE names it) and shown
in the leaderboard."""

from __future__ import annotations

import math

import pytest

from lmforge.evaluation.report.leaderboard import leaderboard
from lmforge.finetuning.classification.metrics import binary_f1, mcc, scores
from lmforge.finetuning.tasks import TaskError, load_task
from lmforge.finetuning.tasks.glue import glue_name, task_metric

GOLD = ["1", "1", "1", "0", "0", "0", "1", "0"]
PRED = ["1", "0", "1", "0", "0", "1", "1", "0"]  # TP 3, FN 1, FP 1, TN 3


def test_mcc_and_f1_on_fixed_inputs():
    assert mcc(PRED, GOLD) == pytest.approx((3 * 3 - 1 * 1) / math.sqrt(4 * 4 * 4 * 4))  # 0.5
    assert binary_f1(PRED, GOLD, "1") == pytest.approx(0.75)  # precision 3/4, recall 3/4
    assert binary_f1(PRED, GOLD, "0") == pytest.approx(0.75)
    assert mcc(["1"] * 8, GOLD) == 0.0  # a constant prediction, as a tiny model on CoLA
    assert binary_f1(["0"] * 8, ["0"] * 8, "1") == 0.0  # the positive label neither predicted nor true
    from sklearn.metrics import f1_score, matthews_corrcoef

    three_gold, three_pred = list("abcabcab"), list("abccbaab")
    assert mcc(three_pred, three_gold) == pytest.approx(matthews_corrcoef(three_gold, three_pred))
    assert binary_f1(three_pred, three_gold, "c") == pytest.approx(
        f1_score(three_gold, three_pred, labels=["c"], average=None)[0])
    with pytest.raises(ValueError, match="2 predictions for 3"):
        mcc(["1", "0"], ["1", "0", "1"])


def test_every_task_gets_mcc_and_a_two_label_task_its_positive_f1():
    two = scores(PRED, GOLD, ["0", "1"])
    assert set(two) == {"accuracy", "macro_f1", "mcc", "f1"} and two["f1"] == pytest.approx(0.75)
    three = scores(list("abccbaab"), list("abcabcab"), ["a", "b", "c"])
    assert set(three) == {"accuracy", "macro_f1", "mcc"}


@pytest.mark.parametrize("spec,labels,metric", [
    ("hf:glue/cola", ["0", "1"], "mcc"), ("hf:nyu-mll/glue/mrpc", ["0", "1"], "f1"), ("hf:glue/qqp", ["0", "1"], "f1"),
    ("hf:glue/sst2", ["0", "1"], "accuracy"), ("hf:glue/mnli", ["0", "1", "2"], "accuracy"),
    ("data/CoLA", ["0", "1"], "mcc"), ("data/SST-2/", ["0", "1"], "accuracy"), ("MRPC", ["0", "1"], "f1"),
    ("MRPC", ["a", "b", "c"], "accuracy"),  # F1 of a positive label needs two labels
    ("docstring_kind", ["class", "function", "module"], "accuracy"), ("hf:imdb", ["0", "1"], "accuracy"),
])
def test_each_glue_task_is_scored_on_its_own_metric(spec, labels, metric):
    assert task_metric(spec, labels) == metric


def test_glue_names():
    assert [glue_name(s) for s in ("hf:glue/cola", "hf:glue/stsb", "data/SST-2", "data/mnli_mismatched", "hf:imdb",
                                   "docstring_kind", "hf:other/cola")] == ["cola", "stsb", "sst2", "mnli_mismatched",
                                                                          None, None, None]
    assert [glue_name(s) for s in ("data/STS-B", "data/MNLI-mm", "data/MNLI_Matched")] == [
        "stsb", "mnli_mismatched", "mnli_matched"]


def _glue_tsv(folder, header, rows):
    folder.mkdir(parents=True)
    for split, part in (("train", rows), ("dev", rows[:4]), ("test", rows[4:])):
        lines = ["\t".join(header)] + ["\t".join(r) for r in part]
        (folder / f"{'validation' if split == 'dev' else split}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_a_glue_folder_is_read_with_its_columns_and_metric(tmp_path):
    cola = [(f"the sentence number {i} is {'fine' if i % 2 else 'bad'} .", str(i % 2)) for i in range(10)]
    _glue_tsv(tmp_path / "CoLA", ("sentence", "label"), cola)
    task = load_task(str(tmp_path / "CoLA"), max_train=None)
    assert task.info["metric"] == "mcc" and not task.pair and task.label_names == ["0", "1"]
    mrpc = [(f"first text {i}", f"second text {i}", str(i % 2)) for i in range(10)]
    _glue_tsv(tmp_path / "MRPC", ("sentence1", "sentence2", "label"), mrpc)
    task = load_task(str(tmp_path / "MRPC"), max_train=None)
    assert task.info["metric"] == "f1" and task.pair


def test_the_leaderboard_shows_the_task_metric_and_its_score():
    test = {"accuracy": 0.7, "macro_f1": 0.6, "mcc": 0.31, "examples": 10}
    evaluation = {"architecture": "bert", "objective": "mlm", "tokenizer": "wordpiece",
                  "pretrain": {"validation": {"loss": 5.0}},
                  "finetune": {"cola": {"mode": "classification", "metric": "mcc", "test": test,
                                        "baselines": {"majority": {"accuracy": 0.69}}}}}
    row = leaderboard([evaluation]).iloc[0]
    assert row["task_metric"] == "mcc" and row["task_score"] == pytest.approx(0.31)
    assert row["task_accuracy"] == pytest.approx(0.7)


# ----------------------------------------------------------------------------- GLUE's own files


def _write(path, lines):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_glue_s_distributed_files_are_read_as_glue_writes_them(tmp_path):
    # CoLA: no header; source, label, the original label (blank when it agrees), sentence
    cola = tmp_path / "CoLA"
    _write(cola / "train.tsv", [f"gj04\t{i % 2}\t{'' if i % 2 else '*'}\tThe dog number {i} barked ." for i in range(20)])
    _write(cola / "dev.tsv", [f"gj04\t{i % 2}\t\tA cat number {i} slept ." for i in range(6)])
    _write(cola / "test.tsv", ["index\tsentence"] + [f"{i}\tA bird {i} sang ." for i in range(4)])
    task = load_task(str(cola), max_train=None)
    assert task.info["metric"] == "mcc" and task.info["glue_files"] == "cola" and task.label_names == ["0", "1"]
    assert [e.text for e in task.splits["test"]] == [f"A cat number {i} slept ." for i in range(6)]  # dev, tested on
    assert len(task.splits["train"]) + len(task.splits["validation"]) == 20  # validation carved from train
    assert task.splits["train"][0].label in ("0", "1") and "(test.tsv has no labels)" in task.description

    # MRPC: its header, the quality label and the two strings; test.tsv without Quality
    mrpc = tmp_path / "MRPC"
    header = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String"
    _write(mrpc / "train.tsv", [header] + [f"{i % 2}\t{i}\t{i + 100}\tSaid {i} things .\tTold {i} stories ." for i in range(12)])
    _write(mrpc / "dev.tsv", [header] + [f"{i % 2}\t{i}\t{i + 100}\tA {i} .\tB {i} ." for i in range(4)])
    _write(mrpc / "test.tsv", ["index\t#1 ID\t#2 ID\t#1 String\t#2 String", "0\t1\t2\tX .\tY ."])
    task = load_task(str(mrpc), max_train=None)
    assert task.info["metric"] == "f1" and task.pair and task.splits["test"][0].text_pair == "B 0 ."

    # MNLI: three labels by name, validation from dev_matched.tsv
    mnli = tmp_path / "MNLI"
    header = "index\tpromptID\tpairID\tgenre\tsentence1\tsentence2\tgold_label"
    names = ("entailment", "neutral", "contradiction")
    _write(mnli / "train.tsv", [header] + [f"{i}\t0\t0\tfiction\tP {i} .\tH {i} .\t{names[i % 3]}" for i in range(15)])
    _write(mnli / "dev_matched.tsv", [header] + [f"{i}\t0\t0\tfiction\tQ {i} .\tG {i} .\t{names[i % 3]}" for i in range(6)])
    _write(mnli / "test.tsv", [header] + [f"{i}\t0\t0\tfiction\tR {i} .\tJ {i} .\t{names[i % 3]}" for i in range(6)])
    task = load_task(str(mnli), max_train=None)
    assert task.label_names == sorted(names) and task.info["metric"] == "accuracy"
    assert task.info["files"]["validation"].endswith("dev_matched.tsv") and task.splits["test"][0].text == "R 0 ."


def test_bad_glue_files_are_refused_naming_the_file(tmp_path):
    cola = tmp_path / "CoLA"
    rows = [f"gj04\t{i % 2}\t\tThe dog {i} ." for i in range(6)]
    _write(cola / "train.tsv", rows[:3] + ["gj04\t1\t\tan extra\tfield ."] + rows[3:])
    _write(cola / "dev.tsv", rows)
    _write(cola / "test.tsv", ["index\tsentence", "0\tx ."])
    with pytest.raises(TaskError, match=r"CoLA/train.tsv: unreadable TSV: .*line 4"):
        load_task(str(cola), max_train=None)
    stsb = tmp_path / "STS-B"  # a regression task now: a score that is no number names the file and row
    _write(stsb / "train.tsv", ["index\tsentence1\tsentence2\tscore", "0\ta .\tb .\t3.8", "1\tc .\td .\tn/a"])
    _write(stsb / "dev.tsv", ["index\tsentence1\tsentence2\tscore", "0\ta .\tb .\t3.8"])
    _write(stsb / "test.tsv", ["index\tsentence1\tsentence2", "0\ta .\tb ."])
    with pytest.raises(TaskError, match=r"STS-B/train.tsv: row 2: target 'n/a' is not a number"):
        load_task(str(stsb), max_train=None)
