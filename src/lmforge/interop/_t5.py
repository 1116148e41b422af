"""T5 and Switch Transformer <-> Hugging Face transformers: configs, weights, identical outputs.

``t5_to_hf(model)`` gives ``transformers.T5ForConditionalGeneration`` (or
``T5ForSequenceClassification``) with our weights, ``t5_from_hf(hf_model)`` the reverse;
``switch_to_hf`` / ``switch_from_hf`` the same for ``SwitchTransformersForConditionalGeneration``.

The same tensors under other names (``_stack_names``), except in three places:

- transformers keeps the relative position bias in the first block's self-attention
  (``block.0.layer.0.SelfAttention.relative_attention_bias``); we keep it on the stack;
- transformers' state dict also lists ``encoder.embed_tokens`` and ``decoder.embed_tokens``
  (and ``lm_head`` when tied), the same tensor as ``shared``;
- Switch experts: transformers has one ``DenseActDense`` per expert (``experts.expert_j.wi``,
  (F, D)); we stack them, ``experts.wi`` (E, D, F), so expert ``j`` is the transpose of slice ``j``.

Traps: transformers 5's ``T5Config`` forces ``tie_word_embeddings=True`` (the given value
survives only as ``scale_decoder_outputs``), so ``t5_to_hf`` unties ``lm_head`` for an untied
model of ours and ``t5_from_hf`` reads the rescale from ``scale_decoder_outputs``
(docs/MODELS.md, "Converting T5"). transformers' Switch capacity is fixed per sequence:
``switch_from_hf`` fixes ours to it; ``switch_to_hf`` writes ours, or, for a factor-based model,
the eval capacity of a ``sequence_length``-token sequence (512 by default).

What does not convert is an error, never a silent approximation: an activation we do not
have, an untied output layer with the v1.0 rescale, a multi-label classifier, a Switch
sparse-layer pattern transformers cannot express, gated Switch experts, a router bias.
"""

from __future__ import annotations

import torch
import transformers
from torch import nn

from ..models import switch, t5
from ..errors import ConfigError
from .common import (
    check_single_label,
    classifier_settings,
    hf_class,
    like,
    load_into_hf,
    our_class,
    state_from_hf,
    tensor_names,
    translate_activation,
)

_FFN_TO_HF = {"relu": "relu", "gated-gelu": "gated-gelu"}  # the same names on both sides

_ATTN = [("q", "q"), ("k", "k"), ("v", "v"), ("o", "o")]


# ----------------------------------------------------------------------------- configs


def _common_hf_kwargs(config: t5.T5Config) -> dict:
    return dict(
        vocab_size=config.vocab_size,
        d_model=config.d_model,
        d_kv=config.d_kv,
        d_ff=config.d_ff,
        num_layers=config.n_layers,
        num_decoder_layers=config.n_decoder_layers,
        num_heads=config.n_heads,
        relative_attention_num_buckets=config.relative_buckets,
        relative_attention_max_distance=config.relative_max_distance,
        dropout_rate=config.dropout,
        layer_norm_epsilon=config.eps,
        initializer_factor=config.init_factor,
        pad_token_id=config.pad_id,
        eos_token_id=config.eos_id,
        decoder_start_token_id=config.decoder_start_id,
        tie_word_embeddings=config.tie_word_embeddings,
    )


