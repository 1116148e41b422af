"""The model a fine-tuning starts from: the pretrained backbone under the head its task family
names (``FamilyInputs.head``), or, for the from-scratch control, the same model randomly
initialised; the recipe's warm-start options applied to the pretrained one."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import torch

from ..config import ConfigError
from ..finetuning.family import WRITTEN
from ..models.registry import ARCHITECTURES, build_model, preset_config
from ..objectives.base import Vocab
from .tokenizer_config import tokenizer_overrides
from ..config.recipes import FinetuneRecipe, Recipe, SizeRecipe
from .warm_start import reinit_top_layers, shrink_and_perturb


def model_spec(pretrained_dir: Path, recipe: Recipe, size: SizeRecipe, tok_dir: Path) -> tuple[str, dict, str]:
    """(preset, config overrides, seq2seq head) of the pretrained model: from its
    ``lmforge_model.json``, or, when there is none, as pretraining would build it (the recipe's
    preset and overrides, the tokenizer's vocabulary and special ids)."""
    meta_path = pretrained_dir / "lmforge_model.json"
    if meta_path.exists():
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        return meta["preset"], dict(meta["config_overrides"]), meta["head"]
    overrides = {**tokenizer_overrides(size.preset, Vocab.from_tokenizer(tok_dir)), **size.model}
    return size.preset, overrides, recipe.pretrain_head


def head_model(arch: str, head: str, preset: str, overrides: dict, seq2seq_head: str, num_labels: int, *,
               lm_coef: float = 0.0, freeze: bool = False, pooling: str = "default") -> tuple[torch.nn.Module, dict, str]:
    """The fine-tuning model, randomly initialised: (model, config overrides, head). ``head`` is
    the family's (``FamilyInputs.head``): ``WRITTEN`` keeps the pretraining head ``seq2seq_head``;
    the others are ``models.registry`` heads, the sequence head reading the sequence as ``pooling``
    says (``default``: the architecture's own)."""
    if head == WRITTEN:
        return build_model(preset, head=seq2seq_head, **overrides), overrides, seq2seq_head
    if arch == "elmo":
        overrides = {**overrides, "freeze_bilm": freeze}
    if head != "classification":  # every position scored: the pooling does not apply
        config = preset_config(preset, **overrides)
        return ARCHITECTURES[arch].heads[head](config, num_labels=num_labels), overrides, head
    if pooling != "default" and arch != "elmo":  # ELMo's classifier averages its mixed layers already
        if "classifier_pooling" not in {f.name for f in dataclasses.fields(preset_config(preset))}:
            raise ConfigError(f"{arch}: the finetune pooling {pooling!r} is not available for this architecture")
        overrides = {**overrides, "classifier_pooling": pooling}
    config = preset_config(preset, **overrides)
    cls = ARCHITECTURES[arch].heads["classification"]
    model = cls(config, num_labels=num_labels, lm_coef=lm_coef) if arch == "gpt" else cls(config, num_labels=num_labels)
    return model, overrides, "classification"


def warm_start_unused(ft: FinetuneRecipe, scratch: bool) -> set[str]:
    """The warm-start options a fingerprint leaves out: all of them for the control (they change
    nothing there), and those left at their defaults (runs made before they existed stay current)."""
    keys = {"shrink_perturb": None, "reinit_top_layers": 0}
    return {k for k, default in keys.items() if scratch or getattr(ft, k) == default}


def warm_start(model: torch.nn.Module, fresh: torch.nn.Module, ft: FinetuneRecipe) -> str:
    """Apply the recipe's ``reinit_top_layers`` then ``shrink_perturb`` to the pretrained ``model``
    (``fresh``: the control's initial model); what was done, in words."""
    done = []
    if ft.reinit_top_layers:
        names = reinit_top_layers(model, fresh, ft.reinit_top_layers)
        if not names:
            raise ConfigError("finetune.reinit_top_layers: this model has no indexed layer stack to re-initialise "
                              "(ALBERT's shared block has none); use shrink_perturb or leave it 0")
        done.append(f"the top {ft.reinit_top_layers} layer(s) re-initialised ({len(names)} tensors)")
    if ft.shrink_perturb is not None:
        shrink, perturb = ft.shrink_perturb
        shrink_and_perturb(model, fresh, shrink, perturb)
        done.append(f"weights shrunk x{shrink:g} and perturbed by x{perturb:g} of the control's initialisation")
    return "warm start: " + "; ".join(done)


def build_finetune_model(pretrained_dir: Path, arch: str, head: str, num_labels: int, *, lm_coef: float = 0.0,
                         freeze: bool = False, pooling: str = "default") -> tuple[torch.nn.Module, str, dict, str]:
    """The fine-tuning model with the pretrained weights under ``head`` (see ``head_model``):
    (model, preset, config overrides, head)."""
    from ..models.folder import load_model_dir

    meta_path = pretrained_dir / "lmforge_model.json"
    if not meta_path.exists():
        raise ConfigError(f"{arch}: no pretrained model in {pretrained_dir}; run `lmforge pretrain {arch}` first")
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    pretrained = load_model_dir(pretrained_dir)
    preset, overrides = meta["preset"], dict(meta["config_overrides"])
    if head == WRITTEN:
        return pretrained, preset, overrides, meta["head"]
    model, overrides, head = head_model(arch, head, preset, overrides, meta["head"], num_labels, lm_coef=lm_coef,
                                        freeze=freeze, pooling=pooling)
    # The heads share the backbone's parameter names; the pretraining head's own weights (the
    # LM softmax, NSP) are left behind and the classifier's are new. A shared name with another
    # shape, or a model that would be mostly new, means the checkpoint is not this backbone.
    source, target = pretrained.state_dict(), model.state_dict()
    shared = sorted(set(source) & set(target))
    mismatched = [k for k in shared if source[k].shape != target[k].shape]
    if mismatched:
        raise ConfigError(f"{arch}: pretrained weights have other shapes than the fine-tuning model, e.g. {mismatched[:5]}")
    loaded_values = sum(target[k].numel() for k in shared)
    if loaded_values < 0.5 * sum(v.numel() for v in target.values()):
        raise ConfigError(f"{arch}: the pretrained weights cover only {loaded_values} of the fine-tuning model's values")
    model.load_state_dict({k: source[k] for k in shared}, strict=False)
    return model, preset, overrides, head
