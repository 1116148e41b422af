"""The rooms of fine-tuning's task families, each by itself on values known in advance:
``regression.scorer`` (a fake model's values, scored with NumPy), ``text_to_text.scorer``
(written answers and entity lists, scored by hand and with seqeval) and the ``Family`` of each
room as ``families.family_for`` picks it (the family's metric, baselines and summary line)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from scipy.stats import rankdata

from lmforge.config import ConfigError
from lmforge.finetuning.tasks.base import Answer, Example, SpanQuestion, TaggedSentence, Task
from lmforge.finetuning import families
from lmforge.finetuning.regression import scorer as finetune_regression
from lmforge.finetuning.text_to_text import scorer as finetune_text_to_text


class SumModel(torch.nn.Module):
    """One value per example: the sum of its unpadded token ids, over ten."""

    def forward(self, input_ids, attention_mask):
        return SimpleNamespace(logits=((input_ids * attention_mask).sum(-1, keepdim=True) / 10.0))


def _collate(rows):
    width = max(len(r["input_ids"]) for r in rows)
    ids = torch.zeros(len(rows), width, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, r in enumerate(rows):
        ids[i, :len(r["input_ids"])] = torch.as_tensor(r["input_ids"])
        mask[i, :len(r["input_ids"])] = 1
    return {"input_ids": ids, "attention_mask": mask, "labels": torch.tensor([float(r["labels"]) for r in rows])}


ENCODED = [{"input_ids": np.array(ids), "labels": np.float32(label)}
           for ids, label in (([3, 4], 0.5), ([10, 2, 9], 2.0), ([1], 0.0), ([7, 7, 7, 7], 3.5), ([5, 6], 1.0))]


def test_regression_values_come_in_order_across_batches_and_are_scored_with_their_gold():
    model = SumModel()
    model.train()
    values, gold = finetune_regression.predict_values(model, ENCODED, _collate, batch_size=2)  # 3 batches
    assert values == pytest.approx([0.7, 2.1, 0.1, 2.8, 1.1]) and gold == [0.5, 2.0, 0.0, 3.5, 1.0]
    assert model.training  # its mode given back
    scores = finetune_regression.regression_scorer(ENCODED, _collate)(model, "cpu")
    v, g = np.array([0.7, 2.1, 0.1, 2.8, 1.1]), np.array(gold)
    assert scores["examples"] == 5
    assert scores["pearson"] == pytest.approx(np.corrcoef(v, g)[0, 1], abs=1e-6)
    assert scores["spearman"] == pytest.approx(np.corrcoef(rankdata(v), rankdata(g))[0, 1], abs=1e-6)
    assert scores["mse"] == pytest.approx(np.mean((v - g) ** 2), abs=1e-6)


def _task(family: str, test: list, labels: list[str]) -> Task:
    return Task(name=f"toy-{family}", description="", label_names=labels, pair=False,
                splits={"train": test, "validation": test, "test": test}, prefix=family, family=family)


def test_span_answers_written_as_text_get_squad_scores(monkeypatch):
    questions = [SpanQuestion("Where?", "in Paris today", (Answer("Paris", 3),), "q0"),
                 SpanQuestion("What?", "a cat sat", (Answer("a cat", 0), Answer("cat", 2)), "q1"),
                 SpanQuestion("Which?", "the blue one", (Answer("blue one", 4),), "q2")]
    written = ["Paris", "The cat!", "the red one"]
    monkeypatch.setattr(finetune_text_to_text, "write", lambda *args, **kwargs: list(written))
    scorer = finetune_text_to_text.text_to_text_scorer("t5", [{}] * 3, _task("span_qa", questions, []), "test",
                                                       _collate, Path("unused"), samples=2)
    scores = scorer(None, "cpu")
    # by hand: exact after SQuAD's normalisation for q0 and q1 ("cat"); q2 shares "one" of 2 and 2 tokens
    assert scores["exact_match"] == pytest.approx(2 / 3)
    assert scores["f1"] == pytest.approx((1 + 1 + 0.5) / 3)
    assert scores["examples"] == 3
    assert scores["samples"] == [{"id": "q0", "written": "Paris"}, {"id": "q1", "written": "The cat!"}]


def test_entity_lists_written_as_text_are_read_back_and_scored_by_seqeval(monkeypatch):
    from seqeval.metrics import f1_score, precision_score, recall_score
    from seqeval.scheme import IOB2

    sentences = [TaggedSentence(("Ada", "Lovelace", "wrote", "code"), ("B-PER", "I-PER", "O", "O"), "s0"),
                 TaggedSentence(("see", "Paris", "and", "Rome"), ("O", "B-LOC", "O", "B-LOC"), "s1"),
                 TaggedSentence(("Alan", "met", "Ada"), ("B-PER", "O", "B-PER"), "s2")]
    written = ["PER: Ada Lovelace", "LOC: Paris; PER: Rome", "PER: Ada; LOC: nowhere"]
    monkeypatch.setattr(finetune_text_to_text, "write", lambda *args, **kwargs: list(written))
    task = _task("tagging", sentences, ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"])
    scores = finetune_text_to_text.text_to_text_scorer("t5", [{}] * 3, task, "test", _collate, Path("unused"),
                                                       per_type=True)(None, "cpu")
    read = [["B-PER", "I-PER", "O", "O"], ["O", "B-LOC", "O", "B-PER"], ["O", "O", "B-PER"]]
    gold = [list(s.tags) for s in sentences]
    assert scores["examples"] == 3
    for name, metric in (("f1", f1_score), ("precision", precision_score), ("recall", recall_score)):
        assert scores[name] == pytest.approx(metric(gold, read, mode="strict", scheme=IOB2)), name
    assert scores["precision"] == pytest.approx(3 / 4) and scores["recall"] == pytest.approx(3 / 5)
    assert set(scores["per_type"]) == {"PER", "LOC"}


def test_families_select_on_their_metric_and_summarise_their_baselines():
    regression = _task("regression", [Example(f"t{i}", None, str(v)) for i, v in enumerate((1.0, 2.0, 4.0, 5.0))], [])
    family = families.family_for(regression, "classification")
    assert family is families.FAMILIES_BY_NAME["regression"]
    assert family.select(regression, None) == "pearson"
    span_qa = _task("span_qa", [], [])
    assert families.family_for(span_qa, "classification").select(span_qa, None) == "f1"
    own = _task("generation", [], [])
    own.info["metric"] = "bleu"
    assert families.family_for(own, "text_to_text").select(own, None) == "bleu"  # a task's own metric first
    assert families.writes_family("text_to_text", "tagging") and families.writes_family("text_to_text", "span_qa")
    assert not families.writes_family("classification", "tagging")
    assert not families.writes_family("text_to_text", "regression")
    assert families.family_for(span_qa, "text_to_text") is families.WRITTEN_BY_NAME["span_qa"]
    assert families.family_for(span_qa, "text_to_text").mode("text_to_text") == "text_to_text"
    assert families.family_for(span_qa, "text_to_text").saved_mode("text_to_text") == "span_qa"

    baselines = family.baselines(regression, seed=0)
    assert set(baselines) == {"mean", "bag_of_words"}
    gold = np.array([1.0, 2.0, 4.0, 5.0])
    assert baselines["mean"]["prediction"] == 3.0 and baselines["mean"]["pearson"] == 0.0
    assert baselines["mean"]["mse"] == pytest.approx(np.mean((gold - 3.0) ** 2))  # 2.5
    metrics = {"family": "regression", "test": {"pearson": 0.5, "spearman": 0.25, "mse": 1.125},
               "baselines": {"mean": {"mse": 2.5}, "bag_of_words": {"pearson": 0.1, "spearman": 0.2}}}
    assert family.summary(metrics, "pearson") == (
        "test Pearson 0.500, Spearman 0.250, MSE 1.125 (bag of words: Pearson 0.100, Spearman 0.200; "
        "the mean: MSE 2.500)")


def test_families_refuse_what_they_cannot_train(tmp_path):
    generation = _task("generation", [], [])
    plain, augmented = SimpleNamespace(augment=None), SimpleNamespace(augment=object())
    with pytest.raises(ConfigError, match="toy-generation: .*bert"):
        families.family_for(generation, "classification").check(generation, "bert", plain, tmp_path / "bert.yaml")
    regression = _task("regression", [], [])
    with pytest.raises(ConfigError, match="finetune.augment makes classification examples; toy-regression is a regression task"):
        families.family_for(regression, "classification").check(regression, "bert", augmented, tmp_path / "bert.yaml")
    families.family_for(generation, "text_to_text").check(generation, "t5", plain, tmp_path / "t5.yaml")  # T5 writes
    with pytest.raises(ConfigError, match="toy-ranking is a ranking task; fine-tuning takes classification, regression, "
                                          "tagging, span_qa, generation tasks"):
        families.family_for(_task("ranking", [], []), "classification")


def test_a_family_that_leaves_out_part_of_the_protocol_cannot_be_made():
    from lmforge.finetuning.family import Family

    class NoSummary(Family):
        name = "partial"

        def encode(self, task, arch, tok_dir, max_length, mode):
            return None

        def scorer(self, inputs, task, split, arch, tok_dir, collate):
            return None

        def baselines(self, task, seed):
            return {}

    with pytest.raises(TypeError, match="summary"):
        NoSummary()
