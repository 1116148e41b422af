"""Switch Transformer (Fedus, Zoph and Shazeer, 2021): T5 (t5.py) with a mixture of experts in
place of the feed-forward layer of every other block, each token sent to ONE expert.

Read top to bottom: ``SwitchConfig`` (a ``T5Config`` plus the experts), ``expert_capacity``,
``Top1Router``, ``Experts`` (every expert's weights stacked, run as grouped matmuls over the
tokens sorted by expert), ``SwitchFeedForward`` (the layer, loop-free over experts),
``SwitchStack`` and the heads ``SwitchForConditionalGeneration`` and
``SwitchForSequenceClassification`` (T5's, with the router losses added).

The traps:

- Which blocks have experts follows transformers' rule, so that its checkpoints convert: block
  ``i`` is sparse when the step is 1 or ``i % step == 1`` (step 2, the published models: blocks
  1, 3, 5, ...).
- Capacity is per group, a group being one sequence: ``int(tokens * capacity_factor /
  num_experts)`` (factor 1.25 in training, 2.0 in evaluation), at least
  ``min_expert_capacity``, unless ``expert_capacity`` fixes it. Tokens over capacity (earlier
  tokens queue first) are DROPPED: their output is 0 and the residual passes them through.
- The router runs in float32 whatever the model dtype; its jitter multiplies only the router's
  copy of the input, in training only (transformers jitters the experts' input too).
- The heads' ``loss`` is the task loss PLUS ``router_aux_loss_coef * load_balancing_loss +
  router_z_loss_coef * router_z_loss``, each averaged over all sparse layers, unless
  ``add_router_losses=False``; ``aux`` holds the task loss alone and the routing statistics.

The capacity, the losses, the ``aux`` keys and every difference from transformers'
``SwitchTransformers``: docs/MODELS.md, "Switch Transformer".
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .layers import ConfigError, ModelOutput, gelu_tanh, preset
from .t5 import T5Config, T5FeedForward, T5ForConditionalGeneration, T5ForSequenceClassification, T5Stack

# ----------------------------------------------------------------------------- config


@dataclass
class SwitchConfig(T5Config):
    """T5's options (defaults: T5-small sizes, v1.0) plus the mixture of experts."""

    num_experts: int = 8
    encoder_sparse_step: int = 2  # block i has experts when step == 1 or i % step == 1; 0: none
    decoder_sparse_step: int = 2
    capacity_factor_train: float = 1.25
    capacity_factor_eval: float = 2.0
    min_expert_capacity: int = 4
    expert_capacity: int | None = None  # fixed tokens per expert per sequence (overrides the factors and the minimum)
    router_jitter: float = 0.01  # multiplicative jitter on the router input, training only
    router_aux_loss_coef: float = 0.01  # alpha of the load-balancing loss (Switch paper)
    router_z_loss_coef: float = 1e-3
    add_router_losses: bool = True  # the head's loss includes both router losses

    def validate(self) -> None:
        super().validate()
        cls = type(self).__name__
        if self.num_experts < 1:
            raise ConfigError(f"{cls}.num_experts must be at least 1, got {self.num_experts}")
        for name in ("encoder_sparse_step", "decoder_sparse_step", "min_expert_capacity"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{cls}.{name} must be >= 0, got {getattr(self, name)}")
        for name in ("capacity_factor_train", "capacity_factor_eval"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{cls}.{name} must be positive, got {getattr(self, name)}")
        if self.expert_capacity is not None and self.expert_capacity < 1:
            raise ConfigError(f"{cls}.expert_capacity must be at least 1 (or None), got {self.expert_capacity}")
        if not 0.0 <= self.router_jitter < 1.0:
            raise ConfigError(f"{cls}.router_jitter must be in [0, 1), got {self.router_jitter}")
        for name in ("router_aux_loss_coef", "router_z_loss_coef"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{cls}.{name} must be >= 0, got {getattr(self, name)}")


_BASE = dict(d_model=768, d_kv=64, d_ff=3072, n_layers=12, n_decoder_layers=12, n_heads=12)  # T5-base

PRESETS: dict[str, SwitchConfig] = {
    # google/switch-base-8: T5-base with 8 experts in every other block (6 + 6 sparse layers), 619M
    "switch-base-8": SwitchConfig(num_experts=8, **_BASE),
    # Not a released model: a CPU size for tests and smoke runs (block 1 of each stack is sparse).
    "switch-tiny": SwitchConfig(vocab_size=1024, d_model=64, d_kv=16, d_ff=128, n_layers=2, n_decoder_layers=2,
                                n_heads=4, num_experts=4),
}


def from_name(name: str, **overrides) -> SwitchConfig:
    """The preset ``name`` with ``overrides`` (unknown option names are a ConfigError)."""
    return preset(PRESETS, "Switch", name, **overrides)


def is_sparse(index: int, step: int) -> bool:
    """Whether block ``index`` has experts (transformers' rule, so its checkpoints convert)."""
    return step == 1 or (step > 1 and index % step == 1)


def expert_capacity(tokens_per_group: int, config: SwitchConfig, training: bool) -> int:
    """Tokens each expert takes from a group of ``tokens_per_group``."""
    if config.expert_capacity is not None:
        return config.expert_capacity
    factor = config.capacity_factor_train if training else config.capacity_factor_eval
    return max(int(tokens_per_group * factor / config.num_experts), config.min_expert_capacity)


# ----------------------------------------------------------------------------- router, experts


class Top1Router(nn.Module):
    """Router logits (..., E) in float32, from an input jittered in training only."""

    def __init__(self, config: SwitchConfig):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(config.num_experts, config.d_model))
        self.jitter = config.router_jitter
        nn.init.normal_(self.weight, 0.0, 0.02)  # flaxformer's router init

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.float()  # a new tensor unless x is float32 already: never modified in place below
        if self.training and self.jitter > 0:
            x = x * torch.empty_like(x).uniform_(1.0 - self.jitter, 1.0 + self.jitter)
        return F.linear(x, self.weight.float())


class Experts(nn.Module):
    """E feed-forward layers with stacked weights, applied to tokens sorted by expert:
    (N, D) -> (N, D), expert ``e`` taking rows ``ends[e - 1]:ends[e]``.

    ``F.grouped_mm`` multiplies each expert's contiguous rows by that expert's weights in one
    call, so the work is exactly that of the routed tokens (a batched matmul over an
    (E, capacity, D) buffer, ``batched``, computes every empty capacity slot too: 25% more with
    the training capacity factor 1.25) and the number of operators does not grow with E."""

    def __init__(self, config: SwitchConfig):
        super().__init__()
        E, D, Fd = config.num_experts, config.d_model, config.d_ff
        self.gated = config.ffn == "gated-gelu"
        self.wi = nn.Parameter(torch.empty(E, D, Fd))
        self.wi_linear = nn.Parameter(torch.empty(E, D, Fd)) if self.gated else None
        self.wo = nn.Parameter(torch.empty(E, Fd, D))
        self.dropout = nn.Dropout(config.dropout)
        with torch.no_grad():  # as T5's dense layers: fan-in scaled
            for w in (self.wi, self.wi_linear):
                if w is not None:
                    nn.init.normal_(w, 0.0, config.init_factor * D**-0.5)
            nn.init.normal_(self.wo, 0.0, config.init_factor * Fd**-0.5)

    def weights(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """``x`` and the expert weights in the dtype the matmuls run in: under autocast, its
        dtype, as autocast casts ``nn.Linear``'s operands (it does not cast ``grouped_mm``'s,
        and a float32 ``grouped_mm`` on a GPU has no fused kernel: its fallback loops over the
        experts with a host read of the offsets)."""
        ws = (self.wi, self.wi_linear, self.wo)
        if torch.is_autocast_enabled(x.device.type):
            dtype = torch.get_autocast_dtype(x.device.type)
            return (x.to(dtype), *(w.to(dtype) if w is not None else None for w in ws))
        return (x, *ws)

    def forward(self, x: torch.Tensor, ends: torch.Tensor) -> torch.Tensor:
        """``x`` (N, D) sorted by expert; ``ends`` (E,) int32, the cumulative token counts,
        ``ends[-1] == N``. (torch 2.13's grouped_mm backward rejects an expanded gradient, such
        as ``.sum()``'s, of its output; the layer multiplies the output by the gate first.)"""
        x, wi, wi_linear, wo = self.weights(x)
        h = F.grouped_mm(x, wi, offs=ends)  # (N, F)
        h = gelu_tanh(h) * F.grouped_mm(x, wi_linear, offs=ends) if self.gated else F.relu(h)
        return F.grouped_mm(self.dropout(h), wo, offs=ends)  # (N, D)

    def batched(self, x: torch.Tensor) -> torch.Tensor:
        """Every expert on its own (capacity) rows: (E, N, D) -> (E, N, D), batched matmuls
        (autocast casts them like any matmul)."""
        h = torch.bmm(x, self.wi)  # (E, N, F)
        h = gelu_tanh(h) * torch.bmm(x, self.wi_linear) if self.gated else F.relu(h)
        return torch.bmm(self.dropout(h), self.wo)


@dataclass
class Routing:
    """What one sparse layer decided, for the losses, statistics and tests."""

    logits: torch.Tensor  # (B, S, E) float32 router logits
    expert: torch.Tensor  # (B, S) top-1 expert
    gate: torch.Tensor  # (B, S) float32 probability of that expert
    kept: torch.Tensor  # (B, S) bool: within capacity (False: dropped)
    capacity: int
    load_balancing_loss: torch.Tensor  # scalar, unweighted
    router_z_loss: torch.Tensor  # scalar, unweighted
    expert_fraction: torch.Tensor  # (E,) fraction of tokens choosing each expert (before dropping)


class SwitchFeedForward(nn.Module):
    """The mixture-of-experts feed-forward layer: (B, S, D) -> ((B, S, D), Routing); each
    sequence is one routing group.

    Two dispatches, the same function (tokens, gates, drops, gradients):

    - "sorted": tokens sorted by expert, each expert computed on exactly its routed rows by
      grouped matmuls (``Experts.forward``). On a CPU it computes the kept rows only, which
      takes one host read (their number; free on a CPU). Elsewhere it reads nothing from the
      device: the dropped rows, sorted last, ride along with the last expert and are weighted 0.
    - "capacity": each token copied to its slot of an (E, B * capacity, D) buffer (the dropped
      ones to a spare row that is discarded), the experts as batched matmuls over the buffer
      (empty slots computed too: 25% more expert work at the training capacity factor 1.25),
      the outputs gathered back. No sort and no host read. Used where ``grouped_mm`` has no
      fused kernel: a GPU computing in float32, and under ``torch.compile`` unless the experts
      compute in bf16 (``grouped_mm`` traces in bf16 only; compiled, the sorted dispatch reads
      nothing on the host, so every shape is static).

    ``dispatch`` "auto" (the default) picks by device, dtype and compilation; "sorted" or
    "capacity" force one. ``count_on_host`` None (the default): the sorted dispatch reads the
    kept count on a CPU only, and never under ``torch.compile``.
    """

    dispatch = "auto"
    count_on_host: bool | None = None

    def __init__(self, config: SwitchConfig):
        super().__init__()
        self.config = config
        self.router = Top1Router(config)
        self.experts = Experts(config)

    def use_sorted(self, x: torch.Tensor) -> bool:
        if self.dispatch != "auto":
            return self.dispatch == "sorted"
        dtype = torch.get_autocast_dtype(x.device.type) if torch.is_autocast_enabled(x.device.type) else x.dtype
        if x.device.type != "cuda" and not torch.compiler.is_compiling():
            return True
        # grouped_mm's fused kernels (Hopper and later) take bf16; compiled, grouped_mm traces in bf16 only
        return dtype == torch.bfloat16

    def dispatch_sorted(self, x: torch.Tensor, expert: torch.Tensor, gate: torch.Tensor,
                        kept: torch.Tensor) -> torch.Tensor:
        """Sort the tokens by expert, the dropped ones under a key E that sorts them last, so
        that each expert's tokens are contiguous rows (in token order: a stable sort) and the
        kept ones a prefix; run the experts on them; scale the outputs by the gate and copy
        them back into place (a dropped token's output is 0)."""
        B, S, D = x.shape
        E = self.config.num_experts
        key = torch.where(kept, expert, E).reshape(-1)  # (B*S,)
        order = torch.argsort(key, stable=True)
        counts = key.new_zeros(E + 1).scatter_add_(0, key, torch.ones_like(key))  # (E + 1,): a static shape, unlike bincount's
        ends = counts[:E].cumsum(0).to(torch.int32)  # (E,) expert e's last row + 1
        weight = (gate * kept).reshape(-1)  # (B*S,) float32, 0 for the dropped
        on_host = self.count_on_host
        if on_host is None:
            on_host = x.device.type == "cpu" and not torch.compiler.is_compiling()
        if on_host:  # compute the kept rows only: their number is a host read (free on a CPU)
            index = order[: int(ends[-1])]
        else:  # no host read: the dropped rows go through the last expert and are weighted 0
            index = order
            ends = torch.cat([ends[:-1], ends.new_full((1,), B * S)])
        expert_out = self.experts(x.reshape(-1, D).index_select(0, index), ends)  # (rows, D)
        weight = weight.index_select(0, index).to(expert_out.dtype).unsqueeze(-1)  # (rows, 1)
        out = expert_out * weight
        return out.new_zeros(B * S, D).index_copy(0, index, out).view(B, S, D)

    def dispatch_capacity(self, x: torch.Tensor, expert: torch.Tensor, position: torch.Tensor,
                          gate: torch.Tensor, kept: torch.Tensor, C: int) -> torch.Tensor:
        """Token (b, s) of expert e at queue position p -> row (e, b * C + p) of an (E, B * C, D)
        buffer; dropped tokens -> a spare last row, discarded (its gradient is zero)."""
        B, S, D = x.shape
        E = self.config.num_experts
        slots = E * B * C
        group = torch.arange(B, device=x.device)[:, None] * C  # (B, 1)
        row = torch.where(kept, expert * (B * C) + group + position, slots).reshape(-1)  # (B*S,)
        buffer = x.new_zeros(slots + 1, D).index_copy(0, row, x.reshape(-1, D))[:slots]
        out = self.experts.batched(buffer.view(E, B * C, D)).reshape(slots, D)
        out = torch.cat([out, out.new_zeros(1, D)]).index_select(0, row)  # (B*S, D), 0 for the dropped
        return (out * (gate * kept).reshape(-1, 1).to(out.dtype)).view(B, S, D)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, Routing]:
        B, S, D = x.shape
        E = self.config.num_experts
        C = expert_capacity(S, self.config, self.training)

        logits = self.router(x)  # (B, S, E) float32
        probs = logits.softmax(dim=-1)
        gate, expert = probs.max(dim=-1)  # (B, S) each
        # one-hot choices by comparison (F.one_hot validates its input with host reads)
        choice = expert.unsqueeze(-1) == torch.arange(E, device=x.device)  # (B, S, E) bool
        # position in the expert's queue: the number of earlier tokens of the group with the same expert
        position = choice.cumsum(dim=1).gather(-1, expert.unsqueeze(-1)).squeeze(-1) - 1  # (B, S)
        kept = position < C

        y = self.dispatch_sorted(x, expert, gate, kept) if self.use_sorted(x) else \
            self.dispatch_capacity(x, expert, position, gate, kept, C)

        # Switch eq. 4-6 per group, averaged over groups; f counts choices before dropping
        fraction = choice.float().mean(dim=1)  # (B, E) f_i
        mean_prob = probs.mean(dim=1)  # (B, E) P_i
        load_balancing = E * (fraction * mean_prob).sum(dim=-1).mean()
        z_loss = torch.logsumexp(logits, dim=-1).pow(2).mean()
        routing = Routing(logits=logits, expert=expert, gate=gate, kept=kept, capacity=C,
                          load_balancing_loss=load_balancing, router_z_loss=z_loss,
                          expert_fraction=fraction.mean(dim=0))
        return y, routing


# ----------------------------------------------------------------------------- stack, heads


class SwitchStack(T5Stack):
    """T5's stack with experts in the sparse blocks."""

    def make_ffn(self, config: SwitchConfig, index: int) -> nn.Module:
        step = config.decoder_sparse_step if self.is_decoder else config.encoder_sparse_step
        return SwitchFeedForward(config) if is_sparse(index, step) else T5FeedForward(config)


class _SwitchHead:
    """What the Switch heads add to T5's: the stack, and the router losses."""

    stack_class = SwitchStack
    task_loss_name = "lm_loss"
    config: SwitchConfig

    def add_routing(self, out: ModelOutput, enc_routing: list[Routing], dec_routing: list[Routing]) -> ModelOutput:
        routings = enc_routing + dec_routing
        if not routings:
            return out
        cfg = self.config
        lb_layers = torch.stack([r.load_balancing_loss for r in routings])
        z_layers = torch.stack([r.router_z_loss for r in routings])
        lb = cfg.router_aux_loss_coef * lb_layers.mean()
        z = cfg.router_z_loss_coef * z_layers.mean()
        out.aux.update(
            load_balancing_loss=lb, router_z_loss=z,
            load_balancing_loss_per_layer=lb_layers, router_z_loss_per_layer=z_layers,
            expert_fraction=torch.stack([r.expert_fraction for r in routings]),
            dropped_fraction=torch.stack([1.0 - r.kept.float().mean() for r in routings]),
        )
        if out.loss is not None:
            out.aux[self.task_loss_name] = out.loss
            if cfg.add_router_losses:
                out.loss = out.loss + lb + z
        return out


class SwitchForConditionalGeneration(_SwitchHead, T5ForConditionalGeneration):
    """Sequence-to-sequence LM (T5's), loss = CE + router losses (see the module docstring)."""


class SwitchForSequenceClassification(_SwitchHead, T5ForSequenceClassification):
    """T5's classification head on the Switch network, loss = task loss + router losses."""

    task_loss_name = "classification_loss"
