"""The masked-LM heads score only the labelled positions in training: the same loss and the
same gradients as scoring every position, and full logits in evaluation."""

import pytest
import torch

from lmforge.models.layers import lm_loss
from lmforge.models.registry import build_model

NO_DROPOUT = {"dropout": 0.0, "attn_dropout": 0.0}
SMALL_ALBERT = {"vocab_size": 512, "max_positions": 64}
PRESETS = [("bert-tiny-test", "pretraining"), ("bert-tiny-test", "mlm"), ("ernie-tiny-test", "pretraining"),
           ("albert-tiny", "pretraining"), ("albert-tiny", "mlm")]


def _batch(vocab: int):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, vocab, (3, 20), generator=g)
    labels = torch.full_like(ids, -100)
    masked = torch.rand(ids.shape, generator=g) < 0.2
    masked[0, 0] = True
    labels[masked] = ids[masked]
    return ids, labels, masked


@pytest.mark.parametrize("preset,head", PRESETS)
def test_training_loss_and_gradients_equal_scoring_every_position(preset, head):
    torch.manual_seed(0)
    model = build_model(preset, head=head, **(SMALL_ALBERT if preset.startswith("albert") else NO_DROPOUT))
    ids, labels, masked = _batch(model.config.vocab_size)
    model.train()
    out = model(input_ids=ids, labels=labels)
    assert out.logits.shape == (int(masked.sum()), model.config.vocab_size)
    sparse_loss = out.aux.get("mlm_loss", out.loss)
    sparse_grads = torch.autograd.grad(sparse_loss, [p for p in model.parameters() if p.requires_grad],
                                       allow_unused=True)

    model.eval()  # the dense path: every position scored, the loss over the labelled ones
    full = model(input_ids=ids)
    assert full.logits.shape == (3, 20, model.config.vocab_size)
    torch.testing.assert_close(full.logits[masked], out.logits.detach(), rtol=1e-5, atol=1e-5)
    dense_loss = lm_loss(full.logits, labels)
    torch.testing.assert_close(sparse_loss.detach(), dense_loss.detach(), rtol=1e-5, atol=1e-6)
    dense_grads = torch.autograd.grad(dense_loss, [p for p in model.parameters() if p.requires_grad],
                                      allow_unused=True)
    for s, d in zip(sparse_grads, dense_grads):
        assert (s is None) == (d is None)  # the same parameters take part (the NSP / SOP heads in neither)
        if s is not None:
            torch.testing.assert_close(s, d, rtol=1e-4, atol=1e-6)


def test_evaluation_with_labels_keeps_every_position():
    model = build_model("bert-tiny-test", head="pretraining").eval()
    ids, labels, _ = _batch(model.config.vocab_size)
    out = model(input_ids=ids, labels=labels)
    assert out.logits.shape == (3, 20, model.config.vocab_size)
    torch.testing.assert_close(out.aux["mlm_loss"], lm_loss(out.logits, labels))
