"""Benchmark: zero-shot scores of pretrained model folders against the untrained floor, and what
the harness costs (seconds per model), through the evaluate stage's own functions.

    .venv/bin/python benchmarks/zero_shot.py --params P/params.yaml --task docstring_next DIR [DIR ...]

Each DIR is an lmforge model folder (e.g. ``<out>/budget-4min/gpt/pretrain/model`` of
``benchmarks/transfer.py --budgets``). The floor is the first folder's architecture with random
weights from ``train.seed`` (the evaluate stage's ``untrained`` arm). Needs the eval extra.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from lmforge.config import load_params
from lmforge.evaluation import harness_task
from lmforge.evaluation.lm_eval_run import require_lm_eval, run_tasks
from lmforge.inference.loading import load
from lmforge.evaluation.zero_shot import default_task, folder_scorer, scorer, untrained_twin


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folders", nargs="+", type=Path)
    ap.add_argument("--params", default="params.yaml", help="the project whose held-out documents make docstring_next")
    ap.add_argument("--task", action="append", default=None, help="task name or YAML (repeatable; default docstring_next)")
    ap.add_argument("--json", help="write the rows here")
    a = ap.parse_args(argv)
    require_lm_eval()
    params = load_params(a.params)
    specs = a.task or [harness_task.NAME]
    local = {harness_task.NAME: default_task(params)} if harness_task.NAME in specs else {}
    first = load(a.folders[0])
    arms = [("untrained", lambda: scorer(untrained_twin(first, params.train.seed), first.tokenizer))]
    arms += [(str(f), lambda f=f: folder_scorer(f)) for f in a.folders]
    rows = []
    for name, make in arms:
        t = time.perf_counter()
        scores = run_tasks(make(), specs, local, name="zero-shot")
        rows.append({"model": name, "seconds": round(time.perf_counter() - t, 1), **{
            f"{task}/{k}": v for task, s in scores.items() for k, v in s.items() if k in ("acc", "acc_norm", "n")}})
        print(json.dumps(rows[-1]), flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1), encoding="utf-8")
    return rows


if __name__ == "__main__":
    main()
