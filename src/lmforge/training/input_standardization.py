"""The classifier's input standardized before fine-tuning (a recipe's ``finetune.standardize_input``).

A short pretraining can leave an encoder whose pooled features share one large direction: every
paragraph maps to nearly the same vector, its differences a small fraction of the common part
(BENCHMARKS.md, "why a short pretraining hurts": the feature spread). A freshly initialised
classifier on such features starts from nearly the same output for every example, and its
tanh (T5's, BART's, Switch's and XLNet's heads) can start saturated. Standardizing the classifier's
input, the practice of any linear probe, removes that: the mean and the standard deviation of
each feature over the training examples, measured once before the first step, are folded into the
first linear layer of the classifier,

    W' = W diag(1 / sigma),   b' = b - W' mu,

so that at the start the layer sees ``(x - mu) / sigma`` and the network's shape is unchanged (the
saved model is an ordinary one). A layer without a bias (GPT's ``score``) is only scaled. Both arms of the transfer comparison get it: the control is
standardized by its own features. Fine-tuning then trains every weight as before.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import nn

# where each architecture's sequence classifier begins: XLNet's summary, BERT's / ALBERT's /
# ELMo's / Transformer-XL's classifier, GPT's score, or the dense layer opening T5's classifier
# module and BART's and Switch's head module
ENTRY_NAMES = ("summary", "classifier", "score", "head")
EXAMPLES = 256  # training examples the statistics are measured on (the first ones, in the split's order)
MIN_STD = 1e-6  # relative to the largest feature's: a constant feature is scaled by at most this much


def classifier_entry(model: nn.Module) -> nn.Linear:
    """The first linear layer of ``model``'s sequence classifier."""
    for name in ENTRY_NAMES:
        module = getattr(model, name, None)
        if not isinstance(module, nn.Linear):
            module = getattr(module, "dense", None)
        if isinstance(module, nn.Linear):
            return module
    raise ValueError(f"{type(model).__name__} has no linear classifier layer ({' / '.join(ENTRY_NAMES)})")


def spread(features: torch.Tensor) -> float:
    """Norm of the per-feature standard deviation across rows over the norm of the mean row
    (0 when every row is the same): how much the examples' features differ, against what they share."""
    if features.dim() != 2 or features.size(0) < 2:
        raise ValueError(f"spread needs a (rows >= 2, features) matrix, got shape {tuple(features.shape)}")
    features = features.double()
    return float(features.std(0).norm() / features.mean(0).norm().clamp_min(1e-12))


@torch.no_grad()
def entry_inputs(model: nn.Module, batches: Sequence[dict[str, torch.Tensor]]) -> torch.Tensor:
    """What the classifier's first layer reads for each example of ``batches`` (eval mode): (N, D)."""
    layer = classifier_entry(model)
    seen: list[torch.Tensor] = []
    hook = layer.register_forward_hook(lambda _m, inputs, _o: seen.append(inputs[0].detach().reshape(-1, inputs[0].size(-1))))
    was_training = model.training
    model.eval()
    try:
        for batch in batches:
            model(**{k: v for k, v in batch.items() if k != "labels"})
    finally:
        hook.remove()
        model.train(was_training)
    return torch.cat(seen)


@torch.no_grad()
def standardize_classifier_input(model: nn.Module, batches: Sequence[dict[str, torch.Tensor]]) -> dict[str, float]:
    """Fold the per-feature mean and standard deviation of the classifier's input over
    ``batches`` into its first linear layer (see the module docstring); returns the spread of
    the input (the norm of the standard deviations over the norm of the mean) and the norm of
    the mean it removed."""
    features = entry_inputs(model, batches).double()
    before = spread(features)  # (and at least two examples)
    mu, sigma = features.mean(0), features.std(0)
    sigma = sigma.clamp_min(MIN_STD * float(sigma.max().clamp_min(1e-12)))
    layer = classifier_entry(model)
    weight = layer.weight.double() / sigma  # (out, D) / (D,)
    layer.weight.copy_(weight.to(layer.weight.dtype))
    if layer.bias is not None:  # GPT's score has none: its input is scaled, not centred
        layer.bias.copy_((layer.bias.double() - weight @ mu).to(layer.bias.dtype))
    return {"spread": before, "mean_norm": float(mu.norm())}


def first_batches(examples: Sequence[dict], collate: Callable[[list], dict[str, torch.Tensor]], batch_size: int,
                  limit: int = EXAMPLES) -> list[dict[str, torch.Tensor]]:
    """The first ``limit`` of ``examples`` as collated batches of ``batch_size``."""
    head = list(examples[:limit])
    return [collate(head[i:i + batch_size]) for i in range(0, len(head), batch_size)]
