"""Fine-tuning on an extractive-QA task (SQuAD v1.1 files), end to end on the tiny project: the
span head over the context's windows, selected on validation F1, scored on test with SQuAD's
exact match and F1 beside the sliding-window baseline, and saved as a span-extraction model."""

from __future__ import annotations

import json
import random

import yaml

from lmforge.config import load_params
from lmforge.testing.documents import sentence

from .conftest import write_params
from .test_finetune import FakeTracker


def write_squad(folder, rng: random.Random) -> None:
    """SQuAD v1.1 JSON: which word was given? (the word after "given" in a context of a few sentences)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, n in (("train.json", 30), ("validation.json", 8), ("test.json", 8)):
        paragraphs = []
        for i in range(n):
            word = f"arg{rng.randrange(40)}"
            parts = [sentence(rng) for _ in range(3)]
            parts.insert(rng.randrange(4), f"The value given {word} is kept.")
            context = " ".join(parts)
            start = context.index(f"given {word}") + len("given ")
            qas = [{"id": f"{name}-{i}", "question": "Which value was given?",
                    "answers": [{"text": word, "answer_start": start}, {"text": f"{word} is kept",
                                                                         "answer_start": start}]}]
            paragraphs.append({"context": context, "qas": qas})
        data = {"version": "1.1", "data": [{"title": "given", "paragraphs": paragraphs}]}
        (folder / name).write_text(json.dumps(data), encoding="utf-8")


def test_span_qa_fine_tunes_selects_on_f1_and_saves_a_span_model(project):
    from lmforge.finetuning.span_qa.metrics import squad_scores
    from lmforge.finetuning.tasks import load_task
    from lmforge.models.folder import load_model_dir
    from lmforge.training import finetune
    from lmforge.finetuning.span_qa.scorer import predict_answers

    task_dir = project / "given_qa"
    write_squad(task_dir, random.Random(9))
    path = project / "pipelines" / "gpt.yaml"
    recipe = yaml.safe_load(path.read_text(encoding="utf-8"))
    recipe["sizes"]["tiny"].pop("finetune_families", None)  # this budget, not the shipped family budgets
    recipe["sizes"]["tiny"]["finetune"] = {"epochs": 1, "batch_size": 8, "learning_rate": 0.001, "warmup_ratio": 0.2,
                                           "schedule": "linear", "eval_every": 2, "eval_batches": 1}
    path.write_text(yaml.safe_dump(recipe), encoding="utf-8")
    params = load_params(write_params(project, train={"finetune_max_steps": None}, finetune={"max_length": 48}))
    logs: list[str] = []
    m = finetune.run_finetune(params, "gpt", str(task_dir), from_scratch=True, log=logs.append,
                              tracker_factory=FakeTracker)
    assert (m["family"], m["mode"], m["metric"], m["options"]["metric"]) == ("span_qa", "span_qa", "f1", "f1")
    assert m["validation"]["f1"] == m["best_validation_f1"] == m["selection"]["best_value"]
    t = m["test"]
    assert t["examples"] == 8 and 0.0 <= t["exact_match"] <= t["f1"] <= 1.0
    assert set(m["baselines"]) == {"sliding_window"} and "f1" in m["baselines"]["sliding_window"]
    assert "test exact match" in logs[-1]
    out = project / "models" / "gpt" / "given_qa-scratch"
    meta = json.loads((out / "model" / "lmforge_model.json").read_text())
    assert meta["head"] == "span_extraction" and meta["num_labels"] == 2
    # the saved model answers the test questions as it was scored
    from lmforge.finetuning.features import collate, pad_id
    from lmforge.finetuning.span_qa.features import encode_questions

    task = load_task(str(task_dir), params, seed=params.train.seed)
    tok = project / "data" / "tokenizers" / "bpe"
    questions = task.splits["test"]
    encoded, windows, spans = encode_questions(questions, "gpt", tok, 48, prefix=task.prefix)
    answers = predict_answers(load_model_dir(out / "model"), encoded, windows, spans, questions,
                              lambda b: collate(b, pad_id("gpt", tok)))
    again = squad_scores(answers, [[a.text for a in q.answers] for q in questions])
    assert (again["exact_match"], again["f1"]) == (t["exact_match"], t["f1"])
    assert all(a == "" or a in q.context for a, q in zip(answers, questions))  # every answer is a span of its context
