"""Per-architecture recipes (``pipelines/<arch>.yaml``): which model preset, tokenizer and
objective an architecture trains with, and its optimisation settings per size.

A recipe is data, validated like ``params.yaml`` (an unknown key or an incompatible choice is an
error naming it). ``params.train.size`` picks the size (``tiny`` for a CPU, ``base`` for a GPU);
``params.train.max_steps`` / ``finetune_max_steps`` override the steps of every recipe.

Fine-tuning budgets are given in optimizer steps (``max_steps``) or in passes over the training
examples (``epochs``), with warmup in steps or as a fraction of the budget (``warmup_ratio``);
:func:`resolve_finetune_budget` turns them into steps once the task's size is known.
"""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field, ValidationError, model_validator

from ..errors import ConfigError
from .params import Params, apply_override, format_validation_error
from ..schema import StrictModel

# the step cap of a pretraining whose budget is in minutes and that names no max_steps: never reached in practice
BUDGET_STEP_CAP = 10_000_000


class OptimConfig(StrictModel):
    """AdamW with linear warmup, then cosine or linear decay to ``min_lr_ratio`` x the peak."""

    max_steps: int = Field(None, ge=1, description="optimizer steps (with budget_minutes: the most steps; "
                                                "may be left out)")
    budget_minutes: float | None = Field(None, gt=0, description="pretraining: stop at the first optimizer step "
                                         "ending past this many wall-clock minutes; the schedule decays over them")
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


    @model_validator(mode="before")
    @classmethod
    def _steps_or_minutes(cls, data: Any) -> Any:
        if cls is OptimConfig and isinstance(data, dict) and data.get("max_steps") is None:
            if data.get("budget_minutes") is None:
                raise ValueError("give max_steps or budget_minutes")
            data = {**data, "max_steps": BUDGET_STEP_CAP}
        return data


def unset_budget(optim: OptimConfig) -> set[str]:
    """``{"budget_minutes"}`` when it is not set: what a fingerprint leaves out, so that the runs
    made before the key existed stay current."""
    return {"budget_minutes"} if optim.budget_minutes is None else set()


class FinetuneOptimConfig(OptimConfig):
    """A fine-tuning budget: ``max_steps`` or ``epochs`` (exactly one), warmup in steps or as
    ``warmup_ratio`` of the budget (at most one). ``schedule: linear`` is the decay of the BERT
    recipe and of ``transformers``' Trainer: linear warmup, then a straight line from the peak
    to ``min_lr_ratio`` x the peak (default 0) at the end of the budget, whatever its unit."""

    max_steps: int | None = Field(None, ge=1, description="optimizer steps (or give epochs)")
    epochs: float | None = Field(None, gt=0, description="passes over the training examples: steps = "
                                 "ceil(epochs x examples / (batch_size x accumulate_grad_batches x processes))")
    warmup_ratio: float | None = Field(None, ge=0, lt=1, description="warmup as a fraction of the steps "
                                       "(ceil(ratio x steps)); instead of warmup_steps")

    @model_validator(mode="after")
    def _one_budget(self) -> FinetuneOptimConfig:
        if (self.max_steps is None) == (self.epochs is None):
            raise ValueError("give exactly one of max_steps and epochs")
        if self.warmup_ratio is not None and self.warmup_steps:
            raise ValueError("give warmup_steps or warmup_ratio, not both")
        if self.budget_minutes is not None:
            raise ValueError("budget_minutes is a pretraining budget; fine-tuning takes max_steps or epochs")
        return self


def resolve_finetune_budget(optim: FinetuneOptimConfig, train_examples: int, world: int = 1) -> OptimConfig:
    """The plain ``OptimConfig`` of ``optim`` for ``train_examples`` training examples on
    ``world`` processes: ``epochs`` become steps (rounded up: the last pass completes) and
    ``warmup_ratio`` becomes warmup steps (rounded up, as ``transformers`` does)."""
    steps = optim.max_steps
    if steps is None:
        global_batch = optim.batch_size * optim.accumulate_grad_batches * world
        # exact arithmetic on the decimal the recipe wrote: 0.1 epoch of 30 examples at 3 is 1 step, not 2
        steps = max(1, math.ceil(Fraction(str(optim.epochs)) * train_examples / global_batch))
    warmup = optim.warmup_steps if optim.warmup_ratio is None else math.ceil(optim.warmup_ratio * steps)
    fields = optim.model_dump(exclude={"epochs", "warmup_ratio"})
    return OptimConfig(**{**fields, "max_steps": steps, "warmup_steps": min(warmup, steps)})


# the budget keys that come in exclusive pairs: a family's budget naming one drops the other
_EITHER = {"max_steps": "epochs", "epochs": "max_steps", "warmup_steps": "warmup_ratio", "warmup_ratio": "warmup_steps"}


