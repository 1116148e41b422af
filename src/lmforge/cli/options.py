"""What the ``lmforge`` commands share, written once: the options every project command takes
(``--params``, ``--set``, ``--force``, ``--restart``), ``--quiet``/``--verbose``, the exit
statuses, and the one-line error (``_fail``, ``user_errors``)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import click

from ..config import ConfigError, Params, load_params
from ..errors import LmforgeError
from ..redact import redact

# What a command reports as one line instead of a traceback: lmforge's own errors (bad
# configuration, input, corpus, task, ...) and the operating system's (a file that is missing
# or cannot be written).
USER_ERRORS: tuple[type[Exception], ...] = (LmforgeError, OSError)


# Exit status: 2 when the command line, the parameters or the input are wrong (nothing ran),
# 1 when a stage that started failed.
USAGE, FAILED = 2, 1


def _fail(message: str, code: int = USAGE) -> None:
    click.echo(f"error: {redact(message)}", err=True)  # a URI's password is never shown
    sys.exit(code)


@contextmanager
def user_errors(code: int = USAGE) -> Iterator[None]:
    """One of ``USER_ERRORS`` raised inside the block is one line and exit status ``code``."""
    try:
        yield
    except USER_ERRORS as exc:
        _fail(str(exc), code)


def _log(message: str) -> None:
    if os.environ.get("LMFORGE_VERBOSITY") != "quiet":
        click.echo(redact(message), err=True)


def _params(params_path: str, overrides: list[str]) -> Params:
    try:
        return load_params(params_path, overrides)
    except ConfigError as exc:
        _fail(str(exc))


# ----------------------------------------------------------------------------- shared options

def params_option(help: str = "Parameters file."):
    """``--params`` (``params_path``): the parameters file, params.yaml by default."""
    return click.option("--params", "params_path", default="params.yaml", show_default=True, help=help)


def set_option(help: str = "Override a parameter."):
    """``--set KEY=VALUE`` (``overrides``, repeatable): a parameter over params.yaml's."""
    return click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help=help)


def project_options(set_help: str = "Override a parameter."):
    """``--params`` then ``--set``, in that order in ``--help``."""
    def decorate(command):
        return params_option()(set_option(set_help)(command))
    return decorate


RESTART_HELP = ("Discard the resume state of these settings and train from the start (train.restart); "
                "changed settings never discard another attempt's checkpoints.")
restart_option = click.option("--restart", is_flag=True, help=RESTART_HELP)

FORCE_HELP = ("Replace an output folder that is not empty and holds no finished output of its stage (never one "
              "that is or holds an input, the project folder, the home folder or /).")
force_option = click.option("--force", is_flag=True, help=FORCE_HELP)


# ----------------------------------------------------------------------------- --quiet / --verbose on every command

def _set_verbosity(ctx, param, value) -> None:
    # in the environment: the stages' progress (lmforge.progress) and the training processes a
    # command starts read it too
    if value:
        os.environ["LMFORGE_VERBOSITY"] = param.name


def with_verbosity(command: click.Command) -> None:
    """Give ``command`` (and, for a group, each of its commands) ``--quiet`` and ``--verbose``."""
    command.params += [
        click.Option(["--quiet", "-q"], is_flag=True, expose_value=False, is_eager=True, callback=_set_verbosity,
                     help="Print results and errors only: no progress, no stage logs."),
        click.Option(["--verbose", "-v"], is_flag=True, expose_value=False, is_eager=True, callback=_set_verbosity,
                     help="Also the libraries' own logs and warnings (Lightning, MLflow)."),
    ]
    for sub in getattr(command, "commands", {}).values():
        with_verbosity(sub)
