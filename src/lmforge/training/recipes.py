"""Per-architecture recipes (``pipelines/<arch>.yaml``): which model preset, tokenizer and
objective an architecture trains with, and its optimisation settings per size.

A recipe is data, validated like ``params.yaml`` (an unknown key or an incompatible choice is an
error naming it). ``params.train.size`` picks the size (``tiny`` for a CPU, ``base`` for a GPU);
``params.train.max_steps`` / ``finetune_max_steps`` override the steps of every recipe.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field, ValidationError, model_validator

from ..config import ConfigError, Params, format_validation_error
from ..schema import StrictModel


class OptimConfig(StrictModel):
    """AdamW with linear warmup, then cosine or linear decay to ``min_lr_ratio`` x the peak."""

    max_steps: int = Field(ge=1, description="optimizer steps")
    batch_size: int = Field(ge=1, description="examples per device per micro-batch")
    accumulate_grad_batches: int = Field(1, ge=1)
    learning_rate: float = Field(gt=0)
    weight_decay: float = Field(0.01, ge=0)
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = Field(1e-8, gt=0)
    warmup_steps: int = Field(0, ge=0)
    schedule: Literal["cosine", "linear", "constant"] = "cosine"
    min_lr_ratio: float = Field(0.0, ge=0, le=1)
    gradient_clip: float | None = Field(1.0, gt=0, description="max global gradient norm; null: no clipping")
    eval_every: int = Field(50, ge=1, description="optimizer steps between validation passes")
    eval_batches: int | None = Field(20, ge=1, description="validation batches per pass during training (null: all)")


class SizeRecipe(StrictModel):
    preset: str = Field(description="model preset name (lmforge.models.registry)")
    model: dict[str, Any] = Field(default_factory=dict, description="config overrides of the preset")
    pretrain: OptimConfig
    finetune: OptimConfig


class FinetuneRecipe(StrictModel):
    mode: Literal["classification", "text_to_text"]
    lm_coef: float = Field(0.0, ge=0, description="GPT-1's auxiliary LM loss weight during fine-tuning (0.5 in the paper)")
    freeze_pretrained: bool = Field(False, description="ELMo: keep the biLM frozen, learn the scalar mix and classifier")


class Recipe(StrictModel):
    architecture: str
    objective: str
    description: str = ""
    head: str | None = Field(None, description="pretraining head (null: the architecture's default)")
    sizes: dict[str, SizeRecipe]
    finetune: FinetuneRecipe

    @model_validator(mode="after")
    def _consistent(self) -> Recipe:
        from ..models.registry import ARCHITECTURES, PRESET_ARCHITECTURE

        if self.architecture not in ARCHITECTURES:
            raise ValueError(f"unknown architecture {self.architecture!r}; known: {sorted(ARCHITECTURES)}")
        arch = ARCHITECTURES[self.architecture]
        if self.objective not in arch.objectives:
            raise ValueError(f"objective {self.objective!r} does not fit {self.architecture}; its heads take {list(arch.objectives)}")
        if self.head is not None and self.head not in arch.heads:
            raise ValueError(f"unknown head {self.head!r} for {self.architecture}; known: {sorted(arch.heads)}")
        for size, s in self.sizes.items():
            if PRESET_ARCHITECTURE.get(s.preset) != self.architecture:
                raise ValueError(f"sizes.{size}.preset: {s.preset!r} is not a {self.architecture} preset; "
                                 f"known: {sorted(arch.presets)}")
        return self

    @property
    def pretrain_head(self) -> str:
        from ..models.registry import ARCHITECTURES

        return self.head or ARCHITECTURES[self.architecture].default_head


def recipe_path(params: Params, arch: str) -> Path:
    """``<train.recipes>/<arch>.yaml`` as configured (relative to the project folder)."""
    return Path(params.train.recipes) / f"{arch}.yaml"


def load_recipe(params: Params, arch: str, root: str | Path | None = None) -> Recipe:
    """The recipe of ``arch`` from ``params.train.recipes`` (relative to ``root``, default the
    working directory); errors name the file and key."""
    path = recipe_path(params, arch)
    full = Path(root) / path if root is not None else path
    if not full.exists():
        raise ConfigError(f"{path}: no recipe for architecture {arch!r}")
    try:
        data = yaml.safe_load(full.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    try:
        recipe = Recipe.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(str(path), exc, "recipe")) from None
    if recipe.architecture != arch:
        raise ConfigError(f"{path}: architecture is {recipe.architecture!r}, expected {arch!r} (the file name)")
    if params.train.size not in recipe.sizes:
        raise ConfigError(f"{path}: no size {params.train.size!r} (train.size); it has {sorted(recipe.sizes)}")
    return recipe


def size_recipe(params: Params, recipe: Recipe) -> SizeRecipe:
    """The recipe's size ``params.train.size`` with the step overrides of ``params.train``."""
    s = recipe.sizes[params.train.size]
    updates = {}
    if params.train.max_steps:
        updates["pretrain"] = s.pretrain.model_copy(update={"max_steps": params.train.max_steps})
    if params.train.finetune_max_steps:
        updates["finetune"] = s.finetune.model_copy(update={"max_steps": params.train.finetune_max_steps})
    return s.model_copy(update=updates) if updates else s
