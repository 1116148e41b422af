"""The project commands: ``init`` (a new project), ``dvc`` (dvc.yaml from the stage graph),
``status`` (where each stage stands), ``stages`` (the graph) and ``tracking sync``."""

from __future__ import annotations

import sys

import click

from .options import _fail, _log, _params, params_option, project_options, user_errors


@click.command()
@click.argument("folder", default=".", type=click.Path(file_okay=False))
@click.option("--force", is_flag=True, help="Replace the starter's files where the folder already has them.")
def init(folder, force) -> None:
    """Start a project in FOLDER (default: here): the starter params.yaml (every parameter at
    its default, commented) and pipelines/ (one recipe per architecture). Then `lmforge run`
    trains on the embedded default corpus, and `lmforge dvc` writes dvc.yaml for `dvc repro`.

    \b
    Example: lmforge init my-project && cd my-project && lmforge run
    """
    from ..starter import init_project

    with user_errors():
        written = init_project(folder, force=force)
    recipes = sum(1 for w in written if w.parent.name == "pipelines" and w.suffix == ".yaml")
    click.echo(f"{folder}: wrote params.yaml and pipelines/ ({recipes} recipes)")


@click.command()
@params_option()
@click.option("--check", is_flag=True, help="Write nothing; exit 1 when dvc.yaml is not what params.yaml and the recipes give.")
def dvc(params_path, check) -> None:
    """Write dvc.yaml from the stage graph (params.yaml and pipelines/*.yaml). Run it after
    enabling an architecture, a tokenizer, an objective or a task; `dvc repro` then runs them.

    \b
    Example: lmforge dvc && dvc repro
    """
    from pathlib import Path

    from ..stages import build_stages, dvc_yaml, missing_param_keys, write_dvc_yaml

    with user_errors():
        if check:
            graph = build_stages(root=".", params_path=params_path)
            missing = missing_param_keys(graph, params_path)
            if missing:
                _fail(f"{params_path} does not spell out {', '.join(missing)}, which the stages in dvc.yaml read from it")
            text = dvc_yaml(graph)
            current = Path("dvc.yaml").read_text(encoding="utf-8") if Path("dvc.yaml").exists() else None
            if current != text:
                click.echo("dvc.yaml is stale: run `lmforge dvc` to regenerate it", err=True)
                sys.exit(1)
            click.echo("dvc.yaml is up to date")
            return
        path, changed = write_dvc_yaml(".", params_path=params_path)
    click.echo(f"{path}: {'written' if changed else 'up to date'}")


@click.command()
@params_option()
@click.option("--json", "as_json", is_flag=True, help="One JSON list of {name, kind, state, reason, finished}.")
def status(params_path, as_json) -> None:
    """Where each stage stands: done, stale (what changed: parameters, code, inputs; or a stale
    stage upstream), running (who holds its output), never run, or unrecorded (outputs with no
    record in dvc.lock). Compares DVC's record of each stage's last run with the project now.

    \b
    Example: lmforge status
             lmforge status --json | jq '.[] | select(.state == "stale") | .name'
    """
    import json

    from ..stages import build_stages
    from ..stages.status import stage_statuses, status_table

    with user_errors():
        statuses = stage_statuses(build_stages(root=".", params_path=params_path))
    click.echo(json.dumps([s.as_dict() for s in statuses], indent=2) if as_json else status_table(statuses))


@click.command()
@params_option()
def stages(params_path) -> None:
    """List the stage graph: each stage, its group, what it reads from and its command.

    \b
    Example: lmforge stages --params params.yaml
    """
    from ..stages import build_stages

    with user_errors():
        graph = build_stages(root=".", params_path=params_path)
    for s in graph:
        click.echo(f"{s.name:32s} {s.group:12s} <- {', '.join(s.upstream) or '-':40s} {s.cli}")


@click.group()
def tracking() -> None:
    """MLflow tracking: what runs kept while the server was away."""


@tracking.command("sync")
@project_options()
def tracking_sync(params_path, overrides) -> None:
    """Send what training runs kept in tracking.spool_dir while their server did not answer, to
    the configured tracking.uri only (runs kept for another server stay kept). Exit status 1 when
    the server still does not answer or runs of another server wait.

    \b
    Example: lmforge tracking sync
    """
    from ..tracking.sync import send_spooled

    params = _params(params_path, list(overrides))
    with user_errors():
        sent, waiting = send_spooled(params.tracking.spool_dir, params.tracking.uri, log=_log)
    click.echo(f"tracking sync: {sent} runs sent, {waiting} still waiting")
    if waiting:
        sys.exit(1)
