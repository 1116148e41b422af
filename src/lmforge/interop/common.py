"""What every converter shares: activation names and the check that two state dicts match."""

from __future__ import annotations

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
