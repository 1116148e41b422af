"""The typed schema of ``params.yaml``: the one configuration every stage reads.

Every model rejects unknown keys, so a typo is an error rather than a silently ignored
setting. Defaults are the reference constants (for cleaning: the TFDS C4 implementation),
so an empty ``params.yaml`` is a valid one.

By section: ``cleaning.py`` (``clean``, ``quality``), ``tokenization.py`` (``split``,
``tokenizer``, ``tokenize``), ``training.py`` (``dataset``, ``train``, ``finetune``,
``evaluate``), ``services.py`` (``executor``, ``tracking``, ``checks``, ``orchestrate``);
``params.py`` holds the root ``Params`` and reads the file. The names other modules use are
exported here: ``from lmforge.config import Params``.
"""

from __future__ import annotations

from ..errors import ConfigError
from .cleaning import BadWordsConfig, CleanConfig, LanguageConfig, LineRules, NearDedupConfig, QualityConfig
from .params import Params, apply_override, format_validation_error, load_params, parse_params
from .services import ExecutorConfig, TrackingConfig
from .tokenization import MixtureRule, SplitConfig, TokenizerConfig, UnigramConfig
from .training import ARCHITECTURE_NAMES, TrainConfig

__all__ = [
    "ARCHITECTURE_NAMES", "BadWordsConfig", "CleanConfig", "ConfigError", "ExecutorConfig", "LanguageConfig", "LineRules",
    "MixtureRule", "NearDedupConfig", "Params", "QualityConfig", "SplitConfig", "TokenizerConfig", "TrackingConfig",
    "TrainConfig", "UnigramConfig", "apply_override", "format_validation_error", "load_params", "parse_params",
]
