"""Tagging and span QA fine-tuned text to text (T5, its recipe set to ``mode: text_to_text``), end
to end on the tiny project: the model writes the entities or the answer, read back and scored by
the family's own metric beside its baseline; the saved folder is its family's model."""

from __future__ import annotations

import json
import random

import pytest
import yaml

from lmforge.config import load_params

from .conftest import write_params
from .test_finetune import FakeTracker
from .test_finetune_spans import write_squad
from .test_finetune_tagging import write_tagging_task


def _t5_budget(project) -> None:
    path = project / "pipelines" / "t5.yaml"
    recipe = yaml.safe_load(path.read_text(encoding="utf-8"))
    recipe["finetune"]["mode"] = "text_to_text"  # the shipped recipe reads the encoder through a pooled head
    recipe["finetune"].pop("pooling", None)
    recipe["sizes"]["tiny"].pop("finetune_families", None)  # this budget, not the shipped family budgets
    recipe["sizes"]["tiny"]["finetune"] = {"max_steps": 2, "batch_size": 8, "learning_rate": 0.001,
                                           "eval_every": 1, "eval_batches": 1}
    path.write_text(yaml.safe_dump(recipe), encoding="utf-8")


@pytest.mark.parametrize("family", ["tagging", "span_qa"])
def test_t5_writes_the_family_s_answers_and_is_scored_on_its_metric(project, family):
    from lmforge.finetuning.features import collate, pad_id
    from lmforge.finetuning.span_qa.metrics import squad_scores
    from lmforge.finetuning.tagging.metrics import entity_scores
    from lmforge.finetuning.tasks import load_task
    from lmforge.finetuning.text_to_text.pairs import as_pairs, entity_types, tags_from_text, text_prefix
    from lmforge.finetuning.generation.features import encode_pairs
    from lmforge.inference.loading import InferenceError, load
    from lmforge.inference.predict import predict
    from lmforge.models.folder import load_model_dir
    from lmforge.training import finetune
    from lmforge.finetuning.generation.scorer import write

    task_dir = project / family
    (write_tagging_task if family == "tagging" else write_squad)(task_dir, random.Random(5))
    _t5_budget(project)
    params = load_params(write_params(project, train={"finetune_max_steps": None}, finetune={"max_length": 64}))
    logs: list[str] = []
    m = finetune.run_finetune(params, "t5", str(task_dir), from_scratch=True, log=logs.append,
                              tracker_factory=FakeTracker)
    assert (m["family"], m["mode"], m["metric"], m["options"]["metric"]) == (family, "text_to_text", "f1", "f1")
    assert m["steps"] == 2 and m["validation"]["f1"] == m["best_validation_f1"]
    t = m["test"]
    assert 0.0 <= t["f1"] <= 1.0 and len(t["samples"]) == 5
    baseline = "most_frequent_tag" if family == "tagging" else "sliding_window"
    assert set(m["baselines"]) == {baseline}
    if family == "tagging":
        assert "per_type" in t and "per_type" not in m["validation"] and t["sentences"] == 12
    out = project / "models" / "t5" / f"{family}-scratch"
    assert json.loads((out / "labels.json").read_text())["mode"] == family
    assert json.loads((out / "model" / "lmforge_model.json").read_text())["head"] != "token_classification"

    # the saved model writes the same test answers, and they score as recorded
    task = load_task(str(task_dir), params, seed=params.train.seed)
    tok = project / "data" / "tokenizers" / "unigram"
    test = task.splits["test"]
    prompts = encode_pairs(as_pairs(task)["test"], "t5", tok, 64, prefix=text_prefix(task), with_target=False)
    written = write(load_model_dir(out / "model"), "t5", prompts, lambda b: collate(b, pad_id("t5", tok)), tok)
    assert [s["written"] for s in t["samples"]] == written[:5]
    if family == "tagging":
        again = entity_scores([tags_from_text(w, s.words, entity_types(task)) for w, s in zip(written, test)],
                              [list(s.tags) for s in test])
    else:
        again = squad_scores(written, [[a.text for a in q.answers] for q in test])
    assert again["f1"] == t["f1"]
    # not a text-to-text classifier: predict refuses it by its family
    with pytest.raises(InferenceError, match=f"a {family} model"):
        predict(load(out), ["some text"])
