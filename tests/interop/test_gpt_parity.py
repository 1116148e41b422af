"""Parity with transformers' GPT-2 and OpenAI GPT: same weights, same outputs; exact round trips; exports load."""

import pytest
import torch

transformers = pytest.importorskip("transformers")

from lmforge.interop._gpt import (  # noqa: E402
    gpt2_config_to_hf,
    gpt2_from_hf,
    gpt2_to_hf,
    openai_gpt_config_to_hf,
    openai_gpt_from_hf,
    openai_gpt_to_hf,
)
from lmforge.models.gpt import GPTConfig, GPTForSequenceClassification, GPTLMHeadModel  # noqa: E402
from lmforge.models.layers import ConfigError  # noqa: E402

HAS_OPENAI = hasattr(transformers, "OpenAIGPTLMHeadModel")
needs_openai = pytest.mark.skipif(
    not HAS_OPENAI, reason=f"transformers {transformers.__version__} no longer ships OpenAI GPT (OpenAIGPTLMHeadModel)"
)

PAD = 0
ATOL = 1e-4
# a non-default shape: 3 layers, hidden 48, 4 heads, inner 80, vocab 101, 40 positions
SHAPE = dict(vocab_size=101, n_positions=40, n_embd=48, n_layer=3, n_head=4, layer_norm_epsilon=1e-6, pad_token_id=PAD)


def gpt2_config(**extra):
    return transformers.GPT2Config(**{**SHAPE, "n_inner": 80, "activation_function": "gelu_new", "bos_token_id": 1, "eos_token_id": 1, **extra})


def openai_config(**extra):
    return transformers.OpenAIGPTConfig(**{**SHAPE, "afn": "gelu", **extra})  # its FFN is always 4 x n_embd


def randomise(model: torch.nn.Module, seed: int = 0) -> torch.nn.Module:
    """Move every parameter off its initial value (LayerNorms, biases too) so no mapping hides."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=g) * 0.05)
    return model.eval()


def inputs(seed: int = 0):
    """(4, 24) ids, right padded with PAD to lengths 24, 17, 9, 1; labels -100 on padding."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, 101, (4, 24), generator=g)
    mask = (torch.arange(24) < torch.tensor([[24], [17], [9], [1]])).long()
    ids = ids.masked_fill(mask == 0, PAD)
    return ids, mask, ids.masked_fill(mask == 0, -100)


def max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a.float() - b.float()).abs().max().item()


def check_lm(hf, ours):
    ids, mask, labels = inputs()
    with torch.no_grad():
        theirs, mine = hf(input_ids=ids, attention_mask=mask, labels=labels), ours(input_ids=ids, attention_mask=mask, labels=labels)
    assert max_diff(theirs.logits, mine.logits) <= ATOL
    assert max_diff(theirs.loss, mine.loss) <= ATOL
    # left padding: the real positions agree (both models use absolute positions 0..L-1)
    left = torch.flip(mask, dims=[1])
    left_ids = torch.where(left.bool(), torch.randint(1, 101, ids.shape, generator=torch.Generator().manual_seed(1)), PAD)
    with torch.no_grad():
        theirs, mine = hf(input_ids=left_ids, attention_mask=left).logits, ours(input_ids=left_ids, attention_mask=left).logits
    assert max_diff(theirs[left.bool()], mine[left.bool()]) <= ATOL


def check_classifier(hf, ours):
    ids, mask, _ = inputs(2)
    labels = torch.tensor([0, 2, 1, 2])
    with torch.no_grad():
        theirs, mine = hf(input_ids=ids, attention_mask=mask, labels=labels), ours(input_ids=ids, attention_mask=mask, labels=labels)
    assert mine.logits.shape == (4, 3)
    assert max_diff(theirs.logits, mine.logits) <= ATOL
    assert max_diff(theirs.loss, mine.loss) <= ATOL


def assert_same_state(a: torch.nn.Module, b: torch.nn.Module):
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys()
    for k in sa:
        assert torch.equal(sa[k], sb[k]), k


# ----------------------------------------------------------------------------- GPT-2


