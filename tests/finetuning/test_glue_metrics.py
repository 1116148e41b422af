"""GLUE's classification metrics: Matthews correlation and the positive label's F1 on fixed
inputs (hand-computed, and scikit-learn's), every task scored on them, and each GLUE task's own
metric chosen from its name (``hf:glue/<task>`` or a folder named as GLUE names it) and shown
in the leaderboard."""

from __future__ import annotations

import math

import pytest

from lmforge.evaluation.report.leaderboard import leaderboard
from lmforge.finetuning.baselines import binary_f1, mcc, scores
from lmforge.finetuning.tasks import load_task
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
                                   "docstring_kind", "hf:other/cola")] == ["cola", None, "sst2", "mnli_mismatched",
                                                                          None, None, None]


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