def _problems(exc: ValidationError, whole: str) -> str:
    """A validation error's problems on one line: each key path (``whole`` for the object itself) and its message."""
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or whole}: {e['msg']}" for e in exc.errors())


def family_budget(base: FinetuneOptimConfig, changes: dict[str, Any]) -> FinetuneOptimConfig:
    """``base`` with ``changes`` (some of its keys) applied: giving ``max_steps`` replaces
    ``epochs`` and the reverse, likewise ``warmup_steps`` and ``warmup_ratio``."""
    fields = base.model_dump()
    for key in changes:
        other = _EITHER.get(key)
        if other is not None and other not in changes:
            fields[other] = 0 if other == "warmup_steps" else None
    fields.update(changes)
    return FinetuneOptimConfig.model_validate(fields)


class TimeToPay(StrictModel):
    """What the transfer curve of a recipe's size measured (``benchmarks/transfer.py --budgets``):
    the least pretraining time, in minutes of one CPU core, after which the pretrained model's
    gain over its from-scratch control paid (at least 3 points and above the spread over its
    seeds), or ``minutes: null`` when none of the measured budgets paid."""

    minutes: float | None = Field(description="the least measured budget whose gain paid (null: none paid)")
    measured: list[float] = Field(min_length=1, description="the budgets the curve measured, in minutes of one core")
    task: str = Field(min_length=1, description="the task the gain was measured on")
    source: str = Field("", description="where the curve is reported, e.g. a BENCHMARKS.md section")

    @model_validator(mode="after")
    def _measured(self) -> TimeToPay:
        if any(m <= 0 for m in self.measured):
            raise ValueError("measured: budgets are positive minutes")
        if self.minutes is not None and self.minutes not in self.measured:
            raise ValueError(f"minutes {self.minutes:g} is not one of the measured budgets {self.measured}")
        return self

    def short_of(self, minutes: float) -> str | None:
        """Why a pretraining of ``minutes`` (one core) is too short to pay, or None when the curve
        does not say so: shorter than the time to pay, or, where no budget paid, no longer than
        the longest one measured."""
        if self.minutes is not None:
            if minutes < self.minutes:
                return (f"{minutes:.1f} CPU-minutes of pretraining, where its recipe pays after {self.minutes:g} "
                        f"on {self.task}")
            return None
        longest = max(self.measured)
        if minutes <= longest:
            return (f"{minutes:.1f} CPU-minutes of pretraining, where its recipe did not pay within "
                    f"{longest:g} on {self.task}")
        return None


class SizeRecipe(StrictModel):
    preset: str = Field(description="model preset name (lmforge.models.registry)")
    model: dict[str, Any] = Field(default_factory=dict, description="config overrides of the preset")
    pretrain_model: dict[str, Any] = Field(
        default_factory=dict, description="config overrides while pretraining only, e.g. {dropout: 0.0}: the saved "
                                          "model (and so fine-tuning, from it or from scratch) keeps `model`'s values")
    pretrain: OptimConfig
    finetune: FinetuneOptimConfig
    finetune_families: dict[Literal["regression", "tagging", "span_qa", "generation"], dict[str, Any]] = Field(
        default_factory=dict, description="a task family's own budget: keys of `finetune` that replace its values "
                                          "for that family's tasks (e.g. generation: {epochs: 12})")
    time_to_pay: TimeToPay | None = Field(
        None, description="what the transfer curve measured: the pretraining minutes (one core) after which this "
                          "size pays; the leaderboard calls a shorter pretraining too short to pay")
    warm_start: dict[Literal["shrink_perturb", "reinit_top_layers"], Any] = Field(
        default_factory=dict, description="this size's warm start of the pretrained arm: the recipe's "
                                          "finetune.shrink_perturb and/or finetune.reinit_top_layers replaced (a "
                                          "remedy a short CPU pretraining needs and a published size does not)")

    @model_validator(mode="after")
    def _family_budgets(self) -> SizeRecipe:
        shaping = [k for k in self.pretrain_model if "dropout" not in k and k != "dropatt"]  # dropatt: Transformer-XL's
        if shaping:  # the saved model is rebuilt without them: only what changes no weight may differ
            raise ValueError(f"pretrain_model: {', '.join(shaping)}: only the dropout rates may differ while pretraining")
        for family, changes in self.finetune_families.items():
            try:
                family_budget(self.finetune, changes)
            except ValidationError as exc:
                problems = _problems(exc, "budget")
                raise ValueError(f"finetune_families.{family}: {problems}") from None
        return self

    def finetune_for(self, family: str) -> FinetuneOptimConfig:
        """The fine-tuning budget of a ``family`` task: ``finetune`` with the family's changes."""
        changes = self.finetune_families.get(family)
        return family_budget(self.finetune, changes) if changes else self.finetune