def _common_our_kwargs(hf_config, tied: bool, generation_config=None) -> dict:
    if isinstance(hf_config.eos_token_id, (list, tuple)):
        raise ConfigError(f"several eos ids {hf_config.eos_token_id} are not supported")
    # transformers 5 keeps decoder_start_token_id only when it was given (else in the
    # generation config, else it is the pad id, as T5's _shift_right requires)
    start = getattr(hf_config, "decoder_start_token_id", None)
    if start is None and generation_config is not None:
        start = getattr(generation_config, "decoder_start_token_id", None)
    return dict(
        vocab_size=hf_config.vocab_size,
        d_model=hf_config.d_model,
        d_kv=hf_config.d_kv,
        d_ff=hf_config.d_ff,
        n_layers=hf_config.num_layers,
        n_decoder_layers=hf_config.num_decoder_layers,
        n_heads=hf_config.num_heads,
        relative_buckets=hf_config.relative_attention_num_buckets,
        relative_max_distance=hf_config.relative_attention_max_distance,
        tie_word_embeddings=tied,
        dropout=float(hf_config.dropout_rate),
        eps=hf_config.layer_norm_epsilon,
        pad_id=hf_config.pad_token_id,
        eos_id=hf_config.eos_token_id,
        decoder_start_id=hf_config.pad_token_id if start is None else start,
        init_factor=float(hf_config.initializer_factor),
    )


def t5_hf_config(config: t5.T5Config, **extra) -> transformers.T5Config:
    """transformers' T5Config for ours (``extra``: e.g. ``num_labels``)."""
    return transformers.T5Config(feed_forward_proj=_FFN_TO_HF[config.ffn], **_common_hf_kwargs(config), **extra)


def _t5_our_config(hf_config: transformers.T5Config, tied: bool, generation_config=None) -> t5.T5Config:
    ffn = translate_activation(_FFN_TO_HF, hf_config.feed_forward_proj, "T5Config.feed_forward_proj")
    return t5.T5Config(ffn=ffn, **_common_our_kwargs(hf_config, tied, generation_config))


# ----------------------------------------------------------------------------- names


def _stack_names(stack: str, n_layers: int, is_decoder: bool, ffn_names) -> dict[str, str]:
    """transformers name -> our name for one stack (``ffn_names(i)``: the FFN's pairs)."""
    pairs = {f"{stack}.block.0.layer.0.SelfAttention.relative_attention_bias.weight": f"{stack}.relative_bias.weight",
             f"{stack}.final_layer_norm.weight": f"{stack}.final_norm.weight"}
    for i in range(n_layers):
        theirs, ours = f"{stack}.block.{i}.layer", f"{stack}.layers.{i}"
        for a, b in _ATTN:
            pairs[f"{theirs}.0.SelfAttention.{a}.weight"] = f"{ours}.self_attn.{b}.weight"
        pairs[f"{theirs}.0.layer_norm.weight"] = f"{ours}.self_attn_norm.weight"
        ff = 1
        if is_decoder:
            for a, b in _ATTN:
                pairs[f"{theirs}.1.EncDecAttention.{a}.weight"] = f"{ours}.cross_attn.{b}.weight"
            pairs[f"{theirs}.1.layer_norm.weight"] = f"{ours}.cross_attn_norm.weight"
            ff = 2
        pairs[f"{theirs}.{ff}.layer_norm.weight"] = f"{ours}.ffn_norm.weight"
        for a, b in ffn_names(i):
            pairs[f"{theirs}.{ff}.{a}"] = f"{ours}.ffn.{b}"
    return pairs


def _t5_ffn_names(gated: bool):
    def names(i: int):
        if gated:
            return [("DenseReluDense.wi_0.weight", "wi.weight"), ("DenseReluDense.wi_1.weight", "wi_linear.weight"),
                    ("DenseReluDense.wo.weight", "wo.weight")]
        return [("DenseReluDense.wi.weight", "wi.weight"), ("DenseReluDense.wo.weight", "wo.weight")]
    return names


def _backbone_names(config: t5.T5Config, ffn_names, hf_prefix: str = "") -> dict[str, str]:
    pairs = {"shared.weight": "shared.weight"}
    pairs |= _stack_names("encoder", config.n_layers, False, ffn_names)
    pairs |= _stack_names("decoder", config.n_decoder_layers, True, ffn_names)
    return {f"{hf_prefix}{k}": v for k, v in pairs.items()}


