"""ERNIE 1.0: BERT's network with ERNIE's configuration and an optional task-type embedding."""

from __future__ import annotations

import math

import pytest
import torch
import transformers

from lmforge.interop._bert import hf_config
from lmforge.models import bert, ernie
from lmforge.models.layers import ConfigError, count_parameters

from .test_bert import make_batch

HEADS = {  # ours -> BERT's head of the same kind (for make_batch)
    ernie.ErnieForPreTraining: bert.BertForPreTraining,
    ernie.ErnieForMaskedLM: bert.BertForMaskedLM,
    ernie.ErnieForSequenceClassification: bert.BertForSequenceClassification,
}
HF_HEADS = {
    ernie.ErnieForPreTraining: transformers.ErnieForPreTraining,
    ernie.ErnieForMaskedLM: transformers.ErnieForMaskedLM,
    ernie.ErnieForSequenceClassification: transformers.ErnieForSequenceClassification,
    ernie.ErnieModel: transformers.ErnieModel,
}


@pytest.fixture(scope="module")
def config() -> ernie.ErnieConfig:
    return ernie.from_name("ernie-tiny-test", vocab_size=97)


def test_ernie_is_bert_with_its_differences():
    for ours, theirs in HEADS.items():
        assert issubclass(ours, theirs)
    base = ernie.from_name("ernie-1.0-base")
    assert isinstance(base, bert.BertConfig)
    # the released ERNIE 1.0 base configuration
    assert (base.n_layers, base.d_model, base.n_heads, base.d_ff) == (12, 768, 12, 3072)
    assert (base.vocab_size, base.max_positions, base.type_vocab_size, base.act) == (18000, 513, 2, "relu")
    assert base.eps == 1e-5 and not base.use_task_id
    tiny = ernie.from_name("ernie-tiny-test")
    assert tiny.act == "relu" and tiny.eps == 1e-5


@pytest.mark.parametrize("head", list(HEADS), ids=lambda h: h.__name__)
def test_forward_backward_every_head(config, head):
    torch.manual_seed(0)
    model = head(config)
    batch = make_batch(config, HEADS[head])
    out = model(**batch)
    # in training the masked-LM heads score only the labelled positions
    classifier = "classification" in head.__name__.lower()
    rows = batch["input_ids"].size(0) if classifier else int((batch["labels"] != -100).sum())
    assert out.logits.shape[0] == rows
    assert torch.isfinite(out.loss)
    out.loss.backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name


@pytest.mark.parametrize("head", list(HEADS), ids=lambda h: h.__name__)
def test_padding_does_not_change_real_positions(config, head):
    torch.manual_seed(0)
    model = head(config).eval()
    batch = make_batch(config, HEADS[head], B=2)
    batch = {k: v for k, v in batch.items() if k in ("input_ids", "attention_mask", "token_type_ids")}
    batch["attention_mask"][:] = 1
    padded = {k: torch.cat([v, torch.zeros_like(v[:, :4])], dim=1) for k, v in batch.items()}
    with torch.no_grad():
        a, b = model(**batch), model(**padded)
    L = batch["input_ids"].size(1)
    real = b.logits if b.logits.ndim == 2 else b.logits[:, :L]
    torch.testing.assert_close(real, a.logits, atol=1e-5, rtol=1e-5)


def test_task_type_embedding(config):
    torch.manual_seed(0)
    batch = make_batch(config, bert.BertForPreTraining)
    plain = ernie.ErnieForPreTraining(config)
    with pytest.raises(ValueError, match="use_task_id"):
        plain(**batch, task_type_ids=torch.zeros_like(batch["input_ids"]))

    with_task = ernie.ErnieForPreTraining(ernie.from_name("ernie-tiny-test", vocab_size=97, use_task_id=True)).eval()
    assert with_task.encoder.embeddings.task.num_embeddings == 3
    assert count_parameters(with_task) == count_parameters(plain) + 3 * config.d_model
    with torch.no_grad():
        default = with_task(**batch).logits
        zeros = with_task(**batch, task_type_ids=torch.zeros_like(batch["input_ids"])).logits
        ones = with_task(**batch, task_type_ids=torch.ones_like(batch["input_ids"])).logits
    torch.testing.assert_close(default, zeros)  # no ids = task 0, as in transformers
    assert not torch.allclose(zeros, ones)
    with_task.train()
    out = with_task(**batch, task_type_ids=torch.ones_like(batch["input_ids"]))
    out.loss.backward()
    assert with_task.encoder.embeddings.task.weight.grad[1].abs().sum() > 0


def test_loss_at_init_is_log_vocab_plus_log_2():
    torch.manual_seed(0)
    config = ernie.from_name("ernie-tiny-test")
    model = ernie.ErnieForPreTraining(config).eval()
    with torch.no_grad():
        out = model(**make_batch(config, bert.BertForPreTraining, L=64))
    assert out.loss.item() == pytest.approx(math.log(config.vocab_size) + math.log(2), abs=0.1)


@pytest.mark.parametrize("name", sorted(ernie.PRESETS))
@pytest.mark.parametrize("use_task_id", [False, True])
def test_preset_parameter_counts_equal_transformers(name, use_task_id):
    config = ernie.from_name(name, use_task_id=use_task_id)
    with torch.device("meta"):
        for ours, theirs in HF_HEADS.items():
            assert count_parameters(ours(config)) == theirs(hf_config(config)).num_parameters(), (name, ours.__name__)


def test_ernie_base_size():
    with torch.device("meta"):
        n = count_parameters(ernie.ErnieModel(ernie.from_name("ernie-1.0-base")))
    # BERT-base less the smaller vocabulary: 110M - (30522 - 18000) * 768 ~ 100M
    assert n == 99_866_112
    assert abs(n - 100e6) / 100e6 < 0.01


def test_config_errors():
    with pytest.raises(ConfigError, match="unknown option"):
        ernie.from_name("ernie-tiny-test", use_task_ids=True)
    with pytest.raises(ConfigError, match="known: .*ernie-1.0-base"):
        ernie.from_name("ernie-3.0")
    with pytest.raises(ConfigError, match="task_type_vocab_size"):
        ernie.from_name("ernie-tiny-test", task_type_vocab_size=0)
    with pytest.raises(ConfigError, match="ErnieConfig"):
        ernie.ErnieForMaskedLM(bert.from_name("bert-tiny-test"))
