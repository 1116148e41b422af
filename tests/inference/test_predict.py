"""``lmforge predict``: the labels the fine-tuning evaluation gives for the same texts (a
classifier and a text-to-text model), probabilities that sum to one, pairs, and the errors."""

import json

import pytest
import torch

from lmforge.finetuning import features
from lmforge.finetuning.tasks import Example
from lmforge.inference.loading import InferenceError, load
from lmforge.inference.predict import predict
from lmforge.finetuning.classification.scorer import predict as evaluate_predict
from lmforge.finetuning.eval_batches import ordered_batches

from .conftest import tokenizer_of, write_model

LABELS = ["module", "class", "function"]
TEXTS = ["Return the value of the parser.", "A class that holds the settings of a run.",
         "Utilities for reading configuration files.", "Close the file."]


def fine_tuned(params, arch, root, mode, pair=False):
    """A model folder as fine-tuning writes it (random weights), with its task record."""
    run = root / arch / "toy"
    head = "classification" if mode == "classification" else None
    model_dir = write_model(params, arch, run / "model", head=head, num_labels=3 if head else None, seed=4)
    tok = tokenizer_of(params, arch)
    targets = ({str(i): features.label_targets(arch, features.load_tokenizer(arch, tok), LABELS)[name]
                for i, name in enumerate(LABELS)} if mode == "text_to_text" else None)
    record = {"labels": LABELS, "mode": mode, "targets": targets, "prefix": "docstring kind", "pair": pair,
              "max_length": 32}
    (model_dir / "task.json").write_text(json.dumps(record))
    return run


@pytest.mark.parametrize("arch, mode", [("bert", "classification"), ("gpt", "classification"),
                                        ("xlnet", "classification"), ("elmo", "classification"),
                                        ("t5", "text_to_text"), ("bart", "text_to_text")])
def test_predict_gives_the_evaluations_labels(corpus, tmp_path, arch, mode):
    params, _ = corpus
    loaded = load(fine_tuned(params, arch, tmp_path, mode))
    with torch.no_grad():
        for p in loaded.model.parameters():
            p.add_(0.3 * torch.randn_like(p))  # predictions that differ from text to text
    got = predict(loaded, TEXTS, batch_size=3)
    label_ids = {name: i for i, name in enumerate(LABELS)}
    examples = [Example(t, None, LABELS[0]) for t in TEXTS]
    encoded = features.encode_examples(examples, arch, loaded.tokenizer.directory, 32, label_ids, prefix="docstring kind",
                                       mode=mode, label_names=LABELS)
    candidates = {int(k): v for k, v in loaded.task["targets"].items()} if mode == "text_to_text" else None
    pad = loaded.vocab.pad if loaded.vocab.pad is not None else 0
    want, _ = evaluate_predict(loaded.model, ordered_batches(encoded, lambda rows: features.collate(rows, pad)), mode, candidates)
    assert [p.label for p in got] == [LABELS[i] for i in want]
    for p in got:
        assert sum(p.scores.values()) == pytest.approx(1.0, abs=1e-5)
        assert p.score == max(p.scores.values()) == p.scores[p.label]


def test_pairs(corpus, tmp_path):
    params, _ = corpus
    loaded = load(fine_tuned(params, "bert", tmp_path, "classification", pair=True))
    with pytest.raises(InferenceError, match="pair"):
        predict(loaded, TEXTS[:2])
    one = predict(loaded, TEXTS[:2], ["It returns.", "It holds."])
    swapped = predict(loaded, TEXTS[:2], ["It holds.", "It returns."])
    assert [p.scores for p in one] != [p.scores for p in swapped]  # the pair is read


def test_errors(models, corpus, tmp_path):
    with pytest.raises(InferenceError, match="pretrained model"):
        predict(load(models["bert"]), TEXTS)
    params, _ = corpus
    loaded = load(fine_tuned(params, "bert", tmp_path, "classification"))
    with pytest.raises(InferenceError, match="empty"):
        predict(loaded, ["fine", ""])
    with pytest.raises(InferenceError, match="single texts"):
        predict(loaded, ["fine"], ["a pair"])
