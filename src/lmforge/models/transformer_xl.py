"""Transformer-XL (Dai et al., 2019): a causal language model with segment-level recurrence
and relative positional encoding.

Read top to bottom: ``TransformerXLConfig`` and ``PRESETS``; ``sinusoid_embedding`` and
``rel_shift`` (the relative positions R_{i-j}, and the shift that turns scores against the
positions ``klen-1 ... 0`` into scores against each key's distance from the query: section
3.3 and appendix B); ``RelativeMultiHeadAttention``, the paper's score
``A_ij = (E_xi W_q + u)^T W_k,E E_xj  +  (E_xi W_q + v)^T W_k,R R_{i-j}`` (u is ``r_w_bias``,
v ``r_r_bias``; W_k,E is part of ``qkv``, W_k,R is ``r``); ``TransformerXLLayer`` (post-LN as
the reference, ``pre_lnorm`` for pre-LN); ``TransformerXLModel`` (the word embedding scaled by
sqrt(d_model), the causal mask over [memory; segment], the memory update); the heads
``TransformerXLLMHeadModel`` and ``TransformerXLForSequenceClassification``.

Traps:

- Batches are the ``segments`` objective's: ``labels`` are ALREADY the next tokens, so the
  loss compares logits[t] with labels[t] and the model does not shift again.
- Every forward returns ``n_layers + 1`` detached memories in ``aux["mems"]`` (none when
  ``mem_len = 0``), batch-first, (B, M, D), where the reference keeps (M, B, D); pass them
  back as ``mems=`` with the next segment of the same rows.
- A plain softmax (tied to the word embedding) where the released WikiText-103 models use an
  adaptive one; hence no preset for the large model. Memory and output layer in detail:
  docs/MODELS.md, "Transformer-XL".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .layers import (
    ConfigError,
    ModelOutput,
    activation,
    check_classifier,
    check_pooling,
    classification_loss,
    init_normal,
    last_token_state,
    lm_loss,
    mean_state,
    no_padding,
    preset,
)

# ----------------------------------------------------------------------------- config


@dataclass
class TransformerXLConfig:
    """Transformer-XL hyper-parameters; the defaults are the WikiText-103 base model."""

    vocab_size: int = 267735  # WikiText-103's word vocabulary
    d_model: int = 410
    d_embed: int | None = None  # the word-embedding width; None: d_model (a projection joins them otherwise)
    n_layers: int = 16
    n_heads: int = 10
    d_head: int = 41  # per head; n_heads * d_head need not equal d_model
    d_inner: int = 2100
    tgt_len: int = 150  # training segment length (the ``segments`` objective's segment_length)
    mem_len: int = 150  # cached positions per layer; 0: no memory
    clamp_len: int = -1  # relative distances above it use R_clamp_len; <= 0: no clamping
    same_length: bool = False  # every query sees the same number of keys (the reference's evaluation setting)
    dropout: float = 0.1  # embeddings, positions, residual branches, FF inner, final states
    dropatt: float = 0.0  # on the attention probabilities
    pre_lnorm: bool = False  # False: post-LN, x = LN(x + f(x)) (the reference's default)
    untie_r: bool = False  # False: one u (r_w_bias) and one v (r_r_bias) for all layers, as in the paper
    tie_weights: bool = True  # the output layer is the word-embedding matrix
    act: str = "relu"
    eps: float = 1e-5  # LayerNorm epsilon (PyTorch's default, as in the reference)
    init_std: float = 0.02
    proj_init_std: float = 0.01  # the d_embed <-> d_model projections (the reference's proj_init_std)
    classifier_pooling: str = "default"  # sequence classifier input: "default" = the last real token, "mean" = token mean

    def __post_init__(self) -> None:
        self.validate()

    @property
    def embed_dim(self) -> int:
        return self.d_model if self.d_embed is None else self.d_embed

    def validate(self) -> None:
        cls = type(self).__name__
        check_pooling(self.classifier_pooling)
        for name in ("vocab_size", "d_model", "n_layers", "n_heads", "d_head", "d_inner", "tgt_len"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{cls}.{name} must be at least 1, got {getattr(self, name)}")
        if self.d_embed is not None and self.d_embed < 1:
            raise ConfigError(f"{cls}.d_embed must be at least 1 or None, got {self.d_embed}")
        if self.mem_len < 0:
            raise ConfigError(f"{cls}.mem_len must be >= 0 (0: no memory), got {self.mem_len}")
        if self.d_model % 2:
            raise ConfigError(f"{cls}.d_model must be even (sin | cos halves of the position encoding), got {self.d_model}")
        for name in ("dropout", "dropatt"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ConfigError(f"{cls}.{name} must be in [0, 1), got {getattr(self, name)}")
        if self.eps <= 0 or self.init_std <= 0 or self.proj_init_std <= 0:
            raise ConfigError(f"{cls}: eps, init_std and proj_init_std must be positive")
        activation(self.act)

    @classmethod
    def from_name(cls, name: str, **overrides) -> "TransformerXLConfig":
        return from_name(name, **overrides)


PRESETS: dict[str, TransformerXLConfig] = {
    # WikiText-103 base (run_wt103_base.sh): 16 x 410, 10 heads of 41, inner 2100, tgt_len = mem_len = 150.
    # 151.1M parameters with the plain tied softmax (the paper's "Transformer-XL Standard": 151M).
    "txl-wt103-base": TransformerXLConfig(),
    # enwik8 12-layer (run_enwik8_base.sh): 12 x 512, 8 heads of 64, inner 2048, tgt_len = mem_len = 512,
    # byte vocabulary of 204. 41.1M parameters (the paper's 12L model: 41M).
    "txl-enwik8-base": TransformerXLConfig(vocab_size=204, d_model=512, n_layers=12, n_heads=8, d_head=64,
                                           d_inner=2048, tgt_len=512, mem_len=512),
    # Not a published model: a CPU size for tests and smoke runs; recipes set vocab_size from the tokenizer.
    "txl-tiny": TransformerXLConfig(vocab_size=1024, d_model=64, n_layers=2, n_heads=4, d_head=16, d_inner=128,
                                    tgt_len=32, mem_len=32),
}


def from_name(name: str, **overrides) -> TransformerXLConfig:
    """The preset ``name`` with ``overrides`` (unknown option names are a ConfigError)."""
    return preset(PRESETS, "Transformer-XL", name, **overrides)


# ----------------------------------------------------------------------------- relative positions


def sinusoid_embedding(pos_seq: torch.Tensor, d_model: int) -> torch.Tensor:
    """R for the (possibly negative) distances ``pos_seq`` (R,): [sin(p w) | cos(p w)] with
    w_k = 1 / 10000^(2k / d_model), the halves concatenated (not interleaved) as in the
    reference. (R,) -> (R, d_model), float32."""
    inv_freq = 1.0 / (10000 ** (torch.arange(0, d_model, 2, device=pos_seq.device, dtype=torch.float32) / d_model))
    angles = pos_seq.float()[:, None] * inv_freq[None, :]  # (R, d_model / 2)
    return torch.cat([angles.sin(), angles.cos()], dim=-1)


def rel_shift(x: torch.Tensor) -> torch.Tensor:
    """The relative shift (paper appendix B): scores against positions to scores against keys.

    ``x[..., i, p]`` is query i's score against relative position ``klen - 1 - p`` (the
    positions run klen-1 ... 0). Query i (at absolute position ``mlen + i``) needs, for key j,
    the distance ``mlen + i - j``, i.e. ``p = Q - 1 - i + j``: row i must move left by
    ``Q - 1 - i``. Padding one zero column in front and re-reading the same memory as
    ``(K + 1, Q)`` then ``(Q, K)`` after dropping the first row shifts row i by exactly that:

        x (Q, K) --pad--> (Q, K+1) --view--> (K+1, Q) --[1:]--> (K, Q) --view--> (Q, K)

    so ``out[i, j] = x[i, Q - 1 - i + j]`` for ``j <= mlen + i``. The entries above that
    diagonal (future keys) read wrapped-around values from the next row or the zero pad:
    garbage, which only the causal mask hides. (B, H, Q, K) -> (B, H, Q, K).
    """
    B, H, Q, K = x.shape
    x = F.pad(x, (1, 0))  # (B, H, Q, K + 1): a zero column in front
    x = x.view(B, H, K + 1, Q)  # the same memory read as K + 1 rows of Q
    return x[:, :, 1:].reshape(B, H, Q, K)  # drop the first row, read back as Q x K


def causal_memory_mask(qlen: int, mlen: int, mem_len: int, same_length: bool, device: torch.device) -> torch.Tensor:
    """(Q, K) bool, True = blocked: query i (at position mlen + i) sees keys j <= mlen + i.
    ``same_length`` also blocks the oldest keys so every query sees the same number of keys
    (the reference's dec_attn_mask)."""
    klen = mlen + qlen
    ones = torch.ones(qlen, klen, dtype=torch.bool, device=device)
    blocked = ones.triu(1 + mlen)
    if same_length:
        mask_len = klen - mem_len
        shift = qlen - mask_len if mask_len > 0 else qlen
        blocked = blocked | ones.tril(-shift)
    return blocked


# ----------------------------------------------------------------------------- layers


class PositionwiseFF(nn.Module):
    """fc1 -> act -> dropout -> fc2 -> dropout, residual and LayerNorm (post-LN, or pre-LN
    when ``pre_lnorm``): the FF sublayer of Transformer-XL and XLNet (dropout inside too)."""

    def __init__(self, d_model: int, d_inner: int, act: str, dropout: float, eps: float, pre_lnorm: bool = False):
        super().__init__()
        self.fc1 = nn.Linear(d_model, d_inner)
        self.fc2 = nn.Linear(d_inner, d_model)
        self.act = activation(act)
        self.dropout = nn.Dropout(dropout)
        self.norm = nn.LayerNorm(d_model, eps=eps)
        self.pre_lnorm = pre_lnorm

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.pre_lnorm:
            return x + self.dropout(self.fc2(self.dropout(self.act(self.fc1(self.norm(x))))))
        return self.norm(x + self.dropout(self.fc2(self.dropout(self.act(self.fc1(x))))))


class RelativeMultiHeadAttention(nn.Module):
    """Transformer-XL's relative multi-head attention over [memory; segment]."""

    def __init__(self, config: TransformerXLConfig):
        super().__init__()
        c = config
        self.n_heads, self.d_head = c.n_heads, c.d_head
        inner = c.n_heads * c.d_head
        self.qkv = nn.Linear(c.d_model, 3 * inner, bias=False)  # W_q, W_k,E, W_v
        self.r = nn.Linear(c.d_model, inner, bias=False)  # W_k,R: keys for the positions
        self.out = nn.Linear(inner, c.d_model, bias=False)
        self.norm = nn.LayerNorm(c.d_model, eps=c.eps)
        self.dropatt = nn.Dropout(c.dropatt)
        self.dropout = nn.Dropout(c.dropout)
        self.pre_lnorm = c.pre_lnorm
        self.scale = 1.0 / math.sqrt(c.d_head)
        if c.untie_r:  # a u and a v per layer (the released WT103 large model)
            self.r_w_bias = nn.Parameter(torch.zeros(c.n_heads, c.d_head))
            self.r_r_bias = nn.Parameter(torch.zeros(c.n_heads, c.d_head))
        else:
            self.r_w_bias = self.r_r_bias = None  # the model's shared ones are passed in

    def forward(self, x: torch.Tensor, pos_emb: torch.Tensor, mask: torch.Tensor | None,
                mem: torch.Tensor | None, r_w_bias: torch.Tensor, r_r_bias: torch.Tensor) -> torch.Tensor:
        """x (B, Q, D); pos_emb (K, D) for distances K-1 ... 0; mask (B or 1, 1, Q, K) bool,
        True = blocked; mem (B, M, D) or None."""
        B, Q, _ = x.shape
        cat = x if mem is None else torch.cat([mem, x], dim=1)  # (B, K, D)
        K = cat.size(1)
        heads = self.qkv(self.norm(cat) if self.pre_lnorm else cat)
        q, k, v = heads.split(self.n_heads * self.d_head, dim=-1)
        q = q[:, -Q:].view(B, Q, self.n_heads, self.d_head).transpose(1, 2)  # (B, H, Q, d)
        k = k.view(B, K, self.n_heads, self.d_head).transpose(1, 2)  # (B, H, K, d)
        v = v.view(B, K, self.n_heads, self.d_head).transpose(1, 2)  # (B, H, K, d)
        r = self.r(pos_emb).view(K, self.n_heads, self.d_head).transpose(0, 1)  # (H, K, d)

        u = self.r_w_bias if self.r_w_bias is not None else r_w_bias  # (H, d)
        w = self.r_r_bias if self.r_r_bias is not None else r_r_bias
        content = (q + u[:, None]) @ k.transpose(-1, -2)  # terms (a) + (c): (B, H, Q, K)
        position = rel_shift((q + w[:, None]) @ r.transpose(-1, -2))  # terms (b) + (d), shifted: (B, H, Q, K)
        scores = (content + position) * self.scale
        if mask is not None:  # hides the causal future, where rel_shift left garbage
            scores = scores.masked_fill(mask, torch.finfo(scores.dtype).min)
        probs = self.dropatt(scores.softmax(dim=-1))
        y = (probs @ v).transpose(1, 2).reshape(B, Q, self.n_heads * self.d_head)  # (B, Q, H d)
        y = self.dropout(self.out(y))
        return x + y if self.pre_lnorm else self.norm(x + y)


class TransformerXLLayer(nn.Module):
    def __init__(self, config: TransformerXLConfig):
        super().__init__()
        self.attn = RelativeMultiHeadAttention(config)
        self.ffn = PositionwiseFF(config.d_model, config.d_inner, config.act, config.dropout, config.eps,
                                  config.pre_lnorm)

    def forward(self, x, pos_emb, mask, mem, r_w_bias, r_r_bias):
        return self.ffn(self.attn(x, pos_emb, mask, mem, r_w_bias, r_r_bias))


# ----------------------------------------------------------------------------- model


class TransformerXLModel(nn.Module):
    """(B, Q) ids and memories -> the last layer's states (B, Q, D) and the new memories."""

    def __init__(self, config: TransformerXLConfig):
        super().__init__()
        config.validate()
        self.config = c = config
        self.word = nn.Embedding(c.vocab_size, c.embed_dim)
        self.word_proj = nn.Linear(c.embed_dim, c.d_model, bias=False) if c.embed_dim != c.d_model else None
        self.emb_scale = math.sqrt(c.d_model)  # the reference scales by sqrt(d_model) (its d_proj)
        self.drop = nn.Dropout(c.dropout)
        self.layers = nn.ModuleList(TransformerXLLayer(c) for _ in range(c.n_layers))
        if c.untie_r:
            self.r_w_bias = self.r_r_bias = None
        else:  # u and v: global, shared by every layer
            self.r_w_bias = nn.Parameter(torch.zeros(c.n_heads, c.d_head))
            self.r_r_bias = nn.Parameter(torch.zeros(c.n_heads, c.d_head))

    def embed(self, input_ids: torch.Tensor) -> torch.Tensor:
        x = self.word(input_ids)  # (B, Q, E)
        if self.word_proj is not None:
            x = self.word_proj(x)  # (B, Q, D)
        return x * self.emb_scale

    def forward(self, input_ids: torch.Tensor, mems: list[torch.Tensor] | None = None,
                attention_mask: torch.Tensor | None = None) -> tuple[torch.Tensor, list[torch.Tensor] | None]:
        c = self.config
        B, Q = input_ids.shape
        if mems is not None and len(mems) == 0:
            mems = None
        if mems is not None and len(mems) != c.n_layers + 1:
            raise ValueError(f"expected {c.n_layers + 1} memories (n_layers + 1), got {len(mems)}")
        M = mems[0].size(1) if mems is not None else 0
        K = M + Q
        x = self.embed(input_ids)

        mask = causal_memory_mask(Q, M, c.mem_len, c.same_length, x.device)[None, None]  # (1, 1, Q, K)
        if not no_padding(attention_mask):  # padded keys; memory stays visible
            pad = attention_mask == 0  # (B, Q)
            pad = torch.cat([pad.new_zeros(B, M), pad], dim=1)  # (B, K)
            mask = mask | pad[:, None, None, :]  # (B, 1, Q, K)

        pos_seq = torch.arange(K - 1, -1, -1, device=x.device)  # distances K-1 ... 0
        if c.clamp_len > 0:
            pos_seq = pos_seq.clamp(max=c.clamp_len)
        pos_emb = self.drop(sinusoid_embedding(pos_seq, c.d_model).to(x.dtype))  # (K, D)

        x = self.drop(x)
        hids = [x]  # the n_layers + 1 inputs that become memories
        for i, layer in enumerate(self.layers):
            x = layer(x, pos_emb, mask, None if mems is None else mems[i], self.r_w_bias, self.r_r_bias)
            hids.append(x)
        new_mems = self.update_mems(hids, mems)
        return self.drop(x), new_mems

    def update_mems(self, hids: list[torch.Tensor], mems: list[torch.Tensor] | None) -> list[torch.Tensor] | None:
        """The last mem_len positions of [old memory; current], per hidden input, detached."""
        mem_len = self.config.mem_len
        if mem_len == 0:
            return None
        new = []
        for i, h in enumerate(hids):
            cat = h if mems is None else torch.cat([mems[i].to(h.dtype), h], dim=1)  # (B, M + Q, D)
            new.append(cat[:, -mem_len:].detach())
        return new


def init_weights(module: nn.Module, config: TransformerXLConfig) -> None:
    """N(0, init_std) weights and the u / v biases, zero linear biases, unit LayerNorms; the
    embedding projections N(0, proj_init_std), as in the reference."""
    init_normal(module, config.init_std)
    for m in module.modules():
        if isinstance(m, (TransformerXLModel, RelativeMultiHeadAttention)) and m.r_w_bias is not None:
            nn.init.normal_(m.r_w_bias, 0.0, config.init_std)
            nn.init.normal_(m.r_r_bias, 0.0, config.init_std)
        if isinstance(m, TransformerXLModel) and m.word_proj is not None:
            nn.init.normal_(m.word_proj.weight, 0.0, config.proj_init_std)


# ----------------------------------------------------------------------------- heads


class TransformerXLLMHeadModel(nn.Module):
    """Causal LM with memory: ``logits`` (B, L, V); ``labels`` are the next tokens, already
    shifted (no shift here); ``aux["mems"]`` the n_layers + 1 detached memories for the next
    segment (absent when mem_len = 0)."""

    def __init__(self, config: TransformerXLConfig):
        super().__init__()
        self.config = c = config
        self.transformer = TransformerXLModel(c)
        # the reference's softmax for cluster 0 keeps its own d_model -> d_embed projection (tie_projs[0] False)
        self.out_proj = nn.Linear(c.d_model, c.embed_dim, bias=False) if c.embed_dim != c.d_model else None
        self.lm_head = nn.Linear(c.embed_dim, c.vocab_size, bias=True)
        init_weights(self, c)
        if self.out_proj is not None:
            nn.init.normal_(self.out_proj.weight, 0.0, c.proj_init_std)
        if c.tie_weights:
            self.lm_head.weight = self.transformer.word.weight

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor | None = None,
                mems: list[torch.Tensor] | None = None, attention_mask: torch.Tensor | None = None) -> ModelOutput:
        hidden, new_mems = self.transformer(input_ids, mems, attention_mask)  # (B, L, D)
        h = self.out_proj(hidden) if self.out_proj is not None else hidden
        logits = self.lm_head(h)  # (B, L, V)
        loss = lm_loss(logits, labels) if labels is not None else None  # labels are already the next tokens
        aux = {"mems": new_mems} if new_mems is not None else {}
        return ModelOutput(logits=logits, loss=loss, hidden_states=hidden, aux=aux)


