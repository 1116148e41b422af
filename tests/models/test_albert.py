"""ALBERT: heads forward and backward, weight sharing, factorised embeddings, padding, presets, config errors."""

import math

import numpy as np
import pytest
import torch

from lmforge.models.albert import (
    PRESETS,
    AlbertConfig,
    AlbertForMaskedLM,
    AlbertForPreTraining,
    AlbertForSequenceClassification,
)
from lmforge.models.layers import ConfigError, attention_bias, count_parameters
from lmforge.objectives.features import pad_batch

TINY = dict(vocab_size=97, embedding_size=16, d_model=32, n_layers=3, n_heads=4, d_ff=64, max_positions=32)


def tiny(**overrides) -> AlbertConfig:
    return AlbertConfig(**{**TINY, **overrides})


def batch(B: int = 3, L: int = 12, seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(1, 97, (B, L), generator=g)
    attention_mask = torch.ones(B, L, dtype=torch.long)
    if B > 1:
        attention_mask[1, L - 4 :] = 0
    input_ids = input_ids.masked_fill(attention_mask == 0, 0)
    token_type_ids = (torch.arange(L) >= L // 2).long().expand(B, L) * attention_mask
    labels = torch.full((B, L), -100)
    labels[:, 2] = input_ids[:, 2]
    labels[:, 5] = input_ids[:, 5]
    return dict(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids, labels=labels)


def test_pretraining_forward_backward():
    torch.manual_seed(0)
    model = AlbertForPreTraining(tiny())
    b = batch()
    out = model(**b, sentence_order_label=torch.tensor([0, 1, 1]))
    assert out.logits.shape == (6, 97)  # training: the 2 labelled positions of each of the 3 rows
    assert out.aux["sop_logits"].shape == (3, 2)
    torch.testing.assert_close(out.loss, out.aux["mlm_loss"] + out.aux["sop_loss"])
    out.loss.backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())
    # MLM only, SOP only, neither
    assert torch.equal(model(**b).loss, model(**b).aux["mlm_loss"])
    no_labels = {k: v for k, v in b.items() if k != "labels"}
    assert model(**no_labels, sentence_order_label=torch.tensor([0, 1, 1])).loss is not None
    assert model(**no_labels).loss is None


def test_masked_lm_forward_backward():
    torch.manual_seed(0)
    model = AlbertForMaskedLM(tiny())
    assert model.albert.pooler is None  # as in the reference: no pooler without a sentence-level head
    out = model(**batch())
    assert out.logits.shape == (6, 97)  # training: the 2 labelled positions of each of the 3 rows
    assert model.eval()(**batch()).logits.shape == (3, 12, 97)
    out.loss.backward()
    assert all(p.grad is not None for p in model.parameters())


@pytest.mark.parametrize("num_labels", [3, 1])
def test_sequence_classification_forward_backward(num_labels):
    torch.manual_seed(0)
    model = AlbertForSequenceClassification(tiny(), num_labels=num_labels)
    b = {k: v for k, v in batch().items() if k != "labels"}
    labels = torch.tensor([0, 2, 1]) if num_labels > 1 else torch.tensor([0.5, 1.0, -1.0])
    out = model(**b, labels=labels)
    assert out.logits.shape == (3, num_labels)
    out.loss.backward()
    assert all(p.grad is not None for p in model.parameters())


def test_one_shared_block_and_factorised_embedding():
    shallow, deep = AlbertForPreTraining(tiny(n_layers=1)), AlbertForPreTraining(tiny(n_layers=12))
    assert count_parameters(shallow) == count_parameters(deep)  # depth costs no parameters
    m = deep
    assert m.albert.embeddings.word.weight.shape == (97, 16)  # V x E
    assert m.albert.project.weight.shape == (32, 16)  # E -> H
    assert m.mlm.dense.weight.shape == (16, 32)  # H -> E before the tied output
    # the output side is the input embedding: a change to it changes the logits
    b = batch()
    with torch.no_grad():
        before = m(**b).logits
        m.albert.embeddings.word.weight[5] += 1.0
        after = m(**b).logits
    assert not torch.allclose(before[..., 5], after[..., 5])


def test_depth_applies_the_block_n_layers_times():
    torch.manual_seed(0)
    model = AlbertForMaskedLM(tiny(n_layers=3)).eval()
    b = batch()
    with torch.no_grad():
        body = model.albert
        x = body.project(body.embeddings(b["input_ids"], b["token_type_ids"]))
        bias = attention_bias(b["attention_mask"], 12, 12, False, x.dtype, x.device)
        for _ in range(3):
            x = body.block(x, bias)
        torch.testing.assert_close(body(b["input_ids"], b["attention_mask"], b["token_type_ids"])[0], x)


def test_padding_leaves_real_positions_unchanged():
    torch.manual_seed(0)
    model = AlbertForPreTraining(tiny()).eval()
    short = {k: v for k, v in batch(1, 7, seed=3).items() if k != "labels"}
    padded = {k: torch.cat([v, torch.zeros(1, 5, dtype=v.dtype)], dim=1) for k, v in short.items()}  # pad id 0, mask 0
    with torch.no_grad():
        a, b = model(**short), model(**padded)
    torch.testing.assert_close(a.logits, b.logits[:, :7], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(a.aux["sop_logits"], b.aux["sop_logits"], atol=1e-5, rtol=1e-5)


def test_mlm_sop_batch_from_the_feature_converter():
    """``model(**batch)`` on the mlm_sop keys, special_tokens_mask included."""
    torch.manual_seed(0)
    model = AlbertForPreTraining(tiny()).eval()

    def example(n: int, swapped: int) -> dict[str, np.ndarray]:
        ids = np.arange(1, n + 1)
        labels = np.full(n, -100)
        labels[2] = ids[2]
        return {"input_ids": ids, "labels": labels, "token_type_ids": (np.arange(n) >= n // 2).astype(np.int64),
                "special_tokens_mask": np.zeros(n, dtype=np.int64), "sentence_order_label": np.array(swapped)}

    b = pad_batch([example(10, 0), example(7, 1)], pad_id=0)
    out = model(**b)
    assert out.loss is not None and out.aux["sop_logits"].shape == (2, 2)


def test_loss_at_init():
    """MLM ~ ln(vocab), SOP ~ ln 2."""
    torch.manual_seed(0)
    config = AlbertConfig.from_name("albert-tiny")
    model = AlbertForPreTraining(config).eval()
    g = torch.Generator().manual_seed(0)
    input_ids = torch.randint(5, config.vocab_size, (4, 64), generator=g)
    labels = torch.where(torch.rand(4, 64, generator=g) < 0.15, input_ids, -100)
    with torch.no_grad():
        out = model(input_ids=input_ids, labels=labels, sentence_order_label=torch.tensor([0, 1, 0, 1]))
    assert abs(out.aux["mlm_loss"].item() - math.log(config.vocab_size)) < 0.15
    assert abs(out.aux["sop_loss"].item() - math.log(2)) < 0.1


# published: ALBERT-base 12M (11.7M without the heads), ALBERT-large 18M
PUBLISHED = {"albert-base": 12e6, "albert-large": 18e6}


@pytest.mark.parametrize("name", list(PRESETS))
def test_preset_parameter_counts_match_transformers(name):
    transformers = pytest.importorskip("transformers")
    from lmforge.interop._albert import albert_config_to_hf

    config = AlbertConfig.from_name(name)
    with torch.device("meta"):
        ours, hf = AlbertForPreTraining(config), transformers.AlbertForPreTraining(albert_config_to_hf(config))
        body, hf_body = ours.albert, transformers.AlbertModel(albert_config_to_hf(config))
    assert count_parameters(ours) == count_parameters(hf)
    assert count_parameters(body) == count_parameters(hf_body)
    if name in PUBLISHED:
        assert count_parameters(ours) == pytest.approx(PUBLISHED[name], rel=0.03)


def test_config_errors():
    with pytest.raises(ConfigError, match="unknown option"):
        AlbertConfig.from_name("albert-base", hidden_size=10)
    with pytest.raises(ConfigError, match="unknown ALBERT preset"):
        AlbertConfig.from_name("albert-xxxl")
    with pytest.raises(ConfigError, match="divisible"):
        AlbertConfig.from_name("albert-tiny", n_heads=3)
    with pytest.raises(ConfigError, match="activation"):
        AlbertConfig.from_name("albert-tiny", act="gelu_new")  # our name is gelu_tanh
    with pytest.raises(ValueError, match="max_positions"):
        AlbertForMaskedLM(tiny())(input_ids=torch.ones(1, 33, dtype=torch.long))
