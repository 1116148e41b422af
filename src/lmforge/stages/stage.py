"""A stage of the pipeline as the graph holds it: its name, kind, inputs, outputs, parameters and
the command that runs it (``Stage``), the paths it writes (``Output``), and how the graph writes
paths (``ProjectPaths``). Each kind declares its stages in ``stages/kinds/<kind>.py``; the graph
(``stages/graph.py``) assembles them."""

from __future__ import annotations

import os
import re
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path

from ..config import Params
from .kind import Log, StageKind
from .metrics import write_stage_metrics


@dataclass(frozen=True)
class Output:
    """A path a stage writes; ``kind``: "out", "metrics" or "plots" (its section in ``dvc.yaml``).
    All are cached by DVC: data/ is git-ignored, so a file kept out of the cache would be nowhere."""

    path: str
    kind: str = "out"


@dataclass(frozen=True)
class Stage:
    name: str
    kind: str                      # a key of stages.kinds.KINDS
    description: str
    command: tuple[str, ...]       # the ``lmforge`` CLI arguments that run the stage
    upstream: tuple[str, ...]      # names of the stages whose outputs it reads
    deps: tuple[str, ...]          # paths it reads: upstream outputs, input files, code
    params: tuple[str, ...]        # dotted keys of params.yaml it depends on
    outputs: tuple[Output, ...]
    key: dict[str, str] = field(default_factory=dict, compare=False)  # arch / kind / objective / task
    code: tuple[str, ...] = ()     # the recipe and the source files among ``deps`` (the code version)
    recipe: str = ""               # the recipe file it reads (training stages), a parameters file for DVC
    recipe_params: tuple[str, ...] = ()  # dotted keys of ``recipe`` it depends on
    # its kind (``stages.kinds.KINDS[kind]``), filled in when the graph is assembled
    spec: StageKind | None = field(default=None, compare=False, repr=False)

    @property
    def kind_spec(self) -> StageKind:
        if self.spec is None:
            raise RuntimeError(f"stage {self.name}: not part of a graph (build_stages fills in its kind)")
        return self.spec

    def check_outputs(self, force: bool = False) -> None:
        """Refuse (``artifacts.UnsafeOutput``) outputs that would replace what the stage did not
        make: an output that is or holds one of its inputs, the project folder (the working
        folder: stages run from it), the home folder or the file system root; and, unless
        ``force``, a main output folder that is not empty and holds no finished record of the
        stage (its kind's ``record``). A stage that writes files rather than a folder has the
        folder they go in checked against the project, home and root folders too."""
        from ..artifacts import check_output

        record = self.kind_spec.record
        for i, output in enumerate(self.outputs):
            check_output(output.path, inputs=self.deps, record=record if i == 0 else None, force=force,
                         what=f"{self.name} output")
        if record is None:
            check_output(self.output_path.parent, what=f"{self.name} output folder")

    def run(self, params: Params, log: Log, *, force: bool = False) -> dict:
        """Run the stage (the library function its kind names), from the project folder, holding
        the lock on its main output (``locks.output_lock``: one writer per output), once its
        outputs are known to replace only what it made (:meth:`check_outputs`; ``force``
        allows replacing a folder of other files)."""
        from ..locks import output_lock

        self.check_outputs(force)
        with output_lock(self.output_path, wait=params.orchestrate.on_locked == "wait",
                         command=f"{self.name}: {shlex.join(sys.argv)}", log=log):
            result = self.kind_spec.run(params, self, log)
            write_stage_metrics(self.kind, self.output_under("."))
            return result

    def summary(self, result: dict) -> str:
        """What the command line prints after the stage ran."""
        summarize = self.kind_spec.summary
        return summarize(self, result) if summarize else f"{self.name}: done"

    @property
    def group(self) -> str:
        """The kind's group; a fine-tuning on a task of another family than classification is in
        that family's (``finetuning_tagging``, ``finetuning_span_qa``, ...)."""
        family = self.key.get("family")
        base = self.kind_spec.group
        return f"{base}_{family}" if family and family != "classification" else base

    @property
    def subprocess(self) -> bool:
        """Training: run as its own process (torchrun when devices > 1)."""
        return self.kind_spec.subprocess

    @property
    def cli(self) -> str:
        return shlex.join(("lmforge", *self.command))

    @property
    def paths(self) -> list[str]:
        return [o.path for o in self.outputs]

    @property
    def output_path(self) -> Path:
        """The stage's main output (the first), as the graph names it."""
        return Path(self.outputs[0].path)

    def output_under(self, root: str | os.PathLike) -> Path:
        """The main output, resolved against the project folder ``root``."""
        out = self.output_path
        return out if out.is_absolute() else Path(root) / out


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_").lower() or "task"


class ProjectPaths:
    """Paths as the stage graph writes them: relative to the project root where they lie inside
    it (DVC needs that), absolute otherwise."""

    def __init__(self, root: Path):
        self.root = root.resolve()

    def __call__(self, path: str | os.PathLike) -> str:
        full = self._full(path)
        try:
            return full.relative_to(self.root).as_posix()
        except ValueError:
            return full.as_posix()

    def _full(self, path: str | os.PathLike) -> Path:
        p = Path(path)
        return Path(os.path.normpath(p if p.is_absolute() else self.root / p))

    def output(self, path: str | os.PathLike, what: str) -> str:
        """An output folder's path; ``UnsafeOutput`` when it is or holds the project folder, the
        home folder or the file system root (no stage may replace those)."""
        from ..artifacts import check_output

        check_output(self._full(path), root=self.root, what=what)
        return self(path)