class TransformerXLForSequenceClassification(nn.Module):
    """A linear classifier on the final state of the LAST REAL token (the only one that has seen
    the whole row, attention being causal; the rightmost position where ``attention_mask`` is
    1). ``logits`` (B, num_labels); ``labels`` (B,) class ids, or float targets when
    ``num_labels == 1`` (mean squared error). Memories are accepted and returned as in the LM."""

    def __init__(self, config: TransformerXLConfig, num_labels: int = 2, classifier_dropout: float = 0.1):
        super().__init__()
        check_classifier(num_labels, classifier_dropout)
        self.config = config
        self.num_labels = num_labels
        self.transformer = TransformerXLModel(config)
        self.dropout = nn.Dropout(classifier_dropout)
        self.classifier = nn.Linear(config.d_model, num_labels)
        init_weights(self, config)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                labels: torch.Tensor | None = None, mems: list[torch.Tensor] | None = None) -> ModelOutput:
        hidden, new_mems = self.transformer(input_ids, mems, attention_mask)  # (B, L, D)
        pooled = (mean_state if self.config.classifier_pooling == "mean" else last_token_state)(hidden, attention_mask)
        logits = self.classifier(self.dropout(pooled))  # (B, num_labels)
        loss = classification_loss(logits, labels) if labels is not None else None
        aux = {"mems": new_mems} if new_mems is not None else {}
        return ModelOutput(logits=logits, loss=loss, hidden_states=hidden, aux=aux)
