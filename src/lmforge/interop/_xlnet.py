"""Our XLNet (``models/xlnet.py``) to and from ``transformers``' XLNet (``XLNetLMHeadModel``,
``XLNetForSequenceClassification``): configs, weights, same outputs.

What differs in the stored weights:

- transformers keeps the attention projections as raw (d_model, n_head, d_head) tensors used
  through einsum: ``q, k, v, r`` are our ``nn.Linear`` weights (n_head * d_head, d_model)
  transposed and reshaped, ``o`` is our (d_model, n_head * d_head) weight reshaped;
- transformers always holds ``r_w_bias``, ``r_r_bias`` and ``r_s_bias`` per layer (the
  released ``untie_r=True``). A model with ``untie_r=False`` (one shared set) exports them
  copied into every layer and writes ``untie_r: false`` into the config (transformers keeps
  unknown config keys); importing such a config ties them back, and is an error if the layers'
  copies differ;
- the LM output layer ``lm_loss.weight`` is the word-embedding matrix (tied); its bias is our
  ``lm_bias``. The classifier's ``sequence_summary.summary`` is our ``summary``.

Memories: our ``mem_len = 0`` (no memory) is transformers' ``mem_len=None`` with
``use_mems_eval=use_mems_train=False``; a positive ``mem_len`` exports with both True, as our
model always returns its memories then. transformers' ``mem_len=None`` with ``use_mems_*``
True (cache everything, unbounded) has no equivalent and imports as ``mem_len = 0``.
Memories themselves are (B, M, D) here and (M, B, D) in transformers.

What does not convert is an error: ``d_head != d_model // n_head`` (transformers requires it),
an activation or summary type we do not have, untied output embeddings, multi-label problems.
"""

from __future__ import annotations

import torch
import transformers
from torch import nn

from ..errors import ConfigError
from ..models.xlnet import XLNetConfig, XLNetForSequenceClassification, XLNetLMHeadModel
from .common import (
    ACT_FROM_HF,
    ACT_TO_HF,
    check_same_keys,
    check_single_label,
    hf_class,
    like,
    load_exactly,
    our_class,
    tensor_names,
    translate_activation,
)

XLNetHead = XLNetLMHeadModel | XLNetForSequenceClassification

_CLASSES = {XLNetLMHeadModel: "XLNetLMHeadModel", XLNetForSequenceClassification: "XLNetForSequenceClassification"}
_BIASES = ("r_w_bias", "r_r_bias", "r_s_bias")
_PROJECTIONS = ("q", "k", "v", "r")  # (inner, d_model) Linear weights <-> (d_model, n_head, d_head)
_LAYER_MODULES = [("rel_attn.layer_norm", "rel_attn.norm"), ("ff.layer_1", "ff.fc1"), ("ff.layer_2", "ff.fc2"),
                  ("ff.layer_norm", "ff.norm")]  # transformers -> ours, under layer(s).i.


# ----------------------------------------------------------------------------- configs


def xlnet_config_to_hf(config: XLNetConfig, num_labels: int = 2, classifier_dropout: float = 0.1,
                       **token_ids: int | None) -> transformers.XLNetConfig:
    """transformers' ``XLNetConfig`` for ours. ``token_ids``: ``pad_token_id``, ``bos_token_id``,
    ``eos_token_id`` (None unless given)."""
    if config.d_head * config.n_heads != config.d_model:
        raise ConfigError(f"transformers' XLNet needs d_head = d_model / n_heads; got d_head {config.d_head}, "
                          f"d_model {config.d_model}, n_heads {config.n_heads}")
    use_mems = config.mem_len > 0
    extra = {"problem_type": "regression"} if num_labels == 1 else {}
    return transformers.XLNetConfig(
        vocab_size=config.vocab_size,
        d_model=config.d_model,
        n_layer=config.n_layers,
        n_head=config.n_heads,
        d_head=config.d_head,
        d_inner=config.d_inner,
        ff_activation=translate_activation(ACT_TO_HF, config.act, "transformers' XLNet"),
        untie_r=config.untie_r,
        attn_type=config.attn_type,
        mem_len=config.mem_len if use_mems else None,
        reuse_len=config.reuse_len or None,
        use_mems_eval=use_mems,
        use_mems_train=use_mems,
        bi_data=config.bi_data,
        clamp_len=config.clamp_len,
        same_length=config.same_length,
        dropout=config.dropout,
        layer_norm_eps=config.eps,
        initializer_range=config.init_std,
        num_labels=num_labels,
        summary_type="last",
        summary_use_proj=True,
        summary_activation="tanh",
        summary_last_dropout=classifier_dropout,
        tie_word_embeddings=True,
        **{"pad_token_id": None, "bos_token_id": None, "eos_token_id": None, **extra, **token_ids},
    )


