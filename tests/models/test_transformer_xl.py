"""Transformer-XL: heads forward/backward, the memory (recurrence, detached, n_layers + 1 entries
of mem_len), causality, the relative shift, padding, presets and config errors.

transformers 5 no longer ships TransfoXL, so there is no parity test here: these properties
are the reference behaviour. (The implementation was also checked once against transformers
4.44's ``TransfoXLLMHeadModel`` started from an empty memory, plain softmax, two segments,
untie_r / d_embed projection / same_length / clamp_len / pre_lnorm: max |diff| of the
log-probabilities 1e-6.)
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from lmforge.models import transformer_xl as txl
from lmforge.models.layers import ConfigError, count_parameters
from lmforge.objectives.features import pad_batch

V = 97
TINY = dict(vocab_size=V, d_model=32, n_layers=2, n_heads=4, d_head=8, d_inner=64, tgt_len=8, mem_len=8)


def tiny(**overrides) -> txl.TransformerXLConfig:
    return txl.TransformerXLConfig(**{**TINY, **overrides})


def ids(B: int, L: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, V, (B, L), generator=torch.Generator().manual_seed(seed))


VARIANTS = {
    "base": dict(),
    "untie_r": dict(untie_r=True),
    "d_embed": dict(d_embed=24),
    "pre_lnorm": dict(pre_lnorm=True),
    "untied_out": dict(tie_weights=False, clamp_len=5),
}


# ----------------------------------------------------------------------------- heads


@pytest.mark.parametrize("variant", VARIANTS)
def test_lm_forward_backward(variant):
    torch.manual_seed(0)
    model = txl.TransformerXLLMHeadModel(tiny(**VARIANTS[variant]))
    x = ids(3, 8)
    out = model(input_ids=x, labels=ids(3, 8, seed=1))
    assert out.logits.shape == (3, 8, V) and out.hidden_states.shape == (3, 8, 32)
    assert torch.isfinite(out.loss)
    out.loss.backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
    assert (model.lm_head.weight is model.transformer.word.weight) == model.config.tie_weights


def test_labels_are_already_shifted():
    """The segments objective's labels are the next tokens: no second shift."""
    torch.manual_seed(0)
    model = txl.TransformerXLLMHeadModel(tiny()).eval()
    x, y = ids(2, 8), ids(2, 8, seed=1)
    y[0, 3] = -100
    with torch.no_grad():
        out = model(input_ids=x, labels=y)
    expected = F.cross_entropy(out.logits.reshape(-1, V), y.reshape(-1), ignore_index=-100)
    torch.testing.assert_close(out.loss, expected)


def test_segments_batch_from_the_feature_converter():
    """``model(**batch)`` on the segments keys (the converter adds attention_mask)."""
    torch.manual_seed(0)
    model = txl.TransformerXLLMHeadModel(tiny()).eval()
    x = ids(1, 17)[0].numpy()
    batch = pad_batch([{"input_ids": x[:8], "labels": x[1:9]}, {"input_ids": x[8:16], "labels": x[9:17]}], pad_id=0)
    out = model(**batch)
    assert set(out.aux) == {"mems"} and torch.isfinite(out.loss)


@pytest.mark.parametrize("num_labels", [3, 1])
def test_classification_forward_backward_and_last_real_token(num_labels):
    torch.manual_seed(0)
    model = txl.TransformerXLForSequenceClassification(tiny(), num_labels=num_labels)
    x = ids(2, 8)
    mask = torch.ones_like(x)
    mask[1, 5:] = 0  # right padded
    labels = torch.tensor([0, 2]) if num_labels == 3 else torch.tensor([0.5, -1.0])
    out = model(input_ids=x, attention_mask=mask, labels=labels)
    assert out.logits.shape == (2, num_labels) and torch.isfinite(out.loss)
    out.loss.backward()
    assert all(p.grad is not None for p in model.parameters())
    model.eval()
    with torch.no_grad():
        out = model(input_ids=x, attention_mask=mask)
        alone = model(input_ids=x[1:, :5]).logits
        expected = model.classifier(out.hidden_states[[0, 1], [7, 4]])
    torch.testing.assert_close(out.logits, expected)
    torch.testing.assert_close(out.logits[1:], alone, atol=1e-5, rtol=1e-5)


