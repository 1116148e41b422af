"""docs/CLI.md, the reference of the ``lmforge`` commands, written from their own ``--help`` (78
columns wide, as a terminal of 80 columns or more shows it), grouped as ``lmforge.cli.VERBS``
groups them.

    python -m lmforge.cli.reference            # writes docs/CLI.md
    python -m lmforge.cli.reference PATH       # writes PATH

tests/test_cli_reference.py fails when docs/CLI.md is not what this writes."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from . import VERBS, main

WIDTH = 78  # click's width on a terminal of 80 columns or more
DEFAULT_PATH = Path("docs") / "CLI.md"

_INTRO = """\
# The `lmforge` commands

Every command's `--help`, as the command prints it. This page is written by
`python -m lmforge.cli.reference` from the commands themselves (`src/lmforge/cli/`); do not edit
it by hand: `tests/test_cli_reference.py` fails when it and the commands differ. How the
commands fit together, exit statuses and progress: [RUNNING.md](RUNNING.md).
"""


def _commands(command: click.Command, ctx: click.Context):
    """``command`` and, for a group, each of its commands (by name), each with its context."""
    yield command, ctx
    if isinstance(command, click.Group):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            yield from _commands(sub, click.Context(sub, info_name=name, parent=ctx))


def _anchor(path: str) -> str:
    return "#" + path.replace(" ", "-")


def _cell(text: str) -> str:
    """Plain text as a Markdown table cell: no HTML tags, emphasis or column breaks."""
    for plain, escaped in (("<", "&lt;"), (">", "&gt;"), ("*", "\\*"), ("|", "\\|")):
        text = text.replace(plain, escaped)
    return text


def _section(command: click.Command, ctx: click.Context) -> str:
    return f"### {ctx.command_path}\n\n```text\n{command.get_help(ctx)}\n```\n"


def reference() -> str:
    """The text of docs/CLI.md."""
    root = click.Context(main, info_name="lmforge", terminal_width=WIDTH, max_content_width=WIDTH)
    listed = [c for _, commands in VERBS for c in commands]
    missing = sorted(set(main.commands) - {c.name for c in listed})
    if missing:
        raise ValueError(f"lmforge.cli.VERBS lists no group for {', '.join(missing)}")
    index = ["| command | what it does |", "| --- | --- |"]
    body = [f"## lmforge\n\n```text\n{main.get_help(root)}\n```\n"]
    for title, commands in VERBS:
        body.append(f"## {title}\n")
        for command in commands:
            for cmd, ctx in _commands(command, click.Context(command, info_name=command.name, parent=root)):
                index.append(f"| [`{ctx.command_path}`]({_anchor(ctx.command_path)}) | "
                             f"{_cell(cmd.get_short_help_str(limit=200))} |")
                body.append(_section(cmd, ctx))
    return "\n".join([_INTRO, *index, "", *body])


def write(path: Path | str = DEFAULT_PATH) -> Path:
    path = Path(path)
    path.write_text(reference(), encoding="utf-8")
    return path


if __name__ == "__main__":
    print(write(*sys.argv[1:2]))
