"""Where each stage of the graph stands (``lmforge status``): done, stale and why, running and who
holds it, or never run.

The record of a stage's last run is DVC's: ``dvc.lock``, written by ``make run`` (the Dagster
assets commit each stage), ``dvc repro`` and ``dvc commit``. DVC's own status compares that record
with the current parameters, inputs and code; a stage downstream of a stale, running or never run
one is stale too, since it will run again. Outputs that exist with no record in ``dvc.lock``
(written by ``lmforge run`` alone, say) are ``unrecorded``: nothing says which settings made them.
A stage whose output lock another process holds is ``running``.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

from ..locks import holder, lock_file
from .graph import Stage, StageGraph

STATES = ("done", "stale", "running", "never run", "unrecorded")


@dataclass
class StageStatus:
    name: str
    kind: str
    state: str                  # one of STATES
    reason: str = ""            # what changed, who holds it, what is missing
    finished: str | None = None  # when its main output was last written (local time, ISO)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _held(output: Path) -> dict | None:
    """The holder's record when another process holds the output's lock now, else None."""
    from filelock import FileLock, Timeout

    path = lock_file(output)
    if not path.exists():
        return None
    lock = FileLock(str(path))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        return holder(output) or {}
    lock.release()
    return None


def _dvc_changes(root: Path) -> dict[str, list]:
    """DVC's status of the project: stage name -> what changed since dvc.lock recorded it."""
    from dvc.repo import Repo

    with Repo(str(root)) as repo:
        return {name.split(":")[-1]: changes for name, changes in repo.status().items()}


def _why(stage: Stage, changes: list) -> str:
    """DVC's changes, said in the project's words: parameters, code, inputs, outputs."""
    params: list[str] = []
    code: list[str] = []
    inputs: list[str] = []
    outputs: list[str] = []
    for change in changes:
        if not isinstance(change, dict):
            inputs.append(str(change))
            continue
        for path, what in (change.get("changed deps") or {}).items():
            if isinstance(what, dict):  # a params file: key -> modified / new / deleted
                params += sorted(what)
            elif any(path == c or path.startswith(c.rstrip("/") + "/") for c in stage.code):
                code.append(path)
            else:
                inputs.append(f"{path} ({what})")
        for path, what in (change.get("changed outs") or {}).items():
            outputs.append(f"{path} ({what})")
    parts = []
    for label, items in (("parameters", params), ("code", code), ("inputs", inputs), ("outputs", outputs)):
        if items:
            parts.append(f"{label}: {', '.join(items)}")
    return "; ".join(parts) or "changed"


def stage_statuses(graph: StageGraph) -> list[StageStatus]:
    """Every stage of ``graph`` in run order, with its state."""
    root = graph.root
    lock_path = root / "dvc.lock"
    recorded = (yaml.safe_load(lock_path.read_text(encoding="utf-8")) or {}).get("stages", {}) if lock_path.exists() else {}
    changes = _dvc_changes(root) if recorded else {}
    out: dict[str, StageStatus] = {}
    for stage in graph:
        output = stage.output_under(root)
        written = (dt.datetime.fromtimestamp(output.stat().st_mtime).isoformat(timespec="seconds")
                   if output.exists() else None)
        status = StageStatus(stage.name, stage.kind, "done", finished=written)
        held = _held(output)
        waiting = [u for u in stage.upstream if u in out and out[u].state != "done"]
        if held is not None:
            status.state = "running"
            status.reason = (f"pid {held.get('pid')} on {held.get('host')} since {held.get('started')}: "
                             f"{held.get('command')}" if held else "another process holds its output lock")
        elif not output.exists():
            status.state, status.reason = "never run", f"no {stage.output_path}"
        elif stage.name not in recorded:
            status.state, status.reason = "unrecorded", "its outputs exist, but dvc.lock has no record of the run that wrote them"
        elif stage.name in changes:
            status.state, status.reason = "stale", _why(stage, changes[stage.name])
        elif waiting:
            status.state = "stale"
            status.reason = "upstream " + ", ".join(f"{u} is {out[u].state}" for u in waiting)
        out[stage.name] = status
    return list(out.values())


def status_table(statuses: list[StageStatus]) -> str:
    """One line per stage: name, state, when its output was written, why."""
    width = max([len(s.name) for s in statuses] + [5])
    lines = [f"{'stage':<{width}}  {'state':<10}  {'written':<19}  why"]
    for s in statuses:
        lines.append(f"{s.name:<{width}}  {s.state:<10}  {s.finished or '-':<19}  {s.reason}".rstrip())
    counts = {state: sum(s.state == state for s in statuses) for state in STATES}
    lines.append(", ".join(f"{n} {state}" for state, n in counts.items() if n))
    return "\n".join(lines)
