"""Switch Transformer against transformers' SwitchTransformers: same logits, cross entropy,
router logits and per-layer router losses after conversion (with a capacity that drops
nothing, and with one that drops tokens), exact round trips, exported directories that
``AutoModelForSeq2SeqLM`` loads, the same greedy tokens as ``generate``.

Non-default configuration: 2 encoder / 3 decoder layers (one sparse block in each stack),
d_model 48, d_kv 12, d_ff 80, 4 experts, vocab 101, 8 buckets, max distance 20; every tensor
perturbed away from its init.
"""

from __future__ import annotations

import pytest
import torch
import transformers

from lmforge.interop._t5 import switch_from_hf, switch_hf_config, switch_to_hf
from lmforge.models import generation, switch, t5
from lmforge.models.layers import ConfigError

from .test_t5_parity import B, S, VOCAB, make_inputs

ATOL = 1e-4
COMMON = dict(vocab_size=VOCAB, d_model=48, d_kv=12, d_ff=80, num_layers=2, num_decoder_layers=3, num_heads=4,
              relative_attention_num_buckets=8, relative_attention_max_distance=20, layer_norm_epsilon=1e-5,
              decoder_start_token_id=0, num_experts=4, num_sparse_encoder_layers=1, num_sparse_decoder_layers=1,
              router_aux_loss_coef=0.01, router_z_loss_coef=0.001)


def make_hf(expert_capacity: int = 64, seed: int = 0, **extra) -> transformers.PreTrainedModel:
    torch.manual_seed(seed)
    model = transformers.SwitchTransformersForConditionalGeneration(
        transformers.SwitchTransformersConfig(expert_capacity=expert_capacity, **COMMON, **extra))
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
        if not model.config.tie_word_embeddings:
            # transformers 5 then unties the stacks' embeddings from `shared` too; in the
            # checkpoints (and in transformers 4) they are one matrix
            model.encoder.embed_tokens.weight.copy_(model.shared.weight)
            model.decoder.embed_tokens.weight.copy_(model.shared.weight)
    return model.eval()


def lm_inputs() -> dict[str, torch.Tensor]:
    return make_inputs("ForConditionalGeneration")


def assert_state_dicts_equal(a: torch.nn.Module, b: torch.nn.Module) -> None:
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys()
    for k in sa:
        assert sa[k].dtype == sb[k].dtype and torch.equal(sa[k], sb[k]), k


@pytest.mark.parametrize("capacity", [64, 2], ids=["nothing-dropped", "capacity-2"])
def test_converted_from_transformers_gives_the_same_outputs(capacity):
    hf = make_hf(capacity)
    ours = switch_from_hf(hf)
    assert ours.config.expert_capacity == capacity and ours.config.num_experts == 4
    inputs = lm_inputs()
    with torch.no_grad():
        theirs = hf(**inputs, output_router_logits=True)
        theirs_ce = hf(**inputs).loss  # without router logits transformers' loss is the cross entropy alone
        mine = ours(**inputs)
        _, enc_routing = ours.run_encoder(inputs["input_ids"], inputs["attention_mask"])
    dropped = mine.aux["dropped_fraction"]
    assert (dropped == 0).all() if capacity == 64 else (dropped > 0).all()
    assert (mine.logits - theirs.logits).abs().max() <= ATOL
    assert abs(mine.aux["lm_loss"] - theirs_ce) <= ATOL
    torch.testing.assert_close(enc_routing[0].logits, theirs.encoder_router_logits[0], atol=ATOL, rtol=0)
    # per-layer router losses (one sparse layer per stack: transformers' per-stack values)
    lb, z = mine.aux["load_balancing_loss_per_layer"], mine.aux["router_z_loss_per_layer"]
    torch.testing.assert_close(lb, torch.stack([theirs.encoder_aux_loss, theirs.decoder_aux_loss]), atol=ATOL, rtol=0)
    torch.testing.assert_close(z, torch.stack([theirs.encoder_z_loss, theirs.decoder_z_loss]), atol=1e-3, rtol=1e-5)
    # transformers adds coef * (encoder + decoder); we add coef * their mean over sparse layers (t5x)
    torch.testing.assert_close(mine.loss - mine.aux["lm_loss"], (theirs.loss - theirs_ce) / 2, atol=ATOL, rtol=1e-5)


@pytest.mark.parametrize("capacity", [64, 2], ids=["nothing-dropped", "capacity-2"])
def test_gradients_equal_transformers(capacity):
    """The cross entropy's gradients through the sorted grouped-matmul dispatch (and the
    attention's training path) equal those through transformers' loop over experts: every
    expert's weights, the router, the position bias, with and without dropped tokens."""
    hf = make_hf(capacity)
    ours = switch_from_hf(hf)
    inputs = lm_inputs()
    mine, theirs = ours(**inputs).aux["lm_loss"], hf(**inputs).loss  # the cross entropy alone, both
    mine.backward()
    theirs.backward()
    assert abs(mine.item() - theirs.item()) <= ATOL
    for stack in ("encoder", "decoder"):
        ffn = getattr(ours, stack).layers[1].ffn
        mlp = getattr(hf, stack).block[1].layer[-1].mlp
        torch.testing.assert_close(ffn.router.weight.grad, mlp.router.classifier.weight.grad, atol=ATOL, rtol=1e-4)
        for e in range(4):
            theirs_e = mlp.experts[f"expert_{e}"]
            for ours_w, theirs_w in ((ffn.experts.wi, theirs_e.wi.weight), (ffn.experts.wo, theirs_e.wo.weight)):
                want = theirs_w.grad.T if theirs_w.grad is not None else torch.zeros_like(ours_w[e])  # unused expert
                torch.testing.assert_close(ours_w.grad[e], want, atol=ATOL, rtol=1e-4)
        theirs_bias = getattr(hf, stack).block[0].layer[0].SelfAttention.relative_attention_bias.weight
        ours_bias = getattr(ours, stack).relative_bias.weight
        torch.testing.assert_close(ours_bias.grad, theirs_bias.grad, atol=ATOL, rtol=1e-4)


