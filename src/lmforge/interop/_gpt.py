"""Our GPT (``models/gpt.py``) to and from ``transformers``' GPT-2 and OpenAI GPT (GPT-1).

What differs in the stored weights:

- transformers keeps the linear layers of both models as ``Conv1D``: ``y = x @ W + b`` with
  ``W`` stored (in, out), the transpose of ``nn.Linear``'s (out, in);
- the attention input projection ``c_attn`` is q, k and v fused along the output axis
  (in, 3 * D), where we keep three linears;
- the output projection ``lm_head`` is tied to the token embedding; we compute the logits from
  the embedding directly, so it has no key of its own.

Architectures: ``GPT2LMHeadModel`` is pre-LN with a final LN (``norm_first=True``);
``OpenAIGPTLMHeadModel`` is post-LN without one (``norm_first=False``) and fixes the FFN width at
4 x the model width. The ``...ForSequenceClassification`` models of both map to
``GPTForSequenceClassification`` (a bias-free ``score`` layer on the last real token); they
find that token through ``pad_token_id``, so pass it when exporting a classifier. Our
``classifier_dropout`` and ``lm_coef`` have no counterpart there: they are dropped on export and
take their defaults on import (outputs in eval mode are unaffected).

transformers' OpenAI GPT calls the tanh approximation of GELU "gelu" (its ``ACT_FNS["gelu"]``
is ``gelu_new``); GPT-2 calls it "gelu_new", as BERT does (the shared tables in common.py).
"""

from __future__ import annotations

import torch
import transformers
from torch import nn

from ..models.gpt import GPTConfig, GPTForSequenceClassification, GPTLMHeadModel
from ..errors import ConfigError
from .common import ACT_FROM_HF, ACT_TO_HF, hf_class, like, our_class, translate_activation

GPTHead = GPTLMHeadModel | GPTForSequenceClassification

_ACT_TO_OPENAI = {"gelu_tanh": "gelu", "relu": "relu"}
_ACT_FROM_OPENAI = {"gelu": "gelu_tanh", "relu": "relu"}


# ----------------------------------------------------------------------------- configs


def _hf_kwargs(config: GPTConfig, num_labels: int, token_ids: dict) -> dict:
    """What ``GPT2Config`` and ``OpenAIGPTConfig`` name alike."""
    if config.local_attention_window is not None:
        raise ConfigError("transformers' GPT-2 and OpenAI GPT attend densely in every layer: a model with "
                          "local_attention_window (GPT-3's banded layers) has no counterpart there")
    return dict(
        vocab_size=config.vocab_size,
        n_positions=config.n_positions,
        n_embd=config.d_model,
        n_layer=config.n_layers,
        n_head=config.n_heads,
        resid_pdrop=config.dropout,
        embd_pdrop=config.embd_dropout,
        attn_pdrop=config.attn_dropout,
        layer_norm_epsilon=config.eps,
        initializer_range=config.init_std,
        num_labels=num_labels,
        **{"bos_token_id": None, "eos_token_id": None, "pad_token_id": None, **token_ids},
    )


def _our_kwargs(hf_config) -> dict:
    """Our ``GPTConfig`` settings that ``GPT2Config`` and ``OpenAIGPTConfig`` name alike."""
    return dict(
        vocab_size=hf_config.vocab_size,
        n_positions=hf_config.n_positions,
        d_model=hf_config.n_embd,
        n_layers=hf_config.n_layer,
        n_heads=hf_config.n_head,
        dropout=hf_config.resid_pdrop,
        attn_dropout=hf_config.attn_pdrop,
        embd_dropout=hf_config.embd_pdrop,
        eps=hf_config.layer_norm_epsilon,
        init_std=hf_config.initializer_range,
    )


def gpt2_config_to_hf(config: GPTConfig, num_labels: int = 2, **token_ids: int | None) -> transformers.GPT2Config:
    """A ``GPT2Config`` for ``config`` (which must be GPT-2 shaped: ``norm_first=True``).
    ``token_ids``: ``bos_token_id``, ``eos_token_id``, ``pad_token_id`` (None unless given)."""
    if not config.norm_first:
        raise ConfigError("GPT-2 in transformers is pre-LN: export a norm_first=False (GPT-1) model with openai_gpt_to_hf")
    return transformers.GPT2Config(n_inner=config.d_ff,
                                   activation_function=translate_activation(ACT_TO_HF, config.act, "GPT-2"),
                                   **_hf_kwargs(config, num_labels, token_ids))


