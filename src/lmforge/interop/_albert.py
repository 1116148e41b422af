"""Our ALBERT (``models/albert.py``) to and from ``transformers``' ALBERT.

Heads: ``AlbertForPreTraining`` (MLM + SOP), ``AlbertForMaskedLM`` and
``AlbertForSequenceClassification`` map to the transformers classes of the same names.
The weights are a renaming (both sides use ``nn.Linear``); transformers nests the shared layer
as ``encoder.albert_layer_groups.0.albert_layers.0`` (one group of one layer, the only layout
we build), and ties ``predictions.decoder`` (weight and bias) to the word embedding and to
``predictions.bias``. transformers' SOP layer is ``num_labels`` wide, so a pretraining model is
exported with ``num_labels = 2``; a classifier with its own ``num_labels``.
The released configs call the tanh GELU "gelu_new"; we call it "gelu_tanh".
"""

from __future__ import annotations

import transformers
from torch import nn

from ..models.albert import AlbertConfig, AlbertForMaskedLM, AlbertForPreTraining, AlbertForSequenceClassification
from ..errors import ConfigError
from ._bert import encoder_hf_kwargs, encoder_our_kwargs
from .common import (
    held_by,
    hf_class,
    like,
    load_into_hf,
    our_class,
    state_from_hf,
    tensor_names,
)

AlbertHead = AlbertForPreTraining | AlbertForMaskedLM | AlbertForSequenceClassification

_LAYER = "albert.encoder.albert_layer_groups.0.albert_layers.0."
# transformers' name -> ours, for every tensor of every head (the modules with .weight and .bias)
_NAMES = {
    "albert.embeddings.word_embeddings.weight": "albert.embeddings.word.weight",
    "albert.embeddings.position_embeddings.weight": "albert.embeddings.position.weight",
    "albert.embeddings.token_type_embeddings.weight": "albert.embeddings.token_type.weight",
    "predictions.bias": "mlm.bias",
} | tensor_names({
    "albert.embeddings.LayerNorm": "albert.embeddings.norm",
    "albert.encoder.embedding_hidden_mapping_in": "albert.project",
    _LAYER + "attention.query": "albert.block.attn.q",
    _LAYER + "attention.key": "albert.block.attn.k",
    _LAYER + "attention.value": "albert.block.attn.v",
    _LAYER + "attention.dense": "albert.block.attn.out",
    _LAYER + "attention.LayerNorm": "albert.block.norm1",
    _LAYER + "ffn": "albert.block.ffn.fc1",
    _LAYER + "ffn_output": "albert.block.ffn.fc2",
    _LAYER + "full_layer_layer_norm": "albert.block.norm2",
    "albert.pooler": "albert.pooler",
    "predictions.dense": "mlm.dense",
    "predictions.LayerNorm": "mlm.norm",
    "sop_classifier.classifier": "sop",
    "classifier": "classifier",
})
# transformers' tied copies of the MLM output layer: name -> the tensor it repeats
_TIED = {"predictions.decoder.weight": "albert.embeddings.word_embeddings.weight",
         "predictions.decoder.bias": "predictions.bias"}

_CLASSES = {
    AlbertForPreTraining: "AlbertForPreTraining",
    AlbertForMaskedLM: "AlbertForMaskedLM",
    AlbertForSequenceClassification: "AlbertForSequenceClassification",
}


# ----------------------------------------------------------------------------- configs


def albert_config_to_hf(config: AlbertConfig, num_labels: int = 2, **token_ids: int | None) -> transformers.AlbertConfig:
    """A transformers ``AlbertConfig`` for ``config``; ``num_labels`` is the classifier's width
    (2 for pretraining: transformers sizes the SOP layer with it). ``token_ids``: ``pad_token_id``, ``bos_token_id``, ``eos_token_id`` (None unless given)."""
    if config.norm_first:
        raise ConfigError("transformers' ALBERT is post-LN: a pre-LN model (norm_first: true) has no equivalent there")
    if config.sharing != "all":
        raise ConfigError(f"transformers' ALBERT: sharing {config.sharing!r} has no equivalent there (its layer "
                          "groups share whole layers); only sharing: all exports")
    return transformers.AlbertConfig(
        embedding_size=config.embedding_size,
        num_hidden_groups=1,
        inner_group_num=1,
        classifier_dropout_prob=config.classifier_dropout,
        num_labels=num_labels,
        **encoder_hf_kwargs(config, "transformers' ALBERT"),
        **{"pad_token_id": None, "bos_token_id": None, "eos_token_id": None, **token_ids},
    )


def albert_config_from_hf(hf_config: transformers.AlbertConfig) -> AlbertConfig:
    """Our ``AlbertConfig`` for a transformers one; layer groups other than one group of one
    layer (all released ALBERTs) are an error."""
    if hf_config.num_hidden_groups != 1 or hf_config.inner_group_num != 1:
        raise ConfigError(
            f"only one shared layer is supported (num_hidden_groups=1, inner_group_num=1), got "
            f"{hf_config.num_hidden_groups}, {hf_config.inner_group_num}"
        )
    if not hf_config.tie_word_embeddings:
        raise ConfigError("AlbertConfig.tie_word_embeddings=False is not supported")
    return AlbertConfig(embedding_size=hf_config.embedding_size, classifier_dropout=hf_config.classifier_dropout_prob,
                        **encoder_our_kwargs(hf_config))


# ----------------------------------------------------------------------------- models


def albert_to_hf(model: AlbertHead, **token_ids: int | None) -> nn.Module:
    """Our ALBERT head -> the transformers class of the same name, with the same weights."""
    hf_cls = hf_class(model, _CLASSES)
    num_labels = getattr(model, "num_labels", 2)  # for pretraining: the SOP layer's width
    hf = hf_cls(albert_config_to_hf(model.config, num_labels, **token_ids))
    load_into_hf(hf, model.state_dict(), held_by(_NAMES, model), _TIED, f"{type(model).__name__} -> {hf_cls.__name__}")
    return like(hf, model)


def albert_from_hf(hf_model: nn.Module) -> AlbertHead:
    """A transformers ``AlbertForPreTraining`` / ``AlbertForMaskedLM`` /
    ``AlbertForSequenceClassification`` -> ours, with the same weights."""
    ours_class = our_class(hf_model, _CLASSES)
    config = albert_config_from_hf(hf_model.config)
    if ours_class is AlbertForPreTraining and hf_model.config.num_labels != 2:
        raise ConfigError(f"the SOP layer must be 2 wide (num_labels=2), got num_labels={hf_model.config.num_labels}")
    if ours_class is AlbertForSequenceClassification:
        model = ours_class(config, num_labels=hf_model.config.num_labels)
    else:
        model = ours_class(config)
    state = state_from_hf(hf_model.state_dict(), held_by(_NAMES, model), _TIED,
                          f"{type(hf_model).__name__} -> {ours_class.__name__}")
    model.load_state_dict(state, strict=True)
    return like(model, hf_model)
