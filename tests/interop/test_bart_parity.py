"""BART against transformers: same logits and losses after conversion, exact round trips,
exported directories that the Auto classes load, and the same generated tokens.

The transformers models use a non-default configuration (2 encoder + 3 decoder layers, width
48, 4 heads, feed-forward 80, vocabulary 101, 40 positions) and every tensor is perturbed away
from its init (biases, LayerNorms, final_logits_bias included), so a wrong name mapping cannot
hide behind zeros and ones. Inputs are padded on both sides of the model.

Generation: our greedy and beam search against ``generate`` with every other logits
processor switched off (GEN_DEFAULTS); the model is the briefly trained one of
tests/models/test_generation.py, whose outputs vary and end at different lengths.
"""

from __future__ import annotations

import pytest
import torch
import transformers

from lmforge.interop._bart import bart_from_hf, bart_to_hf
from lmforge.models import bart, generation
from lmforge.models.layers import ConfigError
from tests.models.test_generation import IDS, MAX_NEW, eval_inputs, score_sequences, trained_bart

ATOL = 1e-4
B, S, T, VOCAB, PAD, EOS = 3, 12, 9, 101, 1, 2
COMMON = dict(vocab_size=VOCAB, d_model=48, encoder_layers=2, decoder_layers=3, encoder_attention_heads=4,
              decoder_attention_heads=4, encoder_ffn_dim=80, decoder_ffn_dim=80, max_position_embeddings=40)
HEADS = {  # case -> (transformers class, Auto class, extra config)
    "generation": (transformers.BartForConditionalGeneration, transformers.AutoModelForSeq2SeqLM, {}),
    "generation-scaled-relu": (transformers.BartForConditionalGeneration, transformers.AutoModelForSeq2SeqLM,
                               {"scale_embedding": True, "activation_function": "relu"}),
    "classification": (transformers.BartForSequenceClassification, transformers.AutoModelForSequenceClassification,
                       {"num_labels": 3}),
    "regression": (transformers.BartForSequenceClassification, transformers.AutoModelForSequenceClassification,
                   {"num_labels": 1}),
}


def make_hf(case: str, seed: int = 0) -> transformers.PreTrainedModel:
    cls, _, extra = HEADS[case]
    torch.manual_seed(seed)
    model = cls(transformers.BartConfig(**COMMON, **extra))
    with torch.no_grad():
        for p in model.parameters():  # tied tensors appear once here
            p.add_(0.1 * torch.randn_like(p))
        if hasattr(model, "final_logits_bias"):
            model.final_logits_bias.normal_(0.0, 0.5)
    return model.eval()


def make_inputs(case: str, seed: int = 1, decoder_inputs: bool = True) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    lengths = torch.tensor([S, S - 4, 5])
    attention_mask = (torch.arange(S)[None, :] < lengths[:, None]).long()
    input_ids = torch.randint(3, VOCAB, (B, S), generator=g)
    input_ids[:, 0] = 0
    input_ids[torch.arange(B), lengths - 1] = EOS  # <s> ... </s>, then padding
    inputs = dict(input_ids=input_ids.masked_fill(attention_mask == 0, PAD), attention_mask=attention_mask)
    if case.startswith("generation"):
        target_lengths = torch.tensor([T, T - 3, 4])
        decoder_mask = (torch.arange(T)[None, :] < target_lengths[:, None]).long()
        labels = torch.randint(3, VOCAB, (B, T), generator=g).masked_fill(decoder_mask == 0, -100)
        inputs["labels"] = labels
        if decoder_inputs:
            inputs["decoder_input_ids"] = bart.shift_right(labels, EOS, PAD)
            inputs["decoder_attention_mask"] = decoder_mask
    elif case == "classification":
        inputs["labels"] = torch.randint(0, 3, (B,), generator=g)
    else:
        inputs["labels"] = torch.randn(B, generator=g)
    return inputs


def max_diffs(ours, theirs) -> dict[str, float]:
    assert ours.logits.shape == theirs.logits.shape
    return {"logits": (ours.logits - theirs.logits).abs().max().item(), "loss": (ours.loss - theirs.loss).abs().item()}


def assert_state_dicts_equal(a: torch.nn.Module, b: torch.nn.Module) -> None:
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys()
    for k in sa:
        assert sa[k].dtype == sb[k].dtype and torch.equal(sa[k], sb[k]), k


@pytest.mark.parametrize("case", HEADS)
def test_converted_from_transformers_gives_the_same_outputs(case):
    hf = make_hf(case)
    ours = bart_from_hf(hf)
    assert not ours.training
    for decoder_inputs in (True, False):  # explicit decoder inputs, and the ones each model derives itself
        inputs = make_inputs(case, decoder_inputs=decoder_inputs)
        with torch.no_grad():
            diffs = max_diffs(ours(**inputs), hf(**inputs))
        assert max(diffs.values()) <= ATOL, (decoder_inputs, diffs)


@pytest.mark.parametrize("case", HEADS)
def test_round_trips_are_exact(case):
    hf = make_hf(case)
    ours = bart_from_hf(hf)
    again = bart_from_hf(bart_to_hf(ours))  # ours -> HF -> ours
    assert type(again) is type(ours) and again.config == ours.config
    assert_state_dicts_equal(ours, again)
    assert_state_dicts_equal(hf, bart_to_hf(ours))  # HF -> ours -> HF


