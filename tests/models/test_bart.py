"""BART: both heads' forward/backward on the CPU preset, padding, incremental decoding,
presets and parameter counts, config errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import transformers

from lmforge.interop._bart import hf_config
from lmforge.models import bart
from lmforge.models.layers import ConfigError, count_parameters, replace_config
from lmforge.objectives.features import pad_batch

BOS, PAD, EOS = 0, 1, 2
HEADS = [bart.BartForConditionalGeneration, bart.BartForSequenceClassification]


@pytest.fixture(scope="module")
def config() -> bart.BartConfig:
    return bart.from_name("bart-tiny", vocab_size=97)


def denoising_batch(config: bart.BartConfig, lengths=(14, 9, 5, 11), seed: int = 0) -> dict[str, torch.Tensor]:
    """What the denoising objective yields, padded by the feature converter: input_ids
    ``<s> noised </s>``, labels ``<s> x </s>``, decoder_input_ids ``</s> <s> x``, both masks."""
    rng = np.random.default_rng(seed)
    examples = []
    for n in lengths:
        body = rng.integers(4, config.vocab_size, n)
        noised = np.delete(body, rng.choice(n, n // 3, replace=False))
        labels = np.concatenate([[BOS], body, [EOS]])
        examples.append({"input_ids": np.concatenate([[BOS], noised, [EOS]]), "labels": labels,
                         "decoder_input_ids": np.concatenate([[EOS], labels[:-1]])})
    return pad_batch(examples, pad_id=config.pad_id)


def classification_batch(config: bart.BartConfig) -> dict[str, torch.Tensor]:
    batch = denoising_batch(config)
    return {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"],
            "labels": torch.tensor([0, 1, 1, 0])}


@pytest.mark.parametrize("head", HEADS, ids=lambda h: h.__name__)
def test_forward_backward_every_head(config, head):
    torch.manual_seed(0)
    model = head(config)
    batch = denoising_batch(config) if head is bart.BartForConditionalGeneration else classification_batch(config)
    out = model(**batch)
    B = batch["input_ids"].size(0)
    if head is bart.BartForConditionalGeneration:
        T = batch["decoder_input_ids"].size(1)
        assert out.logits.shape == (B, T, config.vocab_size)
        assert out.hidden_states.shape == (B, T, config.d_model)
    else:
        assert out.logits.shape == (B, 2)
    assert out.aux["encoder_hidden_states"].shape == (B, batch["input_ids"].size(1), config.d_model)
    assert out.loss.ndim == 0 and torch.isfinite(out.loss)
    out.loss.backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
    for name in ("bart.encoder.layers.1.ffn.fc1.weight", "bart.decoder.layers.1.cross_attn.k.weight"):
        assert dict(model.named_parameters())[name].grad.abs().sum() > 0, name
    assert model(**{k: v for k, v in batch.items() if k != "labels"}).loss is None


def test_labels_alone_give_the_shifted_decoder_inputs(config):
    """Without decoder_input_ids the decoder reads labels shifted right behind </s> (-100 -> pad):
    the objective's decoder_input_ids at every real position (a shorter row's final </s> moves
    into its padding, where nothing reads it)."""
    torch.manual_seed(0)
    model = bart.BartForConditionalGeneration(config).eval()
    batch = denoising_batch(config)
    real = batch["decoder_attention_mask"] == 1
    assert torch.equal(bart.shift_right(batch["labels"], EOS, PAD)[real], batch["decoder_input_ids"][real])
    with torch.no_grad():
        full = model(**batch)
        from_labels = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                            labels=batch["labels"])
    torch.testing.assert_close(from_labels.loss, full.loss)
    torch.testing.assert_close(from_labels.logits[real], full.logits[real])


def test_loss_ignores_minus_100_and_starts_near_log_vocab(config):
    torch.manual_seed(0)
    model = bart.BartForConditionalGeneration(config).eval()
    batch = denoising_batch(config)
    with torch.no_grad():
        out = model(**batch)
    real = batch["labels"] != -100
    expected = torch.nn.functional.cross_entropy(out.logits[real], batch["labels"][real])
    torch.testing.assert_close(out.loss, expected)
    assert abs(out.loss.item() - math.log(config.vocab_size)) < 0.5


@pytest.mark.parametrize("head", HEADS, ids=lambda h: h.__name__)
def test_padding_does_not_change_real_positions(config, head):
    torch.manual_seed(0)
    model = head(config).eval()
    batch = denoising_batch(config, lengths=(9, 9))  # no padding
    keys = ("input_ids", "attention_mask", "decoder_input_ids", "decoder_attention_mask")
    batch = {k: batch[k] for k in keys}
    assert batch["attention_mask"].all() and batch["decoder_attention_mask"].all()
    pad = {"input_ids": PAD, "decoder_input_ids": PAD, "attention_mask": 0, "decoder_attention_mask": 0}
    padded = {k: torch.cat([v, torch.full_like(v[:, :4], pad[k])], dim=1) for k, v in batch.items()}
    with torch.no_grad():
        a, b = model(**batch), model(**padded)
    if head is bart.BartForConditionalGeneration:
        T = batch["decoder_input_ids"].size(1)
        torch.testing.assert_close(b.logits[:, :T], a.logits, atol=1e-5, rtol=1e-5)
    else:  # the same decoder inputs (pads after </s>, causally invisible) and the same last </s>
        torch.testing.assert_close(b.logits, a.logits, atol=1e-5, rtol=1e-5)


def test_output_layer_is_the_shared_embedding(config):
    model = bart.BartForConditionalGeneration(config)
    vocab_by_dim = [n for n, p in model.named_parameters() if p.shape == (config.vocab_size, config.d_model)]
    assert vocab_by_dim == ["bart.shared.weight"]
    assert "final_logits_bias" in model.state_dict() and "final_logits_bias" not in dict(model.named_parameters())
    assert model.bart.shared.weight[config.pad_id].abs().sum() == 0  # the pad row starts at zero
    assert model.bart.encoder.position.num_embeddings == config.max_positions + bart.POSITION_OFFSET


def test_classification_reads_the_last_eos_of_each_row(config):
    torch.manual_seed(0)
    model = bart.BartForSequenceClassification(config, num_labels=3).eval()
    batch = classification_batch(config)
    ids = batch["input_ids"]
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=batch["attention_mask"])
        last = (ids == EOS).long().cumsum(1).argmax(1)  # first position of the final count = the last </s>
        expected = model.head(out.hidden_states[torch.arange(len(ids)), last])
    torch.testing.assert_close(out.logits, expected)
    with pytest.raises(ValueError, match="</s>"):
        model(input_ids=ids.masked_fill(ids == EOS, 5), attention_mask=batch["attention_mask"])


def test_regression_head(config):
    model = bart.BartForSequenceClassification(config, num_labels=1)
    batch = classification_batch(config)
    batch["labels"] = torch.randn(4)
    out = model(**batch)
    assert out.logits.shape == (4, 1)
    torch.testing.assert_close(out.loss, torch.nn.functional.mse_loss(out.logits.reshape(-1), batch["labels"]))


@pytest.mark.parametrize("scale_embedding", [False, True])
def test_incremental_decoding_matches_the_full_decoder(config, scale_embedding):
    """decode() with a cache, one position at a time (and a first chunk of 3), equals one full pass."""
    torch.manual_seed(0)
    model = bart.BartForConditionalGeneration(replace_config(config, scale_embedding=scale_embedding)).eval()
    batch = denoising_batch(config)
    ids, mask, dec = batch["input_ids"], batch["attention_mask"], batch["decoder_input_ids"]
    with torch.no_grad():
        memory = model.encode(ids, mask)
        full = model.decode(dec, memory, mask)
        cache: dict = {}
        steps = [model.decode(dec[:, :3], memory, mask, cache=cache)]
        for t in range(4, dec.size(1) + 1):
            steps.append(model.decode(dec[:, :t], memory, mask, cache=cache))
    assert cache["self.length"] == dec.size(1)
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="cache"):
        model.decode(dec, memory, mask, decoder_attention_mask=batch["decoder_attention_mask"], cache={})


def test_too_long_inputs_are_an_error(config):
    model = bart.BartForConditionalGeneration(replace_config(config, max_positions=8))
    with pytest.raises(ValueError, match="max_positions"):
        model(input_ids=torch.zeros(1, 9, dtype=torch.long), decoder_input_ids=torch.zeros(1, 4, dtype=torch.long))


def test_preset_parameter_counts_match_transformers():
    """bart-base is 139,420,416 parameters, as transformers' (built on the meta device, no memory)."""
    counts = {}
    for name in ("bart-base", "bart-large", "bart-tiny"):
        config = bart.from_name(name)
        with torch.device("meta"):
            ours = count_parameters(bart.BartForConditionalGeneration(config))
            theirs = transformers.BartForConditionalGeneration(hf_config(config)).num_parameters()
        assert ours == theirs, name
        counts[name] = ours
    assert counts["bart-base"] == 139_420_416
    assert 400e6 < counts["bart-large"] < 410e6


def test_config_errors():
    with pytest.raises(ConfigError, match="unknown option"):
        bart.from_name("bart-tiny", n_layers=3)
    with pytest.raises(ConfigError, match="unknown BART preset"):
        bart.from_name("bart-huge")
    with pytest.raises(ConfigError, match="divisible"):
        bart.from_name("bart-tiny", n_heads=3)
    with pytest.raises(ConfigError, match="pad_id"):
        bart.from_name("bart-tiny", vocab_size=50, pad_id=50)
    with pytest.raises(ConfigError, match="act_dropout"):
        bart.from_name("bart-tiny", act_dropout=1.0)
    with pytest.raises(ConfigError, match="activation"):
        bart.from_name("bart-tiny", act="swish")
    with pytest.raises(ConfigError, match="num_labels"):
        bart.BartForSequenceClassification(bart.from_name("bart-tiny"), num_labels=0)
