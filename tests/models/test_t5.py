"""T5: every head's forward/backward on the CPU preset, the relative position buckets, padding,
causality, the v1.0 / v1.1 output layers, incremental decoding, presets and config errors."""

from __future__ import annotations

import math

import pytest
import torch
import transformers

from lmforge.interop._t5 import t5_hf_config, untie_lm_head
from lmforge.models import t5
from lmforge.models.layers import ConfigError, count_parameters

HEADS = [t5.T5ForConditionalGeneration, t5.T5ForSequenceClassification]


def make_batch(config: t5.T5Config, head: type, B: int = 3, S: int = 14, T: int = 9, seed: int = 0) -> dict:
    """A span-corruption-shaped batch (after the feature converter), both sides right-padded."""
    g = torch.Generator().manual_seed(seed)
    src_len, tgt_len = torch.tensor([S, S - 4, 6])[:B], torch.tensor([T, T - 3, 4])[:B]
    attention_mask = (torch.arange(S)[None] < src_len[:, None]).long()
    input_ids = torch.randint(3, config.vocab_size, (B, S), generator=g)
    input_ids[torch.arange(B), src_len - 1] = config.eos_id
    input_ids = input_ids.masked_fill(attention_mask == 0, config.pad_id)
    batch = dict(input_ids=input_ids, attention_mask=attention_mask)
    if issubclass(head, t5.T5ForSequenceClassification):
        batch["labels"] = torch.randint(0, 2, (B,), generator=g)
        return batch
    decoder_attention_mask = (torch.arange(T)[None] < tgt_len[:, None]).long()
    labels = torch.randint(3, config.vocab_size, (B, T), generator=g)
    labels[torch.arange(B), tgt_len - 1] = config.eos_id
    labels = labels.masked_fill(decoder_attention_mask == 0, -100)
    batch.update(labels=labels, decoder_input_ids=t5.shift_right(labels, config.decoder_start_id, config.pad_id),
                 decoder_attention_mask=decoder_attention_mask)
    return batch


@pytest.fixture(scope="module", params=["v1.0", "v1.1"])
def config(request) -> t5.T5Config:
    base = t5.from_name("t5-tiny", vocab_size=97)  # v1.1-style
    if request.param == "v1.0":
        return t5.from_name("t5-tiny", vocab_size=97, ffn="relu", tie_word_embeddings=True, dropout=0.1)
    return base


@pytest.mark.parametrize("head", HEADS, ids=lambda h: h.__name__)
def test_forward_backward_every_head(config, head):
    torch.manual_seed(0)
    model = head(config)
    batch = make_batch(config, head)
    out = model(**batch)
    B, S = batch["input_ids"].shape
    if head is t5.T5ForConditionalGeneration:
        T = batch["labels"].size(1)
        assert out.logits.shape == (B, T, config.vocab_size)
        assert out.hidden_states.shape == (B, T, config.d_model)
    else:
        assert out.logits.shape == (B, 2)
    assert out.aux["encoder_hidden_states"].shape == (B, S, config.d_model)
    assert out.loss.ndim == 0 and torch.isfinite(out.loss)
    out.loss.backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
    no_labels = model(**{k: v for k, v in batch.items() if k != "labels"})
    assert no_labels.loss is None


def test_fused_attention_equals_the_written_out_one(monkeypatch):
    """SDPA with the trained position bias (a GPU's default) gives the loss and gradients of the
    written-out attention."""
    config = t5.from_name("t5-tiny", vocab_size=97)
    torch.manual_seed(0)
    model = t5.T5ForConditionalGeneration(config)
    batch = make_batch(config, t5.T5ForConditionalGeneration)
    results = []
    for fused in (False, True):
        monkeypatch.setattr(t5.T5Attention, "fused", fused)
        model.zero_grad()
        out = model(**batch)
        out.loss.backward()
        results.append((out.logits.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}))
    (logits0, grads0), (logits1, grads1) = results
    torch.testing.assert_close(logits1, logits0, atol=1e-5, rtol=1e-5)
    for name in grads0:
        torch.testing.assert_close(grads1[name], grads0[name], atol=1e-5, rtol=1e-4, msg=name)


def test_labels_alone_are_shifted_into_decoder_inputs(config):
    model = t5.T5ForConditionalGeneration(config).eval()
    batch = make_batch(config, t5.T5ForConditionalGeneration)
    expected = batch["decoder_input_ids"]
    assert (expected[:, 0] == config.decoder_start_id).all()
    with torch.no_grad():
        full = model(**batch)
        shifted = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], labels=batch["labels"],
                        decoder_attention_mask=batch["decoder_attention_mask"])
    torch.testing.assert_close(shifted.logits, full.logits)
    with pytest.raises(ValueError, match="decoder_input_ids"):
        model(input_ids=batch["input_ids"])
    with pytest.raises(TypeError):  # unknown keys are errors, not silently dropped
        model(**batch, next_sentence_label=torch.zeros(3, dtype=torch.long))


