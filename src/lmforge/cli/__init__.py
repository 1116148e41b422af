"""The ``lmforge`` command line, by verb: the stage commands (``stages.py``: one per kind of
stage, each running its stages of the stage graph, and ``run``, all of them), the project
commands (``project.py``: ``init``, ``dvc``, ``status``, ``stages``, ``tracking sync``) and the
commands that use the trained models (``models.py``: ``generate``, ``fill-mask``, ``embed``,
``predict``, ``export``; lmforge.inference). What they share, the options and the one-line
errors, is in ``options.py``; ``reference.py`` writes docs/CLI.md from their ``--help``.

A command imports what it runs inside its function: ``lmforge --help`` imports no torch."""

from __future__ import annotations

import click

from . import models, project, stages
from .options import with_verbosity


@click.group()
@click.version_option(package_name="lmforge")
def main() -> None:
    """lmforge: clean a corpus the way C4 was cleaned, then train the transformer LM family on it."""


# The verbs, by what they work on: each group's title and its commands, in the order
# docs/CLI.md lists them (``lmforge --help`` sorts them by name).
VERBS: tuple[tuple[str, tuple[click.Command, ...]], ...] = (
    ("Stage commands: each runs its stages of the stage graph", (
        stages.clean, stages.quality, stages.tokenizer, stages.tokenize, stages.dataset, stages.pretrain, stages.finetune,
        stages.evaluate, stages.report, stages.run)),
    ("Project commands", (project.init, project.dvc, project.status, project.stages, project.tracking)),
    ("Commands that use the trained models", (
        models.generate, models.fill_mask_command, models.embed, models.predict, models.export)),
)

for _title, _commands in VERBS:
    for _command in _commands:
        main.add_command(_command)
        with_verbosity(_command)  # --quiet / --verbose on every command
