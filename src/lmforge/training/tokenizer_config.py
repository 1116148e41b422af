"""The model configuration values a trained tokenizer decides."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from ..models.registry import PRESET_ARCHITECTURE, preset_config
from ..objectives.base import Vocab


def tokenizer_overrides(preset: str, vocab: Vocab) -> dict[str, Any]:
    """Config values that come from the trained tokenizer: the vocabulary size and special ids."""
    config = preset_config(preset)
    names = {f.name for f in fields(config)}
    out: dict[str, Any] = {"vocab_size": vocab.size}
    for field, role in (("pad_id", "pad"), ("bos_id", "bos"), ("eos_id", "eos")):
        if field in names and getattr(vocab, role) is not None:
            out[field] = getattr(vocab, role)
    if "decoder_start_id" in names:  # BART starts decoding from eos, T5 (and Switch) from pad
        out["decoder_start_id"] = vocab.eos if PRESET_ARCHITECTURE[preset] == "bart" else vocab.pad
    return out