def gpt2_config_from_hf(hf_config: transformers.GPT2Config) -> GPTConfig:
    """Our ``GPTConfig`` for a ``GPT2Config``; options we do not implement are an error."""
    unsupported = {
        "scale_attn_weights": (hf_config.scale_attn_weights, True),
        "scale_attn_by_inverse_layer_idx": (hf_config.scale_attn_by_inverse_layer_idx, False),
        "add_cross_attention": (hf_config.add_cross_attention, False),
        "tie_word_embeddings": (hf_config.tie_word_embeddings, True),
    }
    for name, (value, expected) in unsupported.items():
        if value != expected:
            raise ConfigError(f"GPT2Config.{name}={value} is not supported (only {expected})")
    return GPTConfig(
        d_ff=hf_config.n_inner if hf_config.n_inner is not None else 4 * hf_config.n_embd,
        act=translate_activation(ACT_FROM_HF, hf_config.activation_function, "GPT2Config.activation_function"),
        norm_first=True,
        scaled_residual_init=True,
        **_our_kwargs(hf_config),
    )


def openai_gpt_config_to_hf(config: GPTConfig, num_labels: int = 2, **token_ids: int | None):
    """An ``OpenAIGPTConfig`` for ``config`` (GPT-1 shaped: post-LN, ``d_ff == 4 * d_model``)."""
    transformers_openai = _openai()
    if config.norm_first:
        raise ConfigError("OpenAI GPT in transformers is post-LN: export a norm_first=True (GPT-2) model with gpt2_to_hf")
    if config.d_ff != 4 * config.d_model:
        raise ConfigError(f"OpenAI GPT in transformers fixes d_ff = 4 * d_model = {4 * config.d_model}, got {config.d_ff}")
    return transformers_openai.OpenAIGPTConfig(afn=translate_activation(_ACT_TO_OPENAI, config.act, "OpenAI GPT"),
                                               **_hf_kwargs(config, num_labels, token_ids))


def openai_gpt_config_from_hf(hf_config) -> GPTConfig:
    """Our ``GPTConfig`` (post-LN, GPT-1 initialisation) for an ``OpenAIGPTConfig``."""
    if not hf_config.tie_word_embeddings:
        raise ConfigError("OpenAIGPTConfig.tie_word_embeddings=False is not supported")
    return GPTConfig(
        d_ff=4 * hf_config.n_embd,
        act=translate_activation(_ACT_FROM_OPENAI, hf_config.afn, "OpenAIGPTConfig.afn"),
        norm_first=False,
        scaled_residual_init=False,
        **_our_kwargs(hf_config),
    )


def _openai():
    """transformers' OpenAI GPT classes (present in 4.x and 5.x; a clear error if a release drops them)."""
    if not hasattr(transformers, "OpenAIGPTLMHeadModel"):
        raise ImportError(f"transformers {transformers.__version__} has no OpenAI GPT (OpenAIGPTLMHeadModel)")
    return transformers


# ----------------------------------------------------------------------------- weights


# per block: our module -> transformers' module, for the layers that are not fused
_BLOCK = {"norm1": "ln_1", "norm2": "ln_2", "attn.out": "attn.c_proj", "ffn.fc1": "mlp.c_fc", "ffn.fc2": "mlp.c_proj"}
_CONV1D = {"attn.out", "ffn.fc1", "ffn.fc2"}  # stored transposed by transformers


def _state_to_hf(ours: dict[str, torch.Tensor], config: GPTConfig, wte: str, wpe: str, ln_f: bool) -> dict[str, torch.Tensor]:
    """Our state dict -> transformers' (prefix ``transformer.``, Conv1D layout, fused c_attn)."""
    out = {f"transformer.{wte}.weight": ours["gpt.wte.weight"], f"transformer.{wpe}.weight": ours["gpt.wpe.weight"]}
    for i in range(config.n_layers):
        src, dst = f"gpt.blocks.{i}.", f"transformer.h.{i}."
        for mine, theirs in _BLOCK.items():
            weight = ours[f"{src}{mine}.weight"]
            out[f"{dst}{theirs}.weight"] = weight.t().contiguous() if mine in _CONV1D else weight
            out[f"{dst}{theirs}.bias"] = ours[f"{src}{mine}.bias"]
        # q, k, v (D, D) each, as Linear (out, in) -> c_attn (D, 3D) as Conv1D (in, out)
        out[f"{dst}attn.c_attn.weight"] = torch.cat([ours[f"{src}attn.{p}.weight"].t() for p in "qkv"], dim=1)
        out[f"{dst}attn.c_attn.bias"] = torch.cat([ours[f"{src}attn.{p}.bias"] for p in "qkv"])
    if ln_f:
        out["transformer.ln_f.weight"], out["transformer.ln_f.bias"] = ours["gpt.ln_f.weight"], ours["gpt.ln_f.bias"]
    if "score.weight" in ours:
        out["score.weight"] = ours["score.weight"]
    else:
        out["lm_head.weight"] = ours["gpt.wte.weight"]  # tied
    return out