@pytest.mark.parametrize("case", ["generation", "classification"])
def test_exported_directory_loads_with_auto_classes(case, tmp_path):
    ours = bart_from_hf(make_hf(case))
    bart_to_hf(ours).save_pretrained(tmp_path)
    loaded = HEADS[case][1].from_pretrained(tmp_path).eval()
    assert type(loaded) is HEADS[case][0]
    inputs = make_inputs(case)
    with torch.no_grad():
        diffs = max_diffs(ours(**inputs), loaded(**inputs))
    assert max(diffs.values()) <= ATOL, diffs


def test_ours_to_transformers_from_a_fresh_model():
    torch.manual_seed(0)
    config = bart.BartConfig(vocab_size=VOCAB, d_model=48, encoder_layers=2, decoder_layers=3, n_heads=4, d_ff=80,
                             max_positions=40, act="gelu_tanh")
    ours = bart.BartForConditionalGeneration(config).eval()
    hf = bart_to_hf(ours).eval()
    assert hf.config.activation_function == "gelu_new" and hf.config.decoder_start_token_id == EOS
    inputs = make_inputs("generation")
    with torch.no_grad():
        diffs = max_diffs(ours(**inputs), hf(**inputs))
    assert max(diffs.values()) <= ATOL, diffs


def test_unconvertible_models_are_errors():
    with pytest.raises(ConfigError, match="activation_function"):
        bart_from_hf(transformers.BartForConditionalGeneration(
            transformers.BartConfig(**{**COMMON, "activation_function": "silu"})))
    with pytest.raises(ConfigError, match="same number of heads"):
        bart_from_hf(transformers.BartForConditionalGeneration(
            transformers.BartConfig(**{**COMMON, "decoder_attention_heads": 2})))
    with pytest.raises(ConfigError, match="LayerDrop"):
        bart_from_hf(transformers.BartForConditionalGeneration(
            transformers.BartConfig(**COMMON, encoder_layerdrop=0.1)))
    with pytest.raises(ConfigError, match="tie"):
        bart_from_hf(transformers.BartForConditionalGeneration(
            transformers.BartConfig(**COMMON, tie_word_embeddings=False)))
    with pytest.raises(ConfigError, match="multi-label"):
        bart_from_hf(transformers.BartForSequenceClassification(
            transformers.BartConfig(**COMMON, problem_type="multi_label_classification")))
    with pytest.raises(TypeError, match="BartForQuestionAnswering"):
        bart_from_hf(transformers.BartForQuestionAnswering(transformers.BartConfig(**COMMON)))
    with pytest.raises(ConfigError, match="epsilon"):
        bart_to_hf(bart.BartForConditionalGeneration(bart.from_name("bart-tiny", eps=1e-6)))


# ----------------------------------------------------------------------------- generation

# every transformers logits processor we do not have, off; ids as ours
GEN_DEFAULTS = dict(do_sample=False, max_new_tokens=MAX_NEW, min_length=0, no_repeat_ngram_size=0,
                    repetition_penalty=1.0, forced_eos_token_id=None, forced_bos_token_id=IDS["forced_bos_token_id"],
                    decoder_start_token_id=IDS["decoder_start_token_id"], eos_token_id=IDS["eos_token_id"],
                    pad_token_id=IDS["pad_token_id"], bos_token_id=0)


@pytest.fixture(scope="module")
def trained():
    """(ours, transformers' copy, inputs)."""
    ours = trained_bart()
    hf = bart_to_hf(ours).eval()
    # generate() reads an option left None from the model's generation config, which carries
    # BART's forced_eos_token_id = </s> (as the released checkpoints do): switch it off there
    hf.generation_config.forced_eos_token_id = None
    return ours, hf, eval_inputs()


def hf_generate(hf, inputs, **options):
    config = transformers.GenerationConfig(**GEN_DEFAULTS, **options)
    return hf.generate(input_ids=inputs[0], attention_mask=inputs[1], generation_config=config)


def test_greedy_matches_transformers(trained):
    ours, hf, inputs = trained
    expected = hf_generate(hf, inputs, num_beams=1)
    assert torch.equal(generation.generate(ours, *inputs, MAX_NEW, 1, **IDS), expected)
    assert torch.equal(ours.generate(*inputs, max_new_tokens=MAX_NEW), expected)


@pytest.mark.parametrize("num_beams, length_penalty, early_stopping",
                         [(3, 1.0, True), (3, 2.0, False), (4, 0.5, "never")])
def test_beam_search_matches_transformers(trained, num_beams, length_penalty, early_stopping):
    """Same algorithm as transformers' beam search: the same tokens, and the scores transformers
    reports for them equal ``score_sequences``."""
    ours, hf, inputs = trained
    out = hf_generate(hf, inputs, num_beams=num_beams, length_penalty=length_penalty, early_stopping=early_stopping,
                      return_dict_in_generate=True, output_scores=True)
    got = generation.generate(ours, *inputs, MAX_NEW, num_beams, length_penalty=length_penalty,
                              early_stopping=early_stopping, **IDS)
    assert torch.equal(got, out.sequences)
    scores = score_sequences(ours, *inputs, got, eos_token_id=EOS, forced_bos_token_id=0,
                             length_penalty=length_penalty)
    torch.testing.assert_close(scores, out.sequences_scores, atol=1e-4, rtol=1e-4)
    greedy = generation.generate(ours, *inputs, MAX_NEW, 1, **IDS)
    assert not torch.equal(got[:, : greedy.size(1)], greedy)  # the beams changed something: a real comparison
