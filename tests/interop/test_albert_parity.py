"""Parity with transformers' ALBERT: same weights, same outputs for every head; exact round trips; exports load."""

import pytest
import torch

transformers = pytest.importorskip("transformers")

from lmforge.interop._albert import albert_from_hf, albert_to_hf  # noqa: E402
from lmforge.models.albert import (  # noqa: E402
    AlbertConfig,
    AlbertForMaskedLM,
    AlbertForPreTraining,
    AlbertForSequenceClassification,
)
from lmforge.models.layers import ConfigError  # noqa: E402

ATOL = 1e-4
# a non-default shape: 3 layers, hidden 48, embedding 24, 4 heads, inner 80, vocab 101, 40 positions
SHAPE = dict(vocab_size=101, embedding_size=24, hidden_size=48, num_hidden_layers=3, num_attention_heads=4,
             intermediate_size=80, max_position_embeddings=40, type_vocab_size=2, hidden_act="gelu_new",
             layer_norm_eps=1e-6, pad_token_id=0)


def hf_config(**extra):
    return transformers.AlbertConfig(**{**SHAPE, **extra})


def randomise(model: torch.nn.Module, seed: int = 0) -> torch.nn.Module:
    """Move every parameter off its initial value (LayerNorms, biases too) so no mapping hides."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=g) * 0.05)
    return model.eval()


def batch(seed: int = 0) -> dict[str, torch.Tensor]:
    """(4, 24) pairs, right padded to lengths 24, 17, 9, 2; MLM labels at ~15% of the real positions."""
    g = torch.Generator().manual_seed(seed)
    mask = (torch.arange(24) < torch.tensor([[24], [17], [9], [2]])).long()
    ids = torch.randint(1, 101, (4, 24), generator=g).masked_fill(mask == 0, 0)
    token_type_ids = (torch.arange(24) >= torch.tensor([[10], [8], [4], [1]])).long() * mask
    labels = torch.where((torch.rand(4, 24, generator=g) < 0.15) & mask.bool(), ids, -100)
    labels[0, 3] = ids[0, 3]
    return dict(input_ids=ids, attention_mask=mask, token_type_ids=token_type_ids, labels=labels)


def max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a.float() - b.float()).abs().max().item()


def assert_same_state(a: torch.nn.Module, b: torch.nn.Module):
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys()
    for k in sa:
        assert torch.equal(sa[k], sb[k]), k


def check_pretraining(hf, ours):
    b = batch()
    sop = torch.tensor([0, 1, 1, 0])
    with torch.no_grad():
        theirs, mine = hf(**b, sentence_order_label=sop), ours(**b, sentence_order_label=sop)
    assert max_diff(theirs.prediction_logits, mine.logits) <= ATOL
    assert max_diff(theirs.sop_logits, mine.aux["sop_logits"]) <= ATOL
    assert max_diff(theirs.loss, mine.loss) <= ATOL


def test_pretraining_parity_and_round_trip():
    hf = randomise(transformers.AlbertForPreTraining(hf_config()))
    ours = albert_from_hf(hf)
    assert isinstance(ours, AlbertForPreTraining) and not ours.training
    c = ours.config
    assert (c.embedding_size, c.d_model, c.n_layers, c.n_heads, c.d_ff, c.vocab_size, c.max_positions, c.eps, c.act) == (
        24, 48, 3, 4, 80, 101, 40, 1e-6, "gelu_tanh")
    check_pretraining(hf, ours)
    back = albert_to_hf(ours, pad_token_id=0)
    assert_same_state(hf, back)
    assert_same_state(ours, albert_from_hf(back))
    assert back.predictions.decoder.weight is back.albert.embeddings.word_embeddings.weight  # still tied


def test_masked_lm_parity_and_round_trip():
    hf = randomise(transformers.AlbertForMaskedLM(hf_config()))
    ours = albert_from_hf(hf)
    assert isinstance(ours, AlbertForMaskedLM)
    b = batch(1)
    with torch.no_grad():
        theirs, mine = hf(**b), ours(**b)
    assert max_diff(theirs.logits, mine.logits) <= ATOL
    assert max_diff(theirs.loss, mine.loss) <= ATOL
    assert_same_state(ours, albert_from_hf(albert_to_hf(ours)))


def test_sequence_classification_parity_and_round_trip():
    hf = randomise(transformers.AlbertForSequenceClassification(hf_config(num_labels=3)))
    ours = albert_from_hf(hf)
    assert isinstance(ours, AlbertForSequenceClassification) and ours.num_labels == 3
    b = batch(2)
    b["labels"] = torch.tensor([2, 0, 1, 1])
    with torch.no_grad():
        theirs, mine = hf(**b), ours(**b)
    assert max_diff(theirs.logits, mine.logits) <= ATOL
    assert max_diff(theirs.loss, mine.loss) <= ATOL
    assert_same_state(ours, albert_from_hf(albert_to_hf(ours)))


def test_ours_to_hf_and_export_loads_with_auto_class(tmp_path):
    torch.manual_seed(0)
    config = AlbertConfig(vocab_size=101, embedding_size=24, d_model=48, n_layers=3, n_heads=4, d_ff=80, max_positions=40)
    ours = randomise(AlbertForPreTraining(config))
    albert_to_hf(ours, pad_token_id=0).save_pretrained(tmp_path)
    loaded = transformers.AutoModelForPreTraining.from_pretrained(tmp_path).eval()
    assert type(loaded).__name__ == "AlbertForPreTraining"
    check_pretraining(loaded, ours)
    assert_same_state(ours, albert_from_hf(loaded))


def test_unsupported_layouts_are_errors():
    with pytest.raises(ConfigError, match="one shared layer"):
        albert_from_hf(transformers.AlbertForMaskedLM(hf_config(num_hidden_groups=3)))
    with pytest.raises(ConfigError, match="activation"):
        albert_from_hf(transformers.AlbertForMaskedLM(hf_config(hidden_act="silu")))
