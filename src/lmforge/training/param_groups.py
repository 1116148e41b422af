"""Parameter groups for fine-tuning: where each parameter sits in the network (embeddings, a
layer of the stack, the head), layer-wise learning-rate decay and freezing.

The depth of a parameter is read from its name and from the order of ``named_parameters()``
(the order the modules were registered, inputs first in every lmforge model), so the same rule
covers every architecture:

- a parameter inside a layer stack (``...layers.<i>.``, ``...blocks.<i>.``, ELMo's
  ``forward_layers.<i>.`` / ``backward_layers.<i>.``) has depth ``i + 1``; a stack whose name
  contains ``decoder`` sits on top of the encoder's (depth ``encoder layers + i + 1``), unless
  the model's forward pass does not reach it (``runs_decoder`` false: T5's, BART's and
  Switch's classifiers reading the encoder alone), where it shares the encoder's depths and the
  head sits on the encoder's top layer; parallel stacks (ELMo's two directions) share depths;
- any other parameter takes the depth of the last layer before it in that order: 0 before the
  first layer (the embeddings: BERT's ``encoder.embeddings``, GPT's ``wte``/``wpe``, T5's
  ``shared``, ELMo's character CNN), the top depth after the last one (the head, a final norm,
  BERT's pooler), the encoder's top between an encoder and a decoder.

With ``layer_decay = d`` and ``N`` the top depth, a parameter at depth ``k`` learns at
``lr x d ** (N - k)``: the top layer and the head at the base rate, each lower layer ``d`` times
its upper neighbour's, the embeddings lowest (ELECTRA's and BEiT's layer-wise decay; ULMFiT's
discriminative rates with ``d = 1 / 2.6``). ALBERT's one shared layer has no index: everything
learns at the base rate.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from torch import nn

_STACK = re.compile(r"^(?P<stack>(?:.*\.)?(?:\w*layers|blocks))\.(?P<index>\d+)\.")


@dataclass(frozen=True)
class Placement:
    depth: int  # 0: embeddings ... top: the top layer and what follows it
    role: str  # "embeddings" (before the first layer), "layers" (in or between stacks), "head" (after the last)


def placements(model: nn.Module) -> dict[str, Placement]:
    """Every parameter's depth and role (the rule of the module docstring), by name."""
    names = [name for name, _ in model.named_parameters()]
    matches = {name: _STACK.match(name) for name in names}
    sizes: dict[str, int] = {}
    for m in matches.values():
        if m:
            sizes[m["stack"]] = max(sizes.get(m["stack"], 0), int(m["index"]) + 1)
    below_decoder = max((n for stack, n in sizes.items() if "decoder" not in stack), default=0)
    stacked = getattr(model, "runs_decoder", True)  # an unused decoder does not sit above the encoder
    offsets = {stack: below_decoder if "decoder" in stack and stacked else 0 for stack in sizes}
    layered = [i for i, name in enumerate(names) if matches[name]]
    last_layered = layered[-1] if layered else -1
    out: dict[str, Placement] = {}
    depth = 0
    for i, name in enumerate(names):
        m = matches[name]
        if m:
            depth = offsets[m["stack"]] + int(m["index"]) + 1
            out[name] = Placement(depth, "layers")
        elif not layered or i < layered[0]:
            out[name] = Placement(0, "embeddings")
        elif i > last_layered:
            out[name] = Placement(depth, "head")
        else:
            out[name] = Placement(depth, "layers")
    if layered:  # everything after the last layer sits at the top, whichever stack came last
        top = max(p.depth for p in out.values())
        out = {k: Placement(top, p.role) if p.role == "head" else p for k, p in out.items()}
    return out


def freeze(model: nn.Module, groups: list[str] | tuple[str, ...]) -> list[str]:
    """Stop the gradients of the parameters whose role is in ``groups`` (``embeddings``,
    ``layers``); the names frozen."""
    if not groups:
        return []
    where = placements(model)
    frozen = []
    for name, p in model.named_parameters():
        if where[name].role in groups:
            p.requires_grad_(False)
            frozen.append(name)
    if not any(p.requires_grad for p in model.parameters()):
        raise ValueError(f"freezing {list(groups)} leaves no parameter to train")
    return frozen


def optimizer_groups(model: nn.Module, weight_decay: float, lr: float, layer_decay: float | None = None) -> list[dict]:
    """AdamW parameter groups of the trainable parameters: weight decay on matrices only (not on
    biases, norms' gains or scalar mixes, as BERT and GPT did) and, with ``layer_decay``, one
    learning rate per depth. Each group carries ``lr`` and ``depth``; the groups at the base rate
    come first (``param_groups[0]`` is what a history of the learning rate shows)."""
    where = placements(model) if layer_decay is not None else {}
    top = max((p.depth for p in where.values()), default=0)
    buckets: dict[tuple[int, bool], list[nn.Parameter]] = {}
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        depth = where[name].depth if layer_decay is not None else top
        buckets.setdefault((depth, p.ndim >= 2), []).append(p)
    groups = []
    for (depth, decay), params in sorted(buckets.items(), key=lambda kv: (-kv[0][0], not kv[0][1])):
        scale = layer_decay ** (top - depth) if layer_decay is not None else 1.0
        groups.append({"params": params, "weight_decay": weight_decay if decay else 0.0, "lr": lr * scale, "depth": depth})
    return groups
