"""A trained model and its tokenizer, found from what a user types: a model folder
(``.../model``), the run folder above it (``models/gpt/pretrain``), or an architecture name
(its pretrained model under ``train.output``; with a task, its fine-tuned one).

A fine-tuned model folder carries ``task.json`` (labels, mode, text-to-text prefix, input
length) beside its weights; older runs keep the same record as ``labels.json`` in the run folder.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import LmforgeError
from ..models.folder import META_FILE, MODEL_FILE, check_model_dir, load_model_dir
from ..models.registry import ARCHITECTURES, preset_architectures

TASK_FILE = "task.json"


class InferenceError(LmforgeError, ValueError):
    """A model that cannot do what was asked, a missing model folder, or input it cannot read."""


@dataclass
class LoadedModel:
    """A model in eval mode with what reading and writing text for it needs."""

    arch: str
    directory: Path
    meta: dict
    model: Any  # torch.nn.Module
    tokenizer: Any  # finetuning.features.LoadedTokenizer
    task: dict | None = field(default=None)  # task.json of a fine-tuned model

    @property
    def head(self) -> str:
        return self.meta.get("head") or ARCHITECTURES[self.arch].default_head

    @property
    def vocab(self):
        return self.tokenizer.vocab

    @property
    def max_positions(self) -> int | None:
        """The longest input the model's position table holds (None: relative positions, no limit)."""
        config = self.model.config
        return getattr(config, "max_positions", None) or getattr(config, "n_positions", None)

    def check_length(self, ids: list[int]) -> None:
        limit = self.max_positions
        if limit is not None and len(ids) > limit:
            raise InferenceError(f"a text of {len(ids)} tokens is longer than the {limit} positions {self.arch} has")

    def decode(self, ids, skip_special_tokens: bool = True) -> str:
        return self.tokenizer.tokenizer.decode([int(i) for i in ids], skip_special_tokens=skip_special_tokens)


def model_folder(spec: str | Path, *, train_output: str | Path = "models", task: str | None = None) -> Path:
    """The model folder ``spec`` names: a folder holding the weights, a run folder holding
    ``model/``, or an architecture name (``<train_output>/<arch>/pretrain/model``, or
    ``<train_output>/<arch>/<task slug>/model`` with ``task``)."""
    from ..layout import task_slug

    spec_path = Path(spec)
    if str(spec) in ARCHITECTURES and not spec_path.exists():
        spec_path = Path(train_output) / str(spec) / (task_slug(task) if task else "pretrain")
        hint = f"; run `lmforge {'finetune' if task else 'pretrain'} {spec}` first"
    else:
        hint = ""
    for candidate in (spec_path, spec_path / "model"):
        if (candidate / META_FILE).is_file() and (candidate / MODEL_FILE).is_file():
            return candidate
    raise InferenceError(f"{spec_path}: no trained model there (a folder with {META_FILE} and {MODEL_FILE}){hint}")


def read_task(directory: Path) -> dict | None:
    """The fine-tuned model's task record, or None for a pretrained model."""
    for path in (directory / TASK_FILE, directory.parent / "labels.json"):
        if path.is_file():
            return json.loads(path.read_text(encoding="utf-8"))
    return None


def load(spec: str | Path, *, train_output: str | Path = "models", task: str | None = None) -> LoadedModel:
    """Load the model ``spec`` names (``model_folder``) with the tokenizer saved beside it."""
    from ..finetuning.features import FeatureError, load_tokenizer

    directory = model_folder(spec, train_output=train_output, task=task)
    meta = check_model_dir(directory)  # the record against the weights, before anything is allocated
    arch = preset_architectures().get(meta.get("preset"))
    if arch is None:
        raise InferenceError(f"{directory}: unknown model preset {meta.get('preset')!r}")
    if not (directory / "tokenizer" / "tokenizer.json").is_file():
        raise InferenceError(f"{directory}: no tokenizer/ folder beside the weights")
    try:
        tokenizer = load_tokenizer(arch, directory / "tokenizer")
    except FeatureError as exc:
        raise InferenceError(str(exc)) from exc
    return LoadedModel(arch, directory, meta, load_model_dir(directory, checked=meta), tokenizer,
                       read_task(directory))
