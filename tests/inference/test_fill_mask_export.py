"""``lmforge fill-mask`` against transformers' fill-mask pipeline on the exported folder, and
``lmforge export``: the folder loads in the Auto class of its head without missing weights,
gives our logits, tokenizes as our inputs, and a classifier keeps its label names."""

import json

import pytest
import torch
import transformers

from lmforge.inference.export import export_model
from lmforge.inference.fill_mask import fill_mask
from lmforge.inference.loading import InferenceError, load

from .conftest import redraw_weights, write_model, write_toy_classifier

AUTO = {"gpt": transformers.AutoModelForCausalLM, "xlnet": transformers.AutoModelForCausalLM,
        "bert": transformers.AutoModelForPreTraining, "ernie": transformers.AutoModelForPreTraining,
        "albert": transformers.AutoModelForPreTraining, "bart": transformers.AutoModelForSeq2SeqLM,
        "t5": transformers.AutoModelForSeq2SeqLM, "switch": transformers.AutoModelForSeq2SeqLM}
TEXT = "Return the value of the parser."


@pytest.mark.parametrize("arch", ["bert", "albert", "ernie"])
def test_fill_mask_matches_the_transformers_pipeline(models, arch, tmp_path):
    loaded = redraw_weights(load(models[arch]), 0.2, seed=2)
    out = export_model(loaded, tmp_path / "hf")
    pipe = transformers.pipeline("fill-mask", model=str(out), tokenizer=str(out))
    text = f"Return the {pipe.tokenizer.mask_token} of the parser and the {pipe.tokenizer.mask_token}."
    got = fill_mask(loaded, text, top_k=5)
    want = pipe(text, top_k=5)
    assert len(got.blanks) == len(want) == 2
    for ours, theirs in zip(got.blanks, want):
        assert [c["token"] for c in ours] == [c["token"] for c in theirs]
        assert [c["score"] for c in ours] == pytest.approx([c["score"] for c in theirs], abs=1e-5)
    assert fill_mask(loaded, "Return the [MASK] of it.").sequence  # the generic mark works too


@pytest.mark.parametrize("arch", ["t5", "switch"])
def test_sentinel_blanks_get_the_spans_the_model_writes(models, arch):
    loaded = redraw_weights(load(models[arch]), 0.2, seed=2)
    filled = fill_mask(loaded, "Return the <mask> of the parser and <mask>.")
    assert len(filled.blanks) == 2
    sentinels = loaded.vocab.sentinels
    from lmforge.inference.generate import Settings, generate_ids
    ids = [*loaded.tokenizer.encode(["Return the <extra_id_0> of the parser and <extra_id_1>."])[0], loaded.vocab.eos]
    written = generate_ids(loaded, ids, Settings(max_new_tokens=10 + 2 * (len(ids) - 1)))
    first = filled.blanks[0][0]["token"]
    if sentinels[0] in written:  # the span after <extra_id_0> up to the next sentinel or eos
        start = written.index(sentinels[0]) + 1
        end = next((i for i in range(start, len(written)) if written[i] in sentinels or written[i] == loaded.vocab.eos),
                   len(written))
        assert first == written[start:end]
    else:
        assert first == []


def test_bart_rewrites_the_text(models):
    from lmforge.inference.generate import Settings, generate_ids

    loaded = redraw_weights(load(models["bart"]), 0.2, seed=2)
    text = "Return the <mask> of the parser."
    filled = fill_mask(loaded, text)
    # the text the model writes, greedily, from <s> text </s> (its pretraining layout), <mask> its mask token
    ids = [loaded.vocab.bos, *loaded.tokenizer.encode([text])[0], loaded.vocab.eos]
    assert loaded.vocab.mask in ids
    settings = Settings(max_new_tokens=10 + 2 * (len(ids) - 2))  # fill_mask's default budget for this text
    written = generate_ids(loaded, ids, settings)
    assert written and filled.sequence == loaded.decode(written) and filled.blanks == []
    generic = fill_mask(loaded, "Return the [MASK] of the parser.", settings=settings)  # the generic mark
    assert generic.sequence == filled.sequence


