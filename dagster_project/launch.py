"""The process a training asset launches through Dagster Pipes:

    python -m dagster_project.launch STAGE --params params.yaml
    python -m torch.distributed.run --nproc_per_node N -m dagster_project.launch STAGE ...

It runs the stage's library function (the one ``lmforge pretrain`` / ``finetune`` call) and,
on rank 0 only, streams its log lines to Dagster and reports the materialization's metadata.
Other ranks train silently. Without a Dagster parent (no Pipes context in the environment) it
runs the stage all the same.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from contextlib import ExitStack
from pathlib import Path


def summary_metadata(result) -> dict:
    """The scalar part of a stage's result, as asset metadata (reported through Pipes when launched)."""
    if not isinstance(result, dict):
        return {}
    out = {}
    for key, value in result.items():
        if isinstance(value, bool) or value is None:
            continue
        if isinstance(value, (int, float, str)):
            out[key] = value
        elif key in ("validation", "test") and isinstance(value, dict):
            out.update({f"{key}/{k}": v for k, v in value.items() if isinstance(v, (int, float)) and not isinstance(v, bool)})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m dagster_project.launch")
    ap.add_argument("stage")
    ap.add_argument("--params", default="params.yaml")
    args = ap.parse_args(argv)
    # Cancelling the Dagster run sends SIGINT here (forward_termination). A process started with
    # SIGINT ignored (an ignored disposition is inherited from the parent) would never see it and
    # train to the end: take Python's own handler back so the cancel interrupts training.
    signal.signal(signal.SIGINT, signal.default_int_handler)

    from lmforge.config import load_params
    from lmforge.stages import build_stages
    from lmforge.tracking import is_rank_zero

    from .overrides import run_overrides

    rank0 = is_rank_zero()
    with ExitStack() as stack:
        pipes = None
        if rank0 and os.environ.get("DAGSTER_PIPES_CONTEXT"):
            from dagster_pipes import open_dagster_pipes

            pipes = stack.enter_context(open_dagster_pipes())
        log = (pipes.log.info if pipes is not None else (lambda m: print(m, file=sys.stderr, flush=True))) if rank0 else (lambda m: None)
        params = load_params(args.params, run_overrides())
        stage = build_stages(params, root=Path.cwd())[args.stage]
        result = stage.run(params, log)
        if pipes is not None:
            pipes.report_asset_materialization(metadata={k: v for k, v in summary_metadata(result).items()})
        elif rank0:
            print(json.dumps(summary_metadata(result)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
