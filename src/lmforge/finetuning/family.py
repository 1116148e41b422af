"""What fine-tuning asks of a task family: ``Family``, the one protocol ``training/finetune.py``
drives every family through, and ``FamilyInputs``, a task encoded for one architecture.

A family turns a task's splits into model inputs (``encode``), scores a split with a trained
model (``scorer``, the final test score with ``score_test``), fits the baselines the model must
beat (``baselines``), says which metric model selection follows (``select``) and closes the log
line with the test scores against those baselines (``summary``). Each family lives in a folder
of its own (``classification/``, ``regression/``, ``tagging/``, ``span_qa/``, ``generation/``;
``text_to_text/`` writes tagging and span QA as text) whose ``FAMILY`` is listed in
``families.py``. The model heads are ``models/``'s: ``FamilyInputs.head`` names the one a family's
model has (``training/finetune_model.py`` builds it).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import ConfigError
from .tasks import Task
from .tasks.glue import FAMILY_METRICS

SPLITS = ("train", "validation", "test")
WRITTEN = ""  # ``FamilyInputs.head`` of a model that writes its answer: the pretraining head, kept

# evaluate(model, device) -> the scores of one split
Evaluate = Callable[[Any, Any], dict[str, Any]]


@dataclass
class FamilyInputs:
    """A task encoded for one architecture: the model inputs of each split, the number of outputs
    of its head, and what scoring a split needs besides them."""

    encoded: dict[str, list]
    num_labels: int  # the head's outputs; 0: the pretraining head (the answer written as text)
    head: str  # the head on the backbone, by its name in ``models.registry`` (classification,
    # token_classification, span_extraction), or ``WRITTEN``: the pretraining head, the answer as text
    extra: dict[str, Any] = field(default_factory=dict)  # per split: words, windows, prompts
    candidates: dict[int, list[int]] | None = None  # text-to-text classification: each label's target ids


class Family(ABC):
    """One task family's part of fine-tuning (a family that leaves out ``encode``, ``scorer``,
    ``baselines`` or ``summary`` cannot be instantiated). ``ft`` is the recipe's ``finetune`` section
    (``config.recipes.FinetuneRecipe``); ``recipe`` the recipe file, named in errors."""

    name = ""
    select_prefix = ""  # before the selection metric in the closing log line ("entity " for tagging)
    # the headline of a result (``headline.py``): its metric ("": the result's own, else
    # ``default_metric``) and each baseline's metric
    headline_metric = ""
    default_metric = ""
    baseline_metrics: dict[str, str] = {}

    def mode(self, recipe_mode: str) -> str:
        """The run's mode (``metrics.json``'s ``mode``), from the recipe's ``finetune.mode``."""
        return self.name

    def saved_mode(self, mode: str) -> str:
        """The mode the model folder's ``task.json`` records: what ``lmforge predict`` reads."""
        return self.name

    def check(self, task: Task, arch: str, ft: Any, recipe: Path) -> None:
        """One error before any work for what this family cannot train."""
        refuse_augment(task, ft, recipe)

    def select(self, task: Task, ft: Any) -> str:
        """The metric model selection follows: the task's own (``load_task`` names it), else the family's."""
        return task.info.get("metric") or FAMILY_METRICS[task.family]

    @abstractmethod
    def encode(self, task: Task, arch: str, tok_dir: Path, max_length: int, mode: str) -> FamilyInputs:
        """The task's splits as ``arch``'s inputs."""

    def weighted_labels(self, inputs: FamilyInputs, ft: Any) -> list[int] | None:
        """The training labels to balance the loss over (``training.module.balanced_class_weights``),
        or None for an unweighted loss."""
        return None

    @abstractmethod
    def scorer(self, inputs: FamilyInputs, task: Task, split: str, arch: str, tok_dir: Path,
               collate: Callable) -> Evaluate:
        """``evaluate(model, device)``: the scores of ``split``."""

    def score_test(self, inputs: FamilyInputs, task: Task, arch: str, tok_dir: Path, collate: Callable, model: Any,
                   device: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        """(the test split's scores, what else ``metrics.json`` keeps of them)."""
        return self.scorer(inputs, task, "test", arch, tok_dir, collate)(model, device), {}

    @abstractmethod
    def baselines(self, task: Task, seed: int) -> dict[str, dict]:
        """The baselines the fine-tuned model must beat, each by name."""

    @abstractmethod
    def summary(self, metrics: dict[str, Any], select: str) -> str:
        """The test scores against the baselines, for the closing log line."""


def scored_as(inputs: FamilyInputs) -> str:
    """How a sequence model's outputs are read: ``text_to_text`` (the answer written) or
    ``classification`` (the head's outputs)."""
    return "text_to_text" if inputs.head == WRITTEN else "classification"


def refuse_augment(task: Task, ft: Any, recipe: Path) -> None:
    """Augmentation makes classification examples: an error on another family's task."""
    if ft.augment is not None:
        raise ConfigError(f"{recipe}: finetune.augment makes classification examples; {task.name} is a "
                          f"{task.family} task")
