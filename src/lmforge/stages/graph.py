"""The stage graph: every stage of the pipeline with its inputs, outputs, parameters and kind,
built from ``params.yaml`` and the recipes in ``pipelines/``.

Each kind declares its own stages (``declare`` in ``stages/kinds/<kind>.py``: names, inputs,
outputs, parameters, command, description); this module assembles them in the kinds' order,
adds each kind's code to its stages' inputs and checks the whole. Its two views are derived from
it: ``dvc.yaml`` (``stages/dvc.py``, written by ``lmforge dvc``) and the Dagster asset graph
(``dagster_project/``).

Stage names (letters, digits and ``_``: valid as DVC stage and Dagster asset names):
``clean``; ``quality`` (only when ``quality.enabled``); ``tokenizer_<kind>`` and ``tokens_<kind>``
for each tokenizer kind configured or needed; ``dataset_<objective>``; ``pretrain_<arch>``,
``finetune_<arch>_<task>`` and ``evaluate_<arch>`` for each enabled architecture; ``report``.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, replace
from pathlib import Path

from ..config import ConfigError, Params, load_params
from .context import GraphContext
from .kinds import KINDS
from .stage import Output, Stage

__all__ = ["Output", "Stage", "StageGraph", "build_stages"]


@dataclass
class StageGraph:
    params: Params
    root: Path
    stages: dict[str, Stage]

    def __iter__(self):
        return iter(self.stages.values())

    def __getitem__(self, name: str) -> Stage:
        try:
            return self.stages[name]
        except KeyError:
            raise KeyError(f"no stage {name!r}; stages: {', '.join(self.stages)}") from None

    def __len__(self) -> int:
        return len(self.stages)

    def of_kind(self, kind: str) -> list[Stage]:
        return [s for s in self if s.kind == kind]

    def edges(self) -> set[tuple[str, str]]:
        return {(up, s.name) for s in self for up in s.upstream}

    def code_version(self, stage: Stage) -> str:
        """A short hash of the code and recipe files the stage runs (what Dagster shows as the
        asset's code version): it changes when they change."""
        h = hashlib.sha256(stage.kind.encode())
        for dep in stage.code:
            p = self.root / dep
            files = sorted(q for q in p.rglob("*") if q.is_file() and _is_source(q)) if p.is_dir() else [p]
            for f in files:
                if f.exists():
                    h.update(f.relative_to(self.root).as_posix().encode())
                    h.update(f.read_bytes())
        return h.hexdigest()[:12]


def _is_source(path: Path) -> bool:
    return "__pycache__" not in path.parts and path.suffix not in (".pyc", ".pyo")


def build_stages(params: Params | None = None, root: str | os.PathLike = ".", params_path: str | os.PathLike | None = None) -> StageGraph:
    """The stage graph of the project at ``root`` for ``params`` (default: ``<root>/params.yaml``).

    Recipes are read for every enabled architecture (which objective and tokenizer it uses, how
    it fine-tunes); a missing or invalid recipe is a :class:`ConfigError` naming the file. Paths
    in ``params`` are relative to ``root``. Each kind declares its stages, in the kinds' order
    (``stages.kinds.KINDS``); a kind's code (the library folders it runs) is an input of each of
    its stages and part of its code version."""
    root = Path(root).resolve()
    if params is None:
        params = load_params(params_path or root / "params.yaml")
    ctx = GraphContext.create(params, root)
    for kind in KINDS.values():
        kind.declare(ctx)
    # a project made by ``lmforge init`` has no source folders: its stages depend on the code
    # through the installed package's version instead (tests/test_stage_kinds.py checks that every
    # kind's code exists in this repository)
    code = {name: tuple(p for p in kind.code if (root / p).exists()) for name, kind in KINDS.items()}
    stages = {}
    for name, stage in ctx.stages.items():
        recipe = (stage.recipe,) if stage.recipe else ()
        stages[name] = replace(stage, spec=KINDS[stage.kind], code=(*recipe, *code[stage.kind]),
                               deps=(*stage.deps, *code[stage.kind]))
    graph = StageGraph(params=params, root=root, stages=stages)
    _check_graph(graph)
    return graph


def _check_graph(graph: StageGraph) -> None:
    """Every upstream exists; no two stages write overlapping paths (DVC refuses that too)."""
    owner: dict[str, str] = {}
    for s in graph:
        for u in s.upstream:
            if u not in graph.stages:
                raise ConfigError(f"stage {s.name} reads from {u!r}, which is not a stage")
        for path in s.paths:
            for other, name in owner.items():
                if path == other or path.startswith(other.rstrip("/") + "/") or other.startswith(path.rstrip("/") + "/"):
                    raise ConfigError(f"stages {name} and {s.name} both write {other if len(other) < len(path) else path}; "
                                      "give them separate output paths in params.yaml")
            owner[path] = s.name
