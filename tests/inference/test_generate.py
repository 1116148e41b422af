"""``lmforge generate``: the same tokens as transformers' ``generate`` on the converted model
(greedy, beam search, a repetition penalty), Transformer-XL's memory giving what recomputing
gives, the encoder-decoders through the parity-tested ``models.generation``, sampling's
warpers equal to transformers' ones, and the errors."""

import pytest
import torch
import transformers

from lmforge.inference import generate as gen
from lmforge.inference.loading import InferenceError, load
from lmforge.inference.sampling import Sampling, penalise_repeats, warp
from lmforge.interop.hf import to_hf
from lmforge.models import generation

from .conftest import redraw_weights, write_model

MAX_NEW = 12


@pytest.fixture(scope="module")
def causal(models):
    return {arch: redraw_weights(load(models[arch]), 0.3, seed=1) for arch in ("gpt", "xlnet", "transformer_xl")}


def hf_tokens(loaded, prompt, **options):
    v = loaded.vocab
    hf = to_hf(loaded.model, pad_token_id=v.pad, eos_token_id=v.eos).eval()
    config = transformers.GenerationConfig(do_sample=False, max_new_tokens=MAX_NEW, eos_token_id=v.eos,
                                           pad_token_id=v.pad, use_cache=False, **options)
    ids = torch.tensor([prompt])
    out = hf.generate(input_ids=ids, attention_mask=torch.ones_like(ids), generation_config=config)
    return out[0, len(prompt):].tolist()


@pytest.mark.parametrize("arch", ["gpt", "xlnet"])
@pytest.mark.parametrize("options", [dict(num_beams=1), dict(num_beams=3, early_stopping=True),
                                     dict(num_beams=4, early_stopping=True, length_penalty=2.0),
                                     dict(num_beams=1, repetition_penalty=1.8)])
def test_decoder_only_generation_matches_transformers(causal, arch, options):
    loaded = causal[arch]
    prompt = gen.prompt_ids(loaded, "Return the value of the parser and close the file.")
    settings = gen.Settings(max_new_tokens=MAX_NEW, num_beams=options.get("num_beams", 1),
                            length_penalty=options.get("length_penalty", 1.0),
                            sampling=Sampling(repetition_penalty=options.get("repetition_penalty", 1.0)))
    got = gen.generate_ids(loaded, prompt, settings)
    assert got == hf_tokens(loaded, prompt, **options)
    assert not loaded.model.training  # generation left the model in eval mode
    assert len(got) >= 1


def test_beam_search_is_not_greedy_here(causal):
    """The beam comparison above is a real one: with these weights beams change the output."""
    loaded = causal["gpt"]
    prompt = gen.prompt_ids(loaded, "Return the value of the parser and close the file.")
    greedy = gen.generate_ids(loaded, prompt, gen.Settings(max_new_tokens=MAX_NEW))
    beams = gen.generate_ids(loaded, prompt, gen.Settings(max_new_tokens=MAX_NEW, num_beams=4, length_penalty=2.0))
    assert greedy != beams


def test_transformer_xl_memory_gives_what_recomputing_gives(causal):
    """One token per step with the memory equals the argmax over the whole sequence recomputed,
    while the memory holds the whole context (the tiny preset's mem_len >= prompt + output)."""
    loaded = causal["transformer_xl"]
    prompt = gen.prompt_ids(loaded, "Open the file.")
    new = loaded.model.config.mem_len - len(prompt)
    assert new >= 8
    got = gen.generate_ids(loaded, prompt, gen.Settings(max_new_tokens=new))
    seq, want = list(prompt), []
    with torch.no_grad():
        for _ in range(new):
            token = int(loaded.model(torch.tensor([seq])).logits[0, -1].argmax())
            want.append(token)
            seq.append(token)
            if token == loaded.vocab.eos:
                break
    assert got == want


@pytest.mark.parametrize("arch", ["bart", "t5", "switch"])
@pytest.mark.parametrize("beams", [1, 3])
def test_encoder_decoders_generate_as_the_generation_module(models, arch, beams):
    loaded = redraw_weights(load(models[arch]), 0.2, seed=1)
    prompt = gen.prompt_ids(loaded, "Read the configuration and return a dictionary.")
    got = gen.generate_ids(loaded, prompt, gen.Settings(max_new_tokens=MAX_NEW, num_beams=beams))
    c = loaded.model.config
    ids = torch.tensor([prompt])
    want = generation.generate(loaded.model, ids, torch.ones_like(ids), MAX_NEW, beams,
                               decoder_start_token_id=c.decoder_start_id, eos_token_id=c.eos_id,
                               pad_token_id=c.pad_id, forced_bos_token_id=c.bos_id if arch == "bart" else None)
    want = want[0, 1:].tolist()
    assert got == (want[:want.index(c.eos_id) + 1] if c.eos_id in want else want)
    if arch == "bart":
        assert got[0] == c.bos_id  # BART's first token is forced to <s>


