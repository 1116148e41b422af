"""What the GPU round's end-to-end run did, from the records it left: each Dagster step's time
(``stages.csv``) and the leaderboard with its transfer columns (``leaderboard.md``).

    python benchmarks/gpu_round_report.py --dagster-home WORK/dagster --project WORK/project --out OUT

Called by ``benchmarks/gpu_round.sh`` at the end of its run (and again by hand on a partial run:
it reports whatever steps finished). Steps come from the Dagster instance's own step statistics
(start and end of each step of every run in the instance, the status it ended with).
"""

from __future__ import annotations

import argparse
import csv
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
