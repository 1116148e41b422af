"""What a fine-tuning run is before it starts: its recipe, task, family, where it starts from and
writes to, and its fingerprint (``plan_finetune``), every error about them raised before any work."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import layout
from ..artifacts import fingerprint, sha256_file
from ..config import ConfigError, Params
from ..finetuning.family import Family
from ..finetuning.families import family_for
from ..finetuning.tasks import Task, load_task
from ..tokenizer_kinds import ARCHITECTURE_TOKENIZER
from .finetune_model import model_spec, warm_start_unused
from ..config.recipes import FinetuneRecipe, Recipe, SizeRecipe, load_recipe, recipe_path, size_recipe, unset_budget


@dataclass
class FinetunePlan:
    params: Params
    arch: str
    scratch: bool  # the randomly initialised control
    recipe: Recipe
    ft: FinetuneRecipe  # the recipe's finetune section with the size's warm start
    size: SizeRecipe  # the task family's own budget where the recipe gives one
    pretrained_dir: Path
    out_dir: Path
    tok_dir: Path
    spec: tuple[str, dict, str] | None  # the control's (preset, config overrides, seq2seq head)
    task: Task
    family: Family
    mode: str  # the run's mode (metrics.json's "mode")
    select: str  # the metric model selection follows
    augmenter: Path | None  # the pretrained masked LM that makes augmented examples
    fingerprint: str

    @property
    def init(self) -> str:
        return "scratch" if self.scratch else "pretrained"

    @property
    def recipe_file(self) -> Path:
        return recipe_path(self.params, self.arch)


def plan_finetune(params: Params, arch: str, task_spec: str, scratch: bool) -> FinetunePlan:
    """The run of ``arch`` on ``task_spec`` (``scratch``: its from-scratch control), checked."""
    recipe = load_recipe(params, arch)
    size = size_recipe(params, recipe)
    ft = recipe.finetune_at(size)  # the size's warm start where it gives one
    pretrained_dir = layout.pretrained_model_dir(params, arch)
    out_dir = (layout.finetune_scratch_dir if scratch else layout.finetune_dir)(params, arch, task_spec)
    tok_dir = layout.tokenizer_dir(params, ARCHITECTURE_TOKENIZER[arch])
    pretrained_weights = pretrained_dir / "model.safetensors"
    spec = None
    if scratch:
        spec = model_spec(pretrained_dir, recipe, size, tok_dir)
        preset, overrides, seq2seq_head = spec
        source: Any = {"preset": preset, "config_overrides": overrides, "head": seq2seq_head}
    elif not pretrained_weights.exists():
        raise ConfigError(f"{arch}: no pretrained model in {pretrained_dir}; run `lmforge pretrain {arch}` first")
    else:
        source = sha256_file(pretrained_weights)
    task = load_task(task_spec, params, seed=params.train.seed, max_train=params.finetune.max_train_examples)
    family = family_for(task, ft.mode)  # its inputs, scorer, baselines and summary (finetuning/families.py)
    size = size_recipe(params, recipe, task.family)
    family.check(task, arch, ft, recipe_path(params, arch))
    augmenter = None
    if ft.augment is not None:  # the masked LM that makes the new examples is an input too
        augmenter = layout.pretrained_model_dir(params, ft.augment.model)
        if not (augmenter / "model.safetensors").exists():
            raise ConfigError(f"{arch}: augmentation needs the pretrained {ft.augment.model} in {augmenter}; "
                              f"run `lmforge pretrain {ft.augment.model}` first")
    init = "scratch" if scratch else "pretrained"
    fp = fingerprint("finetune", init, task_spec, task.summary(), ft.model_dump(mode="json", exclude=warm_start_unused(ft, scratch)),
                     size.finetune.model_dump(mode="json", exclude=unset_budget(size.finetune)),
                     params.finetune.max_length, params.train.seed, source,
                     *([sha256_file(augmenter / "model.safetensors")] if augmenter else []))
    return FinetunePlan(params, arch, scratch, recipe, ft, size, pretrained_dir, out_dir, tok_dir, spec, task, family,
                        family.mode(ft.mode), family.select(task, ft), augmenter, fp)
