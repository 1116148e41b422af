"""GPT (Radford et al. 2018) and GPT-2 (Radford et al. 2019): decoder-only causal language models.

The network, top to bottom:

    token embedding (V, D) + learned position embedding (P, D) -> dropout
    n_layers x TransformerBlock with a causal mask (layers.py)
    GPT-2 only: a final LayerNorm
    logits = h @ token_embedding^T (the output projection is tied to the input embedding)

GPT-1 and GPT-2 differ only in configuration: GPT-1 (``norm_first=False``) is post-LN,
``x = LN(x + sublayer(x))``, with no final LN; GPT-2 (``norm_first=True``) is pre-LN,
``x = x + sublayer(LN(x))``, with a final LN after the last block, and initialises the residual
projections (attention output, second FFN layer) with std ``0.02 / sqrt(2 * n_layers)`` (two
residual additions per block; GPT-2 section 2.3). Both use the tanh GELU ("gelu_new").

Traps: the model shifts the labels ONCE (logits at t predict ``labels[t + 1]``) and drops no
position from the loss by its id, so ``eos`` stays a target even when pad == eos. Positions
are absolute: pad on the right.

Heads: ``GPTLMHeadModel`` (next-token prediction) and ``GPTForSequenceClassification``, GPT-1's
fine-tuning (section 3.2): a linear layer on the final state of the last real token, plus
``lm_coef`` x the language-modelling loss on the same inputs (GPT-1 used 0.5; 0 turns it off).
Inputs and GPT-1's input transformations: docs/MODELS.md, "GPT and GPT-2".
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .layers import (
    ConfigError,
    ModelOutput,
    TransformerBlock,
    attention_bias,
    check_classifier,
    check_pooling,
    check_transformer_config,
    classification_loss,
    init_normal,
    last_token_state,
    lm_loss,
    mean_state,
    no_padding,
    preset,
    scaled_init_std,
)


# ----------------------------------------------------------------------------- config


@dataclass
class GPTConfig:
    """GPT-1 / GPT-2 hyper-parameters; the defaults are GPT-2 small (124M)."""

    vocab_size: int = 50257
    n_positions: int = 1024  # the longest sequence (learned position table)
    d_model: int = 768
    n_layers: int = 12
    n_heads: int = 12
    d_ff: int = 3072
    act: str = "gelu_tanh"  # "gelu_new" in the released GPT-1 and GPT-2 configs
    norm_first: bool = True  # False: GPT-1 (post-LN, no final LN); True: GPT-2 (pre-LN + final LN)
    dropout: float = 0.1  # residual dropout (after attention and after the FFN)
    attn_dropout: float = 0.1  # on the attention probabilities
    embd_dropout: float = 0.1  # on token + position embeddings
    eps: float = 1e-5  # LayerNorm epsilon
    init_std: float = 0.02
    scaled_residual_init: bool = True  # GPT-2: residual projections drawn with init_std / sqrt(2 n_layers)
    classifier_pooling: str = "default"  # sequence classifier input: "default" = the last real token, "mean" = token mean
    # GPT-3 (Brown et al. 2020, section 2.1): "alternating dense and locally banded sparse attention
    # patterns in the layers of the transformer, similar to the Sparse Transformer". None: every layer
    # dense (GPT-1, GPT-2); w: the odd layers (the 2nd, 4th, ...) see only the w latest positions
    # (the query's own included), the even ones everything before them
    local_attention_window: int | None = None

    def validate(self) -> None:
        check_transformer_config(self, ("vocab_size", "n_positions", "d_model", "n_layers", "n_heads", "d_ff"),
                                 ("dropout", "attn_dropout", "embd_dropout"))
        check_pooling(self.classifier_pooling)
        w = self.local_attention_window
        if w is not None and (isinstance(w, bool) or not isinstance(w, int) or w < 1):
            raise ConfigError(f"GPT.local_attention_window must be a positive integer or None, got {w!r}")

    def banded(self, layer: int) -> bool:
        """Whether ``layer`` (0-based) attends within the local band."""
        return self.local_attention_window is not None and layer % 2 == 1

    @classmethod
    def from_name(cls, name: str, **overrides) -> "GPTConfig":
        """A preset by name (``PRESETS``) with ``overrides``; unknown names are an error."""
        return preset(PRESETS, "GPT", name, **overrides)


PRESETS: dict[str, GPTConfig] = {
    # GPT-2 small, 124M parameters (the embedding is tied, so counted once)
    "gpt2": GPTConfig(),
    # GPT-2 medium, 355M
    "gpt2-medium": GPTConfig(d_model=1024, n_layers=24, n_heads=16, d_ff=4096),
    # GPT-1: 12 x 768, 12 heads, post-LN, BPE vocabulary of 40478, 512 positions (~117M)
    "openai-gpt": GPTConfig(vocab_size=40478, n_positions=512, norm_first=False, scaled_residual_init=False),
    # a GPT-2 shaped model that trains on a CPU (4 layers x 128 wide); set vocab_size from the tokenizer
    "gpt-tiny": GPTConfig(vocab_size=8192, n_positions=256, d_model=128, n_layers=4, n_heads=4, d_ff=512),
}


# ----------------------------------------------------------------------------- body


class GPTModel(nn.Module):
    """Embeddings + causal transformer blocks (+ the final LN of GPT-2): (B, L) ids -> (B, L, D)."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        config.validate()
        self.config = config
        c = config
        self.wte = nn.Embedding(c.vocab_size, c.d_model)  # token embedding, also the output projection
        self.wpe = nn.Embedding(c.n_positions, c.d_model)  # learned absolute positions
        self.drop = nn.Dropout(c.embd_dropout)
        self.blocks = nn.ModuleList(
            TransformerBlock(c.d_model, c.n_heads, c.d_ff, c.act, c.dropout, c.attn_dropout, c.norm_first, c.eps)
            for _ in range(c.n_layers)
        )
        # pre-LN leaves the residual stream un-normalised after the last block: GPT-2 adds one LN
        self.ln_f = nn.LayerNorm(c.d_model, eps=c.eps) if c.norm_first else nn.Identity()

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        L = input_ids.shape[1]
        if L > self.config.n_positions:
            raise ValueError(f"sequence length {L} exceeds n_positions {self.config.n_positions}")
        positions = torch.arange(L, device=input_ids.device)  # (L,)
        x = self.drop(self.wte(input_ids) + self.wpe(positions))  # (B, L, D)
        if no_padding(attention_mask):
            bias, causal_only = None, True  # no padding: SDPA builds the causal mask itself
        else:  # padding and causality in one additive mask (B, 1, L, L)
            bias, causal_only = attention_bias(attention_mask, L, L, True, x.dtype, x.device), False
        band = None
        if self.config.local_attention_window is not None:  # the banded layers' mask: causal, padding, band
            band = band_bias(L, self.config.local_attention_window, x.dtype, x.device)
            band = band if bias is None else (bias + band).clamp(min=torch.finfo(x.dtype).min)
        for i, block in enumerate(self.blocks):
            x = block(x, band, False) if self.config.banded(i) else block(x, bias, causal_only)
        return self.ln_f(x)