def _state_from_hf(theirs: dict[str, torch.Tensor], config: GPTConfig, wte: str, wpe: str, ln_f: bool) -> dict[str, torch.Tensor]:
    """transformers' state dict -> ours (the inverse of ``_state_to_hf``)."""
    D = config.d_model
    out = {"gpt.wte.weight": theirs[f"transformer.{wte}.weight"], "gpt.wpe.weight": theirs[f"transformer.{wpe}.weight"]}
    for i in range(config.n_layers):
        src, dst = f"transformer.h.{i}.", f"gpt.blocks.{i}."
        for mine, their in _BLOCK.items():
            weight = theirs[f"{src}{their}.weight"]
            out[f"{dst}{mine}.weight"] = weight.t().contiguous() if mine in _CONV1D else weight
            out[f"{dst}{mine}.bias"] = theirs[f"{src}{their}.bias"]
        weight, bias = theirs[f"{src}attn.c_attn.weight"], theirs[f"{src}attn.c_attn.bias"]  # (D, 3D), (3D,)
        for j, p in enumerate("qkv"):
            out[f"{dst}attn.{p}.weight"] = weight[:, j * D : (j + 1) * D].t().contiguous()
            out[f"{dst}attn.{p}.bias"] = bias[j * D : (j + 1) * D]
    if ln_f:
        out["gpt.ln_f.weight"], out["gpt.ln_f.bias"] = theirs["transformer.ln_f.weight"], theirs["transformer.ln_f.bias"]
    if "score.weight" in theirs:
        out["score.weight"] = theirs["score.weight"]
    elif "lm_head.weight" in theirs and not torch.equal(theirs["lm_head.weight"], out["gpt.wte.weight"]):
        raise ConfigError("lm_head.weight differs from the token embedding: untied output layers are not supported")
    return out


def _export(model: GPTHead, hf_config, classes: dict[type, str], wte: str, wpe: str, ln_f: bool) -> nn.Module:
    hf = hf_class(model, classes)(hf_config)
    hf.load_state_dict(_state_to_hf(model.state_dict(), model.config, wte, wpe, ln_f), strict=True)
    return like(hf, model)


def _import(hf_model: nn.Module, config: GPTConfig, classes: dict[type, str], wte: str, wpe: str, ln_f: bool) -> GPTHead:
    ours_class = our_class(hf_model, classes)
    if ours_class is GPTForSequenceClassification:
        model = ours_class(config, num_labels=hf_model.config.num_labels)
    else:
        model = ours_class(config)
    model.load_state_dict(_state_from_hf(hf_model.state_dict(), config, wte, wpe, ln_f), strict=True)
    return like(model, hf_model)


# ----------------------------------------------------------------------------- GPT-2


_GPT2_CLASSES = {GPTLMHeadModel: "GPT2LMHeadModel", GPTForSequenceClassification: "GPT2ForSequenceClassification"}


def gpt2_to_hf(model: GPTHead, **token_ids: int | None) -> nn.Module:
    """``GPTLMHeadModel`` -> ``GPT2LMHeadModel``; ``GPTForSequenceClassification`` ->
    ``GPT2ForSequenceClassification`` (pass ``pad_token_id`` for batches of more than one row)."""
    config = gpt2_config_to_hf(model.config, getattr(model, "num_labels", 2), **token_ids)
    return _export(model, config, _GPT2_CLASSES, "wte", "wpe", ln_f=True)


def gpt2_from_hf(hf_model: nn.Module) -> GPTHead:
    """``GPT2LMHeadModel`` -> ``GPTLMHeadModel``; ``GPT2ForSequenceClassification`` -> ``GPTForSequenceClassification``."""
    return _import(hf_model, gpt2_config_from_hf(hf_model.config), _GPT2_CLASSES, "wte", "wpe", ln_f=True)


# ----------------------------------------------------------------------------- OpenAI GPT (GPT-1)


_OPENAI_CLASSES = {GPTLMHeadModel: "OpenAIGPTLMHeadModel", GPTForSequenceClassification: "OpenAIGPTForSequenceClassification"}


def openai_gpt_to_hf(model: GPTHead, **token_ids: int | None) -> nn.Module:
    """A post-LN ``GPTLMHeadModel`` -> ``OpenAIGPTLMHeadModel`` (classifier ->
    ``OpenAIGPTForSequenceClassification``; pass ``pad_token_id`` for batches of more than one row)."""
    config = openai_gpt_config_to_hf(model.config, getattr(model, "num_labels", 2), **token_ids)
    return _export(model, config, _OPENAI_CLASSES, "tokens_embed", "positions_embed", ln_f=False)


def openai_gpt_from_hf(hf_model: nn.Module) -> GPTHead:
    """``OpenAIGPTLMHeadModel`` -> ``GPTLMHeadModel``; ``OpenAIGPTForSequenceClassification`` ->
    ``GPTForSequenceClassification``."""
    return _import(hf_model, openai_gpt_config_from_hf(hf_model.config), _OPENAI_CLASSES, "tokens_embed",
                   "positions_embed", ln_f=False)
