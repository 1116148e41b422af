"""Greedy and beam search (lmforge.models.generation) on a small BART.

A random BART repeats one token until the length limit, which would make every comparison
vacuous, so the model here is trained for a few dozen steps on a toy task (write the input
backwards): its outputs then differ across inputs, end in ``</s>`` at different lengths, and
beam search finds better-scoring hypotheses than greedy on several of them. The parity of
these searches with transformers' is in tests/interop/test_bart_parity.py.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from lmforge.models import bart, generation

VOCAB, BOS, PAD, EOS = 101, 0, 1, 2
IDS = dict(decoder_start_token_id=EOS, eos_token_id=EOS, pad_token_id=PAD, forced_bos_token_id=BOS)
MAX_NEW = 14


def reversal_batch(g: torch.Generator, n: int, body: int = 10):
    """``<s> x1 .. xk </s>`` (k in 3 .. body - 2, right-padded) -> labels ``<s> xk .. x1 </s>``."""
    lengths = torch.randint(3, body - 1, (n,), generator=g)
    tokens = torch.randint(3, VOCAB, (n, body), generator=g)
    pos = torch.arange(body)[None, :]
    real = pos < lengths[:, None]
    rows = torch.arange(n)
    input_ids = torch.full((n, body + 2), PAD)
    input_ids[:, 0] = BOS
    input_ids[:, 1:-1] = torch.where(real, tokens, PAD)
    input_ids[rows, lengths + 1] = EOS
    reversed_ = tokens.gather(1, (lengths[:, None] - 1 - pos).clamp(min=0))
    labels = torch.full((n, body + 2), -100)
    labels[:, 0] = BOS
    labels[:, 1:-1] = torch.where(real, reversed_, -100)
    labels[rows, lengths + 1] = EOS
    return input_ids, (input_ids != PAD).long(), labels


def trained_bart(steps: int = 60) -> bart.BartForConditionalGeneration:
    """A 2 + 3 layer BART trained briefly on reversal: it has learned the output lengths, not the contents.
    One thread: these matmuls are too small to share, and a busy machine makes threads wait on each other."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _train(steps)
    finally:
        torch.set_num_threads(threads)


def _train(steps: int) -> bart.BartForConditionalGeneration:
    torch.manual_seed(0)
    config = bart.BartConfig(vocab_size=VOCAB, d_model=48, encoder_layers=2, decoder_layers=3, n_heads=4, d_ff=80,
                             max_positions=40, dropout=0.0, attn_dropout=0.0, act_dropout=0.0)
    model = bart.BartForConditionalGeneration(config)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(0)
    for _ in range(steps):
        input_ids, attention_mask, labels = reversal_batch(g, 32)
        loss = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model.eval()


def eval_inputs(n: int = 6):
    input_ids, attention_mask, _ = reversal_batch(torch.Generator().manual_seed(5), n)
    return input_ids, attention_mask


@pytest.fixture(scope="module")
def model() -> bart.BartForConditionalGeneration:
    return trained_bart()


@pytest.fixture(scope="module")
def inputs():
    return eval_inputs()


def score_sequences(model, input_ids, attention_mask, sequences, *, eos_token_id, forced_bos_token_id=None,
                    length_penalty=1.0):
    """The beam-search score of generated ``sequences`` (B, T), start token first: summed
    log-probabilities of the tokens after the start, up to and including the first eos (all of
    them when there is none), over ``len ** length_penalty``; a forced bos contributes 0. (B,) float32."""
    was_training = model.training
    model.eval()
    with torch.no_grad():
        memory = model.encode(input_ids, attention_mask)
        log_probs = F.log_softmax(model.decode(sequences[:, :-1], memory, attention_mask).float(), dim=-1)
    model.train(was_training)
    targets = sequences[:, 1:]  # (B, T - 1)
    token_lp = log_probs.gather(-1, targets[..., None]).squeeze(-1)
    if forced_bos_token_id is not None:
        token_lp[:, 0] = torch.where(targets[:, 0] == forced_bos_token_id, 0.0, float("-inf"))
    is_eos = targets == eos_token_id
    before_eos = (is_eos.long().cumsum(dim=1) - is_eos.long()) == 0  # up to and including the first eos
    lengths = before_eos.sum(dim=1)
    return torch.where(before_eos, token_lp, 0.0).sum(dim=1) / lengths.float() ** length_penalty


def scores(model, inputs, sequences, length_penalty=1.0):
    return score_sequences(model, *inputs, sequences, eos_token_id=EOS, forced_bos_token_id=BOS,
                           length_penalty=length_penalty)


def check_well_formed(out: torch.Tensor, max_new_tokens: int = MAX_NEW) -> None:
    """start token, forced <s>, then tokens up to </s> and only padding after it."""
    assert out.dtype == torch.long and out.size(1) <= 1 + max_new_tokens
    assert (out[:, 0] == EOS).all() and (out[:, 1] == BOS).all()
    generated = out[:, 1:]
    is_eos = generated == EOS
    after_eos = (is_eos.long().cumsum(1) - is_eos.long()) > 0
    assert (generated[after_eos] == PAD).all()
    assert not (generated[~after_eos] == PAD).any()
    # the output is as long as its longest row: some row has no padding at the end
    assert (generated[:, -1] != PAD).any()


def test_greedy_is_well_formed_and_varied(model, inputs):
    out = generation.generate(model, *inputs, MAX_NEW, **IDS)
    check_well_formed(out)
    ends = [(row == EOS).nonzero().flatten().tolist() for row in out[:, 1:]]
    assert len({e[0] for e in ends if e}) >= 3  # ends at several lengths: a meaningful test model
    assert len({tuple(row.tolist()) for row in out}) == len(out)


