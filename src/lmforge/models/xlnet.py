"""XLNet (Yang et al., 2019): permutation language modelling on a Transformer-XL backbone
with two-stream attention.

Read top to bottom:

1. ``XLNetConfig`` and ``PRESETS`` (``from_name("xlnet-base")``).
2. ``relative_positions``: the sinusoid R for the distances ``klen, klen-1, ..., -qlen + 1``:
   attention is bidirectional, so a key can be ahead of the query (negative distance), unlike
   Transformer-XL's ``klen-1 ... 0`` (transformer_xl.py, where ``sinusoid_embedding`` lives).
3. ``rel_shift_bi``: XLNet's relative shift, which needs no zero pad because the positions run
   one past the farthest key on both sides.
4. ``XLNetRelativeAttention``: ``score_ij = (q_i + r_w_bias)^T k_j  +  (q_i + r_r_bias)^T r_{i-j}
   + (q_i + r_s_bias)^T s_ij``: content, position (Transformer-XL's u and v) and the relative
   SEGMENT term: ``s_ij`` is ``seg_embed[0]`` when i and j are in the same segment and
   ``seg_embed[1]`` when not (section 2.5), so segments are compared, never numbered.
   Two streams share every weight:

   - the content stream h starts from the word embeddings and may see its own token;
   - the query stream g starts from one learned ``mask_emb`` and attends to the content
     stream's keys and values under ``perm_mask``, which hides every target's own token from
     it: it knows WHERE it predicts (its position, through r) but not WHAT is there.

5. ``XLNetModel``: the masks (perm_mask, padding, memory), the streams, the layers, memories.
6. Heads: ``XLNetLMHeadModel`` (permutation LM) and ``XLNetForSequenceClassification``.

Batches are the ``permutation`` objective's (``model(**batch)``): ``input_ids`` (B, L),
``perm_mask`` (B, L, L; 1 = query i may NOT attend to key j, padded with 1), ``target_mapping``
(B, P, L; row p one-hot at the p-th predicted position, zero rows past the targets),
``labels`` (B, P; -100 on zero rows), ``token_type_ids`` (B, L) and ``attention_mask``
(B, L; 1 = real token). The masks arrive as ints and are converted here. With
``target_mapping`` the logits are the query stream's, (B, P, V); without, the content
stream's, (B, L, V), scored against ``labels`` (B, L). The masks:

- query stream:   blocked(i, j) = perm_mask[i, j] or j is padding (or j > i with attn_type "uni");
- content stream: the same with the diagonal allowed: a token always sees itself.
- memories (from a previous segment) are visible to both streams.

Memories. With ``mem_len > 0`` every forward returns ``n_layers`` detached memories in
``aux["mems"]``, batch-first (B, M, D): the input of each layer (the content stream), the
first ``reuse_len`` positions of the segment when ``reuse_len > 0``, appended to the old memory
and cut to the last ``mem_len``. XLNet pretraining with memory needs segments that continue
each other (as Transformer-XL's); the ``permutation`` objective yields independent pieces, so
the presets have ``mem_len = 0`` (no memory), the released fine-tuning configuration.

Shapes are batch-first throughout (the reference and transformers compute in (L, B, ...)).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .layers import ConfigError, ModelOutput, activation, init_normal, lm_loss, preset
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

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        cls = type(self).__name__
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
    """XLNet's relative shift: (B, H, Q, R) scores against distances ``klen ... klen - R + 1``
    -> (B, H, Q, klen) scores against keys, ``out[i, j] = x[i, Q + j - i]`` (distance
    ``mlen + i - j``). Re-reading the memory as (R, Q), dropping the first row and reading
    back as (Q, R - 1) moves row i left by ``Q - i``; no entry wraps around because R covers
    every distance a (query, key) pair can have, so unlike Transformer-XL's ``rel_shift`` no
    zero column (and no garbage) is needed."""
    B, H, Q, R = x.shape
    x = x.reshape(B, H, R, Q)[:, :, 1:]  # (B, H, R - 1, Q)
    return x.reshape(B, H, Q, R - 1)[..., :klen]  # (B, H, Q, klen)


# ----------------------------------------------------------------------------- attention


class XLNetRelativeAttention(nn.Module):
    """Relative attention shared by both streams; post-attention residual + LayerNorm."""

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

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        B, L, _ = x.shape
        return x.view(B, L, self.n_heads, self.d_head).transpose(1, 2)  # (B, H, L, d)

    def core(self, q, k, v, r, seg, mask, biases) -> torch.Tensor:
        """q (B, H, Q, d); k, v (B, H, K, d); r (B|1, H, R, d); seg (B, Q, K) bool (True =
        different segments) or None; mask (B|1, Q, K) bool (True = blocked) or None."""
        r_w_bias, r_r_bias, r_s_bias = biases
        K = k.size(2)
        content = (q + r_w_bias[:, None]) @ k.transpose(-1, -2)  # (B, H, Q, K)
        position = rel_shift_bi((q + r_r_bias[:, None]) @ r.transpose(-1, -2), K)  # (B, H, Q, K)
        scores = content + position
        if seg is not None:
            # (q_i + b)^T seg_embed[s] for s = same / different, then pick per (i, j)
            per_kind = torch.einsum("bhqd,shd->bhqs", q + r_s_bias[:, None], self.seg_embed)  # (B, H, Q, 2)
            scores = scores + torch.where(seg[:, None], per_kind[..., 1:], per_kind[..., :1])
        scores = scores * self.scale
        if mask is not None:
            scores = scores.masked_fill(mask[:, None], torch.finfo(scores.dtype).min)
        probs = self.dropout(scores.softmax(dim=-1))
        return probs @ v  # (B, H, Q, d)

    def post(self, x: torch.Tensor, vec: torch.Tensor) -> torch.Tensor:
        B, H, L, d = vec.shape
        y = self.o(vec.transpose(1, 2).reshape(B, L, H * d))
        return self.norm(x + self.dropout(y))

    def forward(self, h, g, mask_h, mask_g, pos_emb, seg, mem, target_mapping, shared_biases):
        """h (B, Q, D) content stream; g (B, P, D) query stream or None; pos_emb (B|1, R, D);
        mem (B, M, D) or None; target_mapping (B, P, Q) float or None."""
        biases = (self.r_w_bias, self.r_r_bias, self.r_s_bias) if self.r_w_bias is not None else shared_biases
        cat = h if mem is None else torch.cat([mem, h], dim=1)  # (B, K, D)
        k, v = self._heads(self.k(cat)), self._heads(self.v(cat))  # (B, H, K, d)
        r = self._heads(self.r(pos_emb))  # (B|1, H, R, d)

        h_out = self.post(h, self.core(self._heads(self.q(h)), k, v, r, seg, mask_h, biases))
        if g is None:
            return h_out, None
        q_g = self._heads(self.q(g))  # (B, H, P, d)
        if target_mapping is not None:
            # place each prediction's query at its position, attend from there, gather back
            q_g = torch.einsum("bhpd,bpl->bhld", q_g, target_mapping)  # (B, H, Q, d)
            vec_g = torch.einsum("bhld,bpl->bhpd", self.core(q_g, k, v, r, seg, mask_g, biases), target_mapping)
        else:
            vec_g = self.core(q_g, k, v, r, seg, mask_g, biases)
        return h_out, self.post(g, vec_g)


class XLNetLayer(nn.Module):
    def __init__(self, config: XLNetConfig):
        super().__init__()
        self.rel_attn = XLNetRelativeAttention(config)
        self.ff = PositionwiseFF(config.d_model, config.d_inner, config.act, config.dropout, config.eps)

    def forward(self, h, g, mask_h, mask_g, pos_emb, seg, mem, target_mapping, shared_biases):
        h, g = self.rel_attn(h, g, mask_h, mask_g, pos_emb, seg, mem, target_mapping, shared_biases)
        return self.ff(h), (self.ff(g) if g is not None else None)  # one FF, both streams


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

    def masks(self, B: int, Q: int, M: int, attention_mask, perm_mask, device):
        """(query-stream mask, content-stream mask), each (B|1, Q, K) bool, True = blocked, or
        (None, None) when nothing is blocked."""
        c = self.config
        K = M + Q
        blocked = None
        if c.attn_type == "uni":
            ones = torch.ones(Q, K, dtype=torch.bool, device=device)
            blocked = ones.triu(M + 1)
            if c.same_length:  # also block keys j < i: every query sees M + 1 keys (the reference's mask_lo)
                blocked = blocked | torch.cat([ones[:, :Q].tril(-1), ~ones[:, Q:]], dim=1)
            blocked = blocked[None]
        data = None
        if attention_mask is not None:  # padded keys, for every query
            data = (attention_mask == 0)[:, None, :].expand(B, Q, Q)
        if perm_mask is not None:
            perm = perm_mask > 0
            data = perm if data is None else data | perm
        if data is not None:
            data = torch.cat([data.new_zeros(B, Q, M), data], dim=2)  # the memory is visible
            blocked = data if blocked is None else blocked | data
        if blocked is None:
            return None, None
        own = torch.eye(Q, dtype=torch.bool, device=device)
        own = torch.cat([own.new_zeros(Q, M), own], dim=1)  # (Q, K): query i's own key M + i
        return blocked, blocked & ~own  # the content stream always sees its own token

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None, perm_mask: torch.Tensor | None = None,
                target_mapping: torch.Tensor | None = None, mems: list[torch.Tensor] | None = None,
                ) -> tuple[torch.Tensor, list[torch.Tensor] | None]:
        c = self.config
        B, Q = input_ids.shape
        if mems is not None and len(mems) == 0:
            mems = None
        if mems is not None and len(mems) != c.n_layers:
            raise ValueError(f"expected {c.n_layers} memories (one per layer), got {len(mems)}")
        M = mems[0].size(1) if mems is not None else 0
        device = input_ids.device

        mask_g, mask_h = self.masks(B, Q, M, attention_mask, perm_mask, device)
        h = self.dropout(self.word_embedding(input_ids))  # (B, Q, D)
        dtype = h.dtype
        g = None
        if target_mapping is not None:
            target_mapping = target_mapping.to(dtype)  # ints from the feature converter
            g = self.dropout(self.mask_emb.to(dtype).expand(B, target_mapping.size(1), -1))  # (B, P, D)

        seg = None
        if token_type_ids is not None:  # True where i and j are in different segments; memory counts as segment 0
            cat_ids = torch.cat([token_type_ids.new_zeros(B, M), token_type_ids], dim=1)  # (B, K)
            seg = token_type_ids[:, :, None] != cat_ids[:, None, :]  # (B, Q, K)

        pos_emb = self.dropout(relative_positions(c, Q, M + Q, B, device).to(dtype))  # (B|1, R, D)
        shared = (self.r_w_bias, self.r_r_bias, self.r_s_bias)

        new_mems = [] if c.mem_len > 0 else None
        for i, layer in enumerate(self.layers):
            mem = None if mems is None else mems[i].to(dtype)
            if new_mems is not None:
                new_mems.append(self.cache(h, mem))
            h, g = layer(h, g, mask_h, mask_g, pos_emb, seg, mem, target_mapping, shared)
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
        if num_labels < 1:
            raise ConfigError(f"num_labels must be >= 1, got {num_labels}")
        if not 0.0 <= classifier_dropout < 1.0:
            raise ConfigError(f"classifier_dropout must be in [0, 1), got {classifier_dropout}")
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
        B, L = input_ids.shape
        hidden, new_mems = self.transformer(input_ids, attention_mask, token_type_ids, mems=mems)  # (B, L, D)
        if attention_mask is None:
            last = torch.full((B,), L - 1, dtype=torch.long, device=input_ids.device)
        else:  # the rightmost real token of each row
            last = (torch.arange(L, device=input_ids.device) * attention_mask.long()).argmax(-1)  # (B,)
        pooled = hidden[torch.arange(B, device=hidden.device), last]  # (B, D)
        logits = self.logits_proj(self.dropout(torch.tanh(self.summary(pooled))))  # (B, num_labels)
        loss = None
        if labels is not None:
            if self.num_labels == 1:
                loss = F.mse_loss(logits.float().reshape(-1), labels.float().reshape(-1))
            else:
                loss = F.cross_entropy(logits.float(), labels.reshape(-1))
        aux = {"mems": new_mems} if new_mems is not None else {}
        return ModelOutput(logits=logits, loss=loss, hidden_states=hidden, aux=aux)