def test_gpt2_lm_parity_and_round_trip():
    hf = randomise(transformers.GPT2LMHeadModel(gpt2_config()))
    ours = gpt2_from_hf(hf)
    assert isinstance(ours, GPTLMHeadModel) and not ours.training
    c = ours.config
    assert (c.d_model, c.n_layers, c.n_heads, c.d_ff, c.vocab_size, c.n_positions, c.eps, c.norm_first, c.act) == (
        48, 3, 4, 80, 101, 40, 1e-6, True, "gelu_tanh")
    check_lm(hf, ours)
    back = gpt2_to_hf(ours, pad_token_id=PAD)
    assert_same_state(hf, back)
    assert_same_state(ours, gpt2_from_hf(back))
    assert back.lm_head.weight is back.transformer.wte.weight  # still tied in transformers


def test_gpt2_classifier_parity_and_round_trip():
    hf = randomise(transformers.GPT2ForSequenceClassification(gpt2_config(num_labels=3)))
    ours = gpt2_from_hf(hf)
    assert isinstance(ours, GPTForSequenceClassification) and ours.num_labels == 3
    check_classifier(hf, ours)
    assert_same_state(ours, gpt2_from_hf(gpt2_to_hf(ours, pad_token_id=PAD)))


def test_ours_to_gpt2_and_export_loads_with_auto_class(tmp_path):
    torch.manual_seed(0)
    ours = randomise(GPTLMHeadModel(GPTConfig(vocab_size=101, n_positions=40, d_model=48, n_layers=3, n_heads=4, d_ff=80)))
    gpt2_to_hf(ours, pad_token_id=PAD, eos_token_id=1).save_pretrained(tmp_path)
    loaded = transformers.AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    assert type(loaded).__name__ == "GPT2LMHeadModel"
    check_lm(loaded, ours)
    assert_same_state(ours, gpt2_from_hf(loaded))


# ----------------------------------------------------------------------------- OpenAI GPT (GPT-1)


@needs_openai
def test_openai_gpt_lm_parity_and_round_trip():
    hf = randomise(transformers.OpenAIGPTLMHeadModel(openai_config()))
    ours = openai_gpt_from_hf(hf)
    c = ours.config
    assert (c.norm_first, c.d_ff, c.act, c.scaled_residual_init) == (False, 192, "gelu_tanh", False)
    check_lm(hf, ours)
    back = openai_gpt_to_hf(ours, pad_token_id=PAD)
    assert_same_state(hf, back)
    assert_same_state(ours, openai_gpt_from_hf(back))


@needs_openai
def test_openai_gpt_classifier_parity_and_round_trip():
    hf = randomise(transformers.OpenAIGPTForSequenceClassification(openai_config(num_labels=3)))
    ours = openai_gpt_from_hf(hf)
    check_classifier(hf, ours)
    assert_same_state(ours, openai_gpt_from_hf(openai_gpt_to_hf(ours, pad_token_id=PAD)))


@needs_openai
def test_openai_gpt_export_loads_with_auto_class(tmp_path):
    torch.manual_seed(0)
    ours = randomise(GPTLMHeadModel(GPTConfig.from_name("openai-gpt", vocab_size=101, n_positions=40, d_model=48,
                                                        n_layers=3, n_heads=4, d_ff=192)))
    openai_gpt_to_hf(ours, pad_token_id=PAD).save_pretrained(tmp_path)
    loaded = transformers.AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    assert type(loaded).__name__ == "OpenAIGPTLMHeadModel"
    check_lm(loaded, ours)


# ----------------------------------------------------------------------------- what cannot be exported


def test_incompatible_exports_are_errors():
    gpt1 = GPTConfig.from_name("gpt-tiny", norm_first=False)
    with pytest.raises(ConfigError, match="pre-LN"):
        gpt2_config_to_hf(gpt1)
    if HAS_OPENAI:
        with pytest.raises(ConfigError, match="post-LN"):
            openai_gpt_config_to_hf(GPTConfig.from_name("gpt-tiny"))
        with pytest.raises(ConfigError, match="d_ff"):
            openai_gpt_config_to_hf(GPTConfig.from_name("gpt-tiny", norm_first=False, d_ff=300))
    with pytest.raises(ConfigError, match="scale_attn_by_inverse_layer_idx"):
        gpt2_from_hf(transformers.GPT2LMHeadModel(gpt2_config(scale_attn_by_inverse_layer_idx=True)))
