"""BERT and ERNIE <-> Hugging Face transformers: configs, weights, identical outputs.

``bert_to_hf(model)`` gives the transformers model of the same head (``BertModel``,
``BertForPreTraining``, ``BertForMaskedLM``, ``BertForSequenceClassification``) with our
weights; ``bert_from_hf(hf_model)`` the reverse; ``ernie_to_hf`` / ``ernie_from_hf`` the same
for ERNIE (``ErnieModel``, ``ErnieForPreTraining``, ...). ``hf_model.save_pretrained(path)``
then writes a directory that ``transformers.AutoModelFor*.from_pretrained`` loads.

The two layouts hold the same tensors under different names, with no transposes (both use
``nn.Linear``'s (out, in) weights): transformers' ``encoder.layer.i.attention.self.query``
is our ``layers.i.attn.q``, and so on (``_name_map``). transformers stores the tied MLM output
layer twice in its state dict (``cls.predictions.decoder.weight`` is the word-embedding
matrix, ``cls.predictions.decoder.bias`` is ``cls.predictions.bias``); we hold it once.

What does not convert is an error, never a silent approximation: an untied MLM output
layer, a decoder / cross-attention configuration, an activation we do not have, a
multi-label classifier.
"""

from __future__ import annotations

import transformers
from torch import nn

from ..models import bert, ernie
from ..errors import ConfigError
from .common import (
    ACT_FROM_HF,
    ACT_TO_HF,
    check_single_label,
    classifier_settings,
    held_by,
    hf_class,
    like,
    load_into_hf,
    our_class,
    state_from_hf,
    tensor_names,
    translate_activation,
)

# ours -> transformers, per family; exact types (ERNIE's classes subclass BERT's)
_BERT_CLASSES = {
    bert.BertModel: "BertModel",
    bert.BertForPreTraining: "BertForPreTraining",
    bert.BertForMaskedLM: "BertForMaskedLM",
    bert.BertForSequenceClassification: "BertForSequenceClassification",
}
_ERNIE_CLASSES = {
    ernie.ErnieModel: "ErnieModel",
    ernie.ErnieForPreTraining: "ErnieForPreTraining",
    ernie.ErnieForMaskedLM: "ErnieForMaskedLM",
    ernie.ErnieForSequenceClassification: "ErnieForSequenceClassification",
}

_LAYER_NAMES = [  # transformers (under encoder.layer.i.) -> ours (under layers.i.)
    ("attention.self.query", "attn.q"),
    ("attention.self.key", "attn.k"),
    ("attention.self.value", "attn.v"),
    ("attention.output.dense", "attn.out"),
    ("attention.output.LayerNorm", "norm1"),
    ("intermediate.dense", "ffn.fc1"),
    ("output.dense", "ffn.fc2"),
    ("output.LayerNorm", "norm2"),
]


# ----------------------------------------------------------------------------- configs


def encoder_hf_kwargs(config, target: str) -> dict:
    """transformers' settings for what BERT-shaped configs (BERT, ERNIE, ALBERT) name alike."""
    if getattr(config, "norm_first", False):
        raise ConfigError(f"{target}: a pre-LN encoder (norm_first: true) has no transformers equivalent "
                          "(transformers' BERT is post-LN)")
    return dict(
        vocab_size=config.vocab_size,
        hidden_size=config.d_model,
        num_hidden_layers=config.n_layers,
        num_attention_heads=config.n_heads,
        intermediate_size=config.d_ff,
        hidden_act=translate_activation(ACT_TO_HF, config.act, target),
        hidden_dropout_prob=config.dropout,
        attention_probs_dropout_prob=config.attn_dropout,
        max_position_embeddings=config.max_positions,
        type_vocab_size=config.type_vocab_size,
        initializer_range=config.init_std,
        layer_norm_eps=config.eps,
    )


def encoder_our_kwargs(hf_config) -> dict:
    """Our settings for what transformers' BERT-shaped configs (BERT, ERNIE, ALBERT) name alike."""
    return dict(
        vocab_size=hf_config.vocab_size,
        d_model=hf_config.hidden_size,
        n_layers=hf_config.num_hidden_layers,
        n_heads=hf_config.num_attention_heads,
        d_ff=hf_config.intermediate_size,
        max_positions=hf_config.max_position_embeddings,
        type_vocab_size=hf_config.type_vocab_size,
        act=translate_activation(ACT_FROM_HF, hf_config.hidden_act, f"{type(hf_config).__name__}.hidden_act"),
        dropout=hf_config.hidden_dropout_prob,
        attn_dropout=hf_config.attention_probs_dropout_prob,
        eps=hf_config.layer_norm_eps,
        init_std=hf_config.initializer_range,
    )


def hf_config(config: bert.BertConfig, **extra) -> transformers.PretrainedConfig:
    """transformers' BertConfig / ErnieConfig with the same network as ours (``extra``: e.g. ``num_labels``)."""
    kwargs = dict(**encoder_hf_kwargs(config, "transformers' BERT"), pad_token_id=config.pad_id, **extra)
    if isinstance(config, ernie.ErnieConfig):
        return transformers.ErnieConfig(
            use_task_id=config.use_task_id, task_type_vocab_size=config.task_type_vocab_size, **kwargs
        )
    return transformers.BertConfig(**kwargs)


