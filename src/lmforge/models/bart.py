"""BART (Lewis et al., 2019): a denoising sequence-to-sequence autoencoder. A bidirectional
encoder reads a corrupted document; a left-to-right decoder, attending to the encoder's
output, writes the original.

Read top to bottom: ``BartConfig`` and ``PRESETS`` (``from_name("bart-base")``); the blocks
(``BartFeedForward``, ``Attention``, which can also take its keys and values from the encoder
output and keep them between decoding steps, the post-LN encoder and decoder layers);
``BartModel`` (one token embedding shared by the encoder, the decoder and the output layer; per
side, learned positions and a LayerNorm on the summed embeddings); the heads
``BartForConditionalGeneration`` and ``BartForSequenceClassification``.

What is BART-specific and easy to get wrong:

- Learned positions are looked up at ``position + 2`` (``POSITION_OFFSET``): fairseq reserved
  the first rows and every released checkpoint keeps them, so the tables have
  ``max_positions + 2`` rows of which the first two are never read. Positions are absolute,
  counted from the first column: pad on the right.
- The decoder starts from ``</s>`` (``decoder_start_id`` = eos), not ``<s>``: decoder inputs
  are ``</s> <s> x ...``, labels ``<s> x ... </s>``, so ``generate`` forces ``<s>`` as the
  first generated token.
- Post-LN everywhere, LayerNorm epsilon 1e-5, exact (erf) GELU.
- The output layer is the shared embedding matrix plus ``final_logits_bias``, a (vocab,)
  buffer that is zero in every released checkpoint and never trained; it is kept so converted
  checkpoints round-trip exactly.

Batches are the denoising objective's (docs/MODELS.md, "BART"); the conditional-generation
head has the ``encode`` / ``decode`` that ``lmforge.models.generation`` needs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .layers import (
    ConfigError,
    FeedForward,
    ModelOutput,
    MultiHeadAttention,
    TransformerBlock,
    attention_bias,
    check_batch,
    check_classifier,
    check_pooling,
    check_transformer_config,
    classification_loss,
    init_normal,
    lm_loss,
    mean_state,
    no_padding,
    preset,
    shift_right,
)

POSITION_OFFSET = 2  # learned positions are read at position + 2 (fairseq's legacy, kept by every checkpoint)

# ----------------------------------------------------------------------------- config


@dataclass
class BartConfig:
    """BART hyper-parameters; the defaults are bart-base (139M). Encoder and decoder share the
    width, the number of heads and the feed-forward size (as in every released BART)."""

    vocab_size: int = 50265
    d_model: int = 768
    encoder_layers: int = 6
    decoder_layers: int = 6
    n_heads: int = 12
    d_ff: int = 3072
    max_positions: int = 1024  # the longest input (and output); the tables hold max_positions + 2 rows
    act: str = "gelu"  # exact (erf) GELU, as released
    dropout: float = 0.1  # on embeddings, residual branches
    attn_dropout: float = 0.1  # on the attention probabilities
    act_dropout: float = 0.1  # inside the feed-forward, after the activation
    eps: float = 1e-5  # LayerNorm epsilon (PyTorch's default, fairseq's value)
    init_std: float = 0.02
    pad_id: int = 1  # the fairseq / RoBERTa dictionary: <s> 0, <pad> 1, </s> 2
    bos_id: int = 0
    eos_id: int = 2
    decoder_start_id: int = 2  # = eos: decoder inputs are "</s> <s> x ..."
    scale_embedding: bool = False  # multiply token embeddings by sqrt(d_model) (False in every BART)
    # sequence classifier input: "default" = the decoder state at the last </s> (the paper's),
    # "mean" = the encoder's states averaged over the real tokens, the decoder not run
    classifier_pooling: str = "default"

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        check_pooling(self.classifier_pooling)
        check_transformer_config(self, ("vocab_size", "d_model", "encoder_layers", "decoder_layers", "n_heads", "d_ff",
                                        "max_positions"), ("dropout", "attn_dropout", "act_dropout"))
        for name in ("pad_id", "bos_id", "eos_id", "decoder_start_id"):
            value = getattr(self, name)
            if not 0 <= value < self.vocab_size:
                raise ConfigError(f"BartConfig.{name} ({value}) must be in [0, vocab_size={self.vocab_size})")


PRESETS: dict[str, BartConfig] = {
    # facebook/bart-base: 6 + 6 layers, 768 wide, 12 heads; 139,420,416 parameters
    "bart-base": BartConfig(),
    # facebook/bart-large: 12 + 12 layers, 1024 wide, 16 heads; ~406M parameters
    "bart-large": BartConfig(d_model=1024, encoder_layers=12, decoder_layers=12, n_heads=16, d_ff=4096),
    # Not a released model: a CPU size for tests and smoke runs. Recipes override vocab_size
    # (and the special ids) with their tokenizer's.
    "bart-tiny": BartConfig(vocab_size=8192, d_model=128, encoder_layers=2, decoder_layers=2, n_heads=4, d_ff=512,
                            max_positions=256),
}


def from_name(name: str, **overrides) -> BartConfig:
    """The preset ``name`` with ``overrides`` (unknown option names are a ConfigError)."""
    return preset(PRESETS, "BART", name, **overrides)


# ----------------------------------------------------------------------------- blocks


class BartFeedForward(FeedForward):
    """fc1 -> act -> dropout (BART's ``activation_dropout``) -> fc2 -> dropout."""

    def __init__(self, d_model: int, d_ff: int, act: str, dropout: float, act_dropout: float):
        super().__init__(d_model, d_ff, act, dropout)
        self.act_dropout = nn.Dropout(act_dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.fc2(self.act_dropout(self.act(self.fc1(x)))))


class Attention(MultiHeadAttention):
    """``layers.MultiHeadAttention`` (the same q, k, v, out parameters, so checkpoint names line
    up; its ``forward`` is plain self-attention) plus what a decoder needs: keys and values from
    another sequence (cross-attention over the encoder output) and keys and values computed once
    and reused on later decoding steps.

    Candidate for layers.py: T5's decoder needs the same two operations.
    """

    def _heads(self, t: torch.Tensor) -> torch.Tensor:
        B, L, _ = t.shape
        return t.view(B, L, self.n_heads, self.head_dim).transpose(1, 2)  # (B, nh, L, hd)

    def keys_values(self, source: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, S, D) -> keys and values, each (B, nh, S, hd); one matmul for both."""
        weight = torch.cat([self.k.weight, self.v.weight])
        bias = torch.cat([self.k.bias, self.v.bias]) if self.k.bias is not None else None
        k, v = F.linear(source, weight, bias).chunk(2, dim=-1)
        return self._heads(k), self._heads(v)

    def attend(self, x: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor | None = None,
               is_causal: bool = False) -> torch.Tensor:
        """Queries from ``x`` (B, T, D) over the given keys/values (B, nh, S, hd) -> (B, T, D)."""
        B, T, D = x.shape
        p = self.dropout if self.training else 0.0
        y = F.scaled_dot_product_attention(self._heads(self.q(x)), k, v, attn_mask=bias, dropout_p=p,
                                           is_causal=is_causal)
        return self.out(y.transpose(1, 2).reshape(B, T, D))


class BartEncoderLayer(TransformerBlock):
    """BERT's post-LN block: x = LN(x + attn(x)); x = LN(x + ffn(x)), with BART's feed-forward."""

    def __init__(self, config: BartConfig):
        c = config
        super().__init__(c.d_model, c.n_heads, c.d_ff, c.act, c.dropout, c.attn_dropout, norm_first=False, eps=c.eps)
        self.ffn = BartFeedForward(c.d_model, c.d_ff, c.act, c.dropout, c.act_dropout)


class BartDecoderLayer(nn.Module):
    """Post-LN: x = LN(x + self_attn(x)) (causal); x = LN(x + cross_attn(x, encoder)); x = LN(x + ffn(x)).

    With a ``cache`` dict (incremental decoding), ``x`` holds only the positions not decoded
    yet; the layer appends their keys/values to ``cache[prefix + "self.k" / "self.v"]`` and
    computes the cross-attention keys/values from the encoder output once
    (``cache[prefix + "cross.k" / "cross.v"]``).
    """

    def __init__(self, config: BartConfig):
        super().__init__()
        c = config
        self.self_attn = Attention(c.d_model, c.n_heads, c.attn_dropout)
        self.norm1 = nn.LayerNorm(c.d_model, eps=c.eps)
        self.cross_attn = Attention(c.d_model, c.n_heads, c.attn_dropout)
        self.norm2 = nn.LayerNorm(c.d_model, eps=c.eps)
        self.ffn = BartFeedForward(c.d_model, c.d_ff, c.act, c.dropout, c.act_dropout)
        self.norm3 = nn.LayerNorm(c.d_model, eps=c.eps)
        self.dropout = nn.Dropout(c.dropout)

    def forward(self, x: torch.Tensor, self_bias: torch.Tensor | None, memory: torch.Tensor,
                cross_bias: torch.Tensor | None, cache: dict | None = None, prefix: str = "") -> torch.Tensor:
        if cache is None:
            h = self.self_attn(x, self_bias, causal_only=self_bias is None)  # fused q/k/v path
            cross_k, cross_v = self.cross_attn.keys_values(memory)
        else:
            k, v = self.self_attn.keys_values(x)
            if prefix + "self.k" in cache:  # (B, nh, past + T, hd)
                k = torch.cat([cache[prefix + "self.k"], k], dim=2)
                v = torch.cat([cache[prefix + "self.v"], v], dim=2)
            cache[prefix + "self.k"], cache[prefix + "self.v"] = k, v
            # no bias: either the first call (causal over the prefix) or one new position (sees all)
            h = self.self_attn.attend(x, k, v, self_bias, is_causal=self_bias is None and x.size(1) > 1)
            if prefix + "cross.k" not in cache:
                cache[prefix + "cross.k"], cache[prefix + "cross.v"] = self.cross_attn.keys_values(memory)
            cross_k, cross_v = cache[prefix + "cross.k"], cache[prefix + "cross.v"]
        x = self.norm1(x + self.dropout(h))
        x = self.norm2(x + self.dropout(self.cross_attn.attend(x, cross_k, cross_v, cross_bias)))
        return self.norm3(x + self.ffn(x))


# ----------------------------------------------------------------------------- encoder, decoder


class _Positions(nn.Module):
    """Learned positions read at ``position + POSITION_OFFSET``, plus the LayerNorm BART puts on
    the summed embeddings, and dropout."""

    def __init__(self, config: BartConfig):
        super().__init__()
        self.position = nn.Embedding(config.max_positions + POSITION_OFFSET, config.d_model)
        self.norm_embedding = nn.LayerNorm(config.d_model, eps=config.eps)
        self.dropout = nn.Dropout(config.dropout)
        self.max_positions = config.max_positions

    def embed(self, tokens: torch.Tensor, start: int = 0) -> torch.Tensor:
        """Token embeddings (B, L, D) of positions start .. start + L - 1 -> LN(tokens + positions)."""
        end = start + tokens.size(1)
        if end > self.max_positions:
            raise ValueError(f"sequence length {end} exceeds max_positions ({self.max_positions})")
        positions = torch.arange(start, end, device=tokens.device) + POSITION_OFFSET  # (L,)
        return self.dropout(self.norm_embedding(tokens + self.position(positions)))


class BartEncoder(_Positions):
    def __init__(self, config: BartConfig):
        super().__init__(config)
        self.layers = nn.ModuleList(BartEncoderLayer(config) for _ in range(config.encoder_layers))

    def forward(self, tokens: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
        x = self.embed(tokens)  # (B, S, D)
        S = x.size(1)
        # padding masked as keys only, as in BERT: outputs at real positions ignore the padding
        bias = attention_bias(attention_mask, S, S, causal=False, dtype=x.dtype, device=x.device)
        for layer in self.layers:
            x = layer(x, bias)
        return x


class BartDecoder(_Positions):
    def __init__(self, config: BartConfig):
        super().__init__(config)
        self.layers = nn.ModuleList(BartDecoderLayer(config) for _ in range(config.decoder_layers))

    def forward(self, tokens: torch.Tensor, memory: torch.Tensor, memory_mask: torch.Tensor | None,
                attention_mask: torch.Tensor | None = None, cache: dict | None = None) -> torch.Tensor:
        """tokens (B, T, D) embedded decoder inputs; memory (B, S, D) the encoder output."""
        if cache is not None and attention_mask is not None:
            raise ValueError("decoder_attention_mask is not supported with a cache (generation pads nothing)")
        past = cache["self.length"] if cache else 0  # positions already decoded (incremental decoding)
        x = self.embed(tokens, start=past)  # (B, T, D)
        T = x.size(1)
        if no_padding(attention_mask) and (past == 0 or T == 1):
            self_bias = None  # causal only (SDPA builds the mask), or one new position that sees every key
        else:  # padding and causality in one mask (B or 1, 1, T, past + T)
            self_bias = attention_bias(attention_mask, T, past + T, causal=True, dtype=x.dtype, device=x.device)
        cross_bias = attention_bias(memory_mask, T, memory.size(1), causal=False, dtype=x.dtype, device=x.device)
        for i, layer in enumerate(self.layers):
            x = layer(x, self_bias, memory, cross_bias, cache, prefix=f"layers.{i}.")
        if cache is not None:
            cache["self.length"] = past + T
        return x


def init_weights(module: nn.Module, config: BartConfig) -> None:
    """N(0, init_std) weights (embeddings and positions too), zero biases, unit LayerNorms, the
    pad embedding row zero: transformers' BART initialisation."""
    init_normal(module, config.init_std)
    for m in module.modules():
        if isinstance(m, nn.Embedding) and m.padding_idx is not None:
            with torch.no_grad():
                m.weight[m.padding_idx].zero_()


class BartModel(nn.Module):
    """The shared token embedding, the encoder and the decoder."""

    def __init__(self, config: BartConfig):
        super().__init__()
        self.config = config
        self.shared = nn.Embedding(config.vocab_size, config.d_model, padding_idx=config.pad_id)
        self.embed_scale = math.sqrt(config.d_model) if config.scale_embedding else 1.0
        self.encoder = BartEncoder(config)
        self.decoder = BartDecoder(config)
        init_weights(self, config)

    def embed_tokens(self, ids: torch.Tensor) -> torch.Tensor:
        return self.shared(ids) * self.embed_scale if self.embed_scale != 1.0 else self.shared(ids)

    def encode(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        return self.encoder(self.embed_tokens(input_ids), attention_mask)  # (B, S, D)

    def decode(self, decoder_input_ids: torch.Tensor, encoder_hidden: torch.Tensor,
               encoder_attention_mask: torch.Tensor | None = None, decoder_attention_mask: torch.Tensor | None = None,
               cache: dict | None = None) -> torch.Tensor:
        """Decoder states (B, T, D); with a cache, only of the positions beyond those it holds."""
        if cache:
            decoder_input_ids = decoder_input_ids[:, cache["self.length"]:]
        tokens = self.embed_tokens(decoder_input_ids)
        return self.decoder(tokens, encoder_hidden, encoder_attention_mask, decoder_attention_mask, cache)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None, decoder_input_ids: torch.Tensor,
                decoder_attention_mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """(decoder states (B, T, D), encoder states (B, S, D))."""
        encoder_hidden = self.encode(input_ids, attention_mask)
        return self.decode(decoder_input_ids, encoder_hidden, attention_mask, decoder_attention_mask), encoder_hidden


# ----------------------------------------------------------------------------- heads


class BartForConditionalGeneration(nn.Module):
    """Sequence-to-sequence LM: ``logits`` (B, T, V) = decoder states @ shared^T + final_logits_bias;
    ``loss`` the cross entropy over ``labels`` != -100 (no shift here: position t of the decoder
    predicts ``labels[t]``, its input being ``labels[t - 1]``). ``hidden_states`` are the decoder's,
    ``aux["encoder_hidden_states"]`` the encoder's."""

    def __init__(self, config: BartConfig):
        super().__init__()
        self.config = config
        self.bart = BartModel(config)
        self.register_buffer("final_logits_bias", torch.zeros(config.vocab_size))  # not trained (reference)

    def lm_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return F.linear(hidden, self.bart.shared.weight, self.final_logits_bias)  # (B, T, V), tied

    def encode(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """The encoder output (B, S, D)."""
        return self.bart.encode(input_ids, attention_mask)

    def decode(self, decoder_input_ids: torch.Tensor, encoder_hidden: torch.Tensor,
               encoder_attention_mask: torch.Tensor | None = None, decoder_attention_mask: torch.Tensor | None = None,
               cache: dict | None = None) -> torch.Tensor:
        """Logits (B, T, V) of ``decoder_input_ids`` given the encoder output.

        ``cache``: a dict this method fills (pass ``{}`` on the first call and the same dict
        afterwards, with the whole prefix each time); it then decodes only the positions beyond
        those already cached and returns their logits, reusing the keys/values of earlier steps.
        Entries are tensors with the batch on dim 0 (``"self.length"``: an int); those under
        ``*cross.*`` depend on the encoder output only.
        """
        return self.lm_logits(self.bart.decode(decoder_input_ids, encoder_hidden, encoder_attention_mask,
                                               decoder_attention_mask, cache))

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                decoder_input_ids: torch.Tensor | None = None, decoder_attention_mask: torch.Tensor | None = None,
                labels: torch.Tensor | None = None) -> ModelOutput:
        c = self.config
        if decoder_input_ids is None:  # the reference: labels shifted right, else the inputs shifted right
            decoder_input_ids = shift_right(labels if labels is not None else input_ids, c.decoder_start_id, c.pad_id)
        hidden, encoder_hidden = self.bart(input_ids, attention_mask, decoder_input_ids, decoder_attention_mask)
        logits = self.lm_logits(hidden)
        loss = lm_loss(logits, labels) if labels is not None else None
        return ModelOutput(logits=logits, loss=loss, hidden_states=hidden,
                           aux={"encoder_hidden_states": encoder_hidden})

    def generate(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, max_new_tokens: int = 20,
                 num_beams: int = 1, **options) -> torch.Tensor:
        """``generation.generate`` with this config's ids: start = ``decoder_start_id`` (</s>),
        ``<s>`` forced first (the decoder was trained on "</s> <s> x ..."), stop at ``</s>``."""
        from .generation import generate

        c = self.config
        ids = dict(decoder_start_token_id=c.decoder_start_id, eos_token_id=c.eos_id, pad_token_id=c.pad_id,
                   forced_bos_token_id=c.bos_id)
        return generate(self, input_ids, attention_mask, max_new_tokens, num_beams, **{**ids, **options})


class BartClassificationHead(nn.Module):
    """dropout -> dense -> tanh -> dropout -> out_proj, on one decoder state per row."""

    def __init__(self, d_model: int, num_labels: int, dropout: float):
        super().__init__()
        self.dense = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout)
        self.out_proj = nn.Linear(d_model, num_labels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out_proj(self.dropout(torch.tanh(self.dense(self.dropout(x)))))


class BartForSequenceClassification(nn.Module):
    """Classify from the decoder state at the last ``</s>`` of each row (BART section 3.1: the
    whole input goes into the encoder and, shifted right, the decoder; the final decoder token
    attends over the complete input). ``logits`` (B, num_labels); ``labels`` (B,) class ids, or
    float targets when ``num_labels == 1`` (mean squared error). ``classifier_dropout`` 0.0 is
    transformers' default.

    Like the reference, the ``</s>`` positions are read from ``input_ids`` and the decoder inputs
    default to ``input_ids`` shifted right. Unlike it, rows may hold different numbers of
    ``</s>`` (the reference raises); every row must hold at least one.
    """

    def __init__(self, config: BartConfig, num_labels: int = 2, classifier_dropout: float = 0.0):
        super().__init__()
        check_classifier(num_labels, classifier_dropout)
        self.config = config
        self.num_labels = num_labels
        self.classifier_dropout = classifier_dropout
        self.bart = BartModel(config)
        self.head = BartClassificationHead(config.d_model, num_labels, classifier_dropout)
        init_weights(self.head, config)

    @property
    def runs_decoder(self) -> bool:
        """Whether the forward pass reaches the decoder (not with ``classifier_pooling: mean``)."""
        return self.config.classifier_pooling != "mean"

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                decoder_input_ids: torch.Tensor | None = None, decoder_attention_mask: torch.Tensor | None = None,
                labels: torch.Tensor | None = None) -> ModelOutput:
        c = self.config
        if c.classifier_pooling == "mean":  # the encoder alone: no decoder step at all
            encoder_hidden = self.bart.encode(input_ids, attention_mask)
            logits = self.head(mean_state(encoder_hidden, attention_mask))
            loss = classification_loss(logits, labels) if labels is not None else None
            return ModelOutput(logits=logits, loss=loss, hidden_states=encoder_hidden)
        if decoder_input_ids is None:
            decoder_input_ids = shift_right(input_ids, c.decoder_start_id, c.pad_id)
        hidden, encoder_hidden = self.bart(input_ids, attention_mask, decoder_input_ids, decoder_attention_mask)
        is_eos = input_ids == c.eos_id
        check_batch(is_eos.any(dim=1).all(), f"every row of input_ids needs an </s> (id {c.eos_id}) to classify from")
        B, L = is_eos.shape
        last_eos = (torch.arange(L, device=input_ids.device) * is_eos).argmax(dim=1)  # (B,)
        logits = self.head(hidden[torch.arange(B, device=hidden.device), last_eos])  # (B, num_labels)
        loss = classification_loss(logits, labels) if labels is not None else None
        return ModelOutput(logits=logits, loss=loss, hidden_states=hidden,
                           aux={"encoder_hidden_states": encoder_hidden})