def xlnet_config_from_hf(hf_config: transformers.XLNetConfig) -> XLNetConfig:
    """Our ``XLNetConfig`` for transformers'; options we do not implement are an error."""
    if not getattr(hf_config, "tie_word_embeddings", True):
        raise ConfigError("the LM output layer must be tied to the word embeddings (tie_word_embeddings)")
    return XLNetConfig(
        vocab_size=hf_config.vocab_size,
        d_model=hf_config.d_model,
        n_layers=hf_config.n_layer,
        n_heads=hf_config.n_head,
        d_head=hf_config.d_head,
        d_inner=hf_config.d_inner,
        act=translate_activation(ACT_FROM_HF, hf_config.ff_activation, "XLNetConfig.ff_activation"),
        untie_r=bool(getattr(hf_config, "untie_r", True)),
        attn_type=hf_config.attn_type,
        mem_len=hf_config.mem_len or 0,
        reuse_len=hf_config.reuse_len or 0,
        bi_data=hf_config.bi_data,
        clamp_len=hf_config.clamp_len,
        same_length=bool(hf_config.same_length) and hf_config.attn_type == "uni",  # ignored by "bi" there
        dropout=float(hf_config.dropout),
        eps=hf_config.layer_norm_eps,
        init_std=hf_config.initializer_range,
    )


def _classifier_settings(hf_config: transformers.XLNetConfig) -> dict:
    wanted = {"summary_type": "last", "summary_use_proj": True, "summary_activation": "tanh"}
    for key, value in wanted.items():
        if getattr(hf_config, key, None) != value:
            raise ConfigError(f"{key} {getattr(hf_config, key, None)!r} is not supported (we summarise with {value!r})")
    if getattr(hf_config, "summary_proj_to_labels", False):
        raise ConfigError("summary_proj_to_labels is not supported (our summary keeps d_model)")
    if getattr(hf_config, "summary_first_dropout", 0) or 0:
        raise ConfigError("summary_first_dropout is not supported")
    check_single_label(hf_config)
    return dict(num_labels=hf_config.num_labels, classifier_dropout=float(hf_config.summary_last_dropout or 0.0))


# ----------------------------------------------------------------------------- weights


def _plain_names(model: XLNetHead) -> dict[str, str]:
    """transformers name -> our name, for the tensors copied as they are."""
    names = {"transformer.word_embedding.weight": "transformer.word_embedding.weight",
             "transformer.mask_emb": "transformer.mask_emb"}
    modules = {}
    for i in range(model.config.n_layers):
        theirs, ours = f"transformer.layer.{i}.", f"transformer.layers.{i}."
        names[theirs + "rel_attn.seg_embed"] = ours + "rel_attn.seg_embed"
        modules |= {theirs + t: ours + o for t, o in _LAYER_MODULES}
    if isinstance(model, XLNetLMHeadModel):
        names["lm_loss.bias"] = "lm_bias"
    else:
        modules |= {"sequence_summary.summary": "summary", "logits_proj": "logits_proj"}
    return names | tensor_names(modules)


