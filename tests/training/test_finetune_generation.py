"""Fine-tuning on a generation task (CNN/DailyMail-style JSONL), end to end on the tiny project:
T5 trained text to text and GPT as a conditional language model, selected on validation ROUGE-L,
scored on test (T5 with beam search) beside the lead-sentence and copy-input baselines."""

from __future__ import annotations

import json
import random

import pytest
import yaml

from lmforge.config import ConfigError, load_params

from ..cleaning.corpus_gen import sentence
from .conftest import write_params
from .test_finetune import FakeTracker


def write_summaries(folder, rng: random.Random) -> None:
    """article -> highlights: the highlight is the article's second sentence."""
    folder.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", 24), ("validation", 6), ("test", 6)):
        with open(folder / f"{split}.jsonl", "w", encoding="utf-8") as f:
            for _ in range(n):
                parts = [sentence(rng) for _ in range(3)]
                f.write(json.dumps({"article": " ".join(parts), "highlights": parts[1]}) + "\n")


@pytest.mark.parametrize("arch", ["t5", "gpt"])
def test_generation_fine_tunes_and_scores_what_the_model_writes(project, arch):
    from lmforge.finetuning.metrics.generation import rouge
    from lmforge.training import finetune

    task_dir = project / "summaries"
    write_summaries(task_dir, random.Random(11))
    path = project / "pipelines" / f"{arch}.yaml"
    recipe = yaml.safe_load(path.read_text(encoding="utf-8"))
    recipe["sizes"]["tiny"].pop("finetune_families", None)  # this budget, not the shipped family budgets
    recipe["sizes"]["tiny"]["finetune"] = {"epochs": 1, "batch_size": 8, "learning_rate": 0.001, "warmup_ratio": 0.2,
                                           "schedule": "linear", "eval_every": 2, "eval_batches": 1}
    path.write_text(yaml.safe_dump(recipe), encoding="utf-8")
    params = load_params(write_params(project, train={"finetune_max_steps": None}, finetune={"max_length": 96}))
    logs: list[str] = []
    m = finetune.run_finetune(params, arch, str(task_dir), from_scratch=True, log=logs.append,
                              tracker_factory=FakeTracker)
    assert (m["family"], m["mode"], m["metric"]) == ("generation", "generation", "rougeL")
    assert m["validation"]["rougeL"] == m["best_validation_rougeL"] == m["selection"]["best_value"]
    t = m["test"]
    assert t["examples"] == 6 and t["num_beams"] == 4 and m["validation"]["num_beams"] == 1
    samples = t["samples"]
    assert len(samples) == 5 and all(set(s) == {"source", "reference", "written"} for s in samples)
    # the reported ROUGE is the samples' (the first five of six) and the sixth's, as rouge-score gives it
    assert 0.0 <= t["rougeL"] <= 1.0 and "exact_match" in t
    mean5 = rouge([s["written"] for s in samples], [s["reference"] for s in samples])["rougeL"]
    assert abs(mean5 * 5 / 6 - t["rougeL"]) <= 1 / 6 + 1e-9
    assert set(m["baselines"]) == {"lead_sentence", "copy_input"}
    meta = json.loads((project / "models" / arch / "summaries-scratch" / "model" / "lmforge_model.json").read_text())
    assert meta["head"] == ("seq2seq" if arch == "t5" else "lm")
    assert "test rougeL" in logs[-1]
    # `lmforge generate` writes with the fine-tuned model from its task's prompt (prefix, delimiter)
    from lmforge.inference.generate import Settings, generate_text
    from lmforge.inference.loading import load

    text = generate_text(load(project / "models" / arch / "summaries-scratch"), samples[0]["source"],
                         Settings(max_new_tokens=8))
    assert isinstance(text, str)


def test_an_encoder_is_refused_for_a_generation_task(project):
    from lmforge.training import finetune

    task_dir = project / "summaries"
    write_summaries(task_dir, random.Random(1))
    params = load_params(write_params(project))
    with pytest.raises(ConfigError, match="bert does not generate text"):
        finetune.run_finetune(params, "bert", str(task_dir), from_scratch=True, log=lambda m: None,
                              tracker_factory=FakeTracker)
