"""What a logged value becomes for MLflow: nested parameters flattened to dotted keys, and a
metric's value as a float (or None when it is not a number)."""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Mapping
from typing import Any

import torch


def flatten_params(params: Any, prefix: str = "") -> dict[str, Any]:
    """Nested mappings (and dataclasses / pydantic models) flattened to dotted keys."""
    if dataclasses.is_dataclass(params) and not isinstance(params, type):
        params = {f.name: getattr(params, f.name) for f in dataclasses.fields(params)}
    elif hasattr(params, "model_dump") and callable(params.model_dump) and not isinstance(params, type):
        params = params.model_dump()
    flat: dict[str, Any] = {}
    for key, value in params.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        nested = isinstance(value, Mapping) or (dataclasses.is_dataclass(value) and not isinstance(value, type)) \
            or (hasattr(value, "model_dump") and not isinstance(value, type))
        if nested and (not isinstance(value, Mapping) or value):
            flat.update(flatten_params(value, name))
        else:
            flat[name] = value
    return flat


def as_float(value: Any) -> float | None:
    """A metric value as a float, or None when it is not a number (strings, None, tensors of more
    than one element...). NaN and infinities are kept."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, numbers.Real):
        return float(value)
    if isinstance(value, torch.Tensor):
        return float(value.detach().item()) if value.numel() == 1 and not value.is_complex() else None
    item = getattr(value, "item", None)  # numpy 0-d arrays and scalars
    if callable(item) and getattr(value, "size", None) == 1:
        try:
            scalar = item()
        except (TypeError, ValueError):
            return None
        return float(scalar) if isinstance(scalar, numbers.Real) else None
    return None