def _tied_copies(hf_prefix: str = "", lm_head: bool = False) -> dict[str, str]:
    """transformers' copies of the shared embedding: name -> ``shared.weight``."""
    copies = {f"{hf_prefix}encoder.embed_tokens.weight": f"{hf_prefix}shared.weight",
              f"{hf_prefix}decoder.embed_tokens.weight": f"{hf_prefix}shared.weight"}
    if lm_head:
        copies["lm_head.weight"] = "shared.weight"
    return copies


def untie_lm_head(hf: transformers.PreTrainedModel, weight: torch.Tensor | None = None) -> None:
    """Give a transformers seq2seq model its own ``lm_head`` (a copy of the embedding unless
    ``weight`` is given), so that it is saved, loaded and trained as a separate matrix."""
    source = hf.shared.weight if weight is None else weight
    hf.lm_head.weight = nn.Parameter(source.detach().clone(), requires_grad=hf.shared.weight.requires_grad)
    tied = getattr(hf, "all_tied_weights_keys", None)
    if isinstance(tied, dict):
        tied.pop("lm_head.weight", None)


def _lm_head_tied_in_hf(hf: nn.Module) -> bool:
    return hf.lm_head.weight is hf.shared.weight or torch.equal(hf.lm_head.weight, hf.shared.weight)


# ----------------------------------------------------------------------------- T5


_T5_CLASSES = {t5.T5ForConditionalGeneration: "T5ForConditionalGeneration",
               t5.T5ForSequenceClassification: "T5ForSequenceClassification"}


def _t5_names(model: nn.Module) -> tuple[dict[str, str], dict[str, str]]:
    """transformers name -> ours, and transformers' tied copies, for our T5 ``model``."""
    config = model.config
    ffn_names = _t5_ffn_names(config.ffn == "gated-gelu")
    if isinstance(model, t5.T5ForSequenceClassification):
        names = _backbone_names(config, ffn_names, "transformer.")
        names |= tensor_names({"classification_head.dense": "classifier.dense",
                               "classification_head.out_proj": "classifier.out_proj"})
        return names, _tied_copies("transformer.")
    names = _backbone_names(config, ffn_names)
    if not config.tie_word_embeddings:  # untied in ours; transformers 5 may hold it tied (see the module docstring)
        names["lm_head.weight"] = "lm_head.weight"
    return names, _tied_copies(lm_head=config.tie_word_embeddings)


def t5_to_hf(model: nn.Module) -> transformers.PreTrainedModel:
    """Our ``T5ForConditionalGeneration`` / ``T5ForSequenceClassification`` -> transformers',
    same weights, same outputs."""
    hf_cls = hf_class(model, _T5_CLASSES)
    extra = classifier_settings(model) if isinstance(model, t5.T5ForSequenceClassification) else {}
    hf = hf_cls(t5_hf_config(model.config, **extra))
    if isinstance(model, t5.T5ForConditionalGeneration) and not model.config.tie_word_embeddings:
        untie_lm_head(hf)
    load_into_hf(hf, model.state_dict(), *_t5_names(model), type(model).__name__)
    return like(hf, model)


def t5_from_hf(hf_model: transformers.PreTrainedModel) -> nn.Module:
    """transformers' ``T5ForConditionalGeneration`` / ``T5ForSequenceClassification`` -> ours."""
    our_cls = our_class(hf_model, _T5_CLASSES)
    hf_config = hf_model.config
    generation_config = getattr(hf_model, "generation_config", None)
    if our_cls is t5.T5ForSequenceClassification:
        check_single_label(hf_config)
        config = _t5_our_config(hf_config, getattr(hf_config, "scale_decoder_outputs", True), generation_config)
        model = our_cls(config, num_labels=hf_config.num_labels, classifier_dropout=float(hf_config.classifier_dropout))
    else:
        scaled = getattr(hf_config, "scale_decoder_outputs", hf_config.tie_word_embeddings)
        if scaled and not _lm_head_tied_in_hf(hf_model):
            raise ConfigError("an lm_head that differs from the embedding with the d_model**-0.5 rescale "
                              "(scale_decoder_outputs) has no equivalent: tie_word_embeddings means both")
        model = our_cls(_t5_our_config(hf_config, scaled, generation_config))
    state = state_from_hf(hf_model.state_dict(), *_t5_names(model), f"{type(hf_model).__name__} -> {our_cls.__name__}")
    model.load_state_dict(state, strict=True)
    return like(model, hf_model)


