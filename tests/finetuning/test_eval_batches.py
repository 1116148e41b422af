"""Scoring batches (finetuning/eval_batches.py): eval mode inside, the model's own mode after,
no gradients, every example once in its order, the labels kept from the model."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lmforge.models.layers import ModelOutput
from lmforge.finetuning.eval_batches import batch_logits, evaluating


class Recorder(torch.nn.Module):
    """Logits = input id x 10 + position, so each row says which example it came from."""

    def __init__(self):
        super().__init__()
        self.dropout = torch.nn.Dropout(0.5)
        self.scale = torch.nn.Parameter(torch.ones(()))
        self.calls: list[dict] = []

    def forward(self, input_ids, **rest):
        self.calls.append({"keys": sorted(["input_ids", *rest]), "training": self.training,
                           "grad": torch.is_grad_enabled()})
        positions = torch.arange(input_ids.shape[1]).expand_as(input_ids)
        return ModelOutput(logits=(input_ids * 10 + positions).float()[..., None] * self.scale)


def collate(examples):
    return {k: torch.from_numpy(np.stack([e[k] for e in examples])) for k in examples[0]}


def test_evaluating_restores_the_models_mode_even_after_an_error():
    model = Recorder().train()
    with evaluating(model) as m:
        assert m is model and not model.training and not model.dropout.training
    assert model.training and model.dropout.training
    with pytest.raises(RuntimeError, match="boom"), evaluating(model):
        raise RuntimeError("boom")
    assert model.training
    model.eval()
    with evaluating(model):
        pass
    assert not model.training  # a model in eval mode stays there


def test_batch_logits_scores_every_example_once_in_order_without_labels():
    encoded = [{"input_ids": np.array([i, i]), "labels": np.array([-100, i])} for i in range(7)]
    model = Recorder().train()
    got = list(batch_logits(model, encoded, collate, batch_size=3))
    assert [first for first, _, _ in got] == [0, 3, 6]
    assert [batch["input_ids"][:, 0].tolist() for _, batch, _ in got] == [[0, 1, 2], [3, 4, 5], [6]]
    assert [batch["labels"][:, 1].tolist() for _, batch, _ in got] == [[0, 1, 2], [3, 4, 5], [6]]  # the labels come back
    logits = torch.cat([lg for _, _, lg in got])
    assert logits[:, :, 0].tolist() == [[10 * i, 10 * i + 1] for i in range(7)]
    assert not logits.requires_grad
    assert model.calls == [{"keys": ["input_ids"], "training": False, "grad": False}] * 3  # labels kept from the model
    assert model.training
