"""T5 (v1.0 and v1.1) against transformers: same logits and losses after conversion, exact round
trips, exported directories that ``AutoModelFor*.from_pretrained`` loads, the same greedy and
beam-search tokens as ``generate``.

The transformers models use a non-default configuration (2 encoder / 3 decoder layers,
d_model 48, d_kv 12 so that n_heads * d_kv != d_model, d_ff 80, vocab 101, 8 buckets, max
distance 20, eps 1e-5) and every tensor is perturbed away from its init (norms included, and
v1.1's output layer differs from the embedding), so a wrong name mapping cannot hide.
"""

from __future__ import annotations

import pytest
import torch
import transformers

from lmforge.interop._t5 import t5_from_hf, t5_to_hf, untie_lm_head
from lmforge.models import generation, t5
from lmforge.models.layers import ConfigError

ATOL = 1e-4
B, S, T, VOCAB = 3, 12, 9, 101
COMMON = dict(vocab_size=VOCAB, d_model=48, d_kv=12, d_ff=80, num_layers=2, num_decoder_layers=3, num_heads=4,
              relative_attention_num_buckets=8, relative_attention_max_distance=20, layer_norm_epsilon=1e-5,
              decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)
VARIANTS = {"v1.0": dict(feed_forward_proj="relu", tie_word_embeddings=True),
            "v1.1": dict(feed_forward_proj="gated-gelu", tie_word_embeddings=False)}
HEADS = {"ForConditionalGeneration": transformers.AutoModelForSeq2SeqLM,
         "ForSequenceClassification": transformers.AutoModelForSequenceClassification}
CASES = [(v, h) for v in VARIANTS for h in HEADS]


def make_hf(variant: str, head: str, seed: int = 0) -> transformers.PreTrainedModel:
    torch.manual_seed(seed)
    extra = {"num_labels": 3} if head == "ForSequenceClassification" else {}
    model = getattr(transformers, "T5" + head)(transformers.T5Config(**COMMON, **VARIANTS[variant], **extra))
    if head == "ForConditionalGeneration" and variant == "v1.1":
        untie_lm_head(model)  # transformers 5 ties it even for v1.1 configs; the checkpoints are untied
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return model.eval()


def make_inputs(head: str, seed: int = 1) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    lengths = torch.tensor([S, S - 4, 5])
    attention_mask = (torch.arange(S)[None] < lengths[:, None]).long()
    input_ids = torch.randint(2, VOCAB, (B, S), generator=g)
    input_ids[torch.arange(B), lengths - 1] = 1  # </s>
    inputs = dict(input_ids=input_ids.masked_fill(attention_mask == 0, 0), attention_mask=attention_mask)
    if head == "ForSequenceClassification":
        inputs["labels"] = torch.randint(0, 3, (B,), generator=g)
        return inputs
    tgt = torch.tensor([T, T - 3, 4])
    decoder_attention_mask = (torch.arange(T)[None] < tgt[:, None]).long()
    labels = torch.randint(2, VOCAB, (B, T), generator=g).masked_fill(decoder_attention_mask == 0, -100)
    inputs.update(labels=labels, decoder_input_ids=t5.shift_right(labels, 0, 0),
                  decoder_attention_mask=decoder_attention_mask)
    return inputs


def max_diffs(ours, theirs) -> dict[str, float]:
    return {k: (ours[k].float() - theirs[k].float()).abs().max().item() for k in ("logits", "loss")}


def outputs(model, inputs) -> dict[str, torch.Tensor]:
    with torch.no_grad():
        out = model(**inputs)
    return {"logits": out.logits, "loss": out.loss}


def assert_state_dicts_equal(a: torch.nn.Module, b: torch.nn.Module) -> None:
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys()
    for k in sa:
        assert sa[k].dtype == sb[k].dtype and torch.equal(sa[k], sb[k]), k


@pytest.mark.parametrize("variant, head", CASES)
def test_converted_from_transformers_gives_the_same_outputs(variant, head):
    hf = make_hf(variant, head)
    ours = t5_from_hf(hf)
    assert not ours.training
    assert ours.config.ffn == VARIANTS[variant]["feed_forward_proj"]
    assert ours.config.tie_word_embeddings == VARIANTS[variant]["tie_word_embeddings"]
    inputs = make_inputs(head)
    diffs = max_diffs(outputs(ours, inputs), outputs(hf, inputs))
    assert max(diffs.values()) <= ATOL, diffs
    if head == "ForConditionalGeneration":  # labels alone: both shift them right behind the pad id
        labels_only = {k: v for k, v in inputs.items() if k not in ("decoder_input_ids", "decoder_attention_mask")}
        diffs = max_diffs(outputs(ours, labels_only), outputs(hf, labels_only))
        assert max(diffs.values()) <= ATOL, diffs


# (ours, transformers) parameter names whose gradients the test below compares: both position
# biases, and attention projections of every kind (encoder, decoder self-, cross-attention)
GRAD_PAIRS = [("encoder.relative_bias.weight", "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"),
              ("decoder.relative_bias.weight", "decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"),
              ("encoder.layers.1.self_attn.q.weight", "encoder.block.1.layer.0.SelfAttention.q.weight"),
              ("encoder.layers.0.self_attn.k.weight", "encoder.block.0.layer.0.SelfAttention.k.weight"),
              ("decoder.layers.2.self_attn.v.weight", "decoder.block.2.layer.0.SelfAttention.v.weight"),
              ("decoder.layers.1.cross_attn.q.weight", "decoder.block.1.layer.1.EncDecAttention.q.weight"),
              ("decoder.layers.0.cross_attn.o.weight", "decoder.block.0.layer.1.EncDecAttention.o.weight")]


