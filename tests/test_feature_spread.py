"""benchmarks/feature_spread.py: the spread on fixed matrices, and on a model whose last layer is
made to ignore its input."""

from __future__ import annotations

import pytest
import torch

from .conftest import load_benchmark


@pytest.fixture(scope="module")
def fs():
    return load_benchmark("feature_spread")


def test_spread_on_fixed_matrices(fs):
    assert fs.spread(torch.ones(5, 3) * 2.0) == 0.0
    rows = torch.tensor([[1.0, 0.0], [3.0, 0.0]])  # mean (2, 0), std (sqrt 2, 0)
    assert fs.spread(rows) == pytest.approx(2 ** 0.5 / 2)
    with pytest.raises(ValueError, match="rows >= 2"):
        fs.spread(torch.ones(1, 3))


def test_a_collapsed_encoder_has_no_spread(fs):
    from lmforge.models.registry import build_model

    torch.manual_seed(0)
    model = build_model("bert-tiny-test", head="classification", num_labels=3, classifier_pooling="mean")
    batch = {"input_ids": torch.randint(5, 1024, (8, 16)), "attention_mask": torch.ones(8, 16, dtype=torch.long),
             "labels": torch.zeros(8, dtype=torch.long)}
    features = fs.classifier_input(model, batch)
    assert features.shape == (8, 64) and fs.spread(features) > 0.05
    with torch.no_grad():  # the last LayerNorm's output no longer depends on its input: every token is its bias
        model.encoder.layers[-1].norm2.weight.zero_()
    assert fs.spread(fs.classifier_input(model, batch)) < 1e-6


def test_a_model_without_a_classifier_is_an_error(fs):
    with pytest.raises(ValueError, match="no linear classifier layer"):
        fs.classifier_input(torch.nn.Identity(), {"input_ids": torch.zeros(2, 3, dtype=torch.long)})


def test_the_encoder_pooled_heads_of_t5_bart_and_switch_are_read(fs):
    from lmforge.models.registry import build_model

    for preset, first in (("t5-tiny", "classifier.dense"), ("switch-tiny", "classifier.dense"), ("bart-tiny", "head.dense")):
        torch.manual_seed(0)
        model = build_model(preset, head="classification", num_labels=3, classifier_pooling="mean")
        batch = {"input_ids": torch.randint(5, 200, (4, 12)), "attention_mask": torch.ones(4, 12, dtype=torch.long)}
        seen = []
        hook = model.get_submodule(first).register_forward_hook(lambda _m, i, _o: seen.append(i[0]))
        features = fs.classifier_input(model, batch)
        hook.remove()
        assert features.shape == (4, model.config.d_model) and torch.equal(features, seen[0])