def test_fill_mask_errors(models):
    with pytest.raises(InferenceError, match="no mask"):
        fill_mask(load(models["bert"]), "Return the value.")
    with pytest.raises(InferenceError, match="no blank"):
        fill_mask(load(models["t5"]), "Return the value.")
    with pytest.raises(InferenceError, match="does not fill"):
        fill_mask(load(models["gpt"]), "Return the [MASK].")


@pytest.mark.parametrize("arch", sorted(AUTO))
def test_export_round_trip(models, corpus, arch, tmp_path):
    if arch == "switch":  # transformers' expert capacity is fixed for 512 tokens: ours must drop none either
        params, _ = corpus
        models = {arch: write_model(params, arch, tmp_path / "switch", capacity_factor_eval=8.0)}
    loaded = redraw_weights(load(models[arch]), 0.05, seed=2)
    out = export_model(loaded, tmp_path / "hf")
    hf, info = AUTO[arch].from_pretrained(str(out), output_loading_info=True)
    assert not info["missing_keys"], info["missing_keys"]
    hf.eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(out))
    ids = torch.tensor([tokenizer(TEXT)["input_ids"]])
    if arch in ("bert", "ernie", "albert"):
        v = loaded.vocab
        assert ids[0].tolist() == [v.cls, *loaded.tokenizer.encode([TEXT])[0], v.sep]
    with torch.no_grad():
        if arch in ("bart", "t5", "switch"):
            dec = torch.tensor([[loaded.model.config.decoder_start_id, 5, 6]])
            ours = loaded.model(ids, torch.ones_like(ids), decoder_input_ids=dec).logits
            theirs = hf(input_ids=ids, decoder_input_ids=dec).logits
        else:
            result = hf(input_ids=ids)
            ours, theirs = loaded.model(ids).logits, getattr(result, "prediction_logits", None)
            theirs = result.logits if theirs is None else theirs
    torch.testing.assert_close(theirs, ours, atol=1e-4, rtol=1e-4)
    assert "trained with lmforge" in (out / "README.md").read_text()


def test_exported_classifier_keeps_its_labels(corpus, tmp_path):
    params, _ = corpus
    run = tmp_path / "bert" / "toy"
    write_toy_classifier(params, run)
    (run / "metrics.json").write_text(json.dumps({"task": "toy", "init": "pretrained", "steps": 10,
                                                  "test": {"accuracy": 0.5, "macro_f1": 0.4}}))
    loaded = load(run)
    out = export_model(loaded, tmp_path / "hf")
    hf = transformers.AutoModelForSequenceClassification.from_pretrained(str(out)).eval()
    assert hf.config.id2label == {0: "module", 1: "class", 2: "function"}
    ids = torch.tensor([transformers.AutoTokenizer.from_pretrained(str(out))(TEXT)["input_ids"]])
    with torch.no_grad():
        torch.testing.assert_close(hf(input_ids=ids).logits, loaded.model(ids).logits, atol=1e-5, rtol=1e-5)
    card = (out / "README.md").read_text()
    assert "module, class, function" in card and "accuracy 0.5000" in card


def test_export_errors(models, tmp_path):
    with pytest.raises(InferenceError, match="no transformers counterpart"):
        export_model(load(models["elmo"]), tmp_path / "x")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "f").write_text("x")
    with pytest.raises(InferenceError, match="not empty"):
        export_model(load(models["gpt"]), tmp_path / "full")


def test_a_text_longer_than_the_position_table_is_one_clear_error(models):
    long = "word " * 600 + "[MASK]."
    with pytest.raises(InferenceError, match=r"longer than the \d+ positions bert has"):
        fill_mask(load(models["bert"]), long)
