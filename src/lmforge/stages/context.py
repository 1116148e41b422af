"""What the kinds read while they declare their stages (``declare(ctx)`` in each
``stages/kinds/<kind>.py``): the parameters, the project folder, the recipes of the enabled
architectures, each task's family, the folders the corpus stages write and which of them the
later stages read, and the stages declared so far."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from .. import layout
from ..config import ConfigError, Params
from .stage import ProjectPaths, Stage


@dataclass
class GraphContext:
    params: Params
    root: Path                      # the project folder, resolved
    rel: ProjectPaths               # how the graph writes a path (relative inside the project)
    recipes: dict                   # architecture -> its recipe (config.recipes.Recipe)
    families: dict[str, str]        # task -> its family (classification, tagging, ...)
    clean_out: str                  # the clean stage's folder
    quality_out: str | None         # the quality stage's folder (None: quality.enabled is false)
    corpus: str                     # the corpus the tokenizers, token stores and corpus tasks read
    corpus_stage: str | None        # the stage that writes it (None: tokenizer.input names another folder)
    stages: dict[str, Stage] = field(default_factory=dict)

    @classmethod
    def create(cls, params: Params, root: str | os.PathLike) -> GraphContext:
        """Recipes are read for every enabled architecture; a missing or invalid recipe is a
        :class:`ConfigError` naming the file. A task's family is read once (a folder's from its
        files)."""
        from ..finetuning.tasks import CORPUS_TASKS
        from ..finetuning.tasks.load import task_family
        from ..config.recipes import load_recipe

        root = Path(root).resolve()
        rel = ProjectPaths(root)
        recipes = {arch: load_recipe(params, arch, root=root) for arch in params.train.architectures}
        families = {task: task_family(task if task in CORPUS_TASKS or task.startswith("hf:") or Path(task).is_absolute()
                                      else str(root / task)) for task in params.finetune.tasks}
        clean_out = rel.output(layout.clean_dir(params), "clean.output")
        quality_out = rel.output(layout.quality_dir(params), "quality.output") if params.quality.enabled else None
        corpus = rel(layout.corpus_dir(params))
        corpus_stage = "quality" if corpus == quality_out else "clean" if corpus == clean_out else None
        return cls(params=params, root=root, rel=rel, recipes=recipes, families=families, clean_out=clean_out,
                   quality_out=quality_out, corpus=corpus, corpus_stage=corpus_stage)

    def add(self, stage: Stage) -> None:
        if stage.name in self.stages:
            raise ConfigError(f"two stages named {stage.name!r}; rename a task or an output")
        self.stages[stage.name] = stage

    def declared(self, kind: str, **key: str) -> list[Stage]:
        """The stages of ``kind`` declared so far whose key holds ``key``, in the order declared."""
        return [s for s in self.stages.values() if s.kind == kind and all(s.key.get(k) == v for k, v in key.items())]

    def tokenizer_kinds(self) -> list[str]:
        """tokenizer.kinds, then those the recipes' objectives read that it does not list."""
        from ..objectives.registry import tokenizer_kind

        kinds = list(self.params.tokenizer.kinds)
        for recipe in self.recipes.values():
            kind = tokenizer_kind(recipe.objective)
            if kind not in kinds:
                kinds.append(kind)
        return kinds