def test_greedy_is_the_argmax_of_the_full_decoder(model, inputs):
    """Each greedy token is the argmax of a plain forward over the generated prefix."""
    out = generation.greedy_search(model, *inputs, MAX_NEW, **IDS)
    with torch.no_grad():
        logits = model(input_ids=inputs[0], attention_mask=inputs[1], decoder_input_ids=out[:, :-1]).logits
    argmax = logits.argmax(-1)  # (B, T - 1)
    argmax[:, 0] = BOS  # forced
    live = torch.ones_like(out[:, 1:], dtype=torch.bool)
    live[:, 1:] = ((out[:, 1:-1] == EOS).long().cumsum(1) == 0)  # positions up to and including the first </s>
    assert torch.equal(out[:, 1:][live], argmax[live])


@pytest.mark.parametrize("num_beams", [1, 3])
def test_cache_gives_the_same_tokens(model, inputs, num_beams):
    with_cache = generation.generate(model, *inputs, MAX_NEW, num_beams, **IDS, use_cache=True)
    without = generation.generate(model, *inputs, MAX_NEW, num_beams, **IDS, use_cache=False)
    assert torch.equal(with_cache, without)


def test_a_model_without_a_cache_argument_works(model, inputs):
    """The protocol's minimum (T5 may implement only this): encode + decode without ``cache``."""

    class Plain(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def encode(self, input_ids, attention_mask):
            return self.inner.encode(input_ids, attention_mask)

        def decode(self, decoder_input_ids, encoder_hidden, encoder_attention_mask):
            return self.inner.decode(decoder_input_ids, encoder_hidden, encoder_attention_mask)

    for beams in (1, 3):
        expected = generation.generate(model, *inputs, MAX_NEW, beams, **IDS)
        assert torch.equal(generation.generate(Plain(model), *inputs, MAX_NEW, beams, **IDS), expected)


def test_one_beam_is_greedy(model, inputs):
    greedy = generation.greedy_search(model, *inputs, MAX_NEW, **IDS)
    assert torch.equal(generation.generate(model, *inputs, MAX_NEW, num_beams=1, **IDS), greedy)
    assert torch.equal(generation.beam_search(model, *inputs, MAX_NEW, num_beams=1, **IDS), greedy)


@pytest.mark.parametrize("length_penalty", [1.0, 2.0, 0.0])
def test_beam_search_scores_at_least_greedy(model, inputs, length_penalty):
    """With early_stopping="never" (the search runs while a running beam could still win, bounded
    with the maximum length) the returned hypothesis scores at least greedy's on every input
    here, and better on some. (Beam search guarantees no such thing in general: greedy's prefix
    can be pruned. With early_stopping=True an input stops at its first num_beams finished
    hypotheses, which may all be shorter and worse than greedy's.)"""
    greedy = generation.greedy_search(model, *inputs, MAX_NEW, **IDS)
    beam = generation.beam_search(model, *inputs, MAX_NEW, num_beams=3, length_penalty=length_penalty,
                                  early_stopping="never", **IDS)
    check_well_formed(beam)
    s_beam, s_greedy = scores(model, inputs, beam, length_penalty), scores(model, inputs, greedy, length_penalty)
    assert (s_beam >= s_greedy - 1e-5).all(), (s_beam, s_greedy)
    assert (s_beam > s_greedy + 1e-3).any()


def test_more_beams_find_scores_at_least_as_good_here(model, inputs):
    s = [scores(model, inputs, generation.beam_search(model, *inputs, MAX_NEW, num_beams=k, early_stopping="never",
                                                      **IDS)) for k in (2, 5)]
    assert (s[1] >= s[0] - 1e-5).all()


def test_generation_restores_the_training_mode_and_needs_no_grad(model, inputs):
    model.train()
    try:
        out = generation.generate(model, *inputs, 3, 2, **IDS)
        assert model.training and not out.requires_grad
    finally:
        model.eval()


def test_without_forced_bos_and_without_attention_mask(model, inputs):
    ids = {**IDS, "forced_bos_token_id": None}
    out = generation.generate(model, inputs[0], None, MAX_NEW, 1, **ids)
    assert (out[:, 0] == EOS).all() and out.size(1) <= 1 + MAX_NEW
    assert torch.equal(generation.beam_search(model, inputs[0], None, MAX_NEW, 1, **ids), out)


def test_max_new_tokens_caps_the_length(model, inputs):
    out = generation.generate(model, *inputs, 2, 3, **IDS)
    assert out.shape == (inputs[0].size(0), 3)


def test_bart_generate_uses_its_config_ids(model, inputs):
    assert torch.equal(model.generate(*inputs, max_new_tokens=MAX_NEW, num_beams=2),
                       generation.generate(model, *inputs, MAX_NEW, 2, **IDS))


def test_bad_arguments():
    model = bart.BartForConditionalGeneration(bart.from_name("bart-tiny", vocab_size=50))
    x = torch.tensor([[0, 5, 2]])
    with pytest.raises(ValueError, match="max_new_tokens"):
        generation.generate(model, x, None, 0, **IDS)
    with pytest.raises(ValueError, match="num_beams"):
        generation.generate(model, x, None, 5, 0, **IDS)
    with pytest.raises(ValueError, match="early_stopping"):
        generation.generate(model, x, None, 5, 2, **IDS, early_stopping="sometimes")
