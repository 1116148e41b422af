"""The root of ``params.yaml`` (``Params``, every section's model) and reading it: the file,
``--set`` overrides (``dotted.key=value``, ``<recipe file>:key=value``), and a validation
error as one line naming each offending key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import Field, ValidationError

from ..errors import ConfigError
from ..schema import StrictModel as _Strict
from .cleaning import CleanConfig, QualityConfig
from .services import ChecksConfig, ExecutorConfig, OrchestrateConfig, TrackingConfig
from .tokenization import SplitConfig, TokenizeConfig, TokenizerConfig
from .training import ARCHITECTURE_NAMES, DatasetConfig, EvaluateConfig, FinetuneConfig, TrainConfig


class Params(_Strict):
    """The root of ``params.yaml``."""

    clean: CleanConfig = CleanConfig()
    quality: QualityConfig = QualityConfig()
    split: SplitConfig = SplitConfig()
    tokenizer: TokenizerConfig = TokenizerConfig()
    tokenize: TokenizeConfig = TokenizeConfig()
    dataset: DatasetConfig = DatasetConfig()
    train: TrainConfig = TrainConfig()
    finetune: FinetuneConfig = FinetuneConfig()
    evaluate: EvaluateConfig = EvaluateConfig()
    tracking: TrackingConfig = TrackingConfig()
    checks: ChecksConfig = ChecksConfig()
    orchestrate: OrchestrateConfig = OrchestrateConfig()
    executor: ExecutorConfig = ExecutorConfig()
    # ``--set <recipe file>:<key>=<value>`` (DVC's spelling of a value in another parameters file):
    # recipe values changed for one command, applied when the recipe is read. Never written to
    # or read from params.yaml; the recipe files hold the lasting values.
    recipe_overrides: dict[str, list[str]] = Field({}, exclude=True)


# ----------------------------------------------------------------------------- loading


def format_validation_error(source: str, exc: ValidationError, what: str = "configuration") -> str:
    """A validation error as one line that names each offending key
    (``params.yaml: invalid configuration: a.b: unknown key; c: ...``)."""
    problems = []
    for err in exc.errors():
        key = ".".join(str(p) for p in err["loc"]) or "<root>"
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown key"
        problems.append(f"{key}: {msg}")
    return f"{source}: invalid {what}: " + "; ".join(" ".join(p.split()) for p in problems)


def parse_params(data: dict[str, Any] | None, source: str = "params") -> Params:
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the top level must be a mapping, got {type(data).__name__}")
    try:
        return Params.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(source, exc)) from None


def load_params(path: str | Path | None = "params.yaml", overrides: list[str] | None = None) -> Params:
    """Read and validate ``params.yaml``; a missing file means all defaults.

    ``overrides`` are ``dotted.key=value`` strings, the value parsed as YAML
    (``clean.rules.min_sentences=5``, ``clean.language.enabled=false``); ``<recipe file>:key=value``
    changes a recipe's value (``pipelines/gpt.yaml:sizes.tiny.pretrain.learning_rate=0.003``, as
    ``dvc exp run -S`` spells it), kept in ``recipe_overrides`` by architecture.
    """
    data: dict[str, Any] = {}
    source = "defaults"
    if path is not None and Path(path).exists():
        source = str(path)
        try:
            data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as exc:
            raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    elif path is not None and str(path) != "params.yaml":
        raise ConfigError(f"{path}: parameters file not found")
    if isinstance(data, dict) and "recipe_overrides" in data:
        raise ConfigError(f"{source}: recipe_overrides: unknown key (change a recipe in its file, or for one command "
                          "with --set <recipe file>:<key>=<value>)")
    recipe_items: dict[str, list[str]] = {}
    for item in overrides or []:
        target = item.split("=", 1)[0]
        if ":" in target:
            file, rest = item.split(":", 1)
            recipe_items.setdefault(Path(file.strip()).as_posix(), []).append(rest)
        else:
            apply_override(data, item)
    params = parse_params(data, source)
    if recipe_items:
        recipes = Path(params.train.recipes)
        for file, items in recipe_items.items():
            f = Path(file)
            if f.suffix != ".yaml" or f.parent != recipes or f.stem not in ARCHITECTURE_NAMES:
                raise ConfigError(f"override {file + ':' + items[0]!r}: {file} is not a recipe; recipes are "
                                  f"{(recipes / '<architecture>.yaml').as_posix()} (train.recipes), e.g. "
                                  f"{(recipes / 'gpt.yaml').as_posix()}:sizes.tiny.pretrain.learning_rate=0.003")
            for item in items:  # the same errors as a params.yaml key's, before anything runs
                try:
                    apply_override({}, item)
                except ConfigError as exc:
                    raise ConfigError(str(exc).replace(repr(item), repr(f"{file}:{item}"), 1)) from None
        params.recipe_overrides = {Path(file).stem: items for file, items in recipe_items.items()}
    return params


def apply_override(data: dict[str, Any], item: str) -> None:
    if "=" not in item:
        raise ConfigError(f"override {item!r}: expected KEY=VALUE, e.g. clean.rules.min_sentences=5")
    key, raw = item.split("=", 1)
    parts = [p for p in key.strip().split(".") if p]
    if not parts:
        raise ConfigError(f"override {item!r}: empty key")
    try:
        value = yaml.safe_load(raw) if raw.strip() else None
    except yaml.YAMLError as exc:
        raise ConfigError(f"override {item!r}: value is not valid YAML: {exc}") from None
    node = data
    for i, part in enumerate(parts[:-1]):
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"override {item!r}: {'.'.join(parts[: i + 1])} is not a mapping")
        node = child
    node[parts[-1]] = value
