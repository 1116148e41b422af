"""ALBERT's cross-layer sharing as a choice (``sharing``: all, attention, none): what each shares,
that the forward runs every layer, and that only the published layout exports to transformers."""

from __future__ import annotations

import pytest
import torch

from lmforge.errors import ConfigError
from lmforge.models.albert import AlbertConfig, AlbertForPreTraining


def _config(sharing: str) -> AlbertConfig:
    return AlbertConfig(vocab_size=100, embedding_size=16, d_model=32, n_layers=3, n_heads=2, d_ff=64,
                        max_positions=32, sharing=sharing)


def test_each_sharing_holds_the_parameters_it_says():
    counts = {s: sum(p.numel() for p in AlbertForPreTraining(_config(s)).parameters()) for s in ("all", "attention", "none")}
    block = counts["none"] - counts["all"]  # two more blocks
    attention = 4 * 32 * 32 + 4 * 32  # Q, K, V and the output projection with their biases
    assert block > 0 and block % 2 == 0
    assert counts["attention"] == counts["none"] - 2 * attention  # the two later layers reuse the first's attention
    model = AlbertForPreTraining(_config("attention"))
    blocks = model.albert.blocks
    assert blocks[1].attn is blocks[0].attn and blocks[1].ffn is not blocks[0].ffn


def test_every_layer_runs_and_a_separate_layer_changes_only_its_own_output():
    torch.manual_seed(0)
    model = AlbertForPreTraining(_config("none")).eval()
    calls = []
    for i, b in enumerate(model.albert.blocks):
        b.register_forward_hook(lambda module, args, out, i=i: calls.append(i))
    ids = torch.randint(5, 100, (2, 8))
    before = model(input_ids=ids).logits
    assert calls == [0, 1, 2]
    with torch.no_grad():
        model.albert.blocks[2].ffn.fc2.bias.add_(1.0)
    assert not torch.allclose(model(input_ids=ids).logits, before)


def test_unknown_sharing_and_the_export_of_a_non_published_layout_are_refused():
    with pytest.raises(ConfigError, match="sharing must be one of"):
        AlbertForPreTraining(_config("layers"))
    from lmforge.interop._albert import albert_config_to_hf

    assert albert_config_to_hf(_config("all")).num_hidden_groups == 1
    with pytest.raises(ConfigError, match="only sharing: all exports"):
        albert_config_to_hf(_config("none"))


@pytest.mark.parametrize("sharing", ["all", "attention"])
def test_norm_first_builds_a_pre_ln_stack_with_a_final_norm_and_is_not_exported(sharing):
    """``norm_first: true``: every layer is x + attn(LN(x)), then x + ffn(LN(x)), whatever it
    shares, and a LayerNorm follows the stack; transformers' ALBERT is post-LN, so the export
    refuses it."""
    from lmforge.config import ConfigError
    from lmforge.interop._albert import albert_config_to_hf
    from lmforge.models.albert import AlbertConfig, AlbertModel

    torch.manual_seed(0)
    config = AlbertConfig(vocab_size=50, embedding_size=8, d_model=16, n_layers=3, n_heads=2, d_ff=32,
                          max_positions=16, sharing=sharing, norm_first=True)
    model = AlbertModel(config).eval()
    ids = torch.randint(5, 50, (2, 7))
    hidden, _ = model(ids)
    x = model.project(model.embeddings(ids, None))
    for block in model.layers():
        x = x + block.attn(block.norm1(x), None)
        x = x + block.ffn(block.norm2(x))
    torch.testing.assert_close(hidden, model.final_norm(x))
    assert AlbertModel(AlbertConfig(vocab_size=50, embedding_size=8, d_model=16, n_layers=1, n_heads=2,
                                    d_ff=32)).final_norm is None
    with pytest.raises(ConfigError, match="post-LN"):
        albert_config_to_hf(config)
