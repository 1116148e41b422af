"""Parity with transformers' XLNet: same weights, same logits and losses (float32, 1e-4) on
permutation-LM batches with padding, segments and memories over two segments; exact round
trips; exported directories load with from_pretrained.

transformers 5 has no Transformer-XL (TransfoXL was removed), so only XLNet is compared here;
Transformer-XL relies on the property tests of tests/models/test_transformer_xl.py.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

transformers = pytest.importorskip("transformers")

from lmforge.interop._xlnet import xlnet_config_to_hf, xlnet_from_hf, xlnet_to_hf  # noqa: E402
from lmforge.models.layers import ConfigError  # noqa: E402
from lmforge.models.xlnet import XLNetConfig, XLNetForSequenceClassification, XLNetLMHeadModel  # noqa: E402
from lmforge.objectives.features import pad_batch  # noqa: E402
from lmforge.objectives.permutation import (  # noqa: E402
    CLS_SEGMENT_ID,
    factorisation_ranks,
    permutation_mask,
    sample_target_spans,
    target_rows,
)

ATOL = 1e-4
V, PAD = 101, 0
# a non-default shape: 3 layers, d_model 48, 4 heads of 12, inner 80, vocab 101
SHAPE = dict(vocab_size=V, d_model=48, n_layers=3, n_heads=4, d_head=12, d_inner=80, mem_len=20)
VARIANTS = {
    "untie_r": dict(untie_r=True),
    "tie_r": dict(untie_r=False),
    "relu_clamp_bidata_reuse": dict(act="relu", clamp_len=6, bi_data=True, reuse_len=9),
}


def randomise(model: torch.nn.Module, seed: int = 0) -> torch.nn.Module:
    """Move every parameter off its initial value (LayerNorms, biases too) so no mapping hides."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=g) * 0.05)
    return model.eval()


