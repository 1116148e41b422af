"""BERT: every head's forward/backward on the CPU preset, padding, presets, config errors."""

from __future__ import annotations

import math

import pytest
import torch
import transformers

from lmforge.interop._bert import hf_config
from lmforge.models import bert
from lmforge.models.layers import ConfigError, count_parameters

HEADS = [bert.BertForPreTraining, bert.BertForMaskedLM, bert.BertForSequenceClassification]
HF_HEADS = {
    bert.BertForPreTraining: transformers.BertForPreTraining,
    bert.BertForMaskedLM: transformers.BertForMaskedLM,
    bert.BertForSequenceClassification: transformers.BertForSequenceClassification,
    bert.BertModel: transformers.BertModel,
}


def make_batch(config: bert.BertConfig, head: type, B: int = 4, L: int = 16, seed: int = 0) -> dict[str, torch.Tensor]:
    """An objective-shaped batch: [CLS] A [SEP] B [SEP] pairs, rows padded to different lengths."""
    g = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(5, config.vocab_size, (B, L), generator=g)
    lengths = torch.tensor([L, L - 3, L - 7, 5])[:B]
    attention_mask = (torch.arange(L)[None, :] < lengths[:, None]).long()
    input_ids = input_ids.masked_fill(attention_mask == 0, config.pad_id)
    token_type_ids = ((torch.arange(L)[None, :] >= lengths[:, None] // 2) & (attention_mask == 1)).long()
    batch = dict(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
    if head is bert.BertForSequenceClassification:
        batch["labels"] = torch.randint(0, 2, (B,), generator=g)
    else:
        chosen = (torch.rand(B, L, generator=g) < 0.3) & (attention_mask == 1)
        batch["labels"] = torch.where(chosen, input_ids, torch.full_like(input_ids, -100))
        batch["special_tokens_mask"] = torch.zeros_like(input_ids)
    if head is bert.BertForPreTraining:
        batch["next_sentence_label"] = torch.randint(0, 2, (B,), generator=g)
    return batch


@pytest.fixture(scope="module")
def config() -> bert.BertConfig:
    return bert.from_name("bert-tiny-test", vocab_size=97)


@pytest.mark.parametrize("head", HEADS, ids=lambda h: h.__name__)
def test_forward_backward_every_head(config, head):
    torch.manual_seed(0)
    model = head(config)
    batch = make_batch(config, head)
    out = model(**batch)
    B, L = batch["input_ids"].shape
    # in training mode the masked-LM heads score only the labelled positions
    labelled = int((batch.get("labels", torch.zeros(1)) != -100).sum())
    expected = (B, 2) if head is bert.BertForSequenceClassification else (labelled, config.vocab_size)
    assert out.logits.shape == expected
    assert out.hidden_states.shape == (B, L, config.d_model)
    assert out.loss.ndim == 0 and torch.isfinite(out.loss)
    if head is bert.BertForPreTraining:
        assert out.aux["nsp_logits"].shape == (B, 2)
        assert torch.allclose(out.loss, out.aux["mlm_loss"] + out.aux["nsp_loss"])
    out.loss.backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
    no_labels = model(**{k: v for k, v in batch.items() if k not in ("labels", "next_sentence_label")})
    assert no_labels.loss is None


def test_pretraining_loss_without_nsp_labels_is_mlm_only(config):
    model = bert.BertForPreTraining(config).eval()
    batch = make_batch(config, bert.BertForPreTraining)
    full = model(**batch)
    del batch["next_sentence_label"]
    mlm_only = model(**batch)
    assert torch.allclose(mlm_only.loss, full.aux["mlm_loss"])
    assert "nsp_loss" not in mlm_only.aux


def test_mlm_output_layer_is_tied_to_word_embeddings(config):
    model = bert.BertForPreTraining(config)
    vocab_by_dim = [n for n, p in model.named_parameters() if p.shape == (config.vocab_size, config.d_model)]
    assert vocab_by_dim == ["encoder.embeddings.word.weight"]  # one matrix, used twice
    assert model.mlm.bias.shape == (config.vocab_size,)  # the output-only bias
    model.eval()
    batch = make_batch(config, bert.BertForPreTraining)
    with torch.no_grad():
        before = model(**batch).logits[..., 3].clone()
        model.encoder.embeddings.word.weight[3].mul_(3.0)  # id 3 is in no input (ids >= 5, pad 0)
        batch_has_7 = (batch["input_ids"] == 3).any()
        after = model(**batch).logits[..., 3]
    assert not batch_has_7
    torch.testing.assert_close(after - model.mlm.bias[3], 3.0 * (before - model.mlm.bias[3]))


@pytest.mark.parametrize("head", HEADS, ids=lambda h: h.__name__)
def test_padding_does_not_change_real_positions(config, head):
    torch.manual_seed(0)
    model = head(config).eval()
    batch = make_batch(config, head, B=2)
    batch = {k: v for k, v in batch.items() if k in ("input_ids", "attention_mask", "token_type_ids")}
    batch["attention_mask"][:] = 1  # no padding
    padded = {k: torch.cat([v, torch.zeros_like(v[:, :5])], dim=1) for k, v in batch.items()}
    padded["input_ids"][:, -5:] = config.pad_id
    with torch.no_grad():
        a, b = model(**batch), model(**padded)
    L = batch["input_ids"].size(1)
    if head is bert.BertForSequenceClassification:
        torch.testing.assert_close(b.logits, a.logits, atol=1e-5, rtol=1e-5)
    else:
        torch.testing.assert_close(b.logits[:, :L], a.logits, atol=1e-5, rtol=1e-5)
    if head is bert.BertForPreTraining:
        torch.testing.assert_close(b.aux["nsp_logits"], a.aux["nsp_logits"], atol=1e-5, rtol=1e-5)


def test_loss_at_init_is_log_vocab_plus_log_2():
    torch.manual_seed(0)
    config = bert.from_name("bert-tiny-test")
    model = bert.BertForPreTraining(config).eval()
    batch = make_batch(config, bert.BertForPreTraining, B=4, L=64)
    with torch.no_grad():
        out = model(**batch)
    assert out.loss.item() == pytest.approx(math.log(config.vocab_size) + math.log(2), abs=0.1)
    assert out.aux["nsp_loss"].item() == pytest.approx(math.log(2), abs=0.1)


def test_training_steps_reduce_the_loss(config):
    torch.manual_seed(0)
    model = bert.BertForPreTraining(config)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    batch = make_batch(config, bert.BertForPreTraining)
    losses = []
    for _ in range(8):
        out = model(**batch)
        out.loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(out.loss.item())
    assert losses[-1] < losses[0] - 0.5


def test_regression_head(config):
    model = bert.BertForSequenceClassification(config, num_labels=1)
    batch = make_batch(config, bert.BertForSequenceClassification)
    batch["labels"] = torch.randn(batch["input_ids"].size(0))
    out = model(**batch)
    assert out.logits.shape == (batch["input_ids"].size(0), 1)
    expected = torch.nn.functional.mse_loss(out.logits.squeeze(-1), batch["labels"])
    torch.testing.assert_close(out.loss, expected)


@pytest.mark.parametrize("name", sorted(bert.PRESETS))
def test_preset_parameter_counts_equal_transformers(name):
    config = bert.from_name(name)
    with torch.device("meta"):  # no memory, no init cost
        for ours, theirs in HF_HEADS.items():
            ours_model = ours(config)
            hf_model = theirs(hf_config(config))
            assert count_parameters(ours_model) == hf_model.num_parameters(), (name, ours.__name__)


@pytest.mark.parametrize("name, published", [("bert-base", 110e6), ("bert-tiny", 4.4e6), ("bert-large", 340e6)])
def test_presets_match_published_sizes(name, published):
    with torch.device("meta"):
        n = count_parameters(bert.BertModel(bert.from_name(name)))
    assert abs(n - published) / published < 0.02, n


def test_presets_have_the_published_shapes():
    base, tiny = bert.from_name("bert-base"), bert.from_name("bert-tiny")
    assert (base.n_layers, base.d_model, base.n_heads, base.vocab_size) == (12, 768, 12, 30522)
    assert (tiny.n_layers, tiny.d_model, tiny.n_heads, tiny.vocab_size) == (2, 128, 2, 30522)
    assert base.act == "gelu" and base.eps == 1e-12 and base.max_positions == 512


def test_config_errors():
    with pytest.raises(ConfigError, match="unknown option"):
        bert.from_name("bert-tiny-test", hidden_size=32)
    with pytest.raises(ConfigError, match="known: .*bert-base"):
        bert.from_name("bert-huge")
    with pytest.raises(ConfigError, match="divisible"):
        bert.from_name("bert-tiny-test", d_model=30, n_heads=4)
    with pytest.raises(ConfigError, match="activation"):
        bert.from_name("bert-tiny-test", act="swish")
    with pytest.raises(ConfigError, match="pad_id"):
        bert.from_name("bert-tiny-test", vocab_size=10, pad_id=10)
    with pytest.raises(ConfigError, match="dropout"):
        bert.BertConfig(dropout=1.0)
    with pytest.raises(ConfigError, match="num_labels"):
        bert.BertForSequenceClassification(bert.from_name("bert-tiny-test"), num_labels=0)
    # overrides make a copy: the preset itself is untouched
    assert bert.from_name("bert-tiny-test", n_layers=3).n_layers == 3
    assert bert.PRESETS["bert-tiny-test"].n_layers == 2


def test_input_errors(config):
    model = bert.BertForMaskedLM(config)
    with pytest.raises(ValueError, match="max_positions"):
        model(input_ids=torch.zeros(1, config.max_positions + 1, dtype=torch.long))
    with pytest.raises(TypeError, match="next_sentence_label"):  # not silently dropped
        model(input_ids=torch.zeros(1, 4, dtype=torch.long), next_sentence_label=torch.zeros(1, dtype=torch.long))


def test_norm_first_builds_a_pre_ln_encoder_with_a_final_norm_and_is_not_exported():
    """``norm_first: true``: each block normalises its input before attention and feed-forward
    (x + attn(LN(x)), then x + ffn(LN(x))), and a LayerNorm follows the stack; transformers' BERT
    is post-LN, so the export refuses it."""
    import pytest
    import torch

    from lmforge.config import ConfigError
    from lmforge.models.bert import BertConfig, BertModel

    torch.manual_seed(0)
    config = BertConfig(vocab_size=50, d_model=16, n_layers=2, n_heads=2, d_ff=32, max_positions=16, norm_first=True,
                        dropout=0.0, attn_dropout=0.0)
    model = BertModel(config).eval()
    ids = torch.randint(5, 50, (2, 7))
    hidden, _ = model(ids)
    x = model.embeddings(ids, None)
    for block in model.layers:
        x = x + block.attn(block.norm1(x), None)
        x = x + block.ffn(block.norm2(x))
    torch.testing.assert_close(hidden, model.final_norm(x))
    assert BertModel(BertConfig(vocab_size=50, d_model=16, n_layers=1, n_heads=2, d_ff=32)).final_norm is None
    from lmforge.interop._bert import encoder_hf_kwargs

    with pytest.raises(ConfigError, match="pre-LN"):
        encoder_hf_kwargs(config, "BertConfig")
