"""BERT and ERNIE against transformers: same outputs after conversion, exact round trips,
exported directories that ``AutoModelFor*.from_pretrained`` loads.

The transformers models use a non-default configuration (sizes, activation, LayerNorm
epsilon, pad id, three segment types) and every tensor is perturbed away from its init
(biases and LayerNorms included), so a wrong name mapping cannot hide behind zeros and ones.
"""

from __future__ import annotations

import pytest
import torch
import transformers

from lmforge.interop._bert import bert_from_hf, bert_to_hf, ernie_from_hf, ernie_to_hf
from lmforge.models import bert, ernie

ATOL = 1e-4
B, L, VOCAB, TYPES, TASKS = 3, 12, 101, 3, 4

COMMON = dict(vocab_size=VOCAB, hidden_size=48, num_hidden_layers=3, num_attention_heads=4, intermediate_size=80,
              max_position_embeddings=40, type_vocab_size=TYPES, layer_norm_eps=1e-7, pad_token_id=1)
FAMILIES = {
    "bert": dict(config=lambda **kw: transformers.BertConfig(hidden_act="gelu", **COMMON, **kw),
                 to_hf=bert_to_hf, from_hf=bert_from_hf, prefix="Bert", ours=bert),
    "ernie": dict(config=lambda **kw: transformers.ErnieConfig(hidden_act="relu", use_task_id=True,
                                                               task_type_vocab_size=TASKS, **COMMON, **kw),
                  to_hf=ernie_to_hf, from_hf=ernie_from_hf, prefix="Ernie", ours=ernie),
}
HEADS = {  # transformers head -> (Auto class, extra config)
    "ForPreTraining": (transformers.AutoModelForPreTraining, {}),
    "ForMaskedLM": (transformers.AutoModelForMaskedLM, {}),
    "ForSequenceClassification": (transformers.AutoModelForSequenceClassification, {"num_labels": 3}),
    "Model": (transformers.AutoModel, {}),
}
CASES = [(f, h) for f in FAMILIES for h in HEADS] + [(f, "regression") for f in FAMILIES]


def make_hf(family: str, head: str, seed: int = 0) -> transformers.PreTrainedModel:
    fam = FAMILIES[family]
    extra = {"num_labels": 1} if head == "regression" else HEADS[head][1]
    cls = getattr(transformers, fam["prefix"] + ("ForSequenceClassification" if head == "regression" else head))
    torch.manual_seed(seed)
    model = cls(fam["config"](**extra))
    with torch.no_grad():
        for p in model.parameters():  # tied tensors appear once here
            p.add_(0.1 * torch.randn_like(p))
    return model.eval()


def make_inputs(family: str, head: str, seed: int = 1) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(0, VOCAB, (B, L), generator=g)
    lengths = torch.tensor([L, L - 4, 5])
    attention_mask = (torch.arange(L)[None, :] < lengths[:, None]).long()
    inputs = dict(input_ids=input_ids.masked_fill(attention_mask == 0, 1), attention_mask=attention_mask,
                  token_type_ids=torch.randint(0, TYPES, (B, L), generator=g))
    if family == "ernie":
        inputs["task_type_ids"] = torch.randint(0, TASKS, (B, L), generator=g)
    if head in ("ForPreTraining", "ForMaskedLM"):
        chosen = (torch.rand(B, L, generator=g) < 0.4) & (attention_mask == 1)
        inputs["labels"] = torch.where(chosen, input_ids, torch.full_like(input_ids, -100))
    if head == "ForPreTraining":
        inputs["next_sentence_label"] = torch.randint(0, 2, (B,), generator=g)
    if head == "ForSequenceClassification":
        inputs["labels"] = torch.randint(0, 3, (B,), generator=g)
    if head == "regression":
        inputs["labels"] = torch.randn(B, generator=g)
    return inputs


def hf_outputs(hf: transformers.PreTrainedModel, head: str, inputs) -> dict[str, torch.Tensor]:
    if head == "Model":
        inputs = {k: v for k, v in inputs.items() if k not in ("labels", "next_sentence_label")}
    out = hf(**inputs)
    if head == "Model":
        return {"hidden": out.last_hidden_state, "pooled": out.pooler_output}
    if head == "ForPreTraining":
        return {"logits": out.prediction_logits, "nsp_logits": out.seq_relationship_logits, "loss": out.loss}
    return {"logits": out.logits, "loss": out.loss}