class AugmentRecipe(StrictModel):
    """Contextual data augmentation of the training split (``inference.augment``)."""

    copies: int = Field(1, ge=1, description="new examples made from each training example")
    rate: float = Field(0.15, gt=0, le=1, description="fraction of each example's words replaced")
    model: Literal["bert", "albert", "ernie"] = Field(
        "bert", description="the architecture whose pretrained masked LM (under train.output) predicts the replacements")


class FinetuneRecipe(StrictModel):
    """How an architecture is fine-tuned; the model selection and the options off by default."""

    mode: Literal["classification", "text_to_text"]
    lm_coef: float = Field(0.0, ge=0, description="GPT-1's auxiliary LM loss weight during fine-tuning (0.5 in the paper)")
    freeze_pretrained: bool = Field(False, description="ELMo: keep the biLM frozen, learn the scalar mix and classifier")
    pooling: Literal["default", "mean"] = Field(
        "default", description="classifier input: default = the architecture's own (BERT's pooled [CLS], GPT's last "
                               "token, ...), mean = the last layer's states averaged over the real tokens")
    metric: Literal["accuracy", "macro_f1", "mcc", "f1"] = Field(
        "accuracy", description="validation metric evaluated every eval_every steps; its best weights are kept "
                                "(mcc: Matthews correlation; f1: the positive label's, two-label tasks)")
    patience: int | None = Field(None, ge=1, description="stop after this many evaluations without improvement (null: off)")
    class_weights: Literal["balanced"] | None = Field(
        None, description="balanced: cross entropy weighted n / (k x count_c) from the training labels (classification)")
    tag_weights: Literal["balanced"] | None = Field(
        None, description="balanced: a tagging head's cross entropy weighted n / (k x count_t) from the training "
                          "tags (the rare B-/I- tags weigh more than O); the heads only, not text to text")
    layer_decay: float | None = Field(None, gt=0, le=1, description="layer-wise learning-rate decay: the top layer and "
                                      "the head at the base rate, each lower layer x this, the embeddings lowest")
    freeze: list[Literal["embeddings", "layers"]] = Field(
        default_factory=list, description="parameter groups kept fixed: embeddings (below the first layer), layers")
    shrink_perturb: tuple[float, float] | None = Field(
        None, description="[shrink, perturb]: each pretrained weight w becomes shrink x w + perturb x w0, w0 the "
                          "from-scratch control's initial value (Ash & Adams 2020); null: the pretrained weights as they are")
    reinit_top_layers: int = Field(0, ge=0, description="the top layers of the stack (and the pooler, a final norm "
                                   "above them) start from the control's initial values (Zhang et al. 2021)")
    augment: AugmentRecipe | None = Field(
        None, description="contextual augmentation: words of the training examples replaced by a masked LM's "
                          "predictions, label kept (Kobayashi 2018); null: off")

    @model_validator(mode="after")
    def _options_fit_mode(self) -> FinetuneRecipe:
        if self.pooling != "default" and self.mode != "classification":
            raise ValueError("pooling applies to the classification heads (mode: classification), not text_to_text")
        if self.class_weights is not None and self.mode != "classification":
            raise ValueError("class_weights apply to the classification heads (mode: classification), not text_to_text")
        if self.tag_weights is not None and self.mode != "classification":
            raise ValueError("tag_weights apply to the tagging heads (mode: classification); text_to_text writes "
                             "the entities")
        if self.shrink_perturb is not None and (min(self.shrink_perturb) < 0 or max(self.shrink_perturb) == 0):
            raise ValueError("shrink_perturb: two non-negative factors, not both zero")
        if len(set(self.freeze)) != len(self.freeze):
            raise ValueError("freeze: a group is named twice")
        return self


class Recipe(StrictModel):
    architecture: str
    objective: str
    description: str = ""
    head: str | None = Field(None, description="pretraining head (null: the architecture's default)")
    sizes: dict[str, SizeRecipe]
    finetune: FinetuneRecipe

    def finetune_at(self, size: SizeRecipe) -> FinetuneRecipe:
        """How ``size`` is fine-tuned: ``finetune`` with the size's ``warm_start`` values."""
        if not size.warm_start:
            return self.finetune
        return FinetuneRecipe.model_validate({**self.finetune.model_dump(), **size.warm_start})

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
            try:
                self.finetune_at(s)
            except ValidationError as exc:
                problems = _problems(exc, "warm start")
                raise ValueError(f"sizes.{size}.warm_start: {problems}") from None
        return self

    @property
    def pretrain_head(self) -> str:
        from ..models.registry import ARCHITECTURES

        return self.head or ARCHITECTURES[self.architecture].default_head


