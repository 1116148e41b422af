"""GPT-1 / GPT-2: heads forward and backward, causality, padding, presets, init, config errors."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from lmforge.models.gpt import PRESETS, GPTConfig, GPTForSequenceClassification, GPTLMHeadModel
from lmforge.models.layers import ConfigError, count_parameters
from lmforge.objectives.features import pad_batch

TINY = dict(vocab_size=97, n_positions=32, d_model=32, n_layers=2, n_heads=4, d_ff=64)
VARIANTS = {"gpt2": dict(norm_first=True), "gpt1": dict(norm_first=False, scaled_residual_init=False)}


def tiny(variant: str = "gpt2", **overrides) -> GPTConfig:
    return GPTConfig(**{**TINY, **VARIANTS[variant], **overrides})


def ids(batch: int, length: int, seed: int = 0, vocab: int = 97) -> torch.Tensor:
    return torch.randint(1, vocab, (batch, length), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("variant", VARIANTS)
def test_lm_head_forward_backward(variant):
    torch.manual_seed(0)
    model = GPTLMHeadModel(tiny(variant))
    x = ids(3, 16)
    out = model(input_ids=x, labels=x)
    assert out.logits.shape == (3, 16, 97)
    assert out.hidden_states.shape == (3, 16, 32)
    out.loss.backward()
    grads = [p.grad for p in model.parameters()]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)
    assert model.gpt.wte.weight.grad.abs().sum() > 0  # input and (tied) output side
    assert isinstance(model.gpt.ln_f, torch.nn.LayerNorm) == (variant == "gpt2")  # final LN only in GPT-2


def test_labels_are_shifted_once_and_eos_is_a_target():
    torch.manual_seed(0)
    model = GPTLMHeadModel(tiny()).eval()
    x = ids(2, 12)
    x[:, 5] = 0  # an id that is also "pad"/"eos" for many tokenizers: still a target
    out = model(input_ids=x, labels=x)
    expected = F.cross_entropy(out.logits[:, :-1].reshape(-1, 97), x[:, 1:].reshape(-1))
    torch.testing.assert_close(out.loss, expected)


@pytest.mark.parametrize("variant", VARIANTS)
def test_causal(variant):
    """Logits at t depend on tokens <= t only."""
    torch.manual_seed(0)
    model = GPTLMHeadModel(tiny(variant)).eval()
    x = ids(2, 16)
    y = x.clone()
    y[:, 9:] = ids(2, 7, seed=1)
    with torch.no_grad():
        a, b = model(input_ids=x).logits, model(input_ids=y).logits
    torch.testing.assert_close(a[:, :9], b[:, :9])
    assert not torch.allclose(a[:, 9:], b[:, 9:])


@pytest.mark.parametrize("variant", VARIANTS)
def test_right_padding_leaves_real_positions_unchanged(variant):
    torch.manual_seed(0)
    model = GPTLMHeadModel(tiny(variant)).eval()
    short, long = ids(1, 7, seed=1), ids(1, 12, seed=2)
    padded = torch.zeros(2, 12, dtype=torch.long)
    padded[0, :7], padded[1] = short[0], long[0]
    mask = (torch.arange(12) < torch.tensor([[7], [12]])).long()
    with torch.no_grad():
        batch = model(input_ids=padded, attention_mask=mask).logits
        alone_short, alone_long = model(input_ids=short).logits, model(input_ids=long).logits
    torch.testing.assert_close(batch[0, :7], alone_short[0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(batch[1], alone_long[0], atol=1e-5, rtol=1e-5)


def test_clm_batch_from_the_feature_converter():
    """``model(**batch)`` on the CLM keys; padded labels are -100 and do not count."""
    torch.manual_seed(0)
    model = GPTLMHeadModel(tiny()).eval()
    examples = [{"input_ids": np.arange(1, 11), "labels": np.arange(1, 11)}, {"input_ids": np.arange(3, 9), "labels": np.arange(3, 9)}]
    batch = pad_batch(examples, pad_id=0)
    assert set(batch) == {"input_ids", "labels", "attention_mask"}
    with torch.no_grad():
        out = model(**batch)
        logits = out.logits
    real = torch.cat([logits[0, :-1], logits[1, :5]])
    targets = torch.cat([batch["labels"][0, 1:], batch["labels"][1, 1:6]])
    torch.testing.assert_close(out.loss, F.cross_entropy(real, targets))


def test_sequence_classification_uses_the_last_real_token():
    torch.manual_seed(0)
    model = GPTForSequenceClassification(tiny(), num_labels=3).eval()
    x = ids(2, 10)
    mask = torch.ones_like(x)
    mask[0, 6:] = 0  # right padded
    mask[1, :3] = 0  # left padded: last real token is still the last position
    with torch.no_grad():
        out = model(input_ids=x, attention_mask=mask)
        expected = model.score(out.hidden_states[[0, 1], [5, 9]])
        alone = model(input_ids=x[:1, :6]).logits
    assert out.logits.shape == (2, 3)
    torch.testing.assert_close(out.logits, expected)
    torch.testing.assert_close(out.logits[:1], alone, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("lm_coef", [0.0, 0.5])
def test_sequence_classification_backward_with_auxiliary_lm_loss(lm_coef):
    torch.manual_seed(0)
    model = GPTForSequenceClassification(tiny("gpt1"), num_labels=3, lm_coef=lm_coef)
    x = ids(4, 10)
    mask = torch.ones_like(x)
    mask[1, 7:] = 0
    labels = torch.tensor([0, 2, 1, 1])
    out = model(input_ids=x, attention_mask=mask, labels=labels)
    out.loss.backward()
    assert all(p.grad is not None for p in model.parameters())
    if lm_coef:
        torch.testing.assert_close(out.loss, out.aux["cls_loss"] + lm_coef * out.aux["lm_loss"])
        assert out.aux["lm_loss"] > 0
    else:
        assert out.aux == {}


def test_regression_head():
    model = GPTForSequenceClassification(tiny(), num_labels=1)
    out = model(input_ids=ids(3, 8), labels=torch.tensor([0.5, -1.0, 2.0]))
    assert out.logits.shape == (3, 1) and out.loss.ndim == 0


def test_loss_at_init_is_about_ln_vocab():
    torch.manual_seed(0)
    config = GPTConfig.from_name("gpt-tiny")
    model = GPTLMHeadModel(config).eval()
    x = ids(2, 64, vocab=config.vocab_size)
    with torch.no_grad():
        loss = model(input_ids=x, labels=x).loss.item()
    assert abs(loss - math.log(config.vocab_size)) < 0.1


def test_gpt2_scaled_residual_init():
    torch.manual_seed(0)
    config = GPTConfig.from_name("gpt-tiny")
    model = GPTLMHeadModel(config)
    block = model.gpt.blocks[0]
    scaled = 0.02 / math.sqrt(2 * config.n_layers)
    assert block.ffn.fc2.weight.std().item() == pytest.approx(scaled, rel=0.05)
    assert block.attn.out.weight.std().item() == pytest.approx(scaled, rel=0.05)
    assert block.attn.q.weight.std().item() == pytest.approx(0.02, rel=0.05)
    assert model.gpt.wpe.weight.std().item() == pytest.approx(0.02, rel=0.05)
    gpt1 = GPTLMHeadModel(GPTConfig.from_name("openai-gpt", n_positions=64, vocab_size=128, n_layers=2))
    assert gpt1.gpt.blocks[0].ffn.fc2.weight.std().item() == pytest.approx(0.02, rel=0.05)


# published sizes (tied embeddings counted once)
PUBLISHED = {"gpt2": 124.4e6, "gpt2-medium": 354.8e6, "openai-gpt": 116.5e6}


@pytest.mark.parametrize("name", list(PRESETS))
def test_preset_parameter_counts_match_transformers(name):
    transformers = pytest.importorskip("transformers")
    from lmforge.interop._gpt import gpt2_config_to_hf, openai_gpt_config_to_hf

    config = GPTConfig.from_name(name)
    with torch.device("meta"):
        ours = GPTLMHeadModel(config)
        if config.norm_first:
            hf = transformers.GPT2LMHeadModel(gpt2_config_to_hf(config))
        else:
            hf = transformers.OpenAIGPTLMHeadModel(openai_gpt_config_to_hf(config))
    assert count_parameters(ours) == count_parameters(hf)
    if name in PUBLISHED:
        assert count_parameters(ours) == pytest.approx(PUBLISHED[name], rel=0.005)


def test_presets():
    gpt1 = GPTConfig.from_name("openai-gpt")
    assert (gpt1.vocab_size, gpt1.n_positions, gpt1.norm_first, gpt1.act) == (40478, 512, False, "gelu_tanh")
    gpt2 = GPTConfig.from_name("gpt2")
    assert (gpt2.vocab_size, gpt2.n_positions, gpt2.norm_first, gpt2.eps) == (50257, 1024, True, 1e-5)
    assert GPTConfig.from_name("gpt-tiny", vocab_size=500).vocab_size == 500
    assert PRESETS["gpt-tiny"].vocab_size == 8192  # overrides copy, never mutate the preset


def test_config_errors():
    with pytest.raises(ConfigError, match="unknown option"):
        GPTConfig.from_name("gpt2", hidden_size=10)
    with pytest.raises(ConfigError, match="unknown GPT preset"):
        GPTConfig.from_name("gpt5")
    with pytest.raises(ConfigError, match="divisible"):
        GPTConfig.from_name("gpt-tiny", n_heads=3)
    with pytest.raises(ConfigError, match="activation"):
        GPTConfig.from_name("gpt-tiny", act="swish")
    with pytest.raises(ConfigError, match="dropout"):
        GPTConfig.from_name("gpt-tiny", dropout=1.5)
    with pytest.raises(ConfigError, match="num_labels"):
        GPTForSequenceClassification(tiny(), num_labels=0)
    with pytest.raises(ConfigError, match="lm_coef"):
        GPTForSequenceClassification(tiny(), lm_coef=-1.0)
    with pytest.raises(ValueError, match="n_positions"):
        GPTLMHeadModel(tiny())(input_ids=ids(1, 33))