def our_outputs(model: torch.nn.Module, head: str, inputs) -> dict[str, torch.Tensor]:
    if head == "Model":
        inputs = {k: v for k, v in inputs.items() if k not in ("labels", "next_sentence_label")}
        hidden, pooled = model(**inputs)
        return {"hidden": hidden, "pooled": pooled}
    out = model(**inputs)
    result = {"logits": out.logits, "loss": out.loss}
    if head == "ForPreTraining":
        result["nsp_logits"] = out.aux["nsp_logits"]
    return result


def max_diffs(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> dict[str, float]:
    assert a.keys() == b.keys()
    for k in a:
        assert a[k].shape == b[k].shape, k
    return {k: (a[k].float() - b[k].float()).abs().max().item() for k in a}


def assert_state_dicts_equal(a: torch.nn.Module, b: torch.nn.Module) -> None:
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys()
    for k in sa:
        assert sa[k].dtype == sb[k].dtype and torch.equal(sa[k], sb[k]), k


@pytest.mark.parametrize("family, head", CASES)
def test_converted_from_transformers_gives_the_same_outputs(family, head):
    hf = make_hf(family, head)
    ours = FAMILIES[family]["from_hf"](hf)
    assert not ours.training
    inputs = make_inputs(family, head)
    with torch.no_grad():
        diffs = max_diffs(our_outputs(ours, head, inputs), hf_outputs(hf, head, inputs))
    assert max(diffs.values()) <= ATOL, diffs


@pytest.mark.parametrize("family, head", CASES)
def test_round_trips_are_exact(family, head):
    fam = FAMILIES[family]
    hf = make_hf(family, head)
    ours = fam["from_hf"](hf)
    again = fam["from_hf"](fam["to_hf"](ours))  # ours -> HF -> ours
    assert type(again) is type(ours) and again.config == ours.config
    assert_state_dicts_equal(ours, again)
    assert_state_dicts_equal(hf, fam["to_hf"](ours))  # HF -> ours -> HF


@pytest.mark.parametrize("family, head", CASES)
def test_exported_directory_loads_with_auto_classes(family, head, tmp_path):
    fam = FAMILIES[family]
    ours = fam["from_hf"](make_hf(family, head))  # a model of ours, exported
    fam["to_hf"](ours).save_pretrained(tmp_path)
    auto = HEADS["ForSequenceClassification" if head == "regression" else head][0]
    loaded = auto.from_pretrained(tmp_path).eval()
    assert type(loaded).__name__ == fam["prefix"] + ("ForSequenceClassification" if head == "regression" else head)
    inputs = make_inputs(family, head)
    with torch.no_grad():
        diffs = max_diffs(our_outputs(ours, head, inputs), hf_outputs(loaded, head, inputs))
    assert max(diffs.values()) <= ATOL, diffs


def test_ours_to_transformers_from_a_fresh_model():
    """The other direction, starting from our init (padding row zero, zero output bias)."""
    torch.manual_seed(0)
    config = bert.from_name("bert-tiny-test", vocab_size=VOCAB, type_vocab_size=TYPES, act="gelu_tanh")
    ours = bert.BertForPreTraining(config).eval()
    hf = bert_to_hf(ours).eval()
    assert hf.config.hidden_act == "gelu_new" and not hf.training
    inputs = make_inputs("bert", "ForPreTraining")
    with torch.no_grad():
        diffs = max_diffs(our_outputs(ours, "ForPreTraining", inputs), hf_outputs(hf, "ForPreTraining", inputs))
    assert max(diffs.values()) <= ATOL, diffs


def test_unconvertible_models_are_errors():
    from lmforge.models.layers import ConfigError

    with pytest.raises(ConfigError, match="hidden_act"):
        bert_from_hf(transformers.BertForMaskedLM(transformers.BertConfig(hidden_act="silu", **COMMON)))
    with pytest.raises(ConfigError, match="tie"):
        bert_from_hf(transformers.BertForMaskedLM(transformers.BertConfig(tie_word_embeddings=False, **COMMON)))
    with pytest.raises(ConfigError, match="multi-label"):
        bert_from_hf(transformers.BertForSequenceClassification(
            transformers.BertConfig(problem_type="multi_label_classification", num_labels=3, **COMMON)))
    with pytest.raises(TypeError, match="BertForTokenClassification"):
        bert_from_hf(transformers.BertForTokenClassification(transformers.BertConfig(**COMMON)))
    with pytest.raises(TypeError):  # an ERNIE model is not a BERT one
        bert_to_hf(ernie.ErnieForMaskedLM(ernie.from_name("ernie-tiny-test")))
