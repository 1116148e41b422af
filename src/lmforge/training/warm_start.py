"""What fine-tuning does to the pretrained weights before its first step: the remedies the
warm-start literature gives for a pretrained start that learns a task more slowly than a random
one (``finetune.shrink_perturb`` and ``finetune.reinit_top_layers`` of a recipe).

- **Shrink and perturb** (Ash & Adams 2020): every pretrained weight ``w`` becomes
  ``shrink x w + perturb x w0``, where ``w0`` is the same parameter of a freshly initialised model,
  the very initialisation the from-scratch control starts from (same seed). ``(1, 0)`` is the
  pretrained model unchanged, ``(0, 1)`` the control's start; in between, the pretrained
  directions are kept at a smaller scale and the fresh weights give back the gradient flow of an
  initialisation.
- **Re-initialising the top layers** (Zhang et al. 2021, "Revisiting few-sample BERT
  fine-tuning"): the ``k`` top layers of the stack, and what sits above them (the pooler, a final
  norm), take the fresh model's values: the layers that specialised most to the pretraining
  objective start over.

Both read the fresh model by parameter name; the depth of a parameter is
:func:`~lmforge.training.param_groups.placements`' (the same rule as the layer-wise decay).
"""

from __future__ import annotations

import torch
from torch import nn

from .param_groups import placements


@torch.no_grad()
def shrink_and_perturb(model: nn.Module, fresh: nn.Module, shrink: float, perturb: float) -> int:
    """``w <- shrink x w + perturb x w0`` for every parameter of ``model`` (``w0``: ``fresh``'s);
    returns how many parameters changed."""
    initial = dict(fresh.named_parameters())
    changed = 0
    for name, p in model.named_parameters():
        p.mul_(shrink).add_(initial[name].to(p.device, p.dtype), alpha=perturb)
        changed += 1
    return changed


@torch.no_grad()
def reinit_top_layers(model: nn.Module, fresh: nn.Module, k: int) -> list[str]:
    """Copy ``fresh``'s values into the parameters of the ``k`` top layers of ``model``'s stack
    and everything placed above them (the head included); returns their names. ``k`` larger than
    the stack re-initialises every layer (the embeddings stay)."""
    where = placements(model)
    top = max((p.depth for p in where.values()), default=0)
    initial = dict(fresh.named_parameters())
    names = [name for name, p in where.items() if p.depth > top - k and p.role != "embeddings"]
    params = dict(model.named_parameters())
    for name in names:
        params[name].copy_(initial[name])
    return names