def test_relative_position_buckets():
    rel = torch.arange(-200, 201)
    bi = t5.relative_position_bucket(rel, bidirectional=True, num_buckets=32, max_distance=128)
    causal = t5.relative_position_bucket(rel, bidirectional=False, num_buckets=32, max_distance=128)
    # bidirectional: half the buckets per sign; exact below 8, logarithmic to 128, then the last bucket
    assert bi[rel == 0].item() == 0 and bi[rel == 3].item() == 16 + 3 and bi[rel == -3].item() == 3
    assert bi.min() == 0 and bi.max() == 31
    assert (bi[rel >= 128] == 31).all() and (bi[rel <= -128] == 15).all()
    assert (bi[(rel > 0)] >= 16).all() and (bi[rel <= 0] < 16).all()
    # causal: later keys all share bucket 0 with the query; earlier ones exact below 16
    assert (causal[rel >= 0] == 0).all() and causal[rel == -5].item() == 5 and causal[rel == -15].item() == 15
    assert (causal[rel <= -128] == 31).all()
    assert (torch.diff(causal[rel <= 0].flip(0)) >= 0).all()  # monotone in the distance


def test_one_position_bias_per_stack_shared_by_its_layers(config):
    model = t5.T5ForConditionalGeneration(config)
    names = [n for n, _ in model.named_parameters() if "relative" in n]
    assert names == ["encoder.relative_bias.weight", "decoder.relative_bias.weight"]
    assert model.encoder.relative_bias.bidirectional and not model.decoder.relative_bias.bidirectional
    assert model.encoder.relative_bias.weight.shape == (config.relative_buckets, config.n_heads)


def test_no_biases_and_rmsnorm_only_scales(config):
    model = t5.T5ForConditionalGeneration(config)
    assert not any(n.endswith(".bias") for n, _ in model.named_parameters())
    norm = t5.RMSNorm(4, eps=1e-6)
    x = torch.tensor([[1.0, 2.0, 3.0, 4.0]])
    torch.testing.assert_close(norm(x), x / x.pow(2).mean().add(1e-6).sqrt())
    # no mean subtraction: a constant vector normalises to ones (a LayerNorm would give zeros)
    torch.testing.assert_close(norm(torch.full((1, 4), 3.0)), torch.ones(1, 4), atol=1e-5, rtol=0)
    assert norm(x.bfloat16()).dtype == torch.float32  # float32 weight: computed and returned in float32


def test_attention_logits_are_not_scaled():
    """q.k with no 1/sqrt(d_kv): two keys whose dot products with the query differ by ln 3 get
    attention 3 : 1, whatever d_kv."""
    config = t5.T5Config(vocab_size=10, d_model=4, d_kv=4, d_ff=8, n_layers=1, n_decoder_layers=1, n_heads=1,
                         dropout=0.0)
    attn = t5.T5Attention(config).eval()
    with torch.no_grad():
        for lin in (attn.q, attn.k, attn.v, attn.o):
            lin.weight.copy_(torch.eye(4))
    x = torch.tensor([[[math.log(3.0), 0.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]]])
    memory = torch.tensor([[[1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]]])
    y = attn(x[:, 1:], None, memory)  # query e1: scores 1 and 0 -> weights e/(1+e), 1/(1+e)
    torch.testing.assert_close(y[0, 0, 0], torch.tensor(math.e / (1 + math.e)))


def test_v1_0_output_layer_is_the_rescaled_embedding_and_v1_1_is_untied():
    v10 = t5.T5ForConditionalGeneration(t5.from_name("t5-tiny", ffn="relu", tie_word_embeddings=True))
    assert v10.lm_head is None
    h = torch.randn(2, 3, v10.config.d_model)
    torch.testing.assert_close(v10.logits(h), h @ v10.shared.weight.T * v10.config.d_model**-0.5)
    v11 = t5.T5ForConditionalGeneration(t5.from_name("t5-tiny"))
    assert v11.lm_head is not None and v11.lm_head.weight is not v11.shared.weight
    torch.testing.assert_close(v11.logits(h), h @ v11.lm_head.weight.T)
    assert v11.encoder.layers[0].ffn.gated and not v10.encoder.layers[0].ffn.gated


