"""Every architecture, its presets and its heads, by name: plain dicts.

``build_model("bert-tiny", head="pretraining", vocab_size=8000)`` builds a preset with
overrides; an unknown preset, head or option is a ``ConfigError`` naming it. Parameter counts of
the published presets match the published models (tests/models/test_registry.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from torch import nn

from . import albert, bart, bert, elmo, ernie, gpt, switch, t5, transformer_xl, xlnet
from .layers import ConfigError, replace_config


@dataclass(frozen=True)
class Architecture:
    presets: dict[str, Any]  # preset name -> config
    heads: dict[str, type[nn.Module]]  # head name -> model class
    default_head: str
    objectives: tuple[str, ...]  # the pretraining objectives its heads consume


ARCHITECTURES: dict[str, Architecture] = {
    "gpt": Architecture(gpt.PRESETS, {"lm": gpt.GPTLMHeadModel, "classification": gpt.GPTForSequenceClassification},
                        "lm", ("clm",)),
    "bert": Architecture(bert.PRESETS, {"pretraining": bert.BertForPreTraining, "mlm": bert.BertForMaskedLM,
                                        "classification": bert.BertForSequenceClassification}, "pretraining", ("mlm_nsp", "mlm")),
    "albert": Architecture(albert.PRESETS, {"pretraining": albert.AlbertForPreTraining, "mlm": albert.AlbertForMaskedLM,
                                            "classification": albert.AlbertForSequenceClassification}, "pretraining", ("mlm_sop",)),
    "ernie": Architecture(ernie.PRESETS, {"pretraining": ernie.ErnieForPreTraining, "mlm": ernie.ErnieForMaskedLM,
                                          "classification": ernie.ErnieForSequenceClassification}, "pretraining", ("knowledge_mlm",)),
    "elmo": Architecture(elmo.PRESETS, {"bilm": elmo.ElmoBiLM, "classification": elmo.ElmoForSequenceClassification},
                         "bilm", ("bilm",)),
    "transformer_xl": Architecture(transformer_xl.PRESETS, {"lm": transformer_xl.TransformerXLLMHeadModel,
                                                            "classification": transformer_xl.TransformerXLForSequenceClassification},
                                   "lm", ("segments",)),
    "xlnet": Architecture(xlnet.PRESETS, {"lm": xlnet.XLNetLMHeadModel, "classification": xlnet.XLNetForSequenceClassification},
                          "lm", ("permutation",)),
    "bart": Architecture(bart.PRESETS, {"seq2seq": bart.BartForConditionalGeneration,
                                        "classification": bart.BartForSequenceClassification}, "seq2seq", ("denoising",)),
    "t5": Architecture(t5.PRESETS, {"seq2seq": t5.T5ForConditionalGeneration, "classification": t5.T5ForSequenceClassification},
                       "seq2seq", ("span_corruption",)),
    "switch": Architecture(switch.PRESETS, {"seq2seq": switch.SwitchForConditionalGeneration,
                                            "classification": switch.SwitchForSequenceClassification}, "seq2seq", ("span_corruption",)),
}

# preset name -> architecture (preset names are unique across architectures)
PRESET_ARCHITECTURE: dict[str, str] = {p: a for a, arch in ARCHITECTURES.items() for p in arch.presets}


def preset_config(name: str, **overrides: Any):
    """The config of preset ``name`` with ``overrides`` applied (validated)."""
    if name not in PRESET_ARCHITECTURE:
        raise ConfigError(f"unknown model preset {name!r}; known: {sorted(PRESET_ARCHITECTURE)}")
    return replace_config(ARCHITECTURES[PRESET_ARCHITECTURE[name]].presets[name], **overrides)


def build_model(name: str, head: str | None = None, num_labels: int | None = None, **overrides: Any) -> nn.Module:
    """Build preset ``name`` (e.g. ``gpt2``, ``bert-tiny``, ``elmo-small``) with the given head
    (default: the architecture's pretraining head) and config overrides."""
    arch = ARCHITECTURES[PRESET_ARCHITECTURE[name]] if name in PRESET_ARCHITECTURE else None
    config = preset_config(name, **overrides)
    head = head or arch.default_head
    if head not in arch.heads:
        raise ConfigError(f"{name}: unknown head {head!r}; known: {sorted(arch.heads)}")
    if head == "classification":
        return arch.heads[head](config, num_labels=num_labels or 2)
    if num_labels is not None:
        raise ConfigError(f"{name}: num_labels applies to the classification head only, not {head!r}")
    return arch.heads[head](config)
