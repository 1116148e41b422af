"""The public interop entry: dispatch by architecture, export with the tokenizer, errors."""

import pytest
import torch
import transformers

from lmforge.interop.hf import export, from_hf, to_hf
from lmforge.models.layers import ConfigError
from lmforge.models.registry import build_model

CASES = [
    ("bert-tiny-test", "pretraining", transformers.BertForPreTraining, transformers.AutoModelForPreTraining),
    ("ernie-tiny-test", "mlm", transformers.ErnieForMaskedLM, transformers.AutoModelForMaskedLM),
    ("albert-tiny", "pretraining", transformers.AlbertForPreTraining, transformers.AutoModelForPreTraining),
    ("gpt-tiny", "lm", transformers.GPT2LMHeadModel, transformers.AutoModelForCausalLM),
    ("xlnet-tiny", "lm", transformers.XLNetLMHeadModel, transformers.AutoModelForCausalLM),
]


SEQ2SEQ = [
    ("bart-tiny", transformers.BartForConditionalGeneration),
    ("t5-tiny", transformers.T5ForConditionalGeneration),
    ("switch-tiny", transformers.SwitchTransformersForConditionalGeneration),
]


@pytest.mark.parametrize("name,hf_class", SEQ2SEQ)
def test_seq2seq_dispatch_export_and_reload(tmp_path, name, hf_class):
    torch.manual_seed(0)
    ours = build_model(name).eval()
    assert type(to_hf(ours)) is hf_class and type(from_hf(to_hf(ours))) is type(ours)
    ids = torch.randint(5, 200, (2, 10))
    mask = torch.ones_like(ids)
    mask[0, -2:] = 0
    dec = torch.randint(5, 200, (2, 4))
    export(ours, tmp_path / "export")
    loaded = transformers.AutoModelForSeq2SeqLM.from_pretrained(str(tmp_path / "export")).eval()
    with torch.no_grad():
        a = ours(input_ids=ids, attention_mask=mask, decoder_input_ids=dec).logits
        b = loaded(input_ids=ids, attention_mask=mask, decoder_input_ids=dec).logits
    assert (a - b).abs().max() <= 1e-4


@pytest.mark.parametrize("name,head,hf_class,auto", CASES)
def test_dispatch_export_and_reload(tmp_path, name, head, hf_class, auto):
    torch.manual_seed(0)
    ours = build_model(name, head=head).eval()
    hf = to_hf(ours)
    assert type(hf) is hf_class
    back = from_hf(hf)
    assert type(back) is type(ours)
    ids = torch.randint(5, 200, (2, 10))
    mask = torch.ones_like(ids)
    mask[0, -2:] = 0
    export(ours, tmp_path / "export")
    loaded = auto.from_pretrained(str(tmp_path / "export")).eval()
    with torch.no_grad():
        a = ours(input_ids=ids, attention_mask=mask).logits
        out = loaded(input_ids=ids, attention_mask=mask)
        b = out.prediction_logits if hasattr(out, "prediction_logits") else out.logits
    keep = mask.bool()
    assert (a[keep] - b[keep]).abs().max() <= 1e-4


def test_export_carries_the_tokenizer(tmp_path):
    from tests.tokenization.conftest import params_for, small_corpus, write_clean

    from lmforge.tokenization.tokenizer_stage import run_tokenizer

    params = params_for(tmp_path)
    write_clean(tmp_path / "clean", small_corpus(60))
    run_tokenizer(params, ["bpe"], log=lambda m: None)
    model = build_model("gpt-tiny", vocab_size=600)
    out = export(model, tmp_path / "gpt", tokenizer_dir=tmp_path / "tokenizers" / "bpe")
    tok = transformers.AutoTokenizer.from_pretrained(str(out))
    assert tok.eos_token == "</s>" and tok.pad_token == "<pad>"
    assert transformers.AutoModelForCausalLM.from_pretrained(str(out)).config.vocab_size == 600


def test_unsupported_models_are_clear_errors():
    with pytest.raises(ConfigError, match="no transformers counterpart for ElmoBiLM"):
        to_hf(build_model("elmo-tiny"))
    with pytest.raises(ConfigError, match="no transformers counterpart for TransformerXLLMHeadModel"):
        to_hf(build_model("txl-tiny"))
    with pytest.raises(ConfigError, match="no converter for transformers model type 'roberta'"):
        from_hf(transformers.RobertaForMaskedLM(transformers.RobertaConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1,
                                                                         num_attention_heads=2, intermediate_size=32)))