@pytest.mark.parametrize("variant", VARIANTS)
def test_gradients_equal_transformers(variant):
    """With gradients on, the position bias needs one, and attention takes its written-out path
    (SDPA has no fused kernel for that): the loss and the gradients equal transformers'."""
    hf = make_hf(variant, "ForConditionalGeneration")
    ours = t5_from_hf(hf)
    inputs = make_inputs("ForConditionalGeneration")
    mine, theirs = ours(**inputs).loss, hf(**inputs).loss
    mine.backward()
    theirs.backward()
    assert abs(mine.item() - theirs.item()) <= ATOL
    ours_params, hf_params = dict(ours.named_parameters()), dict(hf.named_parameters())
    for a, b in GRAD_PAIRS:
        torch.testing.assert_close(ours_params[a].grad, hf_params[b].grad, atol=ATOL, rtol=1e-4, msg=a)


@pytest.mark.parametrize("variant", VARIANTS)
def test_ours_to_transformers_from_a_fresh_model(variant):
    torch.manual_seed(0)
    ffn, tied = VARIANTS[variant]["feed_forward_proj"], VARIANTS[variant]["tie_word_embeddings"]
    config = t5.from_name("t5-tiny", vocab_size=VOCAB, ffn=ffn, tie_word_embeddings=tied, relative_buckets=8,
                          relative_max_distance=20, n_decoder_layers=3)
    ours = t5.T5ForConditionalGeneration(config).eval()
    hf = t5_to_hf(ours).eval()
    assert hf.config.scale_decoder_outputs == tied
    assert (hf.lm_head.weight is hf.shared.weight) == tied
    inputs = make_inputs("ForConditionalGeneration")
    diffs = max_diffs(outputs(ours, inputs), outputs(hf, inputs))
    assert max(diffs.values()) <= ATOL, diffs


@pytest.mark.parametrize("variant, head", CASES)
def test_round_trips_are_exact(variant, head):
    hf = make_hf(variant, head)
    ours = t5_from_hf(hf)
    again = t5_from_hf(t5_to_hf(ours))  # ours -> HF -> ours
    assert type(again) is type(ours) and again.config == ours.config
    assert_state_dicts_equal(ours, again)
    assert_state_dicts_equal(hf, t5_to_hf(ours))  # HF -> ours -> HF


@pytest.mark.parametrize("variant, head", CASES)
def test_exported_directory_loads_with_auto_classes(variant, head, tmp_path):
    ours = t5_from_hf(make_hf(variant, head))
    t5_to_hf(ours).save_pretrained(tmp_path)
    loaded = HEADS[head].from_pretrained(tmp_path).eval()
    assert type(loaded).__name__ == "T5" + head
    if head == "ForConditionalGeneration":
        assert (loaded.lm_head.weight is loaded.shared.weight) == (variant == "v1.0")
    inputs = make_inputs(head)
    diffs = max_diffs(outputs(ours, inputs), outputs(loaded, inputs))
    assert max(diffs.values()) <= ATOL, diffs


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("num_beams", [1, 3])
def test_generation_gives_the_same_tokens_as_transformers(variant, num_beams):
    hf = make_hf(variant, "ForConditionalGeneration")
    with torch.no_grad():  # larger weights: confident, varied continuations
        for p in hf.parameters():
            p.mul_(3.0)
    ours = t5_from_hf(hf)
    inputs = make_inputs("ForSequenceClassification")
    ids, mask = inputs["input_ids"], inputs["attention_mask"]
    # transformers' own cache is sized by num_layers, not num_decoder_layers (an IndexError when the
    # decoder is deeper), so it decodes without one here
    theirs = hf.generate(input_ids=ids, attention_mask=mask, max_new_tokens=8, num_beams=num_beams,
                         do_sample=False, early_stopping=True, use_cache=False)
    for use_cache in (True, False) if num_beams == 1 else (True,):
        mine = generation.generate(ours, ids, mask, max_new_tokens=8, num_beams=num_beams, decoder_start_token_id=0,
                                   eos_token_id=1, pad_token_id=0, use_cache=use_cache)
        # transformers pads finished beams with eos when pad is 0 (generation.py's docstring): compare up to eos
        assert torch.equal(_pad_after_eos(mine), _pad_after_eos(theirs)), (use_cache, mine, theirs)


def _pad_after_eos(seqs: torch.Tensor, eos: int = 1, pad: int = 0) -> torch.Tensor:
    after = (seqs == eos).long().cumsum(dim=1) - (seqs == eos).long() > 0
    return seqs.masked_fill(after, pad)


def test_unconvertible_models_are_errors():
    with pytest.raises(ConfigError, match="feed_forward_proj"):
        t5_from_hf(transformers.T5ForConditionalGeneration(transformers.T5Config(feed_forward_proj="gated-silu",
                                                                                 **COMMON)))
    with pytest.raises(ConfigError, match="multi-label"):
        t5_from_hf(transformers.T5ForSequenceClassification(
            transformers.T5Config(problem_type="multi_label_classification", num_labels=3, **COMMON)))
    scaled_untied = transformers.T5ForConditionalGeneration(transformers.T5Config(**COMMON))
    untie_lm_head(scaled_untied, torch.randn(VOCAB, 48))
    with pytest.raises(ConfigError, match="rescale"):
        t5_from_hf(scaled_untied)
    with pytest.raises(TypeError, match="T5EncoderModel"):
        t5_from_hf(transformers.T5EncoderModel(transformers.T5Config(**COMMON)))
    with pytest.raises(TypeError):
        t5_to_hf(t5.T5Model(t5.from_name("t5-tiny")))