def _our_config(hf_config: transformers.PretrainedConfig, config_class: type[bert.BertConfig]) -> bert.BertConfig:
    """Our BertConfig / ErnieConfig from transformers' config; unsupported settings raise."""
    if getattr(hf_config, "is_decoder", False) or getattr(hf_config, "add_cross_attention", False):
        raise ConfigError("only the bidirectional encoder converts (is_decoder / add_cross_attention are set)")
    if getattr(hf_config, "position_embedding_type", "absolute") != "absolute":
        raise ConfigError(f"position_embedding_type {hf_config.position_embedding_type!r} is not supported")
    kwargs = dict(**encoder_our_kwargs(hf_config), pad_id=hf_config.pad_token_id)
    if config_class is ernie.ErnieConfig:
        kwargs.update(use_task_id=hf_config.use_task_id, task_type_vocab_size=hf_config.task_type_vocab_size)
    return config_class(**kwargs)


# ----------------------------------------------------------------------------- weights


def _name_map(model: nn.Module, hf_prefix: str) -> dict[str, str]:
    """transformers name -> our name, for every tensor of our ``model``'s state dict."""
    bare = isinstance(model, bert.BertModel)
    ours_enc = "" if bare else "encoder."  # where our heads keep the encoder
    theirs_enc = "" if bare else f"{hf_prefix}."  # "bert." / "ernie." in transformers' heads
    pairs = {
        "embeddings.word_embeddings": "embeddings.word",
        "embeddings.position_embeddings": "embeddings.position",
        "embeddings.token_type_embeddings": "embeddings.segment",
        "embeddings.task_type_embeddings": "embeddings.task",
        "embeddings.LayerNorm": "embeddings.norm",
        "pooler.dense": "pooler",
    }
    n_layers = (model if bare else model.encoder).config.n_layers
    for i in range(n_layers):
        for theirs, ours in _LAYER_NAMES:
            pairs[f"encoder.layer.{i}.{theirs}"] = f"layers.{i}.{ours}"
    names = {f"{theirs_enc}{theirs}": f"{ours_enc}{ours}" for theirs, ours in tensor_names(pairs).items()}
    if not bare:  # the heads
        names |= tensor_names({"cls.predictions.transform.dense": "mlm.dense",
                               "cls.predictions.transform.LayerNorm": "mlm.norm",
                               "cls.seq_relationship": "nsp", "classifier": "classifier"})
        names["cls.predictions.bias"] = "mlm.bias"
    return held_by(names, model)


def _tied(hf_prefix: str) -> dict[str, str]:
    """transformers' tied copies of the MLM output layer (in the heads that have one): name -> its source."""
    return {"cls.predictions.decoder.weight": f"{hf_prefix}.embeddings.word_embeddings.weight",
            "cls.predictions.decoder.bias": "cls.predictions.bias"}


def _to_hf(model: nn.Module, classes: dict[type, str], hf_prefix: str) -> transformers.PreTrainedModel:
    hf_cls = hf_class(model, classes)
    extra = classifier_settings(model) if isinstance(model, bert.BertForSequenceClassification) else {}
    hf_kwargs = {"add_pooling_layer": model.pooler is not None} if isinstance(model, bert.BertModel) else {}
    hf = hf_cls(hf_config(model.config, **extra), **hf_kwargs)
    load_into_hf(hf, model.state_dict(), _name_map(model, hf_prefix), _tied(hf_prefix),
                 f"{type(model).__name__} -> {hf_cls.__name__}")
    return like(hf, model)


def _from_hf(hf: transformers.PreTrainedModel, classes: dict[type, str], hf_prefix: str,
             config_class: type[bert.BertConfig]) -> nn.Module:
    our_cls = our_class(hf, classes)
    name = type(hf).__name__
    hf_config = hf.config
    config = _our_config(hf_config, config_class)
    if name.endswith("Model"):
        model = our_cls(config, pooler=hf.pooler is not None)
    elif name.endswith("SequenceClassification"):
        check_single_label(hf_config)
        model = our_cls(config, num_labels=hf_config.num_labels, classifier_dropout=hf_config.classifier_dropout)
    else:
        if not hf_config.tie_word_embeddings:
            raise ConfigError("the MLM output layer must be tied to the word embeddings (tie_word_embeddings)")
        model = our_cls(config)
    state = state_from_hf(hf.state_dict(), _name_map(model, hf_prefix), _tied(hf_prefix), f"{name} -> {our_cls.__name__}")
    model.load_state_dict(state, strict=True)
    return like(model, hf)


# ----------------------------------------------------------------------------- public


def bert_to_hf(model: nn.Module) -> transformers.PreTrainedModel:
    """Our BERT model or head -> the transformers model of the same head, same weights."""
    return _to_hf(model, _BERT_CLASSES, "bert")


def bert_from_hf(hf_model: transformers.PreTrainedModel) -> nn.Module:
    """transformers' BertModel / BertForPreTraining / BertForMaskedLM /
    BertForSequenceClassification -> ours, same weights."""
    return _from_hf(hf_model, _BERT_CLASSES, "bert", bert.BertConfig)


def ernie_to_hf(model: nn.Module) -> transformers.PreTrainedModel:
    """Our ERNIE model or head -> the transformers model of the same head, same weights."""
    return _to_hf(model, _ERNIE_CLASSES, "ernie")


def ernie_from_hf(hf_model: transformers.PreTrainedModel) -> nn.Module:
    """transformers' ErnieModel / ErnieForPreTraining / ErnieForMaskedLM /
    ErnieForSequenceClassification -> ours, same weights."""
    return _from_hf(hf_model, _ERNIE_CLASSES, "ernie", ernie.ErnieConfig)
