"""What the GPU round's end-to-end run did, from the records it left: each Dagster step's time
(``stages.csv``), each finished training's record (``training.csv``: its steps, seconds, where
they went, and a fine-tuning's test accuracy, so that the fine-tunings that finished give their
transfer gains even when the run was stopped before its report) and the leaderboard with its
transfer columns (``leaderboard.md``).

    python benchmarks/gpu_round_report.py --dagster-home WORK/dagster --project WORK/project --out OUT

Called by ``benchmarks/gpu_round.sh`` at the end of its run (and again by hand on a partial run:
it reports whatever steps finished). Steps come from the Dagster instance's own step statistics
(start and end of each step of every run in the instance, the status it ended with).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import sys
from pathlib import Path


def step_rows(dagster_home: Path) -> list[dict]:
    """One row per step of every run in the instance at ``dagster_home``, oldest run first."""
    os.environ["DAGSTER_HOME"] = str(dagster_home.resolve())
    from dagster import DagsterInstance

    rows = []
    with DagsterInstance.get() as instance:
        runs = sorted(instance.get_run_records(), key=lambda r: r.create_timestamp)
        for record in runs:
            run = record.dagster_run
            for stat in sorted(instance.get_run_step_stats(run.run_id), key=lambda s: s.start_time or 0):
                seconds = (stat.end_time - stat.start_time) if stat.start_time and stat.end_time else None
                rows.append({"run": run.run_id[:8], "step": stat.step_key,
                             "status": stat.status.value if stat.status else "STARTED",
                             "seconds": round(seconds, 1) if seconds is not None else ""})
    return rows


def training_rows(models: Path) -> list[dict]:
    """One row per finished training under ``models`` (``<arch>/<run>/metrics.json``: ``pretrain``,
    ``<task>`` or ``<task>-scratch``), with its timings (seconds per phase)."""
    rows = []
    for record in sorted(models.glob("*/*/metrics.json")):
        m = json.loads(record.read_text(encoding="utf-8"))
        pretraining = record.parent.name == "pretrain"
        test = m.get("test") or {}
        rows.append({"architecture": record.parent.parent.name, "run": record.parent.name,
                     "init": "" if pretraining else m.get("init", ""), "task": "" if pretraining else m.get("task", ""),
                     "steps": m.get("steps", ""), "seconds": m.get("seconds", ""),
                     "validation_loss": (m.get("validation") or {}).get("loss", "") if pretraining else "",
                     "test_accuracy": test.get("accuracy", "") if isinstance(test, dict) else "",
                     **{f"t_{k}": v for k, v in (m.get("timings") or {}).items()}})
    return rows


def transfer_gains(rows: list[dict]) -> list[tuple[str, str, float, float]]:
    """(architecture, task, pretrained accuracy, scratch accuracy) where both arms finished."""
    arms = {(r["architecture"], r["task"], r["init"]): r["test_accuracy"] for r in rows if r["task"]}
    return [(arch, task, acc, arms[(arch, task, "scratch")]) for (arch, task, init), acc in sorted(arms.items())
            if init == "pretrained" and acc != "" and arms.get((arch, task, "scratch"), "") != ""]


def write_report(dagster_home: Path, project: Path, out: Path) -> list[dict]:
    out.mkdir(parents=True, exist_ok=True)
    rows = step_rows(dagster_home) if dagster_home.is_dir() else []
    with open(out / "stages.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=["run", "step", "status", "seconds"])
        writer.writeheader()
        writer.writerows(rows)
    done = [r for r in rows if r["status"] == "SUCCESS"]
    total = sum(r["seconds"] for r in done if r["seconds"] != "")
    print(f"gpu_round_report: {len(done)} of {len(rows)} steps succeeded, {total:.0f} s of step time")
    for r in rows:
        if r["status"] != "SUCCESS":
            print(f"  {r['step']}: {r['status']}")
    trainings = training_rows(project / "models")
    columns = list(dict.fromkeys(k for r in trainings for k in r))
    with open(out / "training.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=columns or ["architecture"], restval="")
        writer.writeheader()
        writer.writerows(trainings)
    print(f"gpu_round_report: {len(trainings)} trainings finished")
    for arch, task, pretrained, scratch in transfer_gains(trainings):
        print(f"  {arch} on {task}: test accuracy {pretrained:.4f} pretrained, {scratch:.4f} from scratch, "
              f"gain {100 * (pretrained - scratch):+.1f} points")
    board = project / "data" / "report" / "leaderboard.md"
    if board.is_file():
        shutil.copyfile(board, out / "leaderboard.md")
        print(f"gpu_round_report: leaderboard copied from {board}")
    else:
        print(f"gpu_round_report: no leaderboard at {board} (the report stage did not finish)")
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dagster-home", required=True, type=Path)
    ap.add_argument("--project", required=True, type=Path)
    ap.add_argument("--out", required=True, type=Path)
    a = ap.parse_args(argv)
    write_report(a.dagster_home, a.project, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
