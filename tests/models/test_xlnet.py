"""XLNet: heads forward/backward on permutation-objective batches, the two streams (the query
stream never sees its target's content), padding, memories, presets vs transformers' counts,
config errors. Parity with transformers is in tests/interop/test_xlnet_parity.py."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from lmforge.models import xlnet
from lmforge.models.layers import ConfigError, count_parameters
from lmforge.objectives.features import pad_batch
from lmforge.objectives.permutation import CLS_SEGMENT_ID, factorisation_ranks, permutation_mask, target_rows

V = 97
TINY = dict(vocab_size=V, d_model=32, n_layers=2, n_heads=4, d_head=8, d_inner=64)


def tiny(**overrides) -> xlnet.XLNetConfig:
    return xlnet.XLNetConfig(**{**TINY, **overrides})


def example(length: int, targets: list[int], num_predict: int, seed: int) -> dict[str, np.ndarray]:
    """A permutation-objective example (text <sep> <cls>) with the given target positions."""
    rng = np.random.default_rng(seed)
    tokens = rng.integers(5, V, length).astype(np.int64)
    is_target = np.zeros(length, dtype=bool)
    is_target[targets] = True
    mapping, labels = target_rows(tokens, is_target, num_predict)
    token_type_ids = np.zeros(length, np.int64)
    token_type_ids[-1] = CLS_SEGMENT_ID
    return {"input_ids": tokens, "perm_mask": permutation_mask(factorisation_ranks(is_target, rng)),
            "target_mapping": mapping, "labels": labels, "token_type_ids": token_type_ids}


def perm_batch() -> dict[str, torch.Tensor]:
    """Two examples padded by the feature converter (int tensors, perm_mask padded with 1)."""
    return pad_batch([example(12, [2, 3, 7], 4, 0), example(9, [1, 5], 4, 1)], pad_id=0)


# ----------------------------------------------------------------------------- heads


@pytest.mark.parametrize("untie_r", [True, False])
def test_lm_forward_backward_on_a_permutation_batch(untie_r):
    torch.manual_seed(0)
    model = xlnet.XLNetLMHeadModel(tiny(untie_r=untie_r))
    batch = perm_batch()
    assert set(batch) == {"input_ids", "perm_mask", "target_mapping", "labels", "token_type_ids", "attention_mask"}
    out = model(**batch)
    assert out.logits.shape == (2, 4, V)  # the query stream at the 4 prediction slots
    assert torch.isfinite(out.loss)
    out.loss.backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
    assert model.transformer.mask_emb.grad.abs().sum() > 0  # the query stream's input is trained
    assert "mems" not in out.aux  # mem_len 0


@pytest.mark.parametrize("target_mapping", [True, False])
def test_fused_attention_equals_the_written_out_one(monkeypatch, target_mapping):
    """The SDPA path (a GPU's default) computes the same loss and gradients as the written-out
    scores, with padding, segments and both streams."""
    torch.manual_seed(0)
    model = xlnet.XLNetLMHeadModel(tiny(dropout=0.0))
    batch = perm_batch()
    if not target_mapping:
        batch = {k: v for k, v in batch.items() if k not in ("perm_mask", "target_mapping", "labels")}
        batch["labels"] = batch["input_ids"]
    results = []
    for fused in (False, True):
        monkeypatch.setattr(xlnet.XLNetRelativeAttention, "fused", fused)
        model.zero_grad()
        out = model(**batch)
        out.loss.backward()
        results.append((out.logits.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}))
    (logits0, grads0), (logits1, grads1) = results
    torch.testing.assert_close(logits1, logits0, atol=1e-5, rtol=1e-5)
    assert grads1.keys() == grads0.keys()
    for name in grads0:
        torch.testing.assert_close(grads1[name], grads0[name], atol=1e-5, rtol=1e-4, msg=name)


def test_without_target_mapping_the_content_stream_predicts_every_position():
    torch.manual_seed(0)
    model = xlnet.XLNetLMHeadModel(tiny()).eval()
    x = torch.randint(0, V, (2, 10))
    labels = x.clone()
    labels[:, ::2] = -100
    out = model(input_ids=x, labels=labels)
    assert out.logits.shape == (2, 10, V)
    expected = torch.nn.functional.cross_entropy(out.logits.reshape(-1, V), labels.reshape(-1), ignore_index=-100)
    torch.testing.assert_close(out.loss, expected)


@pytest.mark.parametrize("num_labels", [3, 1])
def test_classification_forward_backward(num_labels):
    torch.manual_seed(0)
    model = xlnet.XLNetForSequenceClassification(tiny(), num_labels=num_labels)
    x = torch.randint(0, V, (2, 10))
    mask = torch.ones_like(x)
    mask[1, 7:] = 0
    labels = torch.tensor([0, 2]) if num_labels == 3 else torch.tensor([0.3, 1.0])
    out = model(input_ids=x, attention_mask=mask, token_type_ids=torch.zeros_like(x), labels=labels)
    assert out.logits.shape == (2, num_labels) and torch.isfinite(out.loss)
    out.loss.backward()
    for name, p in model.named_parameters():  # all but the query stream's input, unused here
        assert (p.grad is None) == (name == "transformer.mask_emb"), name


def test_classification_summarises_the_last_real_token():
    """Right padding (our converter) reads the same <cls> as the row alone."""
    torch.manual_seed(0)
    model = xlnet.XLNetForSequenceClassification(tiny(), num_labels=3).eval()
    x = torch.randint(0, V, (2, 10))
    mask = torch.ones_like(x)
    mask[1, 6:] = 0
    with torch.no_grad():
        out = model(input_ids=x, attention_mask=mask)
        alone = model(input_ids=x[1:, :6]).logits
        expected = model.logits_proj(torch.tanh(model.summary(out.hidden_states[[0, 1], [9, 5]])))
    torch.testing.assert_close(out.logits, expected)
    torch.testing.assert_close(out.logits[1:], alone, atol=1e-5, rtol=1e-5)


# ----------------------------------------------------------------------------- the two streams


def test_query_stream_never_sees_its_own_content():
    """A target's prediction depends on the tokens it may see under perm_mask, never on its own
    token nor on the targets after it in the factorisation order; the content stream at that
    position does see its own token."""
    torch.manual_seed(0)
    model = xlnet.XLNetLMHeadModel(tiny()).eval()
    batch = pad_batch([example(12, [2, 3, 7, 8], 4, 3)], pad_id=0)
    perm = batch["perm_mask"][0]
    positions = batch["target_mapping"][0].argmax(-1)  # the targets, in position order
    with torch.no_grad():
        base = model(**batch).logits[0]
        for row, p in enumerate(positions.tolist()):
            changed = dict(batch, input_ids=batch["input_ids"].clone())
            hidden = perm[p].nonzero().flatten()  # what p's query may not see (itself included)
            assert p in hidden.tolist()
            changed["input_ids"][0, hidden] = (changed["input_ids"][0, hidden] + 1) % V
            torch.testing.assert_close(model(**changed).logits[0, row], base[row])
            # the content stream at p (no target_mapping) sees its own token
            content = {k: v for k, v in batch.items() if k not in ("target_mapping", "labels")}
            a = model(**content).hidden_states[0, p]
            b = model(**{**content, "input_ids": changed["input_ids"]}).hidden_states[0, p]
            assert not torch.allclose(a, b)


def test_the_first_target_in_the_order_sees_only_non_targets():
    torch.manual_seed(0)
    model = xlnet.XLNetLMHeadModel(tiny()).eval()
    batch = pad_batch([example(12, [2, 3, 7, 8], 4, 5)], pad_id=0)
    targets = batch["target_mapping"][0].argmax(-1)
    first = int(batch["perm_mask"][0][targets][:, targets].sum(1).argmax())  # the row blocked from every target
    is_target = torch.zeros(12, dtype=torch.bool)
    is_target[targets] = True
    with torch.no_grad():
        base = model(**batch).logits[0, first]
        for changed_positions, matters in [(is_target, False), (~is_target, True)]:
            ids = batch["input_ids"].clone()
            ids[0, changed_positions] = (ids[0, changed_positions] + 7) % V
            out = model(**{**batch, "input_ids": ids}).logits[0, first]
            assert torch.allclose(out, base) != matters


def test_right_padding_leaves_real_positions_unchanged():
    torch.manual_seed(0)
    model = xlnet.XLNetLMHeadModel(tiny()).eval()
    short = example(9, [1, 5], 4, 1)
    batch = pad_batch([example(12, [2, 3, 7], 4, 0), short], pad_id=0)
    alone = pad_batch([short], pad_id=0)
    with torch.no_grad():
        torch.testing.assert_close(model(**batch).logits[1], model(**alone).logits[0], atol=1e-5, rtol=1e-5)
        content = {k: v for k, v in batch.items() if k not in ("target_mapping", "labels")}
        content_alone = {k: v for k, v in alone.items() if k not in ("target_mapping", "labels")}
        torch.testing.assert_close(model(**content).logits[1, :9], model(**content_alone).logits[0],
                                   atol=1e-5, rtol=1e-5)


def test_rel_shift_bi_gives_each_key_its_distance():
    """out[i, j] = x[i, Q + j - i]: the score against distance klen - (Q + j - i) = mlen + i - j."""
    B, H, Q, M = 2, 3, 4, 5
    K = M + Q
    x = torch.randn(B, H, Q, K + Q)
    out = xlnet.rel_shift_bi(x, K)
    assert out.shape == (B, H, Q, K)
    for i in range(Q):
        for j in range(K):
            torch.testing.assert_close(out[:, :, i, j], x[:, :, i, Q + j - i])


def test_rel_gather_index_is_rel_shift_bi_at_the_query_positions():
    """The query stream's shift (queries at target positions) reads what rel_shift_bi reads for
    the content stream's queries at the same positions."""
    B, H, Q, M = 2, 3, 6, 4
    K = M + Q
    x = torch.randn(B, H, Q, K + Q)
    shifted = xlnet.rel_shift_bi(x, K)  # (B, H, Q, K)
    positions = torch.tensor([[0, 2, 5], [1, 3, 4]])  # (B, P)
    rows = x[torch.arange(B)[:, None], :, positions].transpose(1, 2)  # (B, H, P, R): the targets' rows
    index = xlnet.rel_gather_index(positions, Q, K, K + Q)  # (B, P, K)
    gathered = rows.gather(-1, index[:, None].expand(-1, H, -1, -1))
    torch.testing.assert_close(gathered, shifted[torch.arange(B)[:, None], :, positions].transpose(1, 2))


def test_target_mapping_must_be_one_hot_at_distinct_positions():
    model = xlnet.XLNetLMHeadModel(tiny()).eval()
    x = torch.randint(0, V, (1, 6))
    for bad in ([[0.5, 0.5, 0, 0, 0, 0]], [[1, 0, 0, 0, 0, 0], [1, 0, 0, 0, 0, 0]], [[1, 1, 0, 0, 0, 0]]):
        with pytest.raises(ValueError, match="one-hot"):
            model(input_ids=x, target_mapping=torch.tensor([bad], dtype=torch.float))
    ok = torch.tensor([[[0, 1, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0]]], dtype=torch.int8)  # a zero row is fine
    assert model(input_ids=x, target_mapping=ok).logits.shape == (1, 2, V)


def test_relative_segment_encoding_compares_segments():
    """Only same / different segment matters: renaming the segment ids changes nothing."""
    torch.manual_seed(0)
    model = xlnet.XLNetLMHeadModel(tiny()).eval()
    x = torch.randint(0, V, (1, 8))
    a = torch.tensor([[0, 0, 0, 1, 1, 1, 1, 2]])
    with torch.no_grad():
        out = model(input_ids=x, token_type_ids=a).logits
        renamed = model(input_ids=x, token_type_ids=(a + 1) % 3).logits
        merged = model(input_ids=x, token_type_ids=torch.zeros_like(a)).logits
    torch.testing.assert_close(out, renamed)
    assert not torch.allclose(out, merged)


# ----------------------------------------------------------------------------- memory


def test_memories_detached_one_per_layer_of_mem_len():
    torch.manual_seed(0)
    model = xlnet.XLNetLMHeadModel(tiny(mem_len=6)).train()
    x = torch.randint(0, V, (2, 8))
    out = model(input_ids=x, labels=x)
    mems = out.aux["mems"]
    assert len(mems) == 2 and all(m.shape == (2, 6, 32) for m in mems)
    assert all(not m.requires_grad and m.grad_fn is None for m in mems)
    reuse = xlnet.XLNetLMHeadModel(tiny(mem_len=6, reuse_len=3)).eval()
    with torch.no_grad():
        first = reuse(input_ids=x).aux["mems"]
        second = reuse(input_ids=x, mems=first).aux["mems"]
    assert first[0].shape == (2, 3, 32) and second[0].shape == (2, 6, 32)  # only reuse_len positions are cached


def test_uni_memory_continues_the_segment():
    """With causal attention (attn_type "uni"), segment 2 with segment 1's memory equals one pass."""
    torch.manual_seed(0)
    model = xlnet.XLNetLMHeadModel(tiny(attn_type="uni", mem_len=16)).eval()
    x = torch.randint(0, V, (2, 14))
    with torch.no_grad():
        first = model(input_ids=x[:, :8])
        second = model(input_ids=x[:, 8:], mems=first.aux["mems"])
        whole = model(input_ids=x)
    torch.testing.assert_close(first.logits, whole.logits[:, :8], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(second.logits, whole.logits[:, 8:], atol=1e-5, rtol=1e-5)


def test_bi_data_needs_an_even_batch():
    model = xlnet.XLNetLMHeadModel(tiny(bi_data=True)).eval()
    with torch.no_grad():
        assert model(input_ids=torch.randint(0, V, (2, 6))).logits.shape == (2, 6, V)
        with pytest.raises(ValueError, match="even"):
            model(input_ids=torch.randint(0, V, (3, 6)))


# ----------------------------------------------------------------------------- presets, config


def test_parameter_counts_equal_transformers():
    transformers = pytest.importorskip("transformers")
    from lmforge.interop._xlnet import xlnet_config_to_hf

    for name, expected in [("xlnet-base", 116_750_336), ("xlnet-tiny", None)]:
        config = xlnet.from_name(name)
        with torch.device("meta"):
            ours_lm = count_parameters(xlnet.XLNetLMHeadModel(config))
            ours_cls = count_parameters(xlnet.XLNetForSequenceClassification(config, num_labels=2))
            hf_config = xlnet_config_to_hf(config)
            theirs_lm = sum(p.numel() for p in transformers.XLNetLMHeadModel(hf_config).parameters())
            theirs_cls = sum(p.numel() for p in transformers.XLNetForSequenceClassification(hf_config).parameters())
        assert (ours_lm, ours_cls) == (theirs_lm, theirs_cls), name
        if expected:
            assert ours_lm == expected
            assert math.isclose(ours_lm, 117e6, rel_tol=0.01)
    # untie_r=False holds one set of the three biases instead of one per layer
    tied = count_parameters(xlnet.XLNetLMHeadModel(tiny(untie_r=False)))
    untied = count_parameters(xlnet.XLNetLMHeadModel(tiny()))
    assert untied - tied == (2 - 1) * 3 * 4 * 8


def test_large_preset_size():
    with torch.device("meta"):
        assert count_parameters(xlnet.XLNetLMHeadModel(xlnet.from_name("xlnet-large"))) == 360_300_800


@pytest.mark.parametrize("bad", [dict(n_heads=0), dict(attn_type="both"), dict(mem_len=-1), dict(dropout=1.0),
                                 dict(act="swish"), dict(same_length=True), dict(d_model=33)])
def test_config_errors(bad):
    with pytest.raises(ConfigError):
        tiny(**bad)


def test_unknown_preset_and_option():
    with pytest.raises(ConfigError, match="unknown XLNet preset"):
        xlnet.from_name("xlnet-huge")
    with pytest.raises(ConfigError, match="unknown option"):
        xlnet.from_name("xlnet-tiny", n_layer=3)
    assert xlnet.XLNetConfig.from_name("xlnet-base").untie_r is True
