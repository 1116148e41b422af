"""Every registered preset: builds, and (at tiny sizes) trains a step; published sizes match."""

import math

import pytest
import torch

from lmforge.models.layers import ConfigError, count_parameters
from lmforge.models.registry import ARCHITECTURES, PRESET_ARCHITECTURE, build_model, preset_config

# Published parameter counts (the whole pretraining model, tied weights once; ELMo: without the softmax).
PUBLISHED = {"gpt2": 124e6, "openai-gpt": 117e6, "bert-base": 110e6, "bert-tiny": 4.4e6, "albert-base": 12e6,
             "txl-wt103-base": 151e6, "txl-enwik8-base": 41e6, "xlnet-base": 117e6, "bart-base": 139e6,
             "t5-small": 60.5e6, "t5-v1_1-small": 77e6, "switch-base-8": 619e6}


def batch_for(name: str, head: str, B: int = 2, L: int = 12) -> dict:
    cfg = preset_config(name)
    arch = PRESET_ARCHITECTURE[name]
    g = torch.Generator().manual_seed(0)
    vocab = cfg.vocab_size
    ids = torch.randint(5, vocab, (B, L), generator=g)
    mask = torch.ones(B, L, dtype=torch.long)
    mask[1, -3:] = 0
    # the tagging heads: a tag (0 or 1) per position, -100 where none; the span heads: a start and an end
    tags = torch.where(mask.bool(), torch.randint(0, 2, (B, L), generator=g), torch.full((B, L), -100))
    spans = torch.tensor([[1, 3], [2, 2]])
    if arch == "elmo":
        chars = torch.randint(0, 256, (B, L, cfg.max_characters), generator=g)
        batch = {"char_ids": chars, "attention_mask": mask}
        if head == "bilm":
            batch |= {"labels": ids, "backward_labels": ids}
        else:
            batch["labels"] = {"token_classification": tags, "span_extraction": spans}.get(head, torch.tensor([0, 1]))
        return batch
    eos = getattr(cfg, "eos_id", None)
    if eos is not None:  # encoder-decoder classifiers read the last </s>
        ids[0, -4], ids[1, -4] = eos, eos
    batch = {"input_ids": ids, "attention_mask": mask}
    if head == "classification":
        batch["labels"] = torch.tensor([0, 1])
    elif head == "token_classification":
        batch["labels"] = tags
    elif head == "span_extraction":
        batch["labels"] = spans
    elif head == "seq2seq":
        batch["labels"] = torch.randint(5, vocab, (B, L // 2), generator=g)
    elif head == "lm":
        batch["labels"] = ids
    else:
        batch["labels"] = torch.where(torch.rand(B, L, generator=g) < 0.15, ids, torch.full_like(ids, -100))
        batch["labels"][:, 1] = ids[:, 1]
        if head == "pretraining":
            key = "sentence_order_label" if arch == "albert" else "next_sentence_label"
            batch[key] = torch.tensor([0, 1])
    return batch


TINY = [p for p in PRESET_ARCHITECTURE if "tiny" in p]


@pytest.mark.parametrize("name", sorted(TINY))
def test_every_tiny_preset_trains_a_step_with_every_head(name):
    arch = ARCHITECTURES[PRESET_ARCHITECTURE[name]]
    for head in arch.heads:
        torch.manual_seed(0)
        model = build_model(name, head=head)
        out = model(**batch_for(name, head))
        assert out.loss is not None and torch.isfinite(out.loss), (name, head)
        out.loss.backward()
        grads = [p.grad for p in model.parameters() if p.requires_grad]
        # most parameters get a gradient (some only from inputs this batch lacks: XLNet's mask
        # embedding needs target_mapping, segment biases need token types)
        assert sum(g is not None for g in grads) >= 0.8 * len(grads), (name, head)


def test_every_architecture_has_a_tiny_preset():
    for arch_name, arch in ARCHITECTURES.items():
        assert any("tiny" in p for p in arch.presets), arch_name


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_published_presets_have_the_published_size(name):
    with torch.device("meta"):
        model = build_model(name)
    n = count_parameters(model)
    assert math.isclose(n, PUBLISHED[name], rel_tol=0.05), (name, n)


def test_every_preset_builds_on_meta():
    for name in PRESET_ARCHITECTURE:
        with torch.device("meta"):
            assert count_parameters(build_model(name)) > 0


def test_errors_name_the_problem():
    with pytest.raises(ConfigError, match="unknown model preset 'bert-huge'"):
        build_model("bert-huge")
    with pytest.raises(ConfigError, match="unknown head 'seq2seq'"):
        build_model("bert-tiny", head="seq2seq")
    with pytest.raises(ConfigError, match="unknown option"):
        build_model("gpt-tiny", n_layer=3)
    with pytest.raises(ConfigError, match="num_labels applies to the classification head"):
        build_model("bert-tiny", num_labels=3)
    assert build_model("bert-tiny", head="classification", num_labels=3).classifier.out_features == 3


# Shrinks keep each preset's own choices (activation, pre/post-LN, eps, sharing, highway count)
# and change only sizes, so every registered preset's architecture runs a step on a CPU.
SHRINK = {
    "gpt": dict(vocab_size=300, n_positions=32, d_model=32, n_layers=2, n_heads=2, d_ff=64),
    "bert": dict(vocab_size=300, max_positions=32, d_model=32, n_layers=2, n_heads=2, d_ff=64),
    "ernie": dict(vocab_size=300, max_positions=32, d_model=32, n_layers=2, n_heads=2, d_ff=64),
    "albert": dict(vocab_size=300, max_positions=32, embedding_size=16, d_model=32, n_layers=2, n_heads=2, d_ff=64),
    "elmo": dict(vocab_size=300, filters=((1, 4), (2, 4), (3, 8)), projection_dim=16, cell_dim=32),
    "transformer_xl": dict(vocab_size=300, d_model=32, n_layers=2, n_heads=2, d_head=16, d_inner=64),
    "xlnet": dict(vocab_size=300, d_model=32, n_layers=2, n_heads=2, d_head=16, d_inner=64),
    "bart": dict(vocab_size=300, max_positions=32, d_model=32, encoder_layers=2, decoder_layers=2, n_heads=2, d_ff=64),
    "t5": dict(vocab_size=300, d_model=32, d_kv=8, d_ff=64, n_layers=2, n_decoder_layers=2, n_heads=2),
    "switch": dict(vocab_size=300, d_model=32, d_kv=8, d_ff=64, n_layers=2, n_decoder_layers=2, n_heads=2, num_experts=4),
}


@pytest.mark.parametrize("name", sorted(PRESET_ARCHITECTURE))
def test_every_registered_preset_trains_a_step_when_shrunk(name):
    arch_name = PRESET_ARCHITECTURE[name]
    arch = ARCHITECTURES[arch_name]
    overrides = SHRINK[arch_name]
    config = preset_config(name, **overrides)
    for field, value in overrides.items():
        assert getattr(config, field) == value
    torch.manual_seed(0)
    model = build_model(name, **overrides)
    cfg_batch = batch_for_config(arch_name, arch.default_head, config)
    out = model(**cfg_batch)
    assert torch.isfinite(out.loss)
    out.loss.backward()


def batch_for_config(arch: str, head: str, cfg, B: int = 2, L: int = 10) -> dict:
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(5, cfg.vocab_size, (B, L), generator=g)
    mask = torch.ones(B, L, dtype=torch.long)
    mask[1, -2:] = 0
    if arch == "elmo":
        return {"char_ids": torch.randint(0, 256, (B, L, cfg.max_characters), generator=g), "attention_mask": mask,
                "labels": ids, "backward_labels": ids}
    if head == "lm":
        return {"input_ids": ids, "attention_mask": mask, "labels": ids}
    if head == "seq2seq":
        return {"input_ids": ids, "attention_mask": mask, "labels": ids[:, : L // 2]}
    key = "sentence_order_label" if arch == "albert" else "next_sentence_label"
    return {"input_ids": ids, "attention_mask": mask, "labels": ids, key: torch.tensor([0, 1])}
