"""Shared building blocks: attention, feed-forward, the transformer block, masks, outputs.

Imports torch only. Every architecture file builds from these, so attention (through
``torch.nn.functional.scaled_dot_product_attention``, which picks flash / memory-efficient
kernels on a GPU) and masking are written once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import ConfigError


# ----------------------------------------------------------------------------- configs


def replace_config(config: Any, **overrides: Any) -> Any:
    """A copy of a config dataclass with ``overrides``; unknown names are an error."""
    names = {f.name for f in fields(config)}
    unknown = sorted(set(overrides) - names)
    if unknown:
        raise ConfigError(f"{type(config).__name__}: unknown option(s) {unknown}; known: {sorted(names)}")
    new = type(config)(**{**{f.name: getattr(config, f.name) for f in fields(config)}, **overrides})
    if hasattr(new, "validate"):
        new.validate()
    return new


def check_transformer_config(config: Any, sizes: tuple[str, ...], rates: tuple[str, ...]) -> None:
    """The checks every transformer config shares: positive sizes, heads dividing the width,
    dropout rates in [0, 1), positive eps and init std, a known activation."""
    cls = type(config).__name__
    for name in sizes:
        if getattr(config, name) < 1:
            raise ConfigError(f"{cls}.{name} must be at least 1, got {getattr(config, name)}")
    if config.d_model % config.n_heads:
        raise ConfigError(f"{cls}: d_model ({config.d_model}) must be divisible by n_heads ({config.n_heads})")
    for name in rates:
        if not 0.0 <= getattr(config, name) < 1.0:
            raise ConfigError(f"{cls}.{name} must be in [0, 1), got {getattr(config, name)}")
    if config.eps <= 0 or config.init_std <= 0:
        raise ConfigError(f"{cls}: eps ({config.eps}) and init_std ({config.init_std}) must be positive")
    activation(config.act)  # unknown activation -> ConfigError


def preset(presets: dict[str, Any], family: str, name: str, **overrides: Any) -> Any:
    """Preset ``name`` of ``presets`` with ``overrides``; an unknown name is a ConfigError."""
    if name not in presets:
        raise ConfigError(f"unknown {family} preset {name!r}; known: {sorted(presets)}")
    return replace_config(presets[name], **overrides)


# ----------------------------------------------------------------------------- outputs


@dataclass
class ModelOutput:
    """What every model returns: the main head's ``logits`` and ``loss`` when labels were
    given, plus what the family adds (``hidden_states``, ``aux``: extra logits/losses)."""

    logits: torch.Tensor | None = None
    loss: torch.Tensor | None = None
    hidden_states: torch.Tensor | None = None
    aux: dict[str, torch.Tensor] = field(default_factory=dict)


# ----------------------------------------------------------------------------- activations


def gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    """GPT-2 / OpenAI GPT's tanh approximation of GELU ("gelu_new" in transformers)."""
    return F.gelu(x, approximate="tanh")


ACTIVATIONS = {"gelu": F.gelu, "gelu_tanh": gelu_tanh, "relu": F.relu}


def activation(name: str):
    if name not in ACTIVATIONS:
        raise ConfigError(f"unknown activation {name!r}; known: {sorted(ACTIVATIONS)}")
    return ACTIVATIONS[name]


# ----------------------------------------------------------------------------- host reads
#
# Eager code may read a small fact from the device to take a faster path (no padding: let
# SDPA build the causal mask) or to validate a batch. Under ``torch.compile`` a host read
# breaks the graph, so there the general path is taken and validation runs on the device.


def no_padding(attention_mask: torch.Tensor | None) -> bool:
    """True when ``attention_mask`` (1 = real token) is None or all ones: read on the host in
    eager mode; under ``torch.compile`` False unless None (the mask is applied as it is)."""
    if attention_mask is None:
        return True
    if torch.compiler.is_compiling():
        return False
    return bool(attention_mask.all())


def check_batch(ok: torch.Tensor, message: str) -> None:
    """Raise ValueError(message) unless the bool tensor ``ok`` is true. Under
    ``torch.compile`` the check runs on the device (``torch._assert_async``: a RuntimeError
    with the message on a CPU, a device-side assert on a GPU) so the graph does not break."""
    if torch.compiler.is_compiling():
        torch._assert_async(ok, message)
    elif not bool(ok):
        raise ValueError(message)


# ----------------------------------------------------------------------------- masks


