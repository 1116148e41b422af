"""Model FLOPs per token (models.flops) against hand counts from each model's dimensions, and a
run's compute record (training.compute)."""

from __future__ import annotations

import pytest
import torch

from lmforge.models.flops import attention_modules, flops_per_token
from lmforge.models.registry import build_model
from lmforge.training.compute import compute_record, labelled_fraction


def _block(d: int) -> int:
    """One transformer block with a 4d feed-forward: Q, K, V and output projections (4 d^2 + 4 d),
    two feed-forward matrices (8 d^2 + 5 d), two LayerNorms (4 d)."""
    return 12 * d * d + 13 * d


@pytest.mark.parametrize("preset, d, layers, vocab, length", [("gpt2", 768, 12, 50257, 1024), ("gpt-tiny", 128, 4, 8192, 256)])
def test_gpt_flops_per_token_by_hand(preset, d, layers, vocab, length):
    model = build_model(preset, head="lm")
    n = layers * _block(d) + 2 * d  # the blocks and the final LayerNorm; the embeddings are looked up
    hand = 6 * n + 6 * d * vocab + 12 * layers * d * length  # + the tied output layer at every position, attention
    assert flops_per_token(model, length, 1.0) == hand
    if preset == "gpt2":  # the PaLM appendix B count nanoGPT reports: 6 x (parameters less the position table)
        assert hand == 6 * (124_439_808 - 1024 * 768) + 12 * 12 * 768 * 1024


@pytest.mark.parametrize("preset, d, layers", [("bert-base", 768, 12), ("bert-tiny", 128, 2)])
def test_bert_flops_per_token_by_hand(preset, d, layers):
    model = build_model(preset, head="pretraining")
    vocab, length, masked = 30522, 512, 0.15
    n = (2 * d  # the embeddings' LayerNorm
         + layers * _block(d)
         + d * d + d  # the pooler
         + d * d + d + 2 * d + vocab  # the masked-LM head's transform, its LayerNorm, the output bias
         + 2 * d + 2)  # next-sentence prediction
    hand = 6 * n + 6 * d * vocab * masked + 12 * layers * d * length
    assert flops_per_token(model, length, masked) == pytest.approx(hand, rel=1e-12)


def test_albert_counts_its_shared_block_once_per_layer_it_runs_as():
    one, twelve = build_model("albert-base", head="pretraining", n_layers=1), build_model("albert-base", head="pretraining")
    assert sum(p.numel() for p in one.parameters()) == sum(p.numel() for p in twelve.parameters())
    assert (attention_modules(one), attention_modules(twelve)) == (1, 12)
    d, length = 768, 128
    block = _block(d)
    assert flops_per_token(twelve, length, 0.15) - flops_per_token(one, length, 0.15) == 11 * (6 * block + 12 * d * length)


def test_a_classifier_counts_no_output_layer_over_the_vocabulary():
    model = build_model("bert-tiny", head="classification", num_labels=3)
    assert flops_per_token(model, 64, 0.0) < flops_per_token(model, 64, 1.0)
    assert flops_per_token(model, 64, 1.0) - flops_per_token(model, 64, 0.0) == 6 * 128 * 30522


def test_labelled_fraction_counts_the_predicted_positions():
    batches = [{"input_ids": torch.zeros(2, 10, dtype=torch.long), "labels": torch.tensor([[-100] * 7 + [1] * 3] * 2)},
               {"input_ids": torch.zeros(1, 10, dtype=torch.long), "labels": torch.tensor([[5] * 10])}]
    assert labelled_fraction(batches) == pytest.approx((6 + 10) / 30)
    assert labelled_fraction([{"input_ids": torch.zeros(3, 4, dtype=torch.long)}]) == 1.0


def test_the_compute_record_states_flops_and_mfu_where_the_peak_is_known():
    model = build_model("gpt-tiny", head="lm")
    per_token = flops_per_token(model, 128, 1.0)
    cpu = compute_record(model, tokens=12_800, examples=100, seconds=10.0, cpu_seconds=19.0, predicted_fraction=1.0,
                         device="cpu")
    assert cpu["flops"] == per_token * 12_800 and cpu["positions_per_example"] == 128 and cpu["mfu"] is None
    gpu = compute_record(model, tokens=12_800, examples=100, seconds=10.0, cpu_seconds=9.0, predicted_fraction=1.0,
                         device="NVIDIA H100 80GB HBM3", devices=2)
    assert gpu["mfu"] == round(per_token * 12_800 / 10.0 / (2 * 989.4e12), 4)


@pytest.mark.parametrize("sharing", ["all", "attention", "none"])
def test_albert_sharing_counts_every_layer_once_whatever_it_shares(sharing):
    """The same depth does the same work: sharing changes the parameters, not the FLOPs."""
    model = build_model("albert-base", head="pretraining", sharing=sharing)
    assert attention_modules(model) == 12
    assert flops_per_token(model, 128, 0.15) == flops_per_token(build_model("albert-base", head="pretraining"), 128, 0.15)
