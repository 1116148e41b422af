"""docs/CLI.md is what ``python -m lmforge.cli.reference`` writes from the commands' own
``--help``: a changed option, help text or command fails here until the page is written again."""

from pathlib import Path

from click.testing import CliRunner

from lmforge.cli import VERBS, main
from lmforge.cli.reference import reference

REPO = Path(__file__).resolve().parents[1]


def test_docs_cli_md_is_what_the_commands_say():
    written = (REPO / "docs" / "CLI.md").read_text(encoding="utf-8")
    assert written == reference(), "docs/CLI.md is stale: run `python -m lmforge.cli.reference`"


def test_every_command_is_in_one_group_of_the_verb_table():
    listed = [command.name for _, commands in VERBS for command in commands]
    assert sorted(listed) == sorted(main.commands)


def test_the_page_holds_each_command_s_help_as_the_command_prints_it():
    page = reference()
    for args in (["clean"], ["tracking", "sync"], ["fill-mask"]):
        shown = CliRunner().invoke(main, [*args, "--help"], prog_name="lmforge", terminal_width=78).output
        assert shown.rstrip("\n") in page, args
