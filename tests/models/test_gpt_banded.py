"""GPT-3's alternating dense and locally banded attention (``local_attention_window``): the banded
layers attend only inside the band, the dense ones to everything before them, and padding still
counts."""

import pytest
import torch

from lmforge.interop.hf import to_hf
from lmforge.models.gpt import GPTConfig, GPTLMHeadModel, band_bias
from lmforge.models.layers import ConfigError, attention_bias

W = 3


def model(window=W, n_layers=2):
    torch.manual_seed(0)
    config = GPTConfig.from_name("gpt-tiny", vocab_size=50, n_positions=32, n_layers=n_layers, dropout=0.0,
                                 attn_dropout=0.0, embd_dropout=0.0, local_attention_window=window)
    return GPTLMHeadModel(config).eval()


def block_outputs(m, layer, x, mask=None):
    """The output of block ``layer`` given its input ``x`` (B, L, D), with the mask the model builds."""
    L = x.shape[1]
    captured = {}
    hook = m.gpt.blocks[layer].register_forward_pre_hook(lambda mod, args: captured.setdefault("args", args))
    m(torch.zeros(x.shape[0], L, dtype=torch.long), attention_mask=mask)
    hook.remove()
    _, bias, causal_only = captured["args"]
    with torch.no_grad():
        return m.gpt.blocks[layer](x, bias, causal_only)


@pytest.mark.parametrize("padded", [False, True])
def test_the_banded_layer_sees_only_the_band_and_the_dense_layer_everything_before(padded):
    m = model()
    assert [m.config.banded(i) for i in range(4)] == [False, True, False, True]
    L, i = 10, 8
    mask = torch.ones(1, L, dtype=torch.long) if padded else None
    torch.manual_seed(1)
    x = torch.randn(1, L, m.config.d_model)
    for layer, sees in ((1, set(range(i - W + 1, i + 1))), (0, set(range(i + 1)))):
        base = block_outputs(m, layer, x, mask)[0, i]
        for j in range(L):
            changed = x.clone()
            changed[0, j] += 3.0 * torch.randn(m.config.d_model)  # not a constant: LayerNorm would remove that
            moved = not torch.allclose(block_outputs(m, layer, changed, mask)[0, i], base, atol=1e-6)
            assert moved == (j in sees), (layer, j)


def test_band_bias_and_padding():
    band = band_bias(5, 2, torch.float32, "cpu")[0, 0]
    assert ((band == 0) == torch.tensor([[1, 0, 0, 0, 0], [1, 1, 0, 0, 0], [0, 1, 1, 0, 0], [0, 0, 1, 1, 0],
                                         [0, 0, 0, 1, 1]], dtype=torch.bool)).all()
    m = model()
    ids = torch.randint(0, 50, (2, 9), generator=torch.Generator().manual_seed(3))
    mask = torch.ones(2, 9, dtype=torch.long)
    mask[1, 6:] = 0  # right padding changes nothing before it
    with torch.no_grad():
        full = m(ids[1:, :6]).logits
        padded = m(ids, attention_mask=mask).logits[1:, :6]
    torch.testing.assert_close(padded, full, atol=1e-5, rtol=1e-5)
    assert attention_bias(None, 4, 4, False, torch.float32, "cpu") is None


def test_a_window_as_long_as_the_sequence_is_the_dense_model():
    dense, wide = model(window=None), model(window=32)
    wide.load_state_dict(dense.state_dict())
    ids = torch.randint(0, 50, (2, 12), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        torch.testing.assert_close(wide(ids).logits, dense(ids).logits, atol=1e-5, rtol=1e-5)
    narrow = model(window=2)
    narrow.load_state_dict(dense.state_dict())
    with torch.no_grad():
        assert not torch.allclose(narrow(ids).logits, dense(ids).logits, atol=1e-3)


def test_bad_windows_and_export_are_errors():
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ConfigError, match="local_attention_window"):
            GPTConfig.from_name("gpt-tiny", local_attention_window=bad)
    with pytest.raises(ConfigError, match="banded"):
        to_hf(model())