# ----------------------------------------------------------------------------- Switch


def _sparse_layers(n_layers: int, step: int) -> list[int]:
    """The sparse blocks for transformers' rule (layer i is sparse when step == 1 or i % step == 1)."""
    if step <= 0:
        return []
    return [i for i in range(n_layers) if step == 1 or i % step == 1]


def _hf_num_sparse(n_layers: int, step: int, stack: str) -> int:
    """transformers' num_sparse_*_layers giving the same sparse blocks as our step."""
    wanted = _sparse_layers(n_layers, step)
    for n in range(1, n_layers + 1):
        if _sparse_layers(n_layers, n_layers // n) == wanted:
            return n
    raise ConfigError(f"the {stack}'s sparse layers {wanted} ({n_layers} layers, sparse step {step}) cannot be "
                      f"expressed by transformers' num_sparse_{stack}_layers")


def _our_step(n_layers: int, hf_step: int) -> int:
    """The smallest step of ours giving transformers' sparse blocks (a canonical form, so that
    ours -> transformers -> ours keeps the config)."""
    wanted = _sparse_layers(n_layers, hf_step)
    for step in range(1, n_layers + 2):
        if _sparse_layers(n_layers, step) == wanted:
            return step
    raise ConfigError(f"transformers' sparse step {hf_step} for {n_layers} layers has no equivalent")  # unreachable


def switch_hf_config(config: switch.SwitchConfig, sequence_length: int = 512) -> transformers.SwitchTransformersConfig:
    """transformers' config for ours. Its capacity is fixed per sequence: ours when fixed,
    else our eval capacity for a ``sequence_length``-token sequence."""
    if config.ffn != "relu":
        raise ConfigError(f"transformers' Switch experts have no gated feed-forward layer (ffn={config.ffn!r})")
    capacity = config.expert_capacity or switch.expert_capacity(sequence_length, config, training=False)
    return transformers.SwitchTransformersConfig(
        **_common_hf_kwargs(config),
        dense_act_fn="relu",
        num_experts=config.num_experts,
        expert_capacity=capacity,
        num_sparse_encoder_layers=_hf_num_sparse(config.n_layers, config.encoder_sparse_step, "encoder"),
        num_sparse_decoder_layers=_hf_num_sparse(config.n_decoder_layers, config.decoder_sparse_step, "decoder"),
        router_bias=False,
        router_jitter_noise=config.router_jitter,
        router_dtype="float32",
        router_z_loss_coef=config.router_z_loss_coef,
        router_aux_loss_coef=config.router_aux_loss_coef,
    )


def _switch_our_config(hf_config: transformers.SwitchTransformersConfig, generation_config=None) -> switch.SwitchConfig:
    if hf_config.dense_act_fn != "relu" or getattr(hf_config, "is_gated_act", False):
        raise ConfigError(f"dense_act_fn {hf_config.dense_act_fn!r} has no equivalent (only relu experts)")
    if hf_config.router_bias:
        raise ConfigError("a router bias is not supported (router_bias=True)")
    if hf_config.router_dtype != "float32":
        raise ConfigError(f"the router runs in float32; router_dtype {hf_config.router_dtype!r} is not supported")
    return switch.SwitchConfig(
        ffn="relu",
        num_experts=hf_config.num_experts,
        expert_capacity=hf_config.expert_capacity,
        encoder_sparse_step=_our_step(hf_config.num_layers, hf_config.encoder_sparse_step),
        decoder_sparse_step=_our_step(hf_config.num_decoder_layers, hf_config.decoder_sparse_step),
        router_jitter=float(hf_config.router_jitter_noise),
        router_z_loss_coef=float(hf_config.router_z_loss_coef),
        router_aux_loss_coef=float(hf_config.router_aux_loss_coef),
        **_common_our_kwargs(hf_config, hf_config.tie_word_embeddings, generation_config),
    )


def _switch_names(config: switch.SwitchConfig) -> dict[str, str]:
    enc_sparse = set(_sparse_layers(config.n_layers, config.encoder_sparse_step))
    dec_sparse = set(_sparse_layers(config.n_decoder_layers, config.decoder_sparse_step))

    def ffn_names(sparse: set[int]):
        def names(i: int):
            if i not in sparse:
                return [("mlp.wi.weight", "wi.weight"), ("mlp.wo.weight", "wo.weight")]
            pairs = [("mlp.router.classifier.weight", "router.weight")]
            for j in range(config.num_experts):  # per-expert tensors <-> slices of the stacked ones
                pairs += [(f"mlp.experts.expert_{j}.wi.weight", f"experts.wi.{j}"),
                          (f"mlp.experts.expert_{j}.wo.weight", f"experts.wo.{j}")]
            return pairs
        return names

    pairs = {"shared.weight": "shared.weight"}
    pairs |= _stack_names("encoder", config.n_layers, False, ffn_names(enc_sparse))
    pairs |= _stack_names("decoder", config.n_decoder_layers, True, ffn_names(dec_sparse))
    if not config.tie_word_embeddings:
        pairs["lm_head.weight"] = "lm_head.weight"
    return pairs


_EXPERTS = ("experts.wi", "experts.wo")  # ours stacked (E, D, F) / (E, F, D); transformers' per expert, as Linear weights


def switch_to_hf(model: nn.Module, sequence_length: int = 512) -> transformers.PreTrainedModel:
    """Our ``SwitchForConditionalGeneration`` -> ``SwitchTransformersForConditionalGeneration``.
    A factor-based capacity becomes transformers' fixed one for ``sequence_length`` tokens."""
    if type(model) is not switch.SwitchForConditionalGeneration:
        raise TypeError(f"no transformers equivalent for {type(model).__name__}; known: SwitchForConditionalGeneration")
    config = model.config
    hf = transformers.SwitchTransformersForConditionalGeneration(switch_hf_config(config, sequence_length))
    ours = model.state_dict()
    for name in [n for n in ours if n.endswith(_EXPERTS)]:  # expert j: the transpose of slice j, as "name.j"
        ours |= {f"{name}.{j}": w.t().contiguous() for j, w in enumerate(ours[name])}
    load_into_hf(hf, ours, _switch_names(config), _tied_copies(lm_head=config.tie_word_embeddings),
                 "SwitchForConditionalGeneration")
    return like(hf, model)


def switch_from_hf(hf_model: transformers.PreTrainedModel) -> nn.Module:
    """``SwitchTransformersForConditionalGeneration`` -> our ``SwitchForConditionalGeneration``,
    with transformers' fixed expert capacity."""
    name = type(hf_model).__name__
    if name != "SwitchTransformersForConditionalGeneration":
        raise TypeError(f"cannot convert {name}; known: ['SwitchTransformersForConditionalGeneration']")
    config = _switch_our_config(hf_model.config, getattr(hf_model, "generation_config", None))
    model = switch.SwitchForConditionalGeneration(config)
    state = state_from_hf(hf_model.state_dict(), _switch_names(config), _tied_copies(lm_head=config.tie_word_embeddings),
                          f"{name} -> SwitchForConditionalGeneration")
    stacked: dict[str, dict[int, torch.Tensor]] = {}
    for key in list(state):
        head, _, j = key.rpartition(".")
        if head.endswith(_EXPERTS):
            stacked.setdefault(head, {})[int(j)] = state.pop(key).t()
    for head, slices in stacked.items():
        state[head] = torch.stack([slices[j] for j in range(config.num_experts)])
    model.load_state_dict(state, strict=True)
    return like(model, hf_model)