def attention_bias(
    attention_mask: torch.Tensor | None, q_len: int, k_len: int, causal: bool, dtype: torch.dtype, device: torch.device
) -> torch.Tensor | None:
    """An additive mask (B or 1, 1, q_len, k_len) for SDPA: 0 where a query may attend,
    the dtype's minimum where not. ``attention_mask`` is (B, k_len) with 1 for real tokens.
    None when nothing is masked (SDPA then takes its fastest path)."""
    bias = None
    if not no_padding(attention_mask):
        keep = attention_mask[:, None, None, :].to(torch.bool)  # (B, 1, 1, K)
        bias = torch.zeros(keep.shape, dtype=dtype, device=device).masked_fill(~keep, torch.finfo(dtype).min)
    if causal:
        allowed = torch.ones(q_len, k_len, dtype=torch.bool, device=device).tril(k_len - q_len)
        causal_bias = torch.zeros(1, 1, q_len, k_len, dtype=dtype, device=device).masked_fill(~allowed, torch.finfo(dtype).min)
        bias = causal_bias if bias is None else bias + causal_bias
        bias = bias.clamp(min=torch.finfo(dtype).min)
    return bias


# ----------------------------------------------------------------------------- attention


class MultiHeadAttention(nn.Module):
    """Multi-head attention with separate q, k, v projections (biases optional)."""

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        if d_model % n_heads:
            raise ConfigError(f"d_model ({d_model}) must be divisible by n_heads ({n_heads})")
        self.n_heads = n_heads
        self.head_dim = d_model // n_heads
        self.q = nn.Linear(d_model, d_model, bias=bias)
        self.k = nn.Linear(d_model, d_model, bias=bias)
        self.v = nn.Linear(d_model, d_model, bias=bias)
        self.out = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = dropout

    def forward(self, x: torch.Tensor, bias: torch.Tensor | None = None, causal_only: bool = False) -> torch.Tensor:
        B, L, D = x.shape

        def heads(t: torch.Tensor) -> torch.Tensor:
            return t.view(B, L, self.n_heads, self.head_dim).transpose(1, 2)  # (B, nh, L, hd)

        # One matmul for q, k and v (three separate ones are slower on a CPU); the parameters
        # stay three linears so their names match the reference checkpoints'.
        weight = torch.cat([self.q.weight, self.k.weight, self.v.weight])
        bias_qkv = torch.cat([self.q.bias, self.k.bias, self.v.bias]) if self.q.bias is not None else None
        q, k, v = (heads(t) for t in F.linear(x, weight, bias_qkv).split(D, dim=-1))
        p = self.dropout if self.training else 0.0
        if causal_only:  # no padding: let SDPA build the causal mask (fused kernels)
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
        else:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=bias, dropout_p=p)
        return self.out(y.transpose(1, 2).reshape(B, L, D))


class FeedForward(nn.Module):
    def __init__(self, d_model: int, d_ff: int, act: str = "gelu", dropout: float = 0.0, bias: bool = True):
        super().__init__()
        self.fc1 = nn.Linear(d_model, d_ff, bias=bias)
        self.fc2 = nn.Linear(d_ff, d_model, bias=bias)
        self.act = activation(act)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.fc2(self.act(self.fc1(x))))


class TransformerBlock(nn.Module):
    """Self-attention + feed-forward with residuals; post-LN (BERT, GPT-1) or pre-LN (GPT-2)."""

    def __init__(self, d_model: int, n_heads: int, d_ff: int, act: str = "gelu", dropout: float = 0.1,
                 attn_dropout: float = 0.1, norm_first: bool = False, eps: float = 1e-12, bias: bool = True):
        super().__init__()
        self.attn = MultiHeadAttention(d_model, n_heads, attn_dropout, bias)
        self.ffn = FeedForward(d_model, d_ff, act, dropout, bias)
        self.norm1 = nn.LayerNorm(d_model, eps=eps)
        self.norm2 = nn.LayerNorm(d_model, eps=eps)
        self.dropout = nn.Dropout(dropout)
        self.norm_first = norm_first

    def forward(self, x: torch.Tensor, bias: torch.Tensor | None = None, causal_only: bool = False) -> torch.Tensor:
        if self.norm_first:
            x = x + self.dropout(self.attn(self.norm1(x), bias, causal_only))
            return x + self.ffn(self.norm2(x))
        x = self.norm1(x + self.dropout(self.attn(x, bias, causal_only)))
        return self.norm2(x + self.ffn(x))


# ----------------------------------------------------------------------------- heads


