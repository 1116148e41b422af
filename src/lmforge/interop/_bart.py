"""BART <-> Hugging Face transformers: configs, weights, identical outputs.

``bart_to_hf(model)`` gives transformers' ``BartForConditionalGeneration`` /
``BartForSequenceClassification`` with our weights; ``bart_from_hf(hf_model)`` the reverse.
``hf_model.save_pretrained(path)`` then writes a directory that
``AutoModelForSeq2SeqLM`` / ``AutoModelForSequenceClassification`` load.

Same tensors, no transposes, other names (``_name_map``): transformers' ``model.`` prefix is
our ``bart.``, ``self_attn.q_proj`` our ``attn.q`` in the encoder and ``self_attn.q`` in the
decoder, ``encoder_attn`` our ``cross_attn``, ``self_attn_layer_norm`` / ``encoder_attn_layer_norm``
/ ``final_layer_norm`` our ``norm1`` / ``norm2`` (decoder) / ``norm2`` (encoder) or ``norm3``
(decoder), ``layernorm_embedding`` our ``norm_embedding``, ``embed_positions`` our ``position``.
transformers holds the shared embedding four times in its state dict (``model.shared``, the
encoder's and the decoder's ``embed_tokens``, ``lm_head``); we hold it once.
``final_logits_bias`` is (1, V) there, (V,) here.

What does not convert is an error: different encoder / decoder widths of heads or
feed-forward, LayerDrop, an untied output layer, a LayerNorm epsilon other than 1e-5 (fixed in
transformers' BART), an activation we do not have, multi-label classification.
"""

from __future__ import annotations

import transformers
from torch import nn

from ..models import bart
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

_HF_EPS = 1e-5  # transformers' BART builds nn.LayerNorm(d_model) with the default epsilon

_CLASSES = {
    bart.BartForConditionalGeneration: "BartForConditionalGeneration",
    bart.BartForSequenceClassification: "BartForSequenceClassification",
}

# transformers' tied copies of model.shared.weight
_TIED = {copy: "model.shared.weight"
         for copy in ("model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight", "lm_head.weight")}

_ENCODER_LAYER = [  # transformers (under model.encoder.layers.i.) -> ours (under bart.encoder.layers.i.)
    ("self_attn.q_proj", "attn.q"), ("self_attn.k_proj", "attn.k"), ("self_attn.v_proj", "attn.v"),
    ("self_attn.out_proj", "attn.out"), ("self_attn_layer_norm", "norm1"),
    ("fc1", "ffn.fc1"), ("fc2", "ffn.fc2"), ("final_layer_norm", "norm2"),
]
_DECODER_LAYER = [  # transformers (under model.decoder.layers.i.) -> ours (under bart.decoder.layers.i.)
    ("self_attn.q_proj", "self_attn.q"), ("self_attn.k_proj", "self_attn.k"), ("self_attn.v_proj", "self_attn.v"),
    ("self_attn.out_proj", "self_attn.out"), ("self_attn_layer_norm", "norm1"),
    ("encoder_attn.q_proj", "cross_attn.q"), ("encoder_attn.k_proj", "cross_attn.k"),
    ("encoder_attn.v_proj", "cross_attn.v"), ("encoder_attn.out_proj", "cross_attn.out"),
    ("encoder_attn_layer_norm", "norm2"),
    ("fc1", "ffn.fc1"), ("fc2", "ffn.fc2"), ("final_layer_norm", "norm3"),
]


# ----------------------------------------------------------------------------- configs


def hf_config(config: bart.BartConfig, **extra) -> transformers.BartConfig:
    """transformers' BartConfig for ours (``extra``: e.g. ``num_labels``)."""
    if config.eps != _HF_EPS:
        raise ConfigError(f"transformers' BART has LayerNorm epsilon {_HF_EPS}; this model has {config.eps}")
    return transformers.BartConfig(
        vocab_size=config.vocab_size,
        max_position_embeddings=config.max_positions,
        d_model=config.d_model,
        encoder_layers=config.encoder_layers,
        decoder_layers=config.decoder_layers,
        encoder_attention_heads=config.n_heads,
        decoder_attention_heads=config.n_heads,
        encoder_ffn_dim=config.d_ff,
        decoder_ffn_dim=config.d_ff,
        encoder_layerdrop=0.0,
        decoder_layerdrop=0.0,
        activation_function=translate_activation(ACT_TO_HF, config.act, "transformers' BART"),
        dropout=config.dropout,
        attention_dropout=config.attn_dropout,
        activation_dropout=config.act_dropout,
        init_std=config.init_std,
        scale_embedding=config.scale_embedding,
        pad_token_id=config.pad_id,
        bos_token_id=config.bos_id,
        eos_token_id=config.eos_id,
        decoder_start_token_id=config.decoder_start_id,
        forced_eos_token_id=config.eos_id,  # transformers' BART default (generation forces </s> at max length)
        tie_word_embeddings=True,
        **extra,
    )