def band_bias(length: int, window: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """(1, 1, L, L) additive mask: query i sees keys j with 0 <= i - j < ``window``."""
    distance = torch.arange(length, device=device)[:, None] - torch.arange(length, device=device)[None, :]
    allowed = (distance >= 0) & (distance < window)
    return torch.zeros(1, 1, length, length, dtype=dtype, device=device).masked_fill(~allowed, torch.finfo(dtype).min)


class _GPTPreTrained(nn.Module):
    """Shared by the heads: the body, the tied output projection and the initialisation."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.config = config
        self.gpt = GPTModel(config)

    def _init_weights(self) -> None:
        c = self.config
        init_normal(self, c.init_std)
        if c.scaled_residual_init:  # GPT-2: the two projections that add into the residual stream
            std = scaled_init_std(c.n_layers, c.init_std)
            for block in self.gpt.blocks:
                nn.init.normal_(block.attn.out.weight, 0.0, std)
                nn.init.normal_(block.ffn.fc2.weight, 0.0, std)

    def lm_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return F.linear(hidden, self.gpt.wte.weight)  # (B, L, V), tied to the input embedding


# ----------------------------------------------------------------------------- heads


class GPTLMHeadModel(_GPTPreTrained):
    """Causal LM: ``labels`` are the inputs, shifted once here (logits at t predict labels[t+1])."""

    def __init__(self, config: GPTConfig):
        super().__init__(config)
        self._init_weights()

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
    ) -> ModelOutput:
        hidden = self.gpt(input_ids, attention_mask)  # (B, L, D)
        logits = self.lm_logits(hidden)  # (B, L, V)
        loss = lm_loss(logits, labels, shift=True) if labels is not None else None
        return ModelOutput(logits=logits, loss=loss, hidden_states=hidden)


class GPTForSequenceClassification(_GPTPreTrained):
    """GPT-1 fine-tuning: classify from the last real token's final state; optional auxiliary LM loss.

    The classified position is the last one where ``attention_mask`` is 1 (the last position
    when there is no mask), so rows may be padded on either side. ``logits`` (B, num_labels);
    ``labels`` (B,) are class ids, or float targets when ``num_labels == 1`` (regression, mean
    squared error). With ``lm_coef > 0`` (GPT-1 used 0.5) and labels given, the loss adds
    ``lm_coef`` x the next-token loss over the real tokens of the same inputs; ``aux`` then holds
    ``cls_loss`` and ``lm_loss``. ``classifier_dropout`` 0.1 is GPT-1's.
    """

    def __init__(self, config: GPTConfig, num_labels: int = 2, lm_coef: float = 0.0, classifier_dropout: float = 0.1):
        super().__init__(config)
        check_classifier(num_labels, classifier_dropout)
        if lm_coef < 0:
            raise ConfigError(f"lm_coef must be >= 0, got {lm_coef}")
        self.num_labels = num_labels
        self.lm_coef = lm_coef
        self.dropout = nn.Dropout(classifier_dropout)
        self.score = nn.Linear(config.d_model, num_labels, bias=False)  # GPT-1's W_y
        self._init_weights()

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
    ) -> ModelOutput:
        hidden = self.gpt(input_ids, attention_mask)  # (B, L, D)
        pooled = (mean_state if self.config.classifier_pooling == "mean" else last_token_state)(hidden, attention_mask)
        logits = self.score(self.dropout(pooled))  # (B, num_labels)
        out = ModelOutput(logits=logits, hidden_states=hidden)
        if labels is None:
            return out
        out.loss = classification_loss(logits, labels)
        if self.lm_coef > 0:
            lm_labels = input_ids if attention_mask is None else input_ids.masked_fill(attention_mask == 0, -100)
            aux_lm = lm_loss(self.lm_logits(hidden), lm_labels, shift=True)
            out.aux = {"cls_loss": out.loss, "lm_loss": aux_lm}
            out.loss = out.loss + self.lm_coef * aux_lm
        return out