def example(length: int, seed: int, num_predict: int = 5) -> dict[str, np.ndarray]:
    """A permutation-LM example as the objective builds it: span targets (~1/4 here), a random
    factorisation order, text <sep> <cls> with the <cls> segment id."""
    rng = np.random.default_rng(seed)
    text = length - 2
    tokens = np.concatenate([rng.integers(5, V, text), [3, 4]]).astype(np.int64)
    candidates = np.r_[np.ones(text, bool), False, False]
    spans = sample_target_spans(np.ones(length, bool), candidates, min(num_predict, max(1, text // 4)), 3, 4.0, rng)
    is_target = np.zeros(length, bool)
    for s, e in spans:
        is_target[s:e] = True
    mapping, labels = target_rows(tokens, is_target, num_predict)
    token_type_ids = np.r_[np.zeros(text // 2, np.int64), np.ones(length - 1 - text // 2, np.int64), CLS_SEGMENT_ID]
    return {"input_ids": tokens, "perm_mask": permutation_mask(factorisation_ranks(is_target, rng)),
            "target_mapping": mapping, "labels": labels, "token_type_ids": token_type_ids}


def batch(seed: int, lengths=(16, 11, 7, 16)) -> dict[str, torch.Tensor]:
    """The feature converter's int64 batch, right padded (perm_mask padded with 1)."""
    return pad_batch([example(n, seed * 10 + i) for i, n in enumerate(lengths)], pad_id=PAD)


def hf_inputs(b: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """transformers wants float masks (its einsums and 1 - mask arithmetic)."""
    return {k: (v.float() if k in ("perm_mask", "target_mapping", "attention_mask") else v) for k, v in b.items()}


def max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a.float() - b.float()).abs().max().item()


def assert_same_state(a: torch.nn.Module, b: torch.nn.Module):
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys()
    for k in sa:
        assert torch.equal(sa[k], sb[k]), k


def check_lm(hf, ours) -> float:
    """Permutation batches over two segments with memory, and the content-stream path;
    returns the largest difference seen."""
    worst = 0.0
    first, second = batch(1), batch(2)
    with torch.no_grad():
        ours_1, hf_1 = ours(**first), hf(**hf_inputs(first), use_mems=True)
        ours_2 = ours(**second, mems=ours_1.aux["mems"])
        hf_2 = hf(**hf_inputs(second), mems=hf_1.mems, use_mems=True)
        for a, b in [(ours_1, hf_1), (ours_2, hf_2)]:
            assert a.logits.shape == (4, 5, V)
            worst = max(worst, max_diff(a.logits, b.logits), max_diff(a.loss, b.loss))
        for a, b in zip(ours_2.aux["mems"], hf_2.mems):  # ours (B, M, D), transformers' (M, B, D)
            worst = max(worst, max_diff(a, b.transpose(0, 1)))
        # no target_mapping: the content stream predicts every position
        plain = {k: v for k, v in first.items() if k not in ("perm_mask", "target_mapping", "labels")}
        labels = plain["input_ids"].masked_fill(plain["attention_mask"] == 0, -100)
        a, b = ours(**plain, labels=labels), hf(**hf_inputs(plain), labels=labels)
        assert a.logits.shape == (4, 16, V)
        worst = max(worst, max_diff(a.logits, b.logits), max_diff(a.loss, b.loss))
    assert worst <= ATOL, worst
    return worst


def check_classifier(hf, ours) -> float:
    """Left padded (as transformers' XLNet tokenizer pads), so the last position is <cls> in both."""
    g = torch.Generator().manual_seed(5)
    ids = torch.randint(5, V, (4, 12), generator=g)
    mask = (torch.arange(12) >= torch.tensor([[0], [3], [6], [0]])).long()
    ids = ids.masked_fill(mask == 0, PAD)
    token_type_ids = (torch.arange(12) >= 8).long().expand(4, 12).clone()
    token_type_ids[:, -1] = CLS_SEGMENT_ID
    labels = torch.tensor([0, 2, 1, 2]) if ours.num_labels == 3 else torch.tensor([0.5, -1.0, 2.0, 0.0])
    with torch.no_grad():
        a = ours(input_ids=ids, attention_mask=mask, token_type_ids=token_type_ids, labels=labels)
        b = hf(input_ids=ids, attention_mask=mask.float(), token_type_ids=token_type_ids, labels=labels)
    worst = max(max_diff(a.logits, b.logits), max_diff(a.loss, b.loss))
    assert worst <= ATOL, worst
    return worst


# ----------------------------------------------------------------------------- ours -> transformers


@pytest.mark.parametrize("variant", VARIANTS)
def test_lm_parity_and_round_trip(variant):
    torch.manual_seed(0)
    ours = randomise(XLNetLMHeadModel(XLNetConfig(**SHAPE, **VARIANTS[variant])))
    hf = xlnet_to_hf(ours)
    assert type(hf).__name__ == "XLNetLMHeadModel" and not hf.training
    assert hf.lm_loss.weight is hf.transformer.word_embedding.weight  # still tied in transformers
    check_lm(hf, ours)
    back = xlnet_from_hf(hf)
    assert back.config == ours.config
    assert_same_state(ours, back)
    assert_same_state(hf, xlnet_to_hf(back))


@pytest.mark.parametrize("untie_r", [True, False])
@pytest.mark.parametrize("num_labels", [3, 1])
def test_classifier_parity_and_round_trip(untie_r, num_labels):
    torch.manual_seed(0)
    ours = randomise(XLNetForSequenceClassification(XLNetConfig(**SHAPE, untie_r=untie_r), num_labels=num_labels,
                                                    classifier_dropout=0.2))
    hf = xlnet_to_hf(ours)
    assert hf.config.summary_last_dropout == 0.2 and hf.config.num_labels == num_labels
    check_classifier(hf, ours)
    back = xlnet_from_hf(hf)
    assert (back.num_labels, back.classifier_dropout, back.config) == (num_labels, 0.2, ours.config)
    assert_same_state(ours, back)


def test_uni_parity():
    """attn_type "uni" (causal, same_length). transformers fails to add a padding or perm mask
    to its causal mask (an in-place broadcast error), so the inputs here are unpadded and
    unpermuted, over two segments with memory."""
    torch.manual_seed(0)
    ours = randomise(XLNetLMHeadModel(XLNetConfig(**SHAPE, attn_type="uni", same_length=True, act="gelu_tanh")))
    hf = xlnet_to_hf(ours)
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(5, V, (3, 20), generator=g)
    first, second = ids[:, :12].contiguous(), ids[:, 12:].contiguous()  # transformers views the labels
    token_type_ids = (torch.arange(20) >= 13).long().expand(3, 20)
    with torch.no_grad():
        a1, b1 = ours(input_ids=first, labels=first), hf(input_ids=first, labels=first, use_mems=True)
        a2 = ours(input_ids=second, token_type_ids=token_type_ids[:, 12:], labels=second, mems=a1.aux["mems"])
        b2 = hf(input_ids=second, token_type_ids=token_type_ids[:, 12:], labels=second, mems=b1.mems, use_mems=True)
    for a, b in [(a1, b1), (a2, b2)]:
        assert max(max_diff(a.logits, b.logits), max_diff(a.loss, b.loss)) <= ATOL
    assert_same_state(ours, xlnet_from_hf(hf))


def hf_grads_as_ours(hf, ours) -> dict[str, torch.Tensor]:
    """transformers' gradients in our layout: its parameters overwritten by their gradients, then
    converted like weights. untie_r=False: transformers' per-layer copies of the shared biases
    each got a gradient; ours is their sum."""
    with torch.no_grad():
        for p in hf.parameters():
            p.copy_(p.grad)
        if not ours.config.untie_r:
            for name in ("r_w_bias", "r_r_bias", "r_s_bias"):
                total = sum(getattr(layer.rel_attn, name) for layer in hf.transformer.layer).clone()
                for layer in hf.transformer.layer:
                    getattr(layer.rel_attn, name).copy_(total)
    return xlnet_from_hf(hf).state_dict()


@pytest.mark.parametrize("variant", VARIANTS)
def test_lm_gradient_parity(variant):
    """Same gradients for every parameter on a permutation batch with memory: the query stream
    computed at the targets only, the last layer's unused content stream skipped, the segment
    term's row constant dropped and the scale folded into the queries change nothing."""
    torch.manual_seed(0)
    ours = randomise(XLNetLMHeadModel(XLNetConfig(**SHAPE, **VARIANTS[variant])))
    hf = xlnet_to_hf(ours)
    first, second = batch(1), batch(2)
    with torch.no_grad():
        mems, hf_mems = ours(**first).aux["mems"], hf(**hf_inputs(first), use_mems=True).mems
    a = ours(**second, mems=mems)
    b = hf(**hf_inputs(second), mems=hf_mems, use_mems=True)
    assert max_diff(a.loss, b.loss) <= ATOL
    a.loss.backward()
    b.loss.backward()
    theirs = hf_grads_as_ours(hf, ours)
    for name, p in ours.named_parameters():
        assert max_diff(p.grad, theirs[name]) <= ATOL, name


def test_uni_query_stream_parity():
    """attn_type "uni" with target_mapping (a zero row included), segments and memory: the query
    stream at the targets reads the causal relative positions (no perm_mask or padding, see
    test_uni_parity)."""
    torch.manual_seed(0)
    ours = randomise(XLNetLMHeadModel(XLNetConfig(**SHAPE, attn_type="uni", same_length=True)))
    hf = xlnet_to_hf(ours)
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(5, V, (3, 20), generator=g)
    first, second = ids[:, :12].contiguous(), ids[:, 12:].contiguous()
    positions = torch.tensor([[0, 3, 7, 11], [2, 5, 6, 9], [1, 4, 8, 10]])
    mapping = torch.zeros(3, 4, 12).scatter_(2, positions[..., None], 1.0)
    mapping[2, 3] = 0  # a zero row: no target
    labels = first.gather(1, positions).masked_fill(mapping.sum(-1) == 0, -100)
    second_mapping = torch.zeros(3, 2, 8)
    second_mapping[:, 0, 1] = second_mapping[:, 1, 6] = 1
    token_type_ids = (torch.arange(8) >= 3).long().expand(3, 8)
    with torch.no_grad():
        a1 = ours(input_ids=first, target_mapping=mapping, labels=labels)
        b1 = hf(input_ids=first, target_mapping=mapping, labels=labels, use_mems=True)
        a2 = ours(input_ids=second, token_type_ids=token_type_ids, target_mapping=second_mapping, mems=a1.aux["mems"])
        b2 = hf(input_ids=second, token_type_ids=token_type_ids, target_mapping=second_mapping, mems=b1.mems,
                use_mems=True)
    assert max(max_diff(a1.logits, b1.logits), max_diff(a1.loss, b1.loss), max_diff(a2.logits, b2.logits)) <= ATOL


# ----------------------------------------------------------------------------- transformers -> ours


def test_from_a_transformers_model():
    hf_config = transformers.XLNetConfig(vocab_size=V, d_model=48, n_layer=3, n_head=4, d_inner=80, mem_len=20,
                                         ff_activation="gelu", layer_norm_eps=1e-6, pad_token_id=PAD)
    hf = randomise(transformers.XLNetLMHeadModel(hf_config))
    ours = xlnet_from_hf(hf)
    assert isinstance(ours, XLNetLMHeadModel) and not ours.training
    c = ours.config
    assert (c.d_model, c.n_layers, c.n_heads, c.d_head, c.d_inner, c.untie_r, c.eps, c.mem_len) == (
        48, 3, 4, 12, 80, True, 1e-6, 20)
    check_lm(hf, ours)
    assert_same_state(hf, xlnet_to_hf(ours, pad_token_id=PAD))

    hf_cls = randomise(transformers.XLNetForSequenceClassification(
        transformers.XLNetConfig(**{**hf_config.to_dict(), "num_labels": 3})))
    check_classifier(hf_cls, xlnet_from_hf(hf_cls))


# ----------------------------------------------------------------------------- export


@pytest.mark.parametrize("untie_r", [True, False])
def test_export_loads_with_from_pretrained(tmp_path, untie_r):
    torch.manual_seed(0)
    ours = randomise(XLNetLMHeadModel(XLNetConfig(**SHAPE, untie_r=untie_r)))
    xlnet_to_hf(ours, pad_token_id=PAD).save_pretrained(tmp_path)
    loaded = transformers.AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    assert type(loaded).__name__ == "XLNetLMHeadModel"
    assert loaded.config.untie_r is untie_r  # our key survives the round trip through config.json
    check_lm(loaded, ours)
    assert_same_state(ours, xlnet_from_hf(loaded))

    classifier = randomise(XLNetForSequenceClassification(XLNetConfig(**SHAPE, untie_r=untie_r), num_labels=3))
    xlnet_to_hf(classifier).save_pretrained(tmp_path / "cls")
    loaded_cls = transformers.XLNetForSequenceClassification.from_pretrained(tmp_path / "cls").eval()
    check_classifier(loaded_cls, classifier)


# ----------------------------------------------------------------------------- what does not convert


def test_incompatible_conversions_are_errors():
    with pytest.raises(ConfigError, match="d_head"):
        xlnet_config_to_hf(XLNetConfig(**{**SHAPE, "d_head": 10}))
    hf_config = transformers.XLNetConfig(vocab_size=V, d_model=48, n_layer=2, n_head=4, d_inner=80, num_labels=3)
    with pytest.raises(ConfigError, match="summary_type"):
        xlnet_from_hf(transformers.XLNetForSequenceClassification(
            transformers.XLNetConfig(**{**hf_config.to_dict(), "summary_type": "first"})))
    with pytest.raises(ConfigError, match="multi-label"):
        xlnet_from_hf(transformers.XLNetForSequenceClassification(
            transformers.XLNetConfig(**{**hf_config.to_dict(), "problem_type": "multi_label_classification"})))
    # untie_r=False in the config, but the layers' biases differ
    tied = transformers.XLNetLMHeadModel(transformers.XLNetConfig(**{**hf_config.to_dict(), "untie_r": False}))
    with pytest.raises(ConfigError, match="untie_r"):
        xlnet_from_hf(tied)
    with pytest.raises(TypeError):
        xlnet_from_hf(transformers.XLNetModel(hf_config))