def test_the_prompt_layouts(models):
    text = "Read the file."
    gpt, t5, bart = load(models["gpt"]), load(models["t5"]), load(models["bart"])
    assert gen.prompt_ids(gpt, text) == [gpt.vocab.eos, *gpt.tokenizer.encode([text])[0]]
    assert gen.prompt_ids(t5, text) == [*t5.tokenizer.encode([text])[0], t5.vocab.eos]
    assert gen.prompt_ids(bart, text) == [bart.vocab.bos, *bart.tokenizer.encode([text])[0], bart.vocab.eos]


def test_sampling_is_seeded_and_top_k_one_is_greedy(causal):
    loaded = causal["gpt"]
    prompt = gen.prompt_ids(loaded, "Return the value.")
    sample = gen.Settings(max_new_tokens=MAX_NEW, sampling=Sampling(do_sample=True, temperature=1.5), seed=3)
    first = gen.generate_ids(loaded, prompt, sample)
    assert gen.generate_ids(loaded, prompt, sample) == first
    others = {tuple(gen.generate_ids(loaded, prompt, gen.Settings(max_new_tokens=MAX_NEW, seed=s,
                                                                  sampling=Sampling(do_sample=True, temperature=1.5))))
              for s in range(4, 8)}
    assert len(others | {tuple(first)}) > 1  # the seed matters
    greedy = gen.generate_ids(loaded, prompt, gen.Settings(max_new_tokens=MAX_NEW))
    top1 = gen.Settings(max_new_tokens=MAX_NEW, sampling=Sampling(do_sample=True, top_k=1), seed=3)
    assert gen.generate_ids(loaded, prompt, top1) == greedy


def test_warpers_equal_transformers():
    torch.manual_seed(0)
    logits = torch.randn(1, 50) * 3
    ids = torch.tensor([[3, 7, 7, 20]])
    s = Sampling(do_sample=True, temperature=0.7, top_k=10, top_p=0.8, repetition_penalty=1.3)
    want = transformers.RepetitionPenaltyLogitsProcessor(1.3)(ids, logits.clone())
    assert torch.allclose(penalise_repeats(logits[0], torch.tensor([3, 7, 20]), 1.3), want[0])
    for warper in (transformers.TemperatureLogitsWarper(0.7), transformers.TopKLogitsWarper(10),
                   transformers.TopPLogitsWarper(0.8)):
        want = warper(ids, want)
    got = warp(penalise_repeats(logits[0], torch.tensor([3, 7, 20]), 1.3), s)
    assert torch.equal(torch.isinf(got), torch.isinf(want[0]))
    assert torch.allclose(got[~torch.isinf(got)], want[0][~torch.isinf(want[0])])
    assert 1 <= int((~torch.isinf(got)).sum()) <= 10


def test_streaming_gives_the_whole_text(causal):
    loaded = causal["gpt"]
    pieces = []
    text = gen.generate_text(loaded, "Close the file.", gen.Settings(max_new_tokens=MAX_NEW), on_text=pieces.append)
    assert "".join(pieces) == text and len(pieces) > 1


def test_errors(models, corpus, tmp_path):
    params, _ = corpus
    with pytest.raises(InferenceError, match="does not generate"):
        gen.generate_ids(load(models["bert"]), [5, 6])
    classifier = write_model(params, "gpt", tmp_path / "clf", head="classification", num_labels=3)
    with pytest.raises(InferenceError, match="classifier"):
        gen.generate_ids(load(classifier), [5, 6])
    with pytest.raises(InferenceError, match="empty"):
        gen.prompt_ids(load(models["gpt"]), "   ")
    with pytest.raises(InferenceError, match="no sampling options"):
        gen.Settings(num_beams=2, sampling=Sampling(do_sample=True))
    with pytest.raises(InferenceError, match="no trained model"):
        load(tmp_path / "missing")