class MLMHead(nn.Module):
    """BERT's masked-LM head (ALBERT's too): dense ``d_model -> width``, activation, LayerNorm,
    then scores against the tied word embeddings (V, width) plus an output-only bias:
    ``logits = LN(act(W h)) @ E^T + b``."""

    def __init__(self, d_model: int, width: int, vocab_size: int, act: str, eps: float):
        super().__init__()
        self.dense = nn.Linear(d_model, width)
        self.act = activation(act)
        self.norm = nn.LayerNorm(width, eps=eps)
        self.bias = nn.Parameter(torch.zeros(vocab_size))

    def forward(self, hidden: torch.Tensor, word_embeddings: torch.Tensor) -> torch.Tensor:
        h = self.norm(self.act(self.dense(hidden)))  # (B, L, width)
        return F.linear(h, word_embeddings, self.bias)  # (B, L, V): h @ E^T + b

    def logits_and_loss(self, hidden: torch.Tensor, word_embeddings: torch.Tensor,
                        labels: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The scores and the masked-LM loss (None without labels). In training mode with
        labels the head runs only at the labelled positions, as the original BERT gathers its
        masked positions before the output layer: the loss is the same, but the logits are
        (N, V) for the N labelled positions instead of (B, L, V). At the small widths this
        project trains on a CPU the (V x width) output layer is most of a step's work, so
        scoring the 15% of positions that carry a label makes the step 2-4 times as fast.
        In evaluation mode, or without labels, the logits are the full (B, L, V)."""
        if labels is None or not self.training:
            logits = self(hidden, word_embeddings)
            return logits, (lm_loss(logits, labels) if labels is not None else None)
        keep = labels != -100
        logits = self(hidden[keep], word_embeddings)  # (N, V)
        return logits, lm_loss(logits, labels[keep])


# ----------------------------------------------------------------------------- losses, init


def shift_right(labels: torch.Tensor, start_id: int, pad_id: int) -> torch.Tensor:
    """Teacher-forcing decoder inputs of an encoder-decoder: ``[start] + labels[:-1]``, with
    -100 read as pad."""
    shifted = torch.cat([torch.full_like(labels[:, :1], start_id), labels[:, :-1]], dim=1)
    return shifted.masked_fill(shifted == -100, pad_id)


def lm_loss(logits: torch.Tensor, labels: torch.Tensor, shift: bool = False) -> torch.Tensor:
    """Cross entropy over the vocabulary, ignoring label -100; ``shift`` predicts labels[t+1]
    from position t (causal LMs whose labels are their inputs)."""
    if shift:
        logits, labels = logits[:, :-1], labels[:, 1:]
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)).float(), labels.reshape(-1), ignore_index=-100)


def classification_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Cross entropy for class ids (B,); mean squared error against float targets when the head
    has a single output (``num_labels == 1``, regression)."""
    if logits.size(-1) == 1:
        return F.mse_loss(logits.float().reshape(-1), labels.float().reshape(-1))
    return F.cross_entropy(logits.float(), labels.reshape(-1))


def check_classifier(num_labels: int, classifier_dropout: float | None = None) -> None:
    """A sequence classifier's settings: at least one label, a dropout rate (when given) in [0, 1)."""
    if num_labels < 1:
        raise ConfigError(f"num_labels must be >= 1, got {num_labels}")
    if classifier_dropout is not None and not 0.0 <= classifier_dropout < 1.0:
        raise ConfigError(f"classifier_dropout must be in [0, 1), got {classifier_dropout}")


CLASSIFIER_POOLINGS = ("default", "mean")


def check_pooling(pooling: str) -> None:
    """A sequence classifier's pooling: ``default`` (the architecture's own: BERT's pooled [CLS],
    GPT's last token, ...) or ``mean`` (the average of the last layer's states over real tokens)."""
    if pooling not in CLASSIFIER_POOLINGS:
        raise ConfigError(f"classifier_pooling must be one of {list(CLASSIFIER_POOLINGS)}, got {pooling!r}")


def mean_state(hidden: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
    """(B, L, D) -> (B, D): the mean of each row's states over its real tokens (``attention_mask``
    1), or over every position without a mask."""
    if attention_mask is None:
        return hidden.mean(dim=1)
    keep = attention_mask[..., None].to(hidden.dtype)
    return (hidden * keep).sum(dim=1) / keep.sum(dim=1).clamp(min=1.0)


def last_token_state(hidden: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
    """(B, L, D) -> (B, D): each row's state at its last real token, the rightmost position where
    ``attention_mask`` is 1 (the last position without a mask), so rows may be padded on either side."""
    B, L = hidden.shape[:2]
    if attention_mask is None:
        last = torch.full((B,), L - 1, dtype=torch.long, device=hidden.device)
    else:
        last = (torch.arange(L, device=hidden.device) * attention_mask.long()).argmax(-1)  # (B,)
    return hidden[torch.arange(B, device=hidden.device), last]


def init_normal(module: nn.Module, std: float = 0.02) -> None:
    """BERT / GPT initialisation: N(0, std) weights, zero biases, unit LayerNorms."""
    for m in module.modules():
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, 0.0, std)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.LayerNorm):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)


def count_parameters(model: nn.Module) -> int:
    """Distinct parameters (tied weights counted once)."""
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())


def scaled_init_std(n_layer: int, std: float = 0.02) -> float:
    """GPT-2's init for residual projections: std / sqrt(2 * n_layer)."""
    return std / math.sqrt(2 * n_layer)
