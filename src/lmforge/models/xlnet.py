"""XLNet (Yang et al., 2019): permutation language modelling on a Transformer-XL backbone
with two-stream attention.

Read top to bottom: ``XLNetConfig`` and ``PRESETS``; ``relative_positions`` (the distances
``klen, ..., -qlen + 1``: attention is bidirectional, so a key can be ahead of the query,
unlike Transformer-XL's ``klen-1 ... 0``); ``rel_shift_bi``, ``rel_gather_index`` and
``target_positions``; ``XLNetRelativeAttention``; ``XLNetModel`` (the masks, the streams, the
layers, the memories); the heads ``XLNetLMHeadModel`` and ``XLNetForSequenceClassification``.

The attention score is content + position (Transformer-XL's u and v) + a relative SEGMENT
term (same segment or not, section 2.5). Two streams share every weight: the content stream h
may see its own token; the query stream g starts from one learned ``mask_emb`` and, under
``perm_mask``, never sees its target's token: it knows WHERE it predicts, not WHAT is there.
The query stream is computed at the P target positions only.

Batches are the ``permutation`` objective's: ``input_ids`` (B, L), ``perm_mask`` (B, L, L;
1 = query i may NOT attend to key j), ``target_mapping`` (B, P, L), ``labels`` (B, P),
``token_type_ids`` and ``attention_mask`` (B, L; 1 = real token). With ``target_mapping`` the
logits are the query stream's, (B, P, V); without, the content stream's, (B, L, V).

Traps: memories (``mem_len > 0``) are batch-first, (B, M, D), where the reference and
transformers keep (M, B, D); the presets have ``mem_len = 0``, as the ``permutation``
objective's pieces do not continue each other. The masks, the memories and the fused GPU
path: docs/MODELS.md, "XLNet".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from .layers import (
    ConfigError,
    ModelOutput,
    activation,
    check_batch,
    check_classifier,
    check_pooling,
    classification_loss,
    init_normal,
    last_token_state,
    lm_loss,
    mean_state,
    preset,
)
from .transformer_xl import PositionwiseFF, sinusoid_embedding

# ----------------------------------------------------------------------------- config

ATTN_TYPES = ("bi", "uni")


@dataclass
class XLNetConfig:
    """XLNet hyper-parameters; the defaults are XLNet-base (cased, ~117M parameters)."""

    vocab_size: int = 32000  # the released SentencePiece vocabulary
    d_model: int = 768
    n_layers: int = 12
    n_heads: int = 12
    d_head: int = 64
    d_inner: int = 3072
    act: str = "gelu"  # ff_activation: "gelu" (exact, as released), "relu" or "gelu_tanh"
    untie_r: bool = True  # True (released models): r_w / r_r / r_s biases per layer; False: shared
    attn_type: str = "bi"  # "bi": XLNet; "uni": causal, Transformer-XL-like
    mem_len: int = 0  # cached positions per layer; 0: no memory
    reuse_len: int = 0  # positions of a segment cached for the next; 0: all
    bi_data: bool = False  # half the batch reads positions backwards (pretraining trick); even batches only
    clamp_len: int = -1  # |distance| clamped to it; <= 0: no clamping
    same_length: bool = False  # with attn_type "uni" only: every query sees the same number of keys
    dropout: float = 0.1  # embeddings, positions, attention probabilities, residual branches, FF inner
    eps: float = 1e-12  # LayerNorm epsilon
    init_std: float = 0.02
    classifier_pooling: str = "default"  # sequence classifier input: "default" = the last real token (<cls>), "mean" = token mean

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        cls = type(self).__name__
        check_pooling(self.classifier_pooling)
        for name in ("vocab_size", "d_model", "n_layers", "n_heads", "d_head", "d_inner"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{cls}.{name} must be at least 1, got {getattr(self, name)}")
        if self.d_model % 2:
            raise ConfigError(f"{cls}.d_model must be even (sin | cos halves of the position encoding), got {self.d_model}")
        if self.attn_type not in ATTN_TYPES:
            raise ConfigError(f"{cls}.attn_type must be one of {ATTN_TYPES}, got {self.attn_type!r}")
        if self.mem_len < 0 or self.reuse_len < 0:
            raise ConfigError(f"{cls}: mem_len ({self.mem_len}) and reuse_len ({self.reuse_len}) must be >= 0")
        if self.same_length and self.attn_type != "uni":
            raise ConfigError(f"{cls}.same_length applies to attn_type 'uni' only (it shapes the causal mask)")
        if not 0.0 <= self.dropout < 1.0:
            raise ConfigError(f"{cls}.dropout must be in [0, 1), got {self.dropout}")
        if self.eps <= 0 or self.init_std <= 0:
            raise ConfigError(f"{cls}: eps ({self.eps}) and init_std ({self.init_std}) must be positive")
        activation(self.act)

    @classmethod
    def from_name(cls, name: str, **overrides) -> "XLNetConfig":
        return from_name(name, **overrides)


PRESETS: dict[str, XLNetConfig] = {
    # xlnet-base-cased: 12 x 768, 12 heads of 64, inner 3072; 116.75M parameters (transformers'
    # XLNetLMHeadModel count; the paper only says "the same size as BERT-Base", 110M).
    "xlnet-base": XLNetConfig(),
    # xlnet-large-cased: 24 x 1024, 16 heads of 64, inner 4096; 360.3M (transformers' count; "BERT-Large size").
    "xlnet-large": XLNetConfig(d_model=1024, n_layers=24, n_heads=16, d_inner=4096),
    # Not a released model: a CPU size for tests and smoke runs; recipes set vocab_size from the tokenizer.
    "xlnet-tiny": XLNetConfig(vocab_size=1024, d_model=64, n_layers=2, n_heads=4, d_head=16, d_inner=128),
}


def from_name(name: str, **overrides) -> XLNetConfig:
    """The preset ``name`` with ``overrides`` (unknown option names are a ConfigError)."""
    return preset(PRESETS, "XLNet", name, **overrides)


# ----------------------------------------------------------------------------- relative positions


def relative_positions(config: XLNetConfig, qlen: int, klen: int, batch_size: int, device: torch.device) -> torch.Tensor:
    """R for the distances ``klen, klen-1, ..., end + 1`` (end = -qlen for "bi", -1 for "uni"):
    (1 or B, R, D), float32. One more distance than the farthest key on each side, so that
    ``rel_shift_bi`` can drop a row instead of padding. With ``bi_data`` the second half of
    the batch reads the distances negated (the sequence backwards)."""
    end = -qlen if config.attn_type == "bi" else -1
    fwd = torch.arange(klen, end, -1, device=device)  # (R,)
    seqs = [fwd, -fwd] if config.bi_data else [fwd]
    embs = []
    for seq in seqs:
        if config.clamp_len > 0:
            seq = seq.clamp(-config.clamp_len, config.clamp_len)
        embs.append(sinusoid_embedding(seq, config.d_model))  # (R, D)
    if not config.bi_data:
        return embs[0][None]  # (1, R, D), broadcast over the batch
    if batch_size % 2:
        raise ValueError(f"bi_data needs an even batch size (forward half, backward half), got {batch_size}")
    half = batch_size // 2
    return torch.cat([embs[0][None].expand(half, -1, -1), embs[1][None].expand(half, -1, -1)])  # (B, R, D)


def rel_shift_bi(x: torch.Tensor, klen: int) -> torch.Tensor:
    """XLNet's relative shift: (..., Q, R) scores against distances ``klen ... klen - R + 1``
    -> (..., Q, klen) scores against keys, ``out[i, j] = x[i, Q + j - i]`` (distance
    ``mlen + i - j``). Row i of the result starts ``Q - i`` entries into row i of x, so reading
    x's rows flattened, from entry Q on, in rows of ``R - 1`` is the whole shift: views only,
    no copy after ``contiguous`` (the reference re-reads (Q, R) as (R, Q), drops a row, reads
    back and copies the first klen columns). Nothing wraps into
    the next row because R covers every distance a (query, key) pair can have, so unlike
    Transformer-XL's ``rel_shift`` no zero column (and no garbage) is needed; with
    attn_type "uni" (R = klen + 1) the entries that do wrap are the masked future keys."""
    Q, R = x.shape[-2:]
    flat = x.contiguous().flatten(-2)[..., Q:]  # (..., Q * (R - 1))
    return flat.unflatten(-1, (Q, R - 1))[..., :klen]


def rel_gather_index(positions: torch.Tensor, qlen: int, klen: int, rlen: int) -> torch.Tensor:
    """``rel_shift_bi`` for queries at arbitrary positions (the query stream's targets): the
    index (B, P, klen) such that ``x.gather(-1, index)`` maps (..., P, R) scores against
    distances to (..., P, klen) scores against keys, ``out[p, j] = x[p, qlen + j - pos_p]``.
    Clamped for attn_type "uni", whose R stops at distance 0 (the keys past it are masked)."""
    keys = torch.arange(klen, device=positions.device)
    return (qlen + keys - positions[..., None]).clamp_(max=rlen - 1)  # (B, P, K)


def target_positions(target_mapping: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """target_mapping (B, P, L) -> the position each prediction row points at (B, P) and
    whether the row is real (B, P) (zero rows pad the targets). transformers accepts any float
    mapping and mixes queries with it; the query stream here runs at the P target positions
    only, exact for what the objective builds: one-hot rows at distinct positions."""
    tm = target_mapping.float()  # int8 from the feature converter
    one_hot = ((tm == 0) | (tm == 1)).all() & (tm.sum(-1) <= 1).all() & (tm.sum(1) <= 1).all()
    check_batch(one_hot, "target_mapping rows must be one-hot (or all zero) at distinct positions")
    return tm.argmax(-1), tm.sum(-1) > 0


# ----------------------------------------------------------------------------- attention


@dataclass
class StreamMasks:
    """What the layers share, built once per forward from the batch. Masks are bool, True =
    blocked, None when nothing is; ``seg_*`` are 1.0 where query and key are in different
    segments. The query stream's rows are its P target positions'."""

    mask_h: torch.Tensor | None  # (B|1, L, K) content stream
    seg_h: torch.Tensor | None  # (B, L, K)
    mask_g: torch.Tensor | None = None  # (B|1, P, K) query stream
    seg_g: torch.Tensor | None = None  # (B, P, K)
    shift_g: torch.Tensor | None = None  # (B, P, K): rel_gather_index of the targets
    real_g: torch.Tensor | None = None  # (B, P, 1): 0.0 on target_mapping's zero rows
    biases: dict = field(default_factory=dict)  # mask_bias of each mask, made once per dtype

    def bias(self, stream: str, dtype: torch.dtype) -> torch.Tensor | None:
        """The score bias of stream "h" or "g" (mask_bias), shared by every layer."""
        mask = self.mask_h if stream == "h" else self.mask_g
        if mask is None:
            return None
        if (stream, dtype) not in self.biases:
            self.biases[stream, dtype] = mask_bias(mask, dtype)
        return self.biases[stream, dtype]


def mask_bias(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A bool mask (True = blocked) as a score bias: 0 or half the dtype's lowest value (finite
    after adding the other terms, so a fully blocked row is uniform, never NaN)."""
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill_(mask, torch.finfo(dtype).min / 2)


def position_scores(q: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
    """q (H, B, Q, d) @ r (H, B|1, d, R) -> (H, B, Q, R). One position table for the batch
    (no bi_data) makes it one (B * Q, d) @ (d, R) matmul per head."""
    H, B, Q, d = q.shape
    if r.size(1) == 1:
        return torch.bmm(q.reshape(H, B * Q, d), r[:, 0]).view(H, B, Q, -1)
    return q @ r


class XLNetRelativeAttention(nn.Module):
    """Relative attention shared by both streams; post-attention residual + LayerNorm.
    Computed heads first, (H, B, L, d), so that every product is one batched matmul.
    ``fused`` None (the default): the content term, softmax and values go through
    ``scaled_dot_product_attention`` on a GPU, written out elsewhere (on a CPU SDPA has no
    fused kernel that gives the additive scores a gradient); True or False forces one."""

    fused: bool | None = None

    def __init__(self, config: XLNetConfig):
        super().__init__()
        c = config
        self.n_heads, self.d_head = c.n_heads, c.d_head
        inner = c.n_heads * c.d_head
        self.q = nn.Linear(c.d_model, inner, bias=False)
        self.k = nn.Linear(c.d_model, inner, bias=False)
        self.v = nn.Linear(c.d_model, inner, bias=False)
        self.r = nn.Linear(c.d_model, inner, bias=False)  # keys for the positions (W_k,R)
        self.o = nn.Linear(inner, c.d_model, bias=False)
        self.seg_embed = nn.Parameter(torch.zeros(2, c.n_heads, c.d_head))  # [same segment, different segment]
        if c.untie_r:
            self.r_w_bias = nn.Parameter(torch.zeros(c.n_heads, c.d_head))  # content bias (u)
            self.r_r_bias = nn.Parameter(torch.zeros(c.n_heads, c.d_head))  # position bias (v)
            self.r_s_bias = nn.Parameter(torch.zeros(c.n_heads, c.d_head))  # segment bias
        else:
            self.r_w_bias = self.r_r_bias = self.r_s_bias = None  # the model's shared ones are passed in
        self.norm = nn.LayerNorm(c.d_model, eps=c.eps)
        self.dropout = nn.Dropout(c.dropout)
        self.scale = 1.0 / math.sqrt(c.d_head)

    def heads(self, x: torch.Tensor, *weights: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """x (B, L, D) through the weights side by side, one matmul -> one (H, B, L, d) each."""
        B, L, _ = x.shape
        y = F.linear(x, torch.cat(weights) if len(weights) > 1 else weights[0])  # (B, L, n * H * d)
        return y.view(B, L, len(weights), self.n_heads, self.d_head).permute(2, 3, 0, 1, 4).contiguous().unbind(0)

    def core(self, q, k, v, r, masks: StreamMasks, stream: str, biases) -> torch.Tensor:
        """q (H, B, Q, d), already scaled by 1/sqrt(d); k, v (H, B, K, d); r (H, B|1, d, R);
        stream "h" (the content stream: its queries are the segment's positions, shifted by
        rel_shift_bi) or "g" (queries at the target positions, gathered by ``masks.shift_g``),
        whose mask and segment matrix ``masks`` holds; biases (H, 1, 1, d) each, scaled as q."""
        r_w, r_r, r_s = biases
        H, B, Q, d = q.shape
        K = k.size(2)
        # position term (q_i + v)^T r_{i-j}: against the R distances, then per key
        position = position_scores(q + r_r, r)  # (H, B, Q, R)
        if stream == "h":
            scores = rel_shift_bi(position, K)  # (H, B, Q, K)
        else:
            scores = position.gather(-1, masks.shift_g.expand(H, -1, -1, -1))  # (H, B, Q, K)
        mask = masks.bias(stream, scores.dtype)  # (B|1, Q, K), the same for every head
        if mask is not None:
            scores = scores + mask
        seg = masks.seg_h if stream == "h" else masks.seg_g
        if seg is not None:
            # segment term (q_i + b)^T s_ij, s_ij = seg_embed[0] (same segment) or seg_embed[1]:
            # the seg_embed[0] part is the same for every key of row i, which the softmax
            # cancels, so only (q_i + b)^T (seg_embed[1] - seg_embed[0]) on different-segment keys
            diff = (self.seg_embed[1] - self.seg_embed[0])[:, None, :, None]  # (H, 1, d, 1)
            scores = torch.addcmul(scores, seg, (q + r_s) @ diff)  # (B, Q, K) x (H, B, Q, 1)
        fused = self.fused if self.fused is not None else q.is_cuda
        if fused:
            # the rest in one fused kernel (on a GPU, memory-efficient SDPA, which also gives the
            # position scores their gradient): the content term, softmax, dropout and the values,
            # without the probabilities ever in memory
            p = self.dropout.p if self.training else 0.0
            return F.scaled_dot_product_attention(q + r_w, k, v, attn_mask=scores, dropout_p=p, scale=1.0)
        # content term (q_i + u)^T k_j, added by the matmul itself
        scores = torch.baddbmm(scores.reshape(H * B, Q, K), (q + r_w).view(H * B, Q, d),
                               k.view(H * B, K, d).transpose(1, 2))  # (H * B, Q, K)
        probs = self.dropout(scores.softmax(dim=-1))
        return torch.bmm(probs, v.view(H * B, K, d)).view(H, B, Q, d)

    def post(self, x: torch.Tensor, vec: torch.Tensor) -> torch.Tensor:
        H, B, L, d = vec.shape
        y = self.o(vec.permute(1, 2, 0, 3).reshape(B, L, H * d))  # (B, L, D)
        return self.norm(x + self.dropout(y))

    def forward(self, h, g, mem, pos_emb, masks: StreamMasks, shared_biases, need_h: bool = True):
        """h (B, L, D) content stream; g (B, P, D) query stream at the target positions, or
        None; mem (B, M, D) or None; pos_emb (B|1, R, D). need_h False (the last layer, when
        the query stream is the output): h only gives the keys and values, and h_out is None.
        Returns (h_out, g_out)."""
        out, n_h = self.attend(h, g, mem, pos_emb, masks, shared_biases, need_h)
        return (out[:, :n_h] if need_h else None), (out[:, n_h:] if g is not None else None)

    def attend(self, h, g, mem, pos_emb, masks: StreamMasks, shared_biases, need_h: bool = True):
        """``forward``'s streams side by side: (B, n_h + P, D), the content stream's n_h rows
        (L, or 0 when not needed) then the query stream's P. Every step after the scores acts
        on each row alone (output projection, residual, LayerNorm, and the layer's feed-forward
        network), so both streams go through them together: one pass of each, not two."""
        H, d = self.n_heads, self.d_head
        biases = (self.r_w_bias, self.r_r_bias, self.r_s_bias) if self.r_w_bias is not None else shared_biases
        biases = tuple((b * self.scale)[:, None, None, :] for b in biases)  # (H, 1, 1, d) each
        w_q = self.q.weight * self.scale  # 1/sqrt(d) folded into the queries: every score term is scaled
        if mem is None and need_h:
            q, k, v = self.heads(h, w_q, self.k.weight, self.v.weight)  # (H, B, L, d) each
        else:
            cat = h if mem is None else torch.cat([mem, h], dim=1)  # (B, K, D)
            k, v = self.heads(cat, self.k.weight, self.v.weight)  # (H, B, K, d)
            q = self.heads(h, w_q)[0] if need_h else None  # (H, B, L, d)
        Br, R, _ = pos_emb.shape
        r = self.r(pos_emb).view(Br, R, H, d).permute(2, 0, 3, 1)  # (H, B|1, d, R)

        # content stream: every position, may see its own token
        vec_h = self.core(q, k, v, r, masks, "h", biases) if need_h else None  # (H, B, L, d)
        if g is None:
            return self.post(h, vec_h), h.size(1)
        # query stream: the same keys and values, queried from the targets' positions
        q_g = self.heads(g, w_q)[0]  # (H, B, P, d)
        vec_g = self.core(q_g, k, v, r, masks, "g", biases) * masks.real_g  # zero rows attend to nothing, as in transformers
        if vec_h is None:
            return self.post(g, vec_g), 0
        return self.post(torch.cat([h, g], dim=1), torch.cat([vec_h, vec_g], dim=2)), h.size(1)


class XLNetLayer(nn.Module):
    def __init__(self, config: XLNetConfig):
        super().__init__()
        self.rel_attn = XLNetRelativeAttention(config)
        self.ff = PositionwiseFF(config.d_model, config.d_inner, config.act, config.dropout, config.eps)

    def forward(self, h, g, mem, pos_emb, masks, shared_biases, need_h=True):
        out, n_h = self.rel_attn.attend(h, g, mem, pos_emb, masks, shared_biases, need_h)
        out = self.ff(out)  # one FF, both streams side by side
        return (out[:, :n_h] if need_h else None), (out[:, n_h:] if g is not None else None)


# ----------------------------------------------------------------------------- model


class XLNetModel(nn.Module):
    """Returns the final states of the query stream (B, P, D) when ``target_mapping`` is given,
    of the content stream (B, L, D) otherwise, and the new memories (None when mem_len = 0)."""

    def __init__(self, config: XLNetConfig):
        super().__init__()
        config.validate()
        self.config = c = config
        self.word_embedding = nn.Embedding(c.vocab_size, c.d_model)
        self.layers = nn.ModuleList(XLNetLayer(c) for _ in range(c.n_layers))
        # the query stream's input; trained only by batches with target_mapping
        self.mask_emb = nn.Parameter(torch.zeros(1, 1, c.d_model))
        self.dropout = nn.Dropout(c.dropout)
        if c.untie_r:
            self.r_w_bias = self.r_r_bias = self.r_s_bias = None
        else:  # one set for every layer (the reference's untie_r=False)
            self.r_w_bias = nn.Parameter(torch.zeros(c.n_heads, c.d_head))
            self.r_r_bias = nn.Parameter(torch.zeros(c.n_heads, c.d_head))
            self.r_s_bias = nn.Parameter(torch.zeros(c.n_heads, c.d_head))

    def blocked(self, rows: torch.Tensor, M: int, K: int, padding, perm_rows) -> torch.Tensor | None:
        """Keys hidden from queries at positions ``rows`` (B|1, Q) of the segment: (B|1, Q, K)
        bool, True = blocked, or None. padding (B, L) bool or None; perm_rows (B, Q, L) bool
        (perm_mask's rows of those queries) or None. The memory is visible to every query."""
        c = self.config
        keys = torch.arange(K, device=rows.device)
        out = None
        if c.attn_type == "uni":
            out = keys > M + rows[..., None]  # the future
            if c.same_length:  # also keys j < i: every query sees M + 1 keys (the reference's mask_lo)
                out = out | (keys < rows[..., None])
        data = None
        if padding is not None:
            data = padding[:, None, :]  # (B, 1, L)
        if perm_rows is not None:
            data = perm_rows if data is None else data | perm_rows
        if data is not None:
            if M:
                data = torch.cat([data.new_zeros(*data.shape[:2], M), data], dim=2)  # (B, Q|1, K)
            out = data if out is None else out | data
        return out

    def stream_masks(self, B: int, L: int, M: int, attention_mask, perm_mask, token_type_ids, positions, real,
                     rlen: int, dtype: torch.dtype, device) -> StreamMasks:
        """The masks and segment matrices of both streams (the query stream's when positions,
        (B, P), is given). Query stream: blocked(i, j) = perm_mask[i, j] or j is padding (or
        j > i with "uni"); content stream: the same with its own token allowed."""
        padding = (attention_mask == 0) if attention_mask is not None else None  # (B, L)
        perm = (perm_mask > 0) if perm_mask is not None else None  # (B, L, L)
        rows = torch.arange(L, device=device)[None]  # (1, L)
        mask_h = self.blocked(rows, M, M + L, padding, perm)
        if mask_h is not None:  # a token always sees itself
            mask_h = mask_h & (torch.arange(M + L, device=device) != M + rows[..., None])
        seg_h = seg_g = None
        if token_type_ids is not None:  # 1 where i and j are in different segments; memory counts as segment 0
            cat_ids = torch.cat([token_type_ids.new_zeros(B, M), token_type_ids], dim=1)[:, None, :]  # (B, 1, K)
            seg_h = (token_type_ids[:, :, None] != cat_ids).to(dtype)  # (B, L, K)
        if positions is None:
            return StreamMasks(mask_h, seg_h)
        P = positions.size(1)
        perm_g = perm.gather(1, positions[..., None].expand(B, P, L)) if perm is not None else None  # (B, P, L)
        mask_g = self.blocked(positions, M, M + L, padding, perm_g)
        if token_type_ids is not None:
            seg_g = (token_type_ids.gather(1, positions)[:, :, None] != cat_ids).to(dtype)  # (B, P, K)
        return StreamMasks(mask_h, seg_h, mask_g, seg_g, rel_gather_index(positions, L, M + L, rlen),
                           real[..., None].to(dtype))

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None, perm_mask: torch.Tensor | None = None,
                target_mapping: torch.Tensor | None = None, mems: list[torch.Tensor] | None = None,
                ) -> tuple[torch.Tensor, list[torch.Tensor] | None]:
        c = self.config
        B, L = input_ids.shape
        if mems is not None and len(mems) == 0:
            mems = None
        if mems is not None and len(mems) != c.n_layers:
            raise ValueError(f"expected {c.n_layers} memories (one per layer), got {len(mems)}")
        M = mems[0].size(1) if mems is not None else 0
        device = input_ids.device

        h = self.dropout(self.word_embedding(input_ids))  # (B, L, D) content stream
        dtype = h.dtype
        pos_emb = self.dropout(relative_positions(c, L, M + L, B, device).to(dtype))  # (B|1, R, D)
        g = positions = real = None
        if target_mapping is not None:  # the query stream, only at the P targets' positions
            positions, real = target_positions(target_mapping)  # (B, P)
            g = self.dropout(self.mask_emb.to(dtype).expand(B, positions.size(1), -1))  # (B, P, D)
        masks = self.stream_masks(B, L, M, attention_mask, perm_mask, token_type_ids, positions, real,
                                  pos_emb.size(1), dtype, device)
        shared = (self.r_w_bias, self.r_r_bias, self.r_s_bias)

        new_mems = [] if c.mem_len > 0 else None
        for i, layer in enumerate(self.layers):
            mem = None if mems is None else mems[i].to(dtype)
            if new_mems is not None:
                new_mems.append(self.cache(h, mem))
            # with the query stream as the output, the last layer's content stream feeds nothing
            need_h = g is None or i < c.n_layers - 1
            h, g = layer(h, g, mem, pos_emb, masks, shared, need_h)
        return self.dropout(g if g is not None else h), new_mems

    def cache(self, h: torch.Tensor, mem: torch.Tensor | None) -> torch.Tensor:
        """A layer's input, its first reuse_len positions (all when 0) after the old memory,
        cut to the last mem_len, detached."""
        c = self.config
        cur = h[:, : c.reuse_len] if c.reuse_len > 0 else h
        cat = cur if mem is None else torch.cat([mem, cur], dim=1)
        return cat[:, -c.mem_len:].detach()


def init_weights(module: nn.Module, config: XLNetConfig) -> None:
    """N(0, init_std) for every weight, bias vector, segment embedding and the mask
    embedding; zero linear biases; unit LayerNorms (as transformers initialises XLNet)."""
    init_normal(module, config.init_std)
    for m in module.modules():
        for name in ("r_w_bias", "r_r_bias", "r_s_bias", "seg_embed", "mask_emb"):
            p = getattr(m, name, None)
            if isinstance(p, nn.Parameter):
                nn.init.normal_(p, 0.0, config.init_std)


# ----------------------------------------------------------------------------- heads


class XLNetLMHeadModel(nn.Module):
    """Permutation LM: ``logits = h E^T + b`` (tied to the word embedding, with an output-only
    bias). With ``target_mapping``: (B, P, V) from the query stream, ``labels`` (B, P); without:
    (B, L, V) from the content stream, ``labels`` (B, L). -100 labels are ignored. No shift."""

    def __init__(self, config: XLNetConfig):
        super().__init__()
        self.config = config
        self.transformer = XLNetModel(config)
        self.lm_bias = nn.Parameter(torch.zeros(config.vocab_size))
        init_weights(self, config)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None, perm_mask: torch.Tensor | None = None,
                target_mapping: torch.Tensor | None = None, labels: torch.Tensor | None = None,
                mems: list[torch.Tensor] | None = None) -> ModelOutput:
        hidden, new_mems = self.transformer(input_ids, attention_mask, token_type_ids, perm_mask, target_mapping, mems)
        logits = F.linear(hidden, self.transformer.word_embedding.weight, self.lm_bias)  # (B, P or L, V)
        loss = lm_loss(logits, labels) if labels is not None else None
        aux = {"mems": new_mems} if new_mems is not None else {}
        return ModelOutput(logits=logits, loss=loss, hidden_states=hidden, aux=aux)


class XLNetForSequenceClassification(nn.Module):
    """XLNet's fine-tuning classifier: the summary of the LAST token, which is ``<cls>`` in
    XLNet's ``A <sep> B <sep> <cls>`` layout (the reference's "last" summary type): dense +
    tanh + dropout, then a linear layer to ``num_labels``. With ``attention_mask`` the last
    REAL token is summarised, so right padding (our feature converter's) reads <cls> too; with
    left padding (transformers' XLNet tokenizer) or none it is the last position, as in the
    reference. ``labels`` (B,) class ids, or float targets when ``num_labels == 1`` (MSE).
    ``classifier_dropout`` is transformers' ``summary_last_dropout``."""

    def __init__(self, config: XLNetConfig, num_labels: int = 2, classifier_dropout: float = 0.1):
        super().__init__()
        check_classifier(num_labels, classifier_dropout)
        self.config = config
        self.num_labels = num_labels
        self.classifier_dropout = classifier_dropout
        self.transformer = XLNetModel(config)
        self.summary = nn.Linear(config.d_model, config.d_model)
        self.dropout = nn.Dropout(classifier_dropout)
        self.logits_proj = nn.Linear(config.d_model, num_labels)
        init_weights(self, config)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None, labels: torch.Tensor | None = None,
                mems: list[torch.Tensor] | None = None) -> ModelOutput:
        hidden, new_mems = self.transformer(input_ids, attention_mask, token_type_ids, mems=mems)  # (B, L, D)
        pooled = (mean_state if self.config.classifier_pooling == "mean" else last_token_state)(hidden, attention_mask)
        logits = self.logits_proj(self.dropout(torch.tanh(self.summary(pooled))))  # (B, num_labels)
        loss = classification_loss(logits, labels) if labels is not None else None
        aux = {"mems": new_mems} if new_mems is not None else {}
        return ModelOutput(logits=logits, loss=loss, hidden_states=hidden, aux=aux)
