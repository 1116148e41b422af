"""The sequence classifiers' ``classifier_pooling: mean``: the classifier reads the last layer's
states averaged over the real tokens, so padding does not change a row's logits, and the
default keeps each architecture's own reading (checked against the head's own layers)."""

from __future__ import annotations

import pytest
import torch

from lmforge.config import ConfigError
from lmforge.models.layers import last_token_state, mean_state
from lmforge.models.registry import build_model

TINY = {
    "bert-tiny": {"d_model": 32, "n_layers": 1, "n_heads": 2, "d_ff": 64},
    "ernie-tiny-test": {"d_model": 32, "n_layers": 1, "n_heads": 2, "d_ff": 64},
    "albert-tiny": {"embedding_size": 16, "d_model": 32, "n_layers": 1, "n_heads": 2, "d_ff": 64},
    "gpt-tiny": {"d_model": 32, "n_layers": 1, "n_heads": 2, "d_ff": 64},
    "txl-tiny": {},
    "xlnet-tiny": {},
}

def _model(preset: str, pooling: str):
    torch.manual_seed(0)
    model = build_model(preset, head="classification", vocab_size=64, num_labels=3, classifier_pooling=pooling,
                        **TINY[preset])
    return model.eval()

@pytest.mark.parametrize("preset", sorted(TINY))
def test_mean_pooling_averages_the_real_tokens_and_ignores_padding(preset):
    model = _model(preset, "mean")
    ids = torch.randint(5, 64, (2, 6))
    mask = torch.ones(2, 6, dtype=torch.long)
    mask[1, 4:] = 0
    out = model(input_ids=ids, attention_mask=mask)
    assert out.logits.shape == (2, 3)
    # row 1 alone, without its padding, gives the same logits
    alone = model(input_ids=ids[1:, :4], attention_mask=mask[1:, :4])
    torch.testing.assert_close(out.logits[1], alone.logits[0], atol=1e-5, rtol=1e-5)
    # the classifier's input is the masked mean of the returned last-layer states
    pooled = mean_state(out.hidden_states, mask)
    expected = (mask[..., None] * out.hidden_states).sum(1) / mask.sum(1, keepdim=True)
    torch.testing.assert_close(pooled, expected)

@pytest.mark.parametrize("preset", sorted(TINY))
def test_mean_and_default_pooling_differ_only_in_what_the_classifier_reads(preset):
    default, mean = _model(preset, "default"), _model(preset, "mean")
    mean.load_state_dict(default.state_dict())
    ids = torch.randint(5, 64, (3, 7))
    mask = torch.ones(3, 7, dtype=torch.long)
    a, b = default(input_ids=ids, attention_mask=mask), mean(input_ids=ids, attention_mask=mask)
    torch.testing.assert_close(a.hidden_states, b.hidden_states)
    assert not torch.allclose(a.logits, b.logits)
    if preset.startswith(("gpt", "txl")):  # a linear classifier on one state: logits are linear in it
        head = default.score if preset.startswith("gpt") else default.classifier
        torch.testing.assert_close(a.logits, head(last_token_state(a.hidden_states, mask)))
        torch.testing.assert_close(b.logits, head(mean_state(b.hidden_states, mask)))

def test_an_unknown_pooling_is_a_config_error():
    with pytest.raises(ConfigError, match="classifier_pooling must be one of"):
        build_model("bert-tiny", head="classification", vocab_size=64, num_labels=2, classifier_pooling="max")


@pytest.mark.parametrize("preset", ["t5-tiny", "switch-tiny", "bart-tiny"])
def test_the_encoder_decoders_mean_pooling_runs_the_encoder_alone(preset):
    """T5, Switch and BART classify from the encoder's mean state (EncT5's reading): the decoder
    is never called, the logits are the head on the masked mean of the encoder's last states, and
    the default still reads the decoder."""
    torch.manual_seed(0)
    model = build_model(preset, head="classification", vocab_size=64, num_labels=3, classifier_pooling="mean").eval()
    decoder = model.bart.decoder if preset.startswith("bart") else model.decoder
    calls: list[str] = []
    decoder.register_forward_hook(lambda *_: calls.append("decoder"))
    ids = torch.randint(5, 64, (2, 6))
    ids[:, -1] = model.config.eos_id
    mask = torch.ones(2, 6, dtype=torch.long)
    mask[1, 3:] = 0
    out = model(input_ids=ids, attention_mask=mask, labels=torch.tensor([0, 2]))
    assert calls == [] and out.logits.shape == (2, 3)
    encoder_states = model.bart.encode(ids, mask) if preset.startswith("bart") else model.run_encoder(ids, mask)[0]
    head = model.head if preset.startswith("bart") else model.classifier
    torch.testing.assert_close(out.logits, head(mean_state(encoder_states, mask)))
    ce = torch.nn.functional.cross_entropy(out.logits, torch.tensor([0, 2]))
    if preset.startswith("switch"):  # the encoder's router losses are added, and the decoder's are absent
        from lmforge.models.switch import SwitchFeedForward

        sparse = sum(isinstance(m, SwitchFeedForward) for m in model.encoder.modules())
        assert sparse >= 1 and out.aux["expert_fraction"].shape[0] == sparse
        ce = ce + out.aux["load_balancing_loss"] + out.aux["router_z_loss"]
    torch.testing.assert_close(out.loss, ce)
    # padding does not change a row's logits
    alone = model(input_ids=ids[1:, :3], attention_mask=mask[1:, :3])
    torch.testing.assert_close(out.logits[1], alone.logits[0], atol=1e-5, rtol=1e-5)
    torch.manual_seed(0)
    default = build_model(preset, head="classification", vocab_size=64, num_labels=3).eval()
    (default.bart.decoder if preset.startswith("bart") else default.decoder).register_forward_hook(
        lambda *_: calls.append("decoder"))
    default(input_ids=ids, attention_mask=mask)
    assert calls == ["decoder"]
    with pytest.raises(ConfigError, match="classifier_pooling"):
        build_model(preset, head="classification", vocab_size=64, num_labels=3, classifier_pooling="max")
