"""Fine-tuning on a generation task (CNN/DailyMail-style JSONL), end to end on the tiny project:
T5 trained text to text and GPT as a conditional language model, selected on validation ROUGE-L,
scored on test (T5 with beam search) beside the lead-sentence and copy-input baselines."""

from __future__ import annotations

import json
import random
import string

import pytest
import yaml

from lmforge.config import ConfigError, load_params
from lmforge.testing.documents import sentence

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
    from rouge_score.rouge_scorer import RougeScorer

    from lmforge.finetuning.features import collate, pad_id
    from lmforge.finetuning.generation.features import encode_pairs
    from lmforge.finetuning.tasks import load_task
    from lmforge.models.folder import load_model_dir
    from lmforge.training import finetune
    from lmforge.finetuning.generation.scorer import MAX_NEW_TOKENS, TEST_BEAMS, write

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
    # what the saved model writes on the test sources (beam search, as scored): the samples are its
    # first five; the reported scores are rouge-score's and exact match's of all six, recomputed here
    out = project / "models" / arch / "summaries-scratch"
    task = load_task(str(task_dir), params, seed=params.train.seed)
    tok_dir = out / "model" / "tokenizer"
    prompts = encode_pairs(task.splits["test"], arch, tok_dir, params.finetune.max_length, prefix=task.prefix,
                           with_target=False)
    model = load_model_dir(out / "model")
    pad = pad_id(arch, tok_dir)
    written = write(model, arch, prompts, lambda rows: collate(rows, pad), tok_dir, num_beams=TEST_BEAMS)
    references = [p.target for p in task.splits["test"]]
    assert [(s["source"], s["reference"], s["written"]) for s in samples] == \
        [(p.source, p.target, w) for p, w in zip(task.splits["test"][:5], written)]
    scorer = RougeScorer(["rougeL"], use_stemmer=True)
    expected = sum(scorer.score(r, w)["rougeL"].fmeasure for r, w in zip(references, written)) / 6
    assert t["rougeL"] == pytest.approx(expected, abs=1e-12)

    def plain(text: str) -> str:  # SQuAD's normalisation: case, punctuation, articles, spaces
        text = "".join(c for c in text.lower() if c not in string.punctuation)
        return " ".join(w for w in text.split() if w not in ("a", "an", "the"))

    assert t["exact_match"] == sum(plain(w) == plain(r) for w, r in zip(written, references)) / 6
    assert set(m["baselines"]) == {"lead_sentence", "copy_input"}
    meta = json.loads((project / "models" / arch / "summaries-scratch" / "model" / "lmforge_model.json").read_text())
    assert meta["head"] == ("seq2seq" if arch == "t5" else "lm")
    assert "test rougeL" in logs[-1]
    # `lmforge generate` writes with the fine-tuned model from its task's prompt (prefix, delimiter)
    from lmforge.inference.generate import Settings, generate_text
    from lmforge.inference.loading import load

    # greedy, it writes what the validation passes' greedy search writes for the same source (whose
    # decoding strips the spaces around it)
    text = generate_text(load(out), samples[0]["source"], Settings(max_new_tokens=MAX_NEW_TOKENS))
    assert text.strip() == write(model, arch, prompts[:1], lambda rows: collate(rows, pad), tok_dir, num_beams=1)[0]


def test_an_encoder_is_refused_for_a_generation_task(project):
    from lmforge.training import finetune

    task_dir = project / "summaries"
    write_summaries(task_dir, random.Random(1))
    params = load_params(write_params(project))
    with pytest.raises(ConfigError, match="bert does not generate text"):
        finetune.run_finetune(params, "bert", str(task_dir), from_scratch=True, log=lambda m: None,
                              tracker_factory=FakeTracker)