def test_ours_to_transformers_from_a_fresh_model():
    torch.manual_seed(0)
    config = switch.from_name("switch-tiny", vocab_size=VOCAB, relative_buckets=8, relative_max_distance=20,
                              n_decoder_layers=3, capacity_factor_eval=4.0)
    ours = switch.SwitchForConditionalGeneration(config).eval()
    hf = switch_to_hf(ours, sequence_length=S).eval()
    assert hf.config.expert_capacity == switch.expert_capacity(S, config, training=False)
    inputs = lm_inputs()
    with torch.no_grad():
        mine, theirs = ours(**inputs), hf(**inputs)
    assert (mine.aux["dropped_fraction"] == 0).all()
    assert (mine.logits - theirs.logits).abs().max() <= ATOL
    assert abs(mine.aux["lm_loss"] - theirs.loss) <= ATOL


@pytest.mark.parametrize("tied", [True, False])
def test_round_trips_are_exact(tied):
    hf = make_hf(tie_word_embeddings=tied)
    ours = switch_from_hf(hf)
    assert ours.config.tie_word_embeddings == tied
    again = switch_from_hf(switch_to_hf(ours))
    assert type(again) is type(ours) and again.config == ours.config
    assert_state_dicts_equal(ours, again)
    assert_state_dicts_equal(hf, switch_to_hf(ours))
    # experts: transformers' expert j is the transpose of our stacked slice j
    ffn = ours.encoder.layers[1].ffn
    theirs = hf.encoder.block[1].layer[1].mlp.experts["expert_2"]
    assert torch.equal(ffn.experts.wi[2], theirs.wi.weight.T) and torch.equal(ffn.experts.wo[2], theirs.wo.weight.T)


def test_exported_directory_loads_with_auto_classes(tmp_path):
    ours = switch_from_hf(make_hf())
    switch_to_hf(ours).save_pretrained(tmp_path)
    loaded = transformers.AutoModelForSeq2SeqLM.from_pretrained(tmp_path).eval()
    assert type(loaded).__name__ == "SwitchTransformersForConditionalGeneration"
    inputs = lm_inputs()
    with torch.no_grad():
        mine, theirs = ours(**inputs), loaded(**inputs)
    assert (mine.logits - theirs.logits).abs().max() <= ATOL
    assert abs(mine.aux["lm_loss"] - theirs.loss) <= ATOL


def test_greedy_generation_gives_the_same_tokens_as_transformers():
    hf = make_hf()
    with torch.no_grad():
        for p in hf.parameters():
            p.mul_(3.0)
    ours = switch_from_hf(hf)
    inputs = make_inputs("ForSequenceClassification")
    # transformers' cache is sized by num_layers, not num_decoder_layers: it decodes without one
    theirs = hf.generate(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"], max_new_tokens=8,
                         num_beams=1, do_sample=False, use_cache=False)
    mine = generation.generate(ours, inputs["input_ids"], inputs["attention_mask"], max_new_tokens=8,
                               decoder_start_token_id=0, eos_token_id=1, pad_token_id=0)
    assert mine.shape[0] == B and torch.equal(mine, theirs), (mine, theirs)


def test_unconvertible_models_are_errors():
    with pytest.raises(ConfigError, match="gated"):
        switch_to_hf(switch.SwitchForConditionalGeneration(switch.from_name("switch-tiny", ffn="gated-gelu")))
    with pytest.raises(ConfigError, match="sparse layers"):  # blocks 1, 6, 11 of 12: no num_sparse gives them
        switch_hf_config(switch.from_name("switch-base-8", encoder_sparse_step=5))
    separate = make_hf(tie_word_embeddings=False)
    with torch.no_grad():
        separate.decoder.embed_tokens.weight.add_(1.0)
    with pytest.raises(ConfigError, match="decoder.embed_tokens.weight differs"):
        switch_from_hf(separate)
    with pytest.raises(ConfigError, match="router bias"):
        switch_from_hf(make_hf(router_bias=True))
    with pytest.raises(TypeError):
        switch_to_hf(switch.SwitchForSequenceClassification(switch.from_name("switch-tiny")))
    with pytest.raises(TypeError):
        switch_from_hf(transformers.T5ForConditionalGeneration(transformers.T5Config(
            vocab_size=VOCAB, d_model=16, d_kv=4, d_ff=16, num_layers=1, num_heads=2)))
    assert isinstance(switch_from_hf(make_hf()).config, t5.T5Config)
