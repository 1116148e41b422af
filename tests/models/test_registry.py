"""Every registered preset: builds, and (at tiny sizes) trains a step; published sizes match."""

import math

import pytest
import torch

from lmforge.models.layers import ConfigError, count_parameters
from lmforge.models.registry import ARCHITECTURES, PRESET_ARCHITECTURE, build_model, preset_config

# Published parameter counts (the whole pretraining model, tied weights once; ELMo: without the softmax).
PUBLISHED = {"gpt2": 124e6, "openai-gpt": 117e6, "bert-base": 110e6, "bert-tiny": 4.4e6, "albert-base": 12e6}


def batch_for(name: str, head: str, B: int = 2, L: int = 12) -> dict:
    cfg = preset_config(name)
    arch = PRESET_ARCHITECTURE[name]
    g = torch.Generator().manual_seed(0)
    vocab = cfg.vocab_size
    ids = torch.randint(5, vocab, (B, L), generator=g)
    mask = torch.ones(B, L, dtype=torch.long)
    mask[1, -3:] = 0
    if arch == "elmo":
        chars = torch.randint(0, 256, (B, L, cfg.max_characters), generator=g)
        batch = {"char_ids": chars, "attention_mask": mask}
        if head == "bilm":
            batch |= {"labels": ids, "backward_labels": ids}
        else:
            batch["labels"] = torch.tensor([0, 1])
        return batch
    batch = {"input_ids": ids, "attention_mask": mask}
    if head == "classification":
        batch["labels"] = torch.tensor([0, 1])
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
        assert grads and all(g is not None for g in grads[:3]), (name, head)


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