@pytest.mark.parametrize("head", HEADS, ids=lambda h: h.__name__)
def test_padding_does_not_change_real_positions(config, head):
    torch.manual_seed(0)
    model = head(config).eval()
    batch = make_batch(config, head, B=2)
    batch = {k: v[:, :6] if v.dim() == 2 else v for k, v in batch.items()}
    for k in ("attention_mask", "decoder_attention_mask"):
        if k in batch:
            batch[k][:] = 1
    if head is t5.T5ForConditionalGeneration:
        batch["labels"] = batch["labels"].clamp(min=0)
    padded = {}
    for k, v in batch.items():
        if v.dim() < 2:
            padded[k] = v
            continue
        fill = {"attention_mask": 0, "decoder_attention_mask": 0, "labels": -100}.get(k, config.pad_id)
        padded[k] = torch.cat([v, torch.full_like(v[:, :4], fill)], dim=1)
    with torch.no_grad():
        a, b = model(**batch), model(**padded)
    if head is t5.T5ForConditionalGeneration:
        torch.testing.assert_close(b.logits[:, :6], a.logits, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(b.loss, a.loss, atol=1e-5, rtol=1e-5)


def test_decoder_is_causal(config):
    model = t5.T5ForConditionalGeneration(config).eval()
    batch = make_batch(config, t5.T5ForConditionalGeneration)
    del batch["decoder_attention_mask"], batch["labels"]
    changed = {**batch, "decoder_input_ids": batch["decoder_input_ids"].clone()}
    changed["decoder_input_ids"][:, 5:] = 7
    with torch.no_grad():
        a, b = model(**batch).logits, model(**changed).logits
    torch.testing.assert_close(a[:, :5], b[:, :5])
    assert not torch.allclose(a[:, 5:], b[:, 5:])


def test_encode_decode_and_incremental_decoding_match_forward(config):
    model = t5.T5ForConditionalGeneration(config).eval()
    batch = make_batch(config, t5.T5ForConditionalGeneration)
    with torch.no_grad():
        full = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                     decoder_input_ids=batch["decoder_input_ids"]).logits
        memory = model.encode(batch["input_ids"], batch["attention_mask"])
        torch.testing.assert_close(model.decode(batch["decoder_input_ids"], memory, batch["attention_mask"]), full)
        cache: dict = {}
        steps = [model.decode(batch["decoder_input_ids"][:, :3], memory, batch["attention_mask"], cache=cache)]
        for t in range(4, batch["decoder_input_ids"].size(1) + 1):  # the whole prefix each time, as generation does
            steps.append(model.decode(batch["decoder_input_ids"][:, :t], memory, batch["attention_mask"], cache=cache))
    assert cache["self.length"] == full.size(1) and all(s.size(1) == 1 for s in steps[1:])
    assert any("cross." in k for k in cache) and any("self.k" in k for k in cache)
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-5)


def test_classification_reads_the_last_eos():
    config = t5.from_name("t5-tiny", vocab_size=97)
    model = t5.T5ForSequenceClassification(config, num_labels=3).eval()
    batch = make_batch(config, t5.T5ForSequenceClassification)
    with torch.no_grad():
        out = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
        index = (batch["attention_mask"].sum(1) - 1)  # make_batch puts eos last
        expected = model.classifier(out.hidden_states[torch.arange(3), index])
        torch.testing.assert_close(out.logits, expected)
        no_eos = batch["input_ids"].masked_fill(batch["input_ids"] == config.eos_id, 5)  # last real token instead
        out = model(no_eos, batch["attention_mask"])
        torch.testing.assert_close(out.logits, model.classifier(out.hidden_states[torch.arange(3), index]))
        two_eos = batch["input_ids"].clone()
        two_eos[0, 2] = config.eos_id  # rows may differ in their number of eos: the last one counts
        out = model(two_eos, batch["attention_mask"])
        torch.testing.assert_close(out.logits, model.classifier(out.hidden_states[torch.arange(3), index]))
    regression = t5.T5ForSequenceClassification(config, num_labels=1)
    target = torch.randn(3)
    out = regression(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], labels=target)
    torch.testing.assert_close(out.loss, torch.nn.functional.mse_loss(out.logits.squeeze(-1), target))


