"""T5 (Raffel et al., 2019): an encoder-decoder Transformer trained text-to-text, pre-trained
with span corruption.

Read top to bottom: ``T5Config`` and ``PRESETS`` (``from_name("t5-small")``); ``RMSNorm``;
``relative_position_bucket`` and ``RelativePositionBias``; ``T5Attention``; ``T5Block`` and
``T5Stack`` (pre-norm); ``T5Model``, with the ``encode`` / ``decode`` that generation
(``lmforge.models.generation``) needs (``decode`` takes an optional ``cache``); the heads
``T5ForConditionalGeneration`` and ``T5ForSequenceClassification``.

Traps:

- v1.0 and v1.1 differ only in configuration: v1.0 (``t5-small``, ``t5-base``) has a ReLU
  feed-forward layer and an output layer tied to the input embedding, applied to the decoder
  output rescaled by ``d_model ** -0.5``; v1.1 (``t5-v1_1-*``) a gated-GELU feed-forward
  layer, an untied output layer with no rescale, and no dropout in pre-training.
- RMSNorm only scales: no mean subtraction, no bias.
- Attention has no biases and NO 1/sqrt(d_kv) scaling of the logits; its inner width
  ``n_heads * d_kv`` need not equal ``d_model``.
- No position embeddings: a learned bias per head and distance bucket, one table per stack
  shared by its layers (transformers keeps it in the first layer), so either side may be
  padded on the left or the right. Without ``decoder_input_ids`` the head shifts ``labels``
  behind the decoder start token, which is the pad id.

Switch Transformer (switch.py) is this network with experts: the stack builds its feed-forward
layers through ``make_ffn``, and one may return ``(output, routing)``, which the stack
collects. More in docs/MODELS.md, "T5".
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from .layers import (
    ConfigError,
    ModelOutput,
    attention_bias,
    check_classifier,
    check_pooling,
    classification_loss,
    gelu_tanh,
    lm_loss,
    mean_state,
    preset,
    shift_right,
)

# ----------------------------------------------------------------------------- config

FFN_KINDS = ("relu", "gated-gelu")  # v1.0, v1.1 (transformers' feed_forward_proj)


@dataclass
class T5Config:
    """T5 hyper-parameters; the defaults are T5-small (v1.0, 60.5M)."""

    vocab_size: int = 32128  # 32000 SentencePiece pieces (100 of them sentinels) padded to a multiple of 128
    d_model: int = 512
    d_kv: int = 64  # per-head width of q, k, v (inner width n_heads * d_kv)
    d_ff: int = 2048
    n_layers: int = 6  # encoder blocks
    n_decoder_layers: int = 6
    n_heads: int = 8
    relative_buckets: int = 32
    relative_max_distance: int = 128  # distances at least this far share the last bucket
    ffn: str = "relu"  # "relu" (v1.0) or "gated-gelu" (v1.1)
    # v1.0: the output layer is the embedding, applied to the decoder output scaled by d_model**-0.5;
    # v1.1 (False): a separate output layer, no rescale
    tie_word_embeddings: bool = True
    dropout: float = 0.1  # embeddings, residual branches, attention probabilities, FFN hidden layer
    eps: float = 1e-6  # RMSNorm epsilon
    pad_id: int = 0
    eos_id: int = 1
    decoder_start_id: int = 0  # T5 starts decoding from the pad id
    init_factor: float = 1.0  # scales every init std (transformers' initializer_factor)
    # sequence classifier input: "default" = the decoder state at the last </s> (transformers'),
    # "mean" = the encoder's states averaged over the real tokens, the decoder not run (EncT5)
    classifier_pooling: str = "default"

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        cls = type(self).__name__
        check_pooling(self.classifier_pooling)
        for name in ("vocab_size", "d_model", "d_kv", "d_ff", "n_layers", "n_decoder_layers", "n_heads"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{cls}.{name} must be at least 1, got {getattr(self, name)}")
        # The bidirectional encoder splits the buckets by sign and each half into exact and
        # logarithmic halves: at least one exact bucket per sign needs 4 buckets, and the log
        # range needs max_distance beyond the decoder's exact buckets (relative_buckets // 2).
        if self.relative_buckets < 4:
            raise ConfigError(f"{cls}.relative_buckets must be at least 4, got {self.relative_buckets}")
        if self.relative_max_distance <= self.relative_buckets // 2:
            raise ConfigError(f"{cls}.relative_max_distance ({self.relative_max_distance}) must exceed "
                              f"relative_buckets // 2 ({self.relative_buckets // 2})")
        if self.ffn not in FFN_KINDS:
            raise ConfigError(f"{cls}.ffn must be one of {FFN_KINDS}, got {self.ffn!r}")
        if not 0.0 <= self.dropout < 1.0:
            raise ConfigError(f"{cls}.dropout must be in [0, 1), got {self.dropout}")
        if self.eps <= 0 or self.init_factor <= 0:
            raise ConfigError(f"{cls}: eps ({self.eps}) and init_factor ({self.init_factor}) must be positive")
        for name in ("pad_id", "eos_id", "decoder_start_id"):
            if not 0 <= getattr(self, name) < self.vocab_size:
                raise ConfigError(f"{cls}.{name} ({getattr(self, name)}) must be in [0, vocab_size={self.vocab_size})")


_V1_1 = dict(ffn="gated-gelu", tie_word_embeddings=False, dropout=0.0)  # v1.1: pre-trained without dropout

# The released sizes (Raffel et al. 2019, table 14; the v1.1 checkpoints' configs).
PRESETS: dict[str, T5Config] = {
    "t5-small": T5Config(),
    "t5-base": T5Config(d_model=768, d_ff=3072, n_layers=12, n_decoder_layers=12, n_heads=12),
    "t5-v1_1-small": T5Config(d_model=512, d_ff=1024, n_layers=8, n_decoder_layers=8, n_heads=6, **_V1_1),
    "t5-v1_1-base": T5Config(d_model=768, d_ff=2048, n_layers=12, n_decoder_layers=12, n_heads=12, **_V1_1),
    # Not a released model: a CPU size for tests and smoke runs, v1.1-style. Recipes override
    # vocab_size with their tokenizer's (the sentinels sit at the top of the vocabulary).
    "t5-tiny": T5Config(vocab_size=1024, d_model=64, d_kv=16, d_ff=128, n_layers=2, n_decoder_layers=2, n_heads=4,
                        **_V1_1),
}


def from_name(name: str, **overrides) -> T5Config:
    """The preset ``name`` with ``overrides`` (unknown option names are a ConfigError)."""
    return preset(PRESETS, "T5", name, **overrides)


# ----------------------------------------------------------------------------- norm, positions


class RMSNorm(nn.Module):
    """``weight * x / sqrt(mean(x^2) + eps)``: no mean subtraction, no bias (T5's LayerNorm).
    The mean square is taken in float32 whatever the input dtype."""

    def __init__(self, d_model: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d_model))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.float()
        normed = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * normed.to(self.weight.dtype)


def relative_position_bucket(relative_position: torch.Tensor, bidirectional: bool, num_buckets: int,
                             max_distance: int) -> torch.Tensor:
    """The bucket (0 .. num_buckets - 1) of each ``key - query`` distance (Mesh TF's
    ``_relative_position_bucket``).

    Bidirectional: keys after the query use the upper half of the buckets, keys before it (and
    the query itself) the lower half. Causal: only keys at or before the query get distinct
    buckets (a later key, masked anyway, falls in bucket 0 with the query itself). Within a
    half, distances below ``n / 2`` each have their own bucket; larger ones share buckets of
    logarithmically growing width up to ``max_distance``, beyond which all share the last.
    """
    bucket = torch.zeros_like(relative_position)
    if bidirectional:
        num_buckets //= 2
        bucket = bucket + (relative_position > 0).long() * num_buckets
        distance = relative_position.abs()
    else:
        distance = (-relative_position).clamp(min=0)
    max_exact = num_buckets // 2
    # The same float32 operations, in the same order, as the reference: the truncation to an
    # integer must land in the same bucket. (log(0) at the small distances is never selected.)
    log_bucket = max_exact + (
        torch.log(distance.float() / max_exact) / math.log(max_distance / max_exact) * (num_buckets - max_exact)
    ).to(torch.long)
    log_bucket = log_bucket.clamp(max=num_buckets - 1)
    return bucket + torch.where(distance < max_exact, distance, log_bucket)


class RelativePositionBias(nn.Module):
    """A learned scalar per (bucket, head): the additive position bias (1, H, Q, K)."""

    def __init__(self, config: T5Config, bidirectional: bool):
        super().__init__()
        self.bidirectional = bidirectional
        self.num_buckets = config.relative_buckets
        self.max_distance = config.relative_max_distance
        self.weight = nn.Parameter(torch.empty(config.relative_buckets, config.n_heads))

    def forward(self, q_len: int, k_len: int, offset: int = 0) -> torch.Tensor:
        """``offset``: the absolute position of the first query (keys start at 0)."""
        query = torch.arange(q_len, device=self.weight.device)[:, None] + offset
        key = torch.arange(k_len, device=self.weight.device)[None, :]
        buckets = relative_position_bucket(key - query, self.bidirectional, self.num_buckets, self.max_distance)
        return F.embedding(buckets, self.weight).permute(2, 0, 1).unsqueeze(0)  # (Q, K, H) -> (1, H, Q, K)


# ----------------------------------------------------------------------------- attention, FFN


class T5Attention(nn.Module):
    """Self- or cross-attention without biases and without the 1/sqrt(d_kv) logit scaling.
    ``fused`` None (the default): a trained position bias goes through
    ``scaled_dot_product_attention`` on a GPU (its memory-efficient kernel gives the bias a
    gradient) and is written out elsewhere (below); True or False forces one."""

    fused: bool | None = None

    def __init__(self, config: T5Config):
        super().__init__()
        self.n_heads, self.d_kv = config.n_heads, config.d_kv
        inner = config.n_heads * config.d_kv
        self.q = nn.Linear(config.d_model, inner, bias=False)
        self.k = nn.Linear(config.d_model, inner, bias=False)
        self.v = nn.Linear(config.d_model, inner, bias=False)
        self.o = nn.Linear(inner, config.d_model, bias=False)
        self.dropout = config.dropout

    def _heads(self, t: torch.Tensor) -> torch.Tensor:
        B, L, _ = t.shape
        return t.view(B, L, self.n_heads, self.d_kv).transpose(1, 2)  # (B, H, L, d_kv)

    def forward(self, x: torch.Tensor, bias: torch.Tensor | None, memory: torch.Tensor | None = None,
                cache: dict | None = None, prefix: str = "") -> torch.Tensor:
        """``x`` (B, Q, D) attends to itself, or to ``memory`` (B, K, D) (cross-attention);
        ``bias`` is the additive position bias + mask, broadcastable to (B, H, Q, K).

        With a ``cache`` dict (incremental decoding), self-attention appends the keys/values of
        the new positions ``x`` to ``cache[prefix + "k" / "v"]`` (B, H, past + Q, d_kv) and attends
        over all of them; cross-attention computes the encoder's keys/values once and reuses them.
        """
        B, Q, _ = x.shape
        if memory is None:  # one matmul for q, k and v; the parameters stay three linears
            qkv = F.linear(x, torch.cat([self.q.weight, self.k.weight, self.v.weight]))
            q, k, v = (self._heads(t) for t in qkv.chunk(3, dim=-1))
            if cache is not None:
                if prefix + "k" in cache:
                    k = torch.cat([cache[prefix + "k"], k], dim=2)
                    v = torch.cat([cache[prefix + "v"], v], dim=2)
                cache[prefix + "k"], cache[prefix + "v"] = k, v
        else:
            q = self._heads(self.q(x))
            if cache is not None and prefix + "k" in cache:
                k, v = cache[prefix + "k"], cache[prefix + "v"]
            else:
                kv = F.linear(memory, torch.cat([self.k.weight, self.v.weight]))
                k, v = (self._heads(t) for t in kv.chunk(2, dim=-1))
                if cache is not None:
                    cache[prefix + "k"], cache[prefix + "v"] = k, v
        p = self.dropout if self.training else 0.0
        fused = self.fused if self.fused is not None else x.is_cuda
        if bias is not None and bias.requires_grad and not fused:
            # Training the position bias on a CPU: SDPA's fused kernel there gives no gradient for
            # attn_mask, so it would fall back to its math path, which also multiplies q and k by sqrt(scale)
            # and checks every row for -inf (_safe_softmax; our masks are finite). The same
            # operations written out skip that work (about a quarter of the attention's time).
            scores = torch.matmul(q, k.transpose(-1, -2)).add_(bias)  # (B, H, Q, K)
            y = torch.matmul(F.dropout(scores.softmax(dim=-1), p, self.training), v)
        else:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=bias, dropout_p=p, scale=1.0)  # (B, H, Q, d_kv)
        return self.o(y.transpose(1, 2).reshape(B, Q, self.n_heads * self.d_kv))


class T5FeedForward(nn.Module):
    """``wo(dropout(relu(wi x)))`` (v1.0) or ``wo(dropout(gelu(wi x) * wi_linear x))`` (v1.1)."""

    def __init__(self, config: T5Config):
        super().__init__()
        self.gated = config.ffn == "gated-gelu"
        self.wi = nn.Linear(config.d_model, config.d_ff, bias=False)
        self.wi_linear = nn.Linear(config.d_model, config.d_ff, bias=False) if self.gated else None
        self.wo = nn.Linear(config.d_ff, config.d_model, bias=False)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = gelu_tanh(self.wi(x)) * self.wi_linear(x) if self.gated else F.relu(self.wi(x))
        return self.wo(self.dropout(h))


# ----------------------------------------------------------------------------- blocks, stacks


class T5Block(nn.Module):
    """Pre-norm self-attention, (decoder) cross-attention and feed-forward, each added to the
    residual stream after dropout. Returns the new states and the feed-forward layer's routing
    (None for a dense layer; a mixture of experts returns ``(output, routing)``)."""

    def __init__(self, config: T5Config, is_decoder: bool, ffn: nn.Module):
        super().__init__()
        self.self_attn_norm = RMSNorm(config.d_model, config.eps)
        self.self_attn = T5Attention(config)
        if is_decoder:
            self.cross_attn_norm = RMSNorm(config.d_model, config.eps)
            self.cross_attn = T5Attention(config)
        self.ffn_norm = RMSNorm(config.d_model, config.eps)
        self.ffn = ffn
        self.dropout = nn.Dropout(config.dropout)
        self.is_decoder = is_decoder

    def forward(self, x: torch.Tensor, self_bias: torch.Tensor | None, memory: torch.Tensor | None = None,
                cross_bias: torch.Tensor | None = None, cache: dict | None = None, prefix: str = "",
                ) -> tuple[torch.Tensor, Any]:
        x = x + self.dropout(self.self_attn(self.self_attn_norm(x), self_bias, cache=cache, prefix=prefix + "self."))
        if self.is_decoder:
            h = self.cross_attn(self.cross_attn_norm(x), cross_bias, memory, cache=cache, prefix=prefix + "cross.")
            x = x + self.dropout(h)
        y = self.ffn(self.ffn_norm(x))
        routing = None
        if isinstance(y, tuple):
            y, routing = y
        return x + self.dropout(y), routing


class T5Stack(nn.Module):
    """The encoder (``is_decoder=False``) or the decoder: embedding dropout, the blocks sharing
    one relative position bias, a final RMSNorm and dropout. Takes embedded inputs (the
    embedding is shared by both stacks and the output layer, and lives in ``T5Model``)."""

    def __init__(self, config: T5Config, is_decoder: bool):
        super().__init__()
        self.is_decoder = is_decoder
        self.relative_bias = RelativePositionBias(config, bidirectional=not is_decoder)
        n = config.n_decoder_layers if is_decoder else config.n_layers
        self.layers = nn.ModuleList(T5Block(config, is_decoder, self.make_ffn(config, i)) for i in range(n))
        self.final_norm = RMSNorm(config.d_model, config.eps)
        self.dropout = nn.Dropout(config.dropout)

    def make_ffn(self, config: T5Config, index: int) -> nn.Module:
        """The feed-forward layer of block ``index`` (Switch replaces some)."""
        return T5FeedForward(config)

    def forward(self, x: torch.Tensor, attention_mask: torch.Tensor | None = None,
                memory: torch.Tensor | None = None, memory_mask: torch.Tensor | None = None,
                cache: dict | None = None) -> tuple[torch.Tensor, list[Any]]:
        """``x`` (B, L, D) embedded inputs; ``attention_mask`` (B, L) 1 = real token; the decoder
        also takes the encoder output ``memory`` (B, S, D) and its mask (B, S). Returns the final
        states (B, L, D) and the routing of every mixture-of-experts layer (empty for T5).

        With a ``cache`` (decoder only), ``x`` holds the positions after the ``cache["self.length"]``
        already decoded, which the position bias and the causal mask account for."""
        past = cache.get("self.length", 0) if cache is not None else 0
        if cache is not None and attention_mask is not None:
            raise ValueError("decoder_attention_mask is not supported with a cache (generation pads nothing)")
        L = x.size(1)
        K = past + L
        # position bias (1, H, L, K) + padding (and causal) mask (B, 1, L, K), added once for all layers
        self_bias = self.relative_bias(L, K, offset=past).to(x.dtype)
        mask = attention_bias(attention_mask, L, K, causal=self.is_decoder, dtype=x.dtype, device=x.device)
        if mask is not None:
            self_bias = self_bias + mask
        cross_bias = None
        if self.is_decoder:
            if memory is None:
                raise ValueError("the decoder needs the encoder output (memory)")
            cross_bias = attention_bias(memory_mask, L, memory.size(1), causal=False, dtype=x.dtype, device=x.device)
        x = self.dropout(x)
        routings = []
        for i, layer in enumerate(self.layers):
            x, routing = layer(x, self_bias, memory, cross_bias, cache, prefix=f"layers.{i}.")
            if routing is not None:
                routings.append(routing)
        if cache is not None:
            cache["self.length"] = K
        return self.dropout(self.final_norm(x)), routings


# ----------------------------------------------------------------------------- model, init


@torch.no_grad()
def init_weights(module: nn.Module, config: T5Config) -> None:
    """Mesh TF's initialisation (as in transformers): N(0, 1) embeddings, attention q with std
    (d_model * d_kv)^-1/2 (this is where the missing 1/sqrt(d_kv) of the logits went), k and v
    d_model^-1/2, o (n_heads * d_kv)^-1/2, FFN input d_model^-1/2, output d_ff^-1/2, position
    biases d_model^-1/2, unit norms; every std times ``init_factor``. An untied output layer
    gets d_model^-1/2 (Mesh TF's dense-layer default, unit-variance logits, loss ~ ln V at
    init), where transformers draws it with std 1."""
    f, d = config.init_factor, config.d_model
    for m in module.modules():
        if isinstance(m, RMSNorm):
            nn.init.ones_(m.weight)
        elif isinstance(m, RelativePositionBias):
            nn.init.normal_(m.weight, 0.0, f * d**-0.5)
        elif isinstance(m, T5Attention):
            nn.init.normal_(m.q.weight, 0.0, f * (d * config.d_kv) ** -0.5)
            nn.init.normal_(m.k.weight, 0.0, f * d**-0.5)
            nn.init.normal_(m.v.weight, 0.0, f * d**-0.5)
            nn.init.normal_(m.o.weight, 0.0, f * (config.n_heads * config.d_kv) ** -0.5)
        elif isinstance(m, T5FeedForward):
            for w in (m.wi, m.wi_linear):
                if w is not None:
                    nn.init.normal_(w.weight, 0.0, f * d**-0.5)
            nn.init.normal_(m.wo.weight, 0.0, f * config.d_ff**-0.5)


class T5Model(nn.Module):
    """The shared embedding and both stacks; ``encode`` and ``decode`` are what generation calls."""

    stack_class = T5Stack  # Switch swaps in its own (switch.py)

    def __init__(self, config: T5Config):
        super().__init__()
        self.config = config
        self.shared = nn.Embedding(config.vocab_size, config.d_model)
        self.encoder = self.stack_class(config, is_decoder=False)
        self.decoder = self.stack_class(config, is_decoder=True)
        nn.init.normal_(self.shared.weight, 0.0, config.init_factor)
        init_weights(self, config)

    def run_encoder(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                    ) -> tuple[torch.Tensor, list[Any]]:
        return self.encoder(self.shared(input_ids), attention_mask)

    def run_decoder(self, decoder_input_ids: torch.Tensor, encoder_hidden: torch.Tensor,
                    encoder_attention_mask: torch.Tensor | None = None,
                    decoder_attention_mask: torch.Tensor | None = None,
                    cache: dict | None = None) -> tuple[torch.Tensor, list[Any]]:
        if cache:  # the whole prefix is given; decode the positions the cache does not hold yet
            decoder_input_ids = decoder_input_ids[:, cache["self.length"]:]
        return self.decoder(self.shared(decoder_input_ids), decoder_attention_mask, encoder_hidden,
                            encoder_attention_mask, cache)

    def encode(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """The encoder's output (B, S, D)."""
        return self.run_encoder(input_ids, attention_mask)[0]

    def decode(self, decoder_input_ids: torch.Tensor, encoder_hidden: torch.Tensor,
               encoder_attention_mask: torch.Tensor | None = None,
               decoder_attention_mask: torch.Tensor | None = None, cache: dict | None = None) -> torch.Tensor:
        """The decoder's output states (B, T, D) here (the LM head returns logits); with a
        ``cache`` (incremental decoding, ``lmforge.models.generation``), only those of the
        positions beyond the ones it holds."""
        return self.run_decoder(decoder_input_ids, encoder_hidden, encoder_attention_mask, decoder_attention_mask,
                                cache)[0]

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                decoder_input_ids: torch.Tensor | None = None, decoder_attention_mask: torch.Tensor | None = None,
                ) -> tuple[torch.Tensor, torch.Tensor]:
        """(decoder states (B, T, D), encoder states (B, S, D))."""
        if decoder_input_ids is None:
            raise ValueError("decoder_input_ids are required")
        memory = self.run_encoder(input_ids, attention_mask)[0]
        return self.run_decoder(decoder_input_ids, memory, attention_mask, decoder_attention_mask)[0], memory

    def add_routing(self, out: ModelOutput, enc_routing: list, dec_routing: list) -> ModelOutput:
        """Where the heads hand over the mixture-of-experts routing of both stacks: Switch adds its
        router losses and load statistics; T5 has no routing."""
        return out


