"""Model FLOPs per token: the count MFU and a run's compute are stated in.

The rule is the one of the PaLM paper's appendix B (as nanoGPT counts it), made to read any of the
zoo's models from its modules rather than from a formula per architecture:

    6 N  +  6 d V f  +  12 L d T

- ``N``: every parameter outside the embedding tables (``nn.Embedding``), each taken to act once
  on every input position (the forward's multiply-add is 2 FLOPs, the backward's two products 4),
  or as many times as its module runs (ALBERT's shared block: ``n_layers`` times).
- ``6 d V f``: the output layer over the vocabulary when it is tied to the token embedding (so it
  is not in ``N``), at the fraction ``f`` of the positions that are predicted: 1 for a causal LM,
  the masked share for a masked LM whose head runs on the masked positions only, the target length
  over the input length for an encoder-decoder. An untied output layer is a parameter of ``N``.
- ``12 L d T``: attention's two products (scores, weighted sum) over ``T`` positions in each of the
  ``L`` attention modules (every module whose class name ends in ``Attention``, cross-attention
  included), forward and backward.

Approximations, stated rather than hidden: a pooler or a head transform that runs on one position
or on the predicted ones is counted at every position (under 2% of BERT-base); Transformer-XL's
memory and XLNet's second stream are not added to ``T``; an LSTM's weights count once per position
and direction, as its matrix products do; a mixture of experts (Switch) counts every expert,
where a token runs through one (the count is then an upper bound).
"""

from __future__ import annotations

from torch import nn


def repeats(model: nn.Module) -> dict[int, int]:
    """id(module) -> how many times it runs in one forward pass, for the modules a model runs more
    than once (ALBERT's shared block: a module's ``flop_repeats()`` says so); others run once."""
    times: dict[int, int] = {}
    for m in model.modules():
        if hasattr(m, "flop_repeats"):
            for child, k in m.flop_repeats().items():
                for sub in child.modules():
                    times[id(sub)] = k
    return times


def applied_parameters(model: nn.Module) -> int:
    """Parameters outside the embedding tables, each as often as its module runs in a pass."""
    times = repeats(model)
    total, seen = 0, set()
    for m in model.modules():
        if isinstance(m, nn.Embedding):
            seen.update(id(p) for p in m.parameters(recurse=False))
    for m in model.modules():
        for p in m.parameters(recurse=False):
            if id(p) not in seen:
                seen.add(id(p))
                total += p.numel() * times.get(id(m), 1)
    return total


def attention_modules(model: nn.Module) -> int:
    """Attention modules run in a pass (class name ending in ``Attention``; one inside another is
    part of it), each once, or as often as it runs (a module shared by several layers)."""
    times = repeats(model)
    attentions = [m for m in model.modules() if type(m).__name__.endswith("Attention")]  # each module once
    inner = {id(sub) for m in attentions for sub in m.modules() if sub is not m}
    return sum(times.get(id(m), 1) for m in attentions if id(m) not in inner)


def tied_output(model: nn.Module) -> tuple[int, int] | None:
    """(vocabulary, width) of an output layer tied to the token embedding: an embedding table of the
    config's ``vocab_size`` rows whose weight no ``nn.Linear`` holds as a parameter of its own;
    None when the model has no such table or its output layer is a separate matrix."""
    vocab = getattr(getattr(model, "config", None), "vocab_size", None)
    tables = [m for m in model.modules() if isinstance(m, nn.Embedding) and m.num_embeddings == vocab]
    if not vocab or not tables:
        return None
    untied = any(isinstance(m, nn.Linear) and m.out_features == vocab and m.weight is not tables[0].weight
                 for m in model.modules())
    return None if untied else (vocab, tables[0].embedding_dim)


def model_width(model: nn.Module) -> int:
    """The residual width ``d``: the config's ``d_model`` (else its ``hidden_size``)."""
    config = getattr(model, "config", None)
    for name in ("d_model", "hidden_size", "projection_dim"):
        if isinstance(getattr(config, name, None), int):
            return getattr(config, name)
    raise ValueError(f"{type(model).__name__}: no d_model in its config to count attention FLOPs with")


def flops_per_token(model: nn.Module, positions: float, predicted_fraction: float = 1.0) -> float:
    """Training FLOPs (forward and backward) per input position of ``model`` on sequences of
    ``positions`` positions, ``predicted_fraction`` of them predicted (the module docstring)."""
    total = 6.0 * applied_parameters(model)
    tied = tied_output(model)
    if tied is not None:
        vocab, width = tied
        total += 6.0 * width * vocab * predicted_fraction
    layers = attention_modules(model)
    if layers:
        total += 12.0 * layers * model_width(model) * positions
    return total
