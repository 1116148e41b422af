"""Every architecture, its presets and its heads, by name: plain dicts.

``build_model("bert-tiny", head="pretraining", vocab_size=8000)`` builds a preset with
overrides; an unknown preset, head or option is a ``ConfigError`` naming it. Parameter counts of
the published presets match the published models (tests/models/test_registry.py).
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError

if TYPE_CHECKING:
    from torch import nn

# The names, heads and objectives are read without importing torch (the command line and the
# configuration use them); a head's class and the presets are imported on first use.


class _Heads(Mapping):
    """Head name -> model class of one architecture's module, imported when first looked up."""

    def __init__(self, module: str, classes: dict[str, str]):
        self._module, self._classes = module, classes

    def __getitem__(self, head: str) -> type[nn.Module]:
        module, _, name = self._classes[head].rpartition(":")  # "module:Class" names another module's class
        return getattr(_module(module or self._module), name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._classes)

    def __len__(self) -> int:
        return len(self._classes)


def _module(name: str):
    return importlib.import_module(f"{__package__}.{name}")


@dataclass(frozen=True)
class Architecture:
    module: str  # lmforge.models.<module>
    heads: Mapping[str, type[nn.Module]]  # head name -> model class
    default_head: str
    objectives: tuple[str, ...]  # the pretraining objectives its heads consume

    @property
    def presets(self) -> dict[str, Any]:
        """Preset name -> config."""
        return _module(self.module).PRESETS


def _arch(module: str, heads: dict[str, str], default_head: str, objectives: tuple[str, ...]) -> Architecture:
    # every architecture tags and extracts answer spans with its sequence classifier's network
    # (models/token_classification.py)
    tagger = "token_classification:" + heads["classification"].replace("SequenceClassification", "TokenClassification")
    spans = "token_classification:" + heads["classification"].replace("SequenceClassification", "QuestionAnswering")
    return Architecture(module, _Heads(module, {**heads, "token_classification": tagger, "span_extraction": spans}),
                        default_head, objectives)


ARCHITECTURES: dict[str, Architecture] = {
    "gpt": _arch("gpt", {"lm": "GPTLMHeadModel", "classification": "GPTForSequenceClassification"}, "lm", ("clm",)),
    "bert": _arch("bert", {"pretraining": "BertForPreTraining", "mlm": "BertForMaskedLM",
                           "rtd": "electra:BertForReplacedTokenDetection",
                           "classification": "BertForSequenceClassification"}, "pretraining", ("mlm_nsp", "mlm")),
    "albert": _arch("albert", {"pretraining": "AlbertForPreTraining", "mlm": "AlbertForMaskedLM",
                               "classification": "AlbertForSequenceClassification"}, "pretraining", ("mlm_sop",)),
    "ernie": _arch("ernie", {"pretraining": "ErnieForPreTraining", "mlm": "ErnieForMaskedLM",
                             "rtd": "electra:ErnieForReplacedTokenDetection",
                             "classification": "ErnieForSequenceClassification"}, "pretraining", ("knowledge_mlm",)),
    "elmo": _arch("elmo", {"bilm": "ElmoBiLM", "classification": "ElmoForSequenceClassification"}, "bilm", ("bilm",)),
    "transformer_xl": _arch("transformer_xl", {"lm": "TransformerXLLMHeadModel",
                                               "classification": "TransformerXLForSequenceClassification"}, "lm", ("segments",)),
    "xlnet": _arch("xlnet", {"lm": "XLNetLMHeadModel", "classification": "XLNetForSequenceClassification"}, "lm", ("permutation",)),
    "bart": _arch("bart", {"seq2seq": "BartForConditionalGeneration", "classification": "BartForSequenceClassification"},
                  "seq2seq", ("denoising",)),
    "t5": _arch("t5", {"seq2seq": "T5ForConditionalGeneration", "classification": "T5ForSequenceClassification"},
                "seq2seq", ("span_corruption",)),
    "switch": _arch("switch", {"seq2seq": "SwitchForConditionalGeneration", "classification": "SwitchForSequenceClassification"},
                    "seq2seq", ("span_corruption",)),
}


# the heads that take ``num_labels``: a class per sequence, per token (tagging), or a start and an
# end score per token (extractive QA: num_labels 2)
CLASSIFIER_HEADS = ("classification", "token_classification", "span_extraction")


@functools.cache
def preset_architectures() -> dict[str, str]:
    """Preset name -> architecture (preset names are unique across architectures). It needs every
    model module, so it is built on first use; ``PRESET_ARCHITECTURE`` is the same table."""
    return {p: a for a, arch in ARCHITECTURES.items() for p in arch.presets}


def __getattr__(name: str) -> Any:
    if name == "PRESET_ARCHITECTURE":
        return preset_architectures()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def preset_config(name: str, **overrides: Any):
    """The config of preset ``name`` with ``overrides`` applied (validated)."""
    from .layers import replace_config

    if name not in preset_architectures():
        raise ConfigError(f"unknown model preset {name!r}; known: {sorted(preset_architectures())}")
    return replace_config(ARCHITECTURES[preset_architectures()[name]].presets[name], **overrides)


def build_model(name: str, head: str | None = None, num_labels: int | None = None, **overrides: Any) -> nn.Module:
    """Build preset ``name`` (e.g. ``gpt2``, ``bert-tiny``, ``elmo-small``) with the given head
    (default: the architecture's pretraining head) and config overrides."""
    arch = ARCHITECTURES[preset_architectures()[name]] if name in preset_architectures() else None
    config = preset_config(name, **overrides)
    head = head or arch.default_head
    if head not in arch.heads:
        raise ConfigError(f"{name}: unknown head {head!r}; known: {sorted(arch.heads)}")
    if head in CLASSIFIER_HEADS:
        return arch.heads[head](config, num_labels=num_labels or 2)
    if num_labels is not None:
        raise ConfigError(f"{name}: num_labels applies to the classification heads only, not {head!r}")
    return arch.heads[head](config)


class _TooManyModules(Exception):
    pass


def build_on_meta(name: str, head: str | None = None, num_labels: int | None = None, *, max_modules: int = 20_000,
                  **overrides: Any) -> nn.Module:
    """``build_model(name, head, num_labels, **overrides)`` on the meta device: every parameter's
    shape and nothing allocated, to check sizes before building the real model. Options that
    cannot build a model (a wrong type, a size below 1, a width the heads do not divide) and
    more than ``max_modules`` modules (a layer count no machine holds, which would take the
    build itself hours) are a ``ConfigError`` naming them."""
    import torch
    from torch.nn.modules.module import register_module_module_registration_hook

    registered = 0

    def count(module, child_name, child):
        nonlocal registered
        registered += 1
        if registered > max_modules:
            raise _TooManyModules
        return None

    described = f"{name} (head {head}, {overrides})"
    handle = register_module_module_registration_hook(count)
    try:
        with torch.device("meta"):
            return build_model(name, head=head, num_labels=num_labels, **overrides)
    except _TooManyModules:
        raise ConfigError(f"{described}: more than {max_modules:,} modules; its sizes are not those of a model "
                          "that can be built") from None
    except ConfigError:
        raise
    except (TypeError, ValueError, OverflowError, RuntimeError, AttributeError, KeyError, MemoryError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else ""
        raise ConfigError(f"{described}: cannot be built ({type(exc).__name__}: {first})") from None
    finally:
        handle.remove()