# ----------------------------------------------------------------------------- heads


def _decoder_inputs(config: T5Config, decoder_input_ids: torch.Tensor | None,
                    labels: torch.Tensor | None) -> torch.Tensor:
    if decoder_input_ids is not None:
        return decoder_input_ids
    if labels is None:
        raise ValueError("give decoder_input_ids, or labels to shift right into them")
    return shift_right(labels, config.decoder_start_id, config.pad_id)


class T5ForConditionalGeneration(T5Model):
    """Sequence-to-sequence LM: ``logits`` (B, T, V) over the next target token, ``loss`` the
    cross entropy over labels != -100 (mean over target tokens), ``hidden_states`` the decoder
    output, ``aux["encoder_hidden_states"]`` the encoder's."""

    def __init__(self, config: T5Config):
        super().__init__(config)
        self.lm_head = None
        if not config.tie_word_embeddings:
            self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
            nn.init.normal_(self.lm_head.weight, 0.0, config.init_factor * config.d_model**-0.5)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Decoder states (B, T, D) -> logits (B, T, V)."""
        if self.lm_head is not None:
            return self.lm_head(hidden)
        # v1.0: the tied output layer sees the states scaled by d_model^-1/2 (Mesh TF), which
        # keeps the logits at unit scale with N(0, 1) embeddings
        return F.linear(hidden * self.config.d_model**-0.5, self.shared.weight)

    def decode(self, decoder_input_ids: torch.Tensor, encoder_hidden: torch.Tensor,
               encoder_attention_mask: torch.Tensor | None = None,
               decoder_attention_mask: torch.Tensor | None = None, cache: dict | None = None) -> torch.Tensor:
        """Logits (B, T, V) for every decoder position (with a ``cache``: for the positions it
        did not hold yet), given the encoder output (B, S, D)."""
        return self.logits(super().decode(decoder_input_ids, encoder_hidden, encoder_attention_mask,
                                          decoder_attention_mask, cache))

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                decoder_input_ids: torch.Tensor | None = None, decoder_attention_mask: torch.Tensor | None = None,
                labels: torch.Tensor | None = None) -> ModelOutput:
        decoder_input_ids = _decoder_inputs(self.config, decoder_input_ids, labels)
        memory, enc_routing = self.run_encoder(input_ids, attention_mask)
        hidden, dec_routing = self.run_decoder(decoder_input_ids, memory, attention_mask, decoder_attention_mask)
        logits = self.logits(hidden)
        loss = lm_loss(logits, labels) if labels is not None else None
        out = ModelOutput(logits=logits, loss=loss, hidden_states=hidden, aux={"encoder_hidden_states": memory})
        return self.add_routing(out, enc_routing, dec_routing)


class T5ClassificationHead(nn.Module):
    """dropout -> dense (D, D) -> tanh -> dropout -> out_proj (D, num_labels), with biases
    (transformers' ``T5ClassificationHead``)."""

    def __init__(self, config: T5Config, num_labels: int, dropout: float):
        super().__init__()
        self.dense = nn.Linear(config.d_model, config.d_model)
        self.out_proj = nn.Linear(config.d_model, num_labels)
        self.dropout = nn.Dropout(dropout)
        f = config.init_factor * config.d_model**-0.5
        for layer in (self.dense, self.out_proj):
            nn.init.normal_(layer.weight, 0.0, f)
            nn.init.zeros_(layer.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out_proj(self.dropout(torch.tanh(self.dense(self.dropout(x)))))


class T5ForSequenceClassification(T5Model):
    """Classification as in transformers' ``T5ForSequenceClassification``: the whole
    encoder-decoder runs with the decoder reading the input shifted right (unless
    ``decoder_input_ids`` are given), and the decoder state at the input's last ``</s>``
    (which has seen the entire input) is classified. A row without ``</s>`` uses its last real
    token (by ``attention_mask``) where transformers raises; rows may differ in their number of
    ``</s>``, which transformers also rejects. ``labels`` (B,) class ids, or float targets
    when ``num_labels == 1`` (mean squared error). ``logits`` (B, num_labels)."""

    def __init__(self, config: T5Config, num_labels: int = 2, classifier_dropout: float = 0.0):
        super().__init__(config)
        check_classifier(num_labels, classifier_dropout)
        self.num_labels = num_labels
        self.classifier_dropout = classifier_dropout
        self.classifier = T5ClassificationHead(config, num_labels, classifier_dropout)

    @property
    def runs_decoder(self) -> bool:
        """Whether the forward pass reaches the decoder (not with ``classifier_pooling: mean``)."""
        return self.config.classifier_pooling != "mean"

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                decoder_input_ids: torch.Tensor | None = None, decoder_attention_mask: torch.Tensor | None = None,
                labels: torch.Tensor | None = None) -> ModelOutput:
        if self.config.classifier_pooling == "mean":  # the encoder alone (EncT5): no decoder step at all
            memory, enc_routing = self.run_encoder(input_ids, attention_mask)
            logits = self.classifier(mean_state(memory, attention_mask))
            loss = classification_loss(logits, labels) if labels is not None else None
            return self.add_routing(ModelOutput(logits=logits, loss=loss, hidden_states=memory), enc_routing, [])
        if decoder_input_ids is None:
            decoder_input_ids = shift_right(input_ids, self.config.decoder_start_id, self.config.pad_id)
        elif decoder_input_ids.shape != input_ids.shape:
            raise ValueError(f"decoder_input_ids {tuple(decoder_input_ids.shape)} must align with input_ids "
                             f"{tuple(input_ids.shape)}: the decoder state at the input's last </s> is classified")
        memory, enc_routing = self.run_encoder(input_ids, attention_mask)
        hidden, dec_routing = self.run_decoder(decoder_input_ids, memory, attention_mask, decoder_attention_mask)
        B, L = input_ids.shape
        positions = torch.arange(L, device=input_ids.device).expand(B, L)
        is_eos = input_ids == self.config.eos_id
        real = attention_mask.bool() if attention_mask is not None else torch.ones_like(is_eos)
        last_eos = torch.where(is_eos, positions, -1).amax(dim=1)
        last_real = torch.where(real, positions, -1).amax(dim=1).clamp(min=0)
        index = torch.where(last_eos >= 0, last_eos, last_real)  # (B,)
        pooled = hidden[torch.arange(B, device=hidden.device), index]  # (B, D)
        logits = self.classifier(pooled)  # (B, num_labels)
        loss = classification_loss(logits, labels) if labels is not None else None
        out = ModelOutput(logits=logits, loss=loss, hidden_states=hidden, aux={"encoder_hidden_states": memory})
        return self.add_routing(out, enc_routing, dec_routing)