def _to_hf_state(model: XLNetHead) -> dict[str, torch.Tensor]:
    c = model.config
    ours = model.state_dict()
    state = {theirs: ours[name] for theirs, name in _plain_names(model).items()}
    for i in range(c.n_layers):
        theirs, mine = f"transformer.layer.{i}.rel_attn.", f"transformer.layers.{i}.rel_attn."
        for p in _PROJECTIONS:  # (H d, D) -> (D, H, d)
            state[theirs + p] = ours[f"{mine}{p}.weight"].t().reshape(c.d_model, c.n_heads, c.d_head)
        state[theirs + "o"] = ours[mine + "o.weight"].reshape(c.d_model, c.n_heads, c.d_head)  # (D, H d) -> (D, H, d)
        for b in _BIASES:  # per layer in transformers: the shared set is copied into every layer
            state[theirs + b] = ours[mine + b] if c.untie_r else ours[f"transformer.{b}"]
    if isinstance(model, XLNetLMHeadModel):
        state["lm_loss.weight"] = state["transformer.word_embedding.weight"]
    return {k: v.clone() for k, v in state.items()}


def _from_hf_state(hf: nn.Module, model: XLNetHead) -> dict[str, torch.Tensor]:
    c = model.config
    theirs = hf.state_dict()
    state = {name: theirs[t] for t, name in _plain_names(model).items()}
    for i in range(c.n_layers):
        t, mine = f"transformer.layer.{i}.rel_attn.", f"transformer.layers.{i}.rel_attn."
        for p in _PROJECTIONS:
            state[f"{mine}{p}.weight"] = theirs[t + p].reshape(c.d_model, c.n_heads * c.d_head).t()
        state[mine + "o.weight"] = theirs[t + "o"].reshape(c.d_model, c.n_heads * c.d_head)
        for b in _BIASES:
            if c.untie_r:
                state[mine + b] = theirs[t + b]
            elif not torch.equal(theirs[t + b], theirs[f"transformer.layer.0.rel_attn.{b}"]):
                raise ConfigError(f"untie_r is False but layer {i}'s {b} differs from layer 0's")
    if not c.untie_r:
        for b in _BIASES:
            state[f"transformer.{b}"] = theirs[f"transformer.layer.0.rel_attn.{b}"]
    used = set(_plain_names(model)) | {f"transformer.layer.{i}.rel_attn.{p}" for i in range(c.n_layers)
                                       for p in (*_PROJECTIONS, "o", *_BIASES)}
    if isinstance(model, XLNetLMHeadModel):
        if not torch.equal(theirs["lm_loss.weight"], theirs["transformer.word_embedding.weight"]):
            raise ConfigError("lm_loss.weight differs from the word embeddings: untied output layers do not convert")
        used.add("lm_loss.weight")
    check_same_keys(used, set(theirs), type(hf).__name__)
    return {k: v.clone() for k, v in state.items()}


# ----------------------------------------------------------------------------- public


def xlnet_to_hf(model: XLNetHead, **token_ids: int | None) -> transformers.PreTrainedModel:
    """Our ``XLNetLMHeadModel`` / ``XLNetForSequenceClassification`` -> transformers' model of
    the same head, same weights (and the same train / eval mode and dtype)."""
    hf_cls = hf_class(model, _CLASSES)
    head = {}
    if isinstance(model, XLNetForSequenceClassification):
        head = dict(num_labels=model.num_labels, classifier_dropout=model.classifier_dropout)
    hf = hf_cls(xlnet_config_to_hf(model.config, **head, **token_ids))
    load_exactly(hf, _to_hf_state(model), f"{type(model).__name__} -> {hf_cls.__name__}")
    return like(hf, model)


def xlnet_from_hf(hf_model: transformers.PreTrainedModel) -> XLNetHead:
    """transformers' ``XLNetLMHeadModel`` / ``XLNetForSequenceClassification`` -> ours, same weights."""
    ours_class = our_class(hf_model, _CLASSES)
    config = xlnet_config_from_hf(hf_model.config)
    if ours_class is XLNetForSequenceClassification:
        model = ours_class(config, **_classifier_settings(hf_model.config))
    else:
        model = ours_class(config)
    model.load_state_dict(_from_hf_state(hf_model, model), strict=True)
    return like(model, hf_model)