def recipe_path(params: Params, arch: str) -> Path:
    """``<train.recipes>/<arch>.yaml`` as configured (relative to the project folder)."""
    return Path(params.train.recipes) / f"{arch}.yaml"


def starter_recipe(arch: str) -> Path:
    """The recipe ``lmforge init`` writes for ``arch`` (packaged with lmforge)."""
    from .. import starter

    return starter.folder() / "pipelines" / f"{arch}.yaml"


def recipe_file(params: Params, arch: str, root: str | Path | None = None) -> Path:
    """Where ``arch``'s recipe is read from: the project's ``<train.recipes>/<arch>.yaml``; in a
    project with no recipes folder at all, the packaged starter recipe (``lmforge init`` writes
    them into the project, where DVC can see them)."""
    path = recipe_path(params, arch)
    full = Path(root) / path if root is not None and not path.is_absolute() else path
    if not full.parent.exists() and starter_recipe(arch).exists():
        return starter_recipe(arch)
    return full


def _read(path: Path, shown: Path, arch: str) -> dict[str, Any]:
    if not path.exists():
        raise ConfigError(f"{shown}: no recipe for architecture {arch!r} (`lmforge init` writes the starter recipes)")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{shown}: not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{shown}: the top level must be a mapping, got {type(data).__name__}")
    return data


def load_recipe(params: Params, arch: str, root: str | Path | None = None) -> Recipe:
    """The recipe of ``arch`` from ``params.train.recipes`` (relative to ``root``, default the
    working directory) with the command's ``--set <recipe file>:key=value`` changes
    (``params.recipe_overrides``); errors name the file and key."""
    path = recipe_path(params, arch)
    data = _read(recipe_file(params, arch, root), path, arch)
    overrides = params.recipe_overrides.get(arch, [])
    for item in overrides:
        apply_override(data, item)
    source = f"{path} (with --set {', '.join(overrides)})" if overrides else str(path)
    try:
        recipe = Recipe.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(source, exc, "recipe")) from None
    if recipe.architecture != arch:
        raise ConfigError(f"{source}: architecture is {recipe.architecture!r}, expected {arch!r} (the file name)")
    if params.train.size not in recipe.sizes:
        raise ConfigError(f"{source}: no size {params.train.size!r} (train.size); it has {sorted(recipe.sizes)}")
    return recipe


def recipe_param_keys(params: Params, arch: str, part: Literal["pretrain", "finetune", "evaluate"],
                      root: str | Path | None = None) -> list[str]:
    """The keys of ``arch``'s recipe file that a ``part`` stage reads, as DVC names parameters in
    another file (dotted; a mapping stands for everything under it): the objective and head,
    and of the size ``train.size`` its preset, model overrides and ``part`` settings; fine-tuning
    also its ``finetune`` section; the evaluate stage only the size's ``time_to_pay``. Only keys
    the file writes (DVC refuses a missing one)."""
    data = _read(recipe_file(params, arch, root), recipe_path(params, arch), arch)
    size = params.train.size
    wanted = ["objective", "head", f"sizes.{size}.preset", f"sizes.{size}.model", f"sizes.{size}.{part}"]
    if part == "evaluate":
        wanted = [f"sizes.{size}.time_to_pay"]
    if part == "pretrain":
        wanted.append(f"sizes.{size}.pretrain_model")
    if part == "finetune":
        wanted += [f"sizes.{size}.finetune_families", f"sizes.{size}.warm_start", "finetune"]
    keys = []
    for key in wanted:
        node: Any = data
        for name in key.split("."):
            node = node.get(name) if isinstance(node, dict) else None
        if node is not None:
            keys.append(key)
    return keys


def size_recipe(params: Params, recipe: Recipe, family: str | None = None) -> SizeRecipe:
    """The recipe's size ``params.train.size`` with the step overrides of ``params.train``; with
    a task ``family``, its fine-tuning budget is that family's (``finetune_families``)."""
    s = recipe.sizes[params.train.size]
    if family is not None and family in s.finetune_families:
        s = s.model_copy(update={"finetune": s.finetune_for(family)})
    updates = {}
    if params.train.budget_minutes:  # minutes instead of the recipe's steps (train.max_steps, if given, caps them)
        updates["pretrain"] = s.pretrain.model_copy(update={
            "budget_minutes": params.train.budget_minutes, "max_steps": params.train.max_steps or BUDGET_STEP_CAP})
    elif params.train.max_steps:
        updates["pretrain"] = s.pretrain.model_copy(update={"max_steps": params.train.max_steps, "budget_minutes": None})
    if params.train.finetune_max_steps:
        updates["finetune"] = s.finetune.model_copy(update={"max_steps": params.train.finetune_max_steps, "epochs": None})
    return s.model_copy(update=updates) if updates else s
