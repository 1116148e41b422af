"""Materialize assets from the command line, recorded in the project's Dagster instance (so
the runs show in the UI): what ``make run`` calls.

    python -m dagster_project.run                       # every asset (job full_pipeline)
    python -m dagster_project.run --job retrain_gpt
    python -m dagster_project.run --select clean,tokenizer_bpe
    python -m dagster_project.run --set train.size=base --set train.max_steps=300

``--set KEY=VALUE`` (repeatable) changes a parameter for this run only, as ``lmforge``'s commands
take it (``pipelines/<arch>.yaml:KEY=VALUE`` for a recipe's): every process of the run sees it
(``dagster_project.overrides``); ``params.yaml`` is not rewritten.

Assets are named, not selected by Dagster's selection syntax: the DVC installation pins the
parser runtime that syntax needs to an older release (``dagster asset materialize --select``
fails in this environment); the UI and the names below are unaffected.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path


def project_job(name: str):
    """Job ``name`` of the project's definitions: how a step's process rebuilds the job."""
    from .definitions import defs

    return defs.resolve_job_def(name)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m dagster_project.run")
    ap.add_argument("--job", default="full_pipeline", help="job to run (default: full_pipeline)")
    ap.add_argument("--select", default="", help="comma-separated asset names (default: the job's assets)")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                    help="change a parameter for this run (repeatable), as lmforge's commands take it")
    ap.add_argument("--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR"),
                    help="Dagster's console logger (default INFO: the stages' lines; DEBUG adds every Dagster "
                         "event, which the instance and the UI keep either way)")
    ap.add_argument("--verbose", action="store_true", help="the same as --log-level DEBUG")
    args = ap.parse_args(argv)
    if args.verbose:
        args.log_level = "DEBUG"

    from lmforge.config import ConfigError, load_params

    from .overrides import export_overrides
    from .summary import closing_lines, step_seconds

    project = Path(os.environ.get("LMFORGE_PROJECT") or ".").resolve()
    try:  # a wrong key or value is one line, before Dagster starts
        params = load_params(project / "params.yaml", args.overrides)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    export_overrides(args.overrides)

    from dagster import AssetKey, DagsterEventType, DagsterInstance

    if not os.environ.get("DAGSTER_HOME"):  # the embedded default: the project's own folder
        home = Path(".dagster").resolve()
        home.mkdir(exist_ok=True)
        os.environ["DAGSTER_HOME"] = str(home)
    os.environ.setdefault("LMFORGE_PROJECT", str(Path.cwd().resolve()))  # the project, for every step process
    from .definitions import defs

    job = defs.resolve_job_def(args.job)
    names = [n.strip() for n in args.select.split(",") if n.strip()]
    known = {k.to_user_string() for k in defs.resolve_asset_graph().get_all_asset_keys()}
    unknown = [n for n in names if n not in known]
    if unknown:
        print(f"error: no asset named {', '.join(unknown)}; assets: {', '.join(sorted(known))}", file=sys.stderr)
        return 2
    selection = [AssetKey(n) for n in names] or None
    run_config = {"loggers": {"console": {"config": {"log_level": args.log_level}}}}
    began = time.monotonic()
    with DagsterInstance.get() as instance:
        if defs.executor.name == "in_process":  # orchestrate.executor
            result = job.execute_in_process(instance=instance, raise_on_error=False, asset_selection=selection,
                                            run_config=run_config)
        else:  # steps in processes of their own: each rebuilds the definitions of this project
            from dagster import build_reconstructable_job, execute_job

            job_ref = build_reconstructable_job("dagster_project.run", "project_job", reconstructable_args=(args.job,),
                                                reconstructor_working_directory=str(Path(__file__).resolve().parent.parent))
            result = execute_job(job_ref, instance=instance, raise_on_error=False, asset_selection=selection,
                                 run_config=run_config)
        done = [e.asset_key.to_user_string() for e in result.get_asset_materialization_events()]
        failed_checks = [e.event_specific_data for e in result.all_events
                         if e.event_type == DagsterEventType.ASSET_CHECK_EVALUATION and not e.event_specific_data.passed]
        failed_steps = [e.step_key for e in result.all_events if e.event_type == DagsterEventType.STEP_FAILURE]
        planned = names or sorted(k.to_user_string() for k in job.asset_layer.executable_asset_keys)
        held_back = [n for n in planned if n not in done and n not in failed_steps]
        took = step_seconds(instance.all_logs(result.run_id))
    print(f"run {result.run_id} ({args.job}): {len(done)} assets materialized"
          + (f", {len(failed_steps)} failed: {', '.join(failed_steps)}" if failed_steps else "")
          + (f", {len(held_back)} not run (upstream failed or a blocking check failed): {', '.join(held_back)}" if held_back else ""))
    for c in failed_checks:
        print(f"  check failed: {c.asset_key.to_user_string()}/{c.check_name} ({c.severity.value.lower()}): {c.description}")
    if any(c.severity.value.lower() == "warn" for c in failed_checks):
        print("  (a check that warns keeps its asset and runs what follows it: it flags a result to read, "
              "e.g. a pretraining too short to pay; one that errors holds back what depends on it)")
    report = Path(params.evaluate.output) if "report" in (names or planned) else None
    print("\n".join(closing_lines(project, report, took, time.monotonic() - began)))
    return 0 if result.success else 1


if __name__ == "__main__":
    sys.exit(main())
