"""Fine-tuning on a tagging task, end to end on the tiny project: the tagging head trained from
the pretrained backbone (and the from-scratch control), selected on validation entity F1, scored
on test with seqeval's entity scores beside the most-frequent-tag baseline, and saved as a model
folder that tags again as it did."""

from __future__ import annotations

import json
import random

import yaml

from lmforge.config import load_params
from lmforge.testing.documents import sentence

from .conftest import write_params
from .test_finetune import FakeTracker


def write_tagging_task(folder, rng: random.Random) -> None:
    """JSONL sentences (``tokens``, ``tags``): the word after "given" is a parameter."""
    folder.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", 40), ("validation", 12), ("test", 12)):
        with open(folder / f"{split}.jsonl", "w", encoding="utf-8") as f:
            for _ in range(n):
                words = sentence(rng).rstrip(".").split()
                at = rng.randrange(len(words))
                words[at:at] = ["given", f"arg{rng.randrange(30)}"]
                tags = ["B-PARAM" if i == at + 1 else "O" for i in range(len(words))]
                f.write(json.dumps({"tokens": words, "tags": tags}) + "\n")


def test_tagging_fine_tunes_selects_on_entity_f1_and_saves_a_tagger(project):
    from lmforge.finetuning.tagging.metrics import entity_scores
    from lmforge.finetuning.tasks import load_task
    from lmforge.models.folder import load_model_dir
    from lmforge.training import finetune
    from lmforge.training.pretrain import run_pretrain

    task_dir = project / "params_task"
    write_tagging_task(task_dir, random.Random(3))
    path = project / "pipelines" / "bert.yaml"
    recipe = yaml.safe_load(path.read_text(encoding="utf-8"))
    recipe["finetune"]["class_weights"] = "balanced"  # a classification setting: tagging is unweighted
    recipe["sizes"]["tiny"].pop("finetune_families", None)  # this budget, not the shipped family budgets
    recipe["sizes"]["tiny"]["finetune"] = {"epochs": 1, "batch_size": 8, "learning_rate": 0.001, "warmup_ratio": 0.2,
                                           "schedule": "linear", "eval_every": 2, "eval_batches": 1}
    path.write_text(yaml.safe_dump(recipe), encoding="utf-8")
    params = load_params(write_params(project, train={"finetune_max_steps": None}))
    logs: list[str] = []
    scratch = finetune.run_finetune(params, "bert", str(task_dir), from_scratch=True, log=logs.append,
                                    tracker_factory=FakeTracker)
    run_pretrain(params, "bert", log=logs.append, tracker_factory=FakeTracker)
    pretrained = finetune.run_finetune(params, "bert", str(task_dir), log=logs.append, tracker_factory=FakeTracker)

    task = load_task(str(task_dir), params, seed=params.train.seed)
    out = project / "models" / "bert" / "params_task"
    for m in (scratch, pretrained):
        assert (m["family"], m["mode"], m["metric"]) == ("tagging", "tagging", "f1")
        assert m["options"]["class_weights"] is None and m["options"]["metric"] == "f1"
        assert m["steps"] == 5 and m["selection"]["evaluations"] == 3
        # the restored weights are the best evaluation's: scoring them again gives its value
        assert m["validation"]["f1"] == m["best_validation_f1"] == m["selection"]["best_value"]
        t = m["test"]
        assert t["examples"] == t["sentences"] == 12 and t["entities"] == 12 and "PARAM" in t["per_type"]
        assert 0.0 <= t["f1"] <= 1.0 and 0.0 <= t["token_accuracy"] <= 1.0
        b = m["baselines"]["most_frequent_tag"]
        # the baseline, recomputed here: "given" and the argN words it has seen
        seen: dict[str, dict[str, int]] = {}
        for s in task.splits["train"]:
            for w, tag in zip(s.words, s.tags):
                seen.setdefault(w, {}).setdefault(tag, 0)
                seen[w][tag] += 1
        guess = [[max(seen[w], key=seen[w].get) if w in seen else "O" for w in s.words] for s in task.splits["test"]]
        assert b["f1"] == entity_scores(guess, [list(s.tags) for s in task.splits["test"]])["f1"]
        assert "test_confusion" not in m
    assert logs[-1].startswith("finetune bert on params_task (pretrained): best validation entity f1")
    # the saved folder is a tagger: the same head, and the same test scores when it tags again
    model = load_model_dir(out / "model")
    meta = json.loads((out / "model" / "lmforge_model.json").read_text())
    assert meta["head"] == "token_classification" and meta["num_labels"] == 2
    labels = json.loads((out / "labels.json").read_text())
    assert labels["mode"] == "tagging" and labels["labels"] == ["O", "B-PARAM"]
    from lmforge.finetuning.features import collate, pad_id
    from lmforge.finetuning.tagging.features import encode_tagged
    from lmforge.finetuning.tagging.scorer import tagging_scorer

    tok = project / "data" / "tokenizers" / "wordpiece"
    encoded, words = encode_tagged(task.splits["test"], "bert", tok, params.finetune.max_length,
                                   {"O": 0, "B-PARAM": 1}, prefix=task.prefix)
    again = tagging_scorer(encoded, words, task.splits["test"], lambda b: collate(b, pad_id("bert", tok)),
                           task.label_names)(model, "cpu")
    assert again["f1"] == pretrained["test"]["f1"] and again["token_accuracy"] == pretrained["test"]["token_accuracy"]

    # the folder is a tagger: predict (a classifier's command), generate and export refuse it by name
    import pytest

    from lmforge.inference.export import export_model
    from lmforge.inference.generate import generate_text
    from lmforge.inference.loading import InferenceError, load
    from lmforge.inference.predict import predict

    loaded = load(out)
    with pytest.raises(InferenceError, match="a tagging model"):
        predict(loaded, ["some text"])
    with pytest.raises(InferenceError, match="token_classification model"):
        export_model(loaded, project / "exported")
    with pytest.raises(InferenceError, match="does not generate text"):
        generate_text(loaded, "some text")
