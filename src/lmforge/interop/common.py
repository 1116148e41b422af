"""What every converter shares: activation names, class lookup, the renaming of state dicts and its checks."""

from __future__ import annotations

import torch
import transformers
from torch import nn

from ..errors import ConfigError

# ours -> transformers' activation names; transformers' "gelu" is the exact (erf) GELU,
# "gelu_new" (and "gelu_pytorch_tanh") the tanh approximation we call "gelu_tanh"
ACT_TO_HF = {"gelu": "gelu", "relu": "relu", "gelu_tanh": "gelu_new"}
ACT_FROM_HF = {"gelu": "gelu", "relu": "relu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh"}


def translate_activation(table: dict[str, str], act: str, where: str) -> str:
    """``table[act]``; an activation the table lacks is a ConfigError that names ``where``
    (the target model, or the config field the name came from)."""
    if act not in table:
        raise ConfigError(f"{where}: activation {act!r} has no counterpart; supported: {sorted(table)}")
    return table[act]


def check_same_keys(expected: set[str], got: set[str], what: str) -> None:
    if expected != got:
        raise ConfigError(f"{what}: state dicts differ; missing {sorted(expected - got)}, "
                          f"unexpected {sorted(got - expected)}")


# ----------------------------------------------------------------------------- classes


def hf_class(model: nn.Module, classes: dict[type, str]) -> type:
    """transformers' class for our ``model``; ``classes`` maps our exact classes to transformers'
    class names (exact: ERNIE's classes subclass BERT's)."""
    if type(model) not in classes:
        raise TypeError(f"no transformers equivalent for {type(model).__name__}; known: {[c.__name__ for c in classes]}")
    return getattr(transformers, classes[type(model)])


def our_class(hf_model: nn.Module, classes: dict[type, str]) -> type:
    """Our class for transformers' ``hf_model`` (the inverse of ``hf_class``)."""
    by_name = {name: ours for ours, name in classes.items()}
    name = type(hf_model).__name__
    if name not in by_name:
        raise TypeError(f"cannot convert {name}; known: {sorted(by_name)}")
    return by_name[name]


def like(converted: nn.Module, original: nn.Module) -> nn.Module:
    """``converted`` in ``original``'s dtype and train / eval mode."""
    return converted.to(next(original.parameters()).dtype).train(original.training)


def classifier_settings(model: nn.Module) -> dict:
    """transformers' config entries for our sequence classifier ``model``: its width and dropout,
    and the regression problem type for a one-label (mean squared error) head."""
    settings = dict(num_labels=model.num_labels, classifier_dropout=model.classifier_dropout)
    if model.num_labels == 1:
        settings["problem_type"] = "regression"
    return settings


def check_single_label(hf_config) -> None:
    """Our classifiers are single-label (or regression): a multi-label one is an error."""
    if hf_config.problem_type == "multi_label_classification":
        raise ConfigError("multi-label classification (problem_type) is not supported")


# ----------------------------------------------------------------------------- weights
#
# A converter names transformers' tensors by ours (``names``: transformers' name -> ours) and
# lists the tied copies transformers keeps in its state dict (``copies``: a copy's name -> the
# transformers name of the tensor it repeats). Layout changes beyond a renaming (transposes,
# fused or stacked tensors) are the converter's, before or after these.


def tensor_names(modules: dict[str, str]) -> dict[str, str]:
    """Module names (transformers' -> ours) -> the names of their ``weight`` and ``bias`` tensors."""
    return {f"{theirs}.{p}": f"{ours}.{p}" for theirs, ours in modules.items() for p in ("weight", "bias")}


def held_by(names: dict[str, str], model: nn.Module) -> dict[str, str]:
    """The entries of ``names`` (transformers' -> ours) whose tensor our ``model`` has."""
    ours = model.state_dict()
    return {theirs: name for theirs, name in names.items() if name in ours}


def load_exactly(module: nn.Module, state: dict[str, torch.Tensor], what: str) -> None:
    """``module.load_state_dict(state)`` after checking that the names match, naming the differences."""
    check_same_keys(set(module.state_dict()), set(state), what)
    module.load_state_dict(state, strict=True)


def load_into_hf(hf: nn.Module, ours: dict[str, torch.Tensor], names: dict[str, str],
                 copies: dict[str, str], what: str) -> None:
    """Our state dict ``ours`` into ``hf``, renamed by ``names``, with the ``copies`` that
    ``hf``'s state dict lists; together they must cover it exactly."""
    state = {theirs: ours[name] for theirs, name in names.items()}
    listed = hf.state_dict()
    for copy, source in copies.items():
        if copy in listed:
            state[copy] = state[source]
    load_exactly(hf, state, what)


def state_from_hf(theirs: dict[str, torch.Tensor], names: dict[str, str], copies: dict[str, str],
                  what: str) -> dict[str, torch.Tensor]:
    """Our state dict from transformers' ``theirs`` (the inverse of ``load_into_hf``). A tied
    copy that is not the same tensor as its source cannot be held once: an error, as is a
    tensor of ``theirs`` that neither ``names`` nor ``copies`` accounts for."""
    present = {copy: source for copy, source in copies.items() if copy in theirs}
    for copy, source in present.items():
        if not torch.equal(theirs[copy], theirs[source]):
            raise ConfigError(f"{copy} differs from {source}: untied weights do not convert")
    check_same_keys(set(names) | set(present), set(theirs), what)
    return {ours: theirs[t] for t, ours in names.items()}