@pytest.mark.parametrize("name", ["t5-tiny", "t5-v1_1-small"])
def test_loss_at_init_is_about_log_vocab(name):
    """v1.1's untied output layer starts with unit-variance logits. (v1.0's tied one does not:
    the decoder state still carries its input token's N(0, 1) embedding, which the tied output
    layer scores at ~sqrt(d_model), so the initial loss is well above ln V, in transformers too.)"""
    torch.manual_seed(0)
    config = t5.from_name(name) if name == "t5-tiny" else t5.from_name(name, vocab_size=2000, n_layers=2,
                                                                          n_decoder_layers=2)
    model = t5.T5ForConditionalGeneration(config).eval()
    with torch.no_grad():
        out = model(**make_batch(config, t5.T5ForConditionalGeneration, B=3, S=32, T=16))
    # CE of N(0, s^2) logits ~ ln V + s^2 / 2
    assert math.log(config.vocab_size) - 0.3 < out.loss.item() < math.log(config.vocab_size) + 1.0, out.loss.item()


def test_training_steps_reduce_the_loss():
    torch.manual_seed(0)
    config = t5.from_name("t5-tiny", vocab_size=97)
    model = t5.T5ForConditionalGeneration(config)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    batch = make_batch(config, t5.T5ForConditionalGeneration)
    losses = []
    for _ in range(10):
        out = model(**batch)
        out.loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(out.loss.item())
    assert losses[-1] < losses[0] - 1.0


def hf_t5_model(config: t5.T5Config, head: str = "T5ForConditionalGeneration", **extra):
    """A freshly initialised transformers model with the same network as ours (an untied
    ``lm_head`` untied there too)."""
    hf = getattr(transformers, head)(t5_hf_config(config, **extra))
    if head == "T5ForConditionalGeneration" and not config.tie_word_embeddings:
        untie_lm_head(hf)
    return hf


@pytest.mark.parametrize("name", sorted(t5.PRESETS))
def test_preset_parameter_counts_equal_transformers(name):
    config = t5.from_name(name)
    with torch.device("meta"):
        ours = count_parameters(t5.T5ForConditionalGeneration(config))
        theirs = hf_t5_model(config).num_parameters()
        ours_cls = count_parameters(t5.T5ForSequenceClassification(config, num_labels=3))
        theirs_cls = hf_t5_model(config, "T5ForSequenceClassification", num_labels=3).num_parameters()
    assert (ours, ours_cls) == (theirs, theirs_cls)


@pytest.mark.parametrize("name, published", [("t5-small", 60.5e6), ("t5-base", 223e6), ("t5-v1_1-small", 77e6),
                                             ("t5-v1_1-base", 248e6)])
def test_presets_match_published_sizes(name, published):
    with torch.device("meta"):
        n = count_parameters(t5.T5ForConditionalGeneration(t5.from_name(name)))
    assert abs(n - published) / published < 0.005, n


def test_presets_have_the_published_shapes():
    small, v11 = t5.from_name("t5-small"), t5.from_name("t5-v1_1-small")
    assert (small.n_layers, small.d_model, small.n_heads, small.d_ff, small.vocab_size) == (6, 512, 8, 2048, 32128)
    assert small.ffn == "relu" and small.tie_word_embeddings
    assert (v11.n_layers, v11.d_model, v11.n_heads, v11.d_kv, v11.d_ff) == (8, 512, 6, 64, 1024)
    assert v11.ffn == "gated-gelu" and not v11.tie_word_embeddings and v11.dropout == 0.0
    assert (small.relative_buckets, small.relative_max_distance, small.eps) == (32, 128, 1e-6)
    assert (small.pad_id, small.eos_id, small.decoder_start_id) == (0, 1, 0)


def test_config_errors():
    with pytest.raises(ConfigError, match="unknown option"):
        t5.from_name("t5-tiny", hidden_size=32)
    with pytest.raises(ConfigError, match="known: .*t5-small"):
        t5.from_name("t5-huge")
    with pytest.raises(ConfigError, match="ffn"):
        t5.from_name("t5-tiny", ffn="gated-silu")
    with pytest.raises(ConfigError, match="relative_buckets"):
        t5.from_name("t5-tiny", relative_buckets=2)
    with pytest.raises(ConfigError, match="relative_max_distance"):
        t5.from_name("t5-tiny", relative_buckets=32, relative_max_distance=16)
    with pytest.raises(ConfigError, match="eos_id"):
        t5.from_name("t5-tiny", vocab_size=10, eos_id=10)
    with pytest.raises(ConfigError, match="dropout"):
        t5.T5Config(dropout=1.0)
    with pytest.raises(ConfigError, match="num_labels"):
        t5.T5ForSequenceClassification(t5.from_name("t5-tiny"), num_labels=0)
    assert t5.from_name("t5-tiny", n_layers=3).n_layers == 3
    assert t5.PRESETS["t5-tiny"].n_layers == 2