def _our_config(hf: transformers.BartConfig) -> bart.BartConfig:
    if hf.encoder_attention_heads != hf.decoder_attention_heads or hf.encoder_ffn_dim != hf.decoder_ffn_dim:
        raise ConfigError("encoder and decoder must have the same number of heads and feed-forward size "
                          f"(heads {hf.encoder_attention_heads}/{hf.decoder_attention_heads}, "
                          f"ffn {hf.encoder_ffn_dim}/{hf.decoder_ffn_dim})")
    if hf.encoder_layerdrop or hf.decoder_layerdrop:
        raise ConfigError(f"LayerDrop is not supported (encoder_layerdrop {hf.encoder_layerdrop}, "
                          f"decoder_layerdrop {hf.decoder_layerdrop})")
    if not hf.tie_word_embeddings:
        raise ConfigError("the output layer must be tied to the shared embedding (tie_word_embeddings)")
    return bart.BartConfig(
        vocab_size=hf.vocab_size,
        d_model=hf.d_model,
        encoder_layers=hf.encoder_layers,
        decoder_layers=hf.decoder_layers,
        n_heads=hf.encoder_attention_heads,
        d_ff=hf.encoder_ffn_dim,
        max_positions=hf.max_position_embeddings,
        act=translate_activation(ACT_FROM_HF, hf.activation_function, "BartConfig.activation_function"),
        dropout=float(hf.dropout),
        attn_dropout=float(hf.attention_dropout),
        act_dropout=float(hf.activation_dropout),
        eps=_HF_EPS,
        init_std=hf.init_std,
        pad_id=hf.pad_token_id,
        bos_id=hf.bos_token_id,
        eos_id=hf.eos_token_id,
        decoder_start_id=hf.decoder_start_token_id,
        scale_embedding=bool(hf.scale_embedding),
    )


# ----------------------------------------------------------------------------- weights


def _name_map(model: nn.Module) -> dict[str, str]:
    """transformers name -> our name, for every tensor of our ``model``'s state dict."""
    c = model.config
    pairs = {
        "model.shared": "bart.shared",
        "model.encoder.embed_positions": "bart.encoder.position",
        "model.encoder.layernorm_embedding": "bart.encoder.norm_embedding",
        "model.decoder.embed_positions": "bart.decoder.position",
        "model.decoder.layernorm_embedding": "bart.decoder.norm_embedding",
        "classification_head.dense": "head.dense",
        "classification_head.out_proj": "head.out_proj",
    }
    for i in range(c.encoder_layers):
        for theirs, ours in _ENCODER_LAYER:
            pairs[f"model.encoder.layers.{i}.{theirs}"] = f"bart.encoder.layers.{i}.{ours}"
    for i in range(c.decoder_layers):
        for theirs, ours in _DECODER_LAYER:
            pairs[f"model.decoder.layers.{i}.{theirs}"] = f"bart.decoder.layers.{i}.{ours}"
    return held_by({"final_logits_bias": "final_logits_bias"} | tensor_names(pairs), model)


# ----------------------------------------------------------------------------- public


def bart_to_hf(model: nn.Module) -> transformers.PreTrainedModel:
    """Our BartForConditionalGeneration / BartForSequenceClassification -> transformers' same head, same weights."""
    hf_cls = hf_class(model, _CLASSES)
    extra = classifier_settings(model) if isinstance(model, bart.BartForSequenceClassification) else {}
    hf = hf_cls(hf_config(model.config, **extra))
    ours = model.state_dict()
    if "final_logits_bias" in ours:  # (V,) here, (1, V) there
        ours["final_logits_bias"] = ours["final_logits_bias"].reshape(1, -1)
    load_into_hf(hf, ours, _name_map(model), _TIED, f"{type(model).__name__} -> {hf_cls.__name__}")
    return like(hf, model)


def bart_from_hf(hf_model: transformers.PreTrainedModel) -> nn.Module:
    """transformers' BartForConditionalGeneration / BartForSequenceClassification -> ours, same weights."""
    our_cls = our_class(hf_model, _CLASSES)
    hf_config_ = hf_model.config
    config = _our_config(hf_config_)
    if our_cls is bart.BartForSequenceClassification:
        check_single_label(hf_config_)
        model = our_cls(config, num_labels=hf_config_.num_labels,
                        classifier_dropout=float(hf_config_.classifier_dropout or 0.0))
    else:
        model = our_cls(config)
    state = state_from_hf(hf_model.state_dict(), _name_map(model), _TIED,
                          f"{type(hf_model).__name__} -> {our_cls.__name__}")
    if "final_logits_bias" in state:  # (1, V) there, (V,) here
        state["final_logits_bias"] = state["final_logits_bias"].reshape(-1)
    model.load_state_dict(state, strict=True)
    return like(model, hf_model)