# ----------------------------------------------------------------------------- memory


@pytest.mark.parametrize("variant", ["base", "untie_r", "d_embed", "pre_lnorm"])
def test_memory_continues_the_segment(variant):
    """Segment 2 with the memory of segment 1 == the last positions of one pass over both
    (eval mode, mem_len >= len(segment 1), same_length False)."""
    torch.manual_seed(0)
    model = txl.TransformerXLLMHeadModel(tiny(mem_len=12, **VARIANTS[variant])).eval()
    x = ids(3, 17)
    with torch.no_grad():
        first = model(input_ids=x[:, :9])
        second = model(input_ids=x[:, 9:], mems=first.aux["mems"])
        whole = model(input_ids=x)
    torch.testing.assert_close(first.logits, whole.logits[:, :9], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(second.logits, whole.logits[:, 9:], atol=1e-5, rtol=1e-5)
    # the memory matters: without it segment 2 differs
    with torch.no_grad():
        alone = model(input_ids=x[:, 9:]).hidden_states
    assert not torch.allclose(alone, whole.hidden_states[:, 9:], atol=1e-3)


def test_memories_are_detached_n_layers_plus_one_of_mem_len():
    torch.manual_seed(0)
    model = txl.TransformerXLLMHeadModel(tiny(mem_len=10)).train()
    x = ids(2, 24)
    out = model(input_ids=x[:, :8], labels=x[:, 1:9])
    mems = out.aux["mems"]
    assert len(mems) == model.config.n_layers + 1
    assert [m.shape for m in mems] == [(2, 8, 32)] * 3  # fewer than mem_len positions exist yet
    for m in mems:
        assert not m.requires_grad and m.grad_fn is None
    out2 = model(input_ids=x[:, 8:16], labels=x[:, 9:17], mems=mems)
    assert [m.shape for m in out2.aux["mems"]] == [(2, 10, 32)] * 3  # the last mem_len of 8 + 8
    assert all(not m.requires_grad for m in out2.aux["mems"])
    out2.loss.backward()  # no gradient into segment 1's graph (it would fail on a freed graph otherwise)
    out.loss.backward()


def test_memory_is_the_last_mem_len_of_old_memory_and_current_inputs():
    torch.manual_seed(0)
    model = txl.TransformerXLLMHeadModel(tiny(mem_len=6)).eval()
    x = ids(2, 10)
    with torch.no_grad():
        a = model(input_ids=x[:, :4])
        b = model(input_ids=x[:, 4:], mems=a.aux["mems"])
        emb = model.transformer.embed(x)  # the first memory entry is the (scaled) embedding
    torch.testing.assert_close(a.aux["mems"][0], emb[:, :4])
    torch.testing.assert_close(b.aux["mems"][0], emb[:, 4:])  # [4 old; 6 new][-6:]
    torch.testing.assert_close(b.aux["mems"][-1], b.hidden_states[:, -6:])  # the last entry: the final layer's output
    assert "mems" not in model.__class__(tiny(mem_len=0))(input_ids=x).aux  # mem_len 0: no memory


def test_embedding_is_scaled_by_sqrt_d_model():
    torch.manual_seed(0)
    model = txl.TransformerXLModel(tiny())
    x = ids(1, 5)
    torch.testing.assert_close(model.embed(x), model.word(x) * math.sqrt(32))


# ----------------------------------------------------------------------------- attention


@pytest.mark.parametrize("variant", ["base", "untie_r"])
def test_causal_with_and_without_memory(variant):
    """Logits at t depend on tokens <= t only, also through the memory."""
    torch.manual_seed(0)
    model = txl.TransformerXLLMHeadModel(tiny(**VARIANTS[variant])).eval()
    x = ids(2, 10)
    y = x.clone()
    y[:, 6:] = ids(2, 4, seed=3)
    with torch.no_grad():
        mems = model(input_ids=ids(2, 8, seed=4)).aux["mems"]
        for m in (None, mems):
            a, b = model(input_ids=x, mems=m).logits, model(input_ids=y, mems=m).logits
            torch.testing.assert_close(a[:, :6], b[:, :6])
            assert not torch.allclose(a[:, 6:], b[:, 6:])


def test_rel_shift_moves_each_row_to_key_distances():
    """out[i, j] = x[i, Q - 1 - i + j] (the score against distance mlen + i - j) for j <= mlen + i."""
    B, H, Q, M = 2, 3, 4, 5
    K = M + Q
    x = torch.randn(B, H, Q, K)
    out = txl.rel_shift(x)
    for i in range(Q):
        for j in range(M + i + 1):
            torch.testing.assert_close(out[:, :, i, j], x[:, :, i, Q - 1 - i + j])


def test_left_padding_is_masked_and_positions_are_relative():
    """A left-padded row's real tokens give the same logits as the row alone: padded keys are
    masked and only distances enter the attention."""
    torch.manual_seed(0)
    model = txl.TransformerXLLMHeadModel(tiny()).eval()
    x = ids(1, 6)
    padded = torch.cat([torch.zeros(1, 3, dtype=torch.long), x], dim=1)
    mask = torch.tensor([[0, 0, 0, 1, 1, 1, 1, 1, 1]])
    with torch.no_grad():
        a = model(input_ids=padded, attention_mask=mask).logits[:, 3:]
        b = model(input_ids=x).logits
    torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


def test_same_length_and_clamp_len():
    torch.manual_seed(0)
    model = txl.TransformerXLLMHeadModel(tiny(same_length=True, mem_len=4)).eval()
    x = ids(2, 8)
    with torch.no_grad():
        out = model(input_ids=x[:, 4:], mems=model(input_ids=x[:, :4]).aux["mems"])
    assert torch.isfinite(out.logits).all()
    blocked = txl.causal_memory_mask(4, 4, 4, True, torch.device("cpu"))
    assert (~blocked).sum(1).tolist() == [4, 4, 4, 4]  # every query sees mem_len keys
    # clamp_len beyond every distance changes nothing
    base = txl.TransformerXLLMHeadModel(tiny()).eval()
    clamped = txl.TransformerXLLMHeadModel(tiny(clamp_len=100)).eval()
    clamped.load_state_dict(base.state_dict())
    with torch.no_grad():
        torch.testing.assert_close(base(input_ids=x).logits, clamped(input_ids=x).logits)


# ----------------------------------------------------------------------------- presets, config


def test_presets_and_parameter_counts():
    counts = {}
    for name in txl.PRESETS:
        with torch.device("meta"):
            counts[name] = count_parameters(txl.TransformerXLLMHeadModel(txl.from_name(name)))
    # the paper's WT103 "Standard" model is 151M and its enwik8 12-layer model 41M
    assert math.isclose(counts["txl-wt103-base"], 151e6, rel_tol=0.01), counts
    assert math.isclose(counts["txl-enwik8-base"], 41e6, rel_tol=0.01), counts
    assert counts["txl-tiny"] < 1e6
    assert txl.from_name("txl-tiny", mem_len=0).mem_len == 0
    assert txl.TransformerXLConfig.from_name("txl-wt103-base").tgt_len == 150


@pytest.mark.parametrize("bad", [dict(n_layers=0), dict(mem_len=-1), dict(dropatt=1.0), dict(act="swish"),
                                 dict(d_model=33), dict(d_embed=0)])
def test_config_errors(bad):
    with pytest.raises(ConfigError):
        tiny(**bad)


def test_unknown_preset_and_option():
    with pytest.raises(ConfigError, match="unknown Transformer-XL preset"):
        txl.from_name("txl-huge")
    with pytest.raises(ConfigError, match="unknown option"):
        txl.from_name("txl-tiny", n_layer=3)


def test_wrong_number_of_memories():
    model = txl.TransformerXLLMHeadModel(tiny())
    with pytest.raises(ValueError, match="n_layers \\+ 1"):
        model(input_ids=ids(1, 4), mems=[torch.zeros(1, 2, 32)] * 2)
