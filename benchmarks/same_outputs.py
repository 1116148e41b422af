"""Compare two runs' outputs file by file: what a change that should alter no result did alter.

    python benchmarks/same_outputs.py RUN_A RUN_B [--dirs data models] [--json OUT]

For each file under ``--dirs`` of both project folders (attempt folders, locks and caches left
out): **identical** bytes; **same values** for a JSON file or a CSV table equal once the fields
that record when and how fast a run went are dropped (seconds, timings, throughput, run ids,
absolute paths of the folder); otherwise **differs**, with the first differing key. Charts (PNG)
of a run's speed differ whenever its timing does and are listed apart. Exit 0 when nothing
differs beyond those, 1 otherwise.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
from pathlib import Path

# keys whose values say when, how fast or under which id a run went, not what it computed
VOLATILE = {"seconds", "cpu_seconds", "timings", "mlflow_run_id", "run_id", "tokens_per_second", "elapsed",
            "started", "finished", "created", "duration", "training_seconds", "wall_seconds", "execution",
            "examples_per_second", "steps_per_second", "mfu", "time", "timestamp", "version", "run_started"}
VOLATILE_COLUMNS = {"tokens_per_second", "seconds", "time", "elapsed", "step_seconds", "throughput"}
SKIP_PARTS = {".pretrain.attempts", "__pycache__", ".cache", "mlruns", "mlartifacts"}


def _clean(value, roots: tuple[str, str]):
    if isinstance(value, dict):
        return {k: _clean(v, roots) for k, v in value.items() if k not in VOLATILE and not k.endswith("_seconds")}
    if isinstance(value, list):
        return [_clean(v, roots) for v in value]
    if isinstance(value, str):
        for root in roots:
            value = value.replace(root, "<run>")
        return value
    return value


def _first_difference(a, b, where: str = "") -> str:
    if type(a) is not type(b):
        return f"{where or '/'}: {type(a).__name__} vs {type(b).__name__}"
    if isinstance(a, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                return f"{where}/{k}: only in {'B' if k not in a else 'A'}"
            if a[k] != b[k]:
                return _first_difference(a[k], b[k], f"{where}/{k}")
    if isinstance(a, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            if x != y:
                return _first_difference(x, y, f"{where}[{i}]")
    return f"{where or '/'}: {str(a)[:80]} vs {str(b)[:80]}"


def _table(text: str) -> list[dict]:
    rows = list(csv.DictReader(io.StringIO(text)))
    return [{k: v for k, v in r.items() if k not in VOLATILE_COLUMNS and not (k or "").endswith("_seconds")}
            for r in rows]


def compare(a_root: Path, b_root: Path, dirs: list[str]) -> dict[str, list]:
    out: dict[str, list] = {"identical": [], "same values": [], "charts differ": [], "differs": [], "only in one": []}
    roots = (str(a_root), str(b_root))
    for d in dirs:
        files = {p.relative_to(a_root) for p in (a_root / d).rglob("*") if p.is_file()} | \
                {p.relative_to(b_root) for p in (b_root / d).rglob("*") if p.is_file()}
        for rel in sorted(files):
            if SKIP_PARTS & set(rel.parts) or rel.suffix == ".lock" or rel.name.endswith(".lock.json"):
                continue
            a, b = a_root / rel, b_root / rel
            if not (a.is_file() and b.is_file()):
                out["only in one"].append(str(rel))
                continue
            x, y = a.read_bytes(), b.read_bytes()
            if x == y:
                out["identical"].append(str(rel))
            elif rel.suffix == ".json":
                p, q = _clean(json.loads(x), roots), _clean(json.loads(y), roots)
                (out["same values"].append(str(rel)) if p == q
                 else out["differs"].append(f"{rel}: {_first_difference(p, q)}"))
            elif rel.suffix == ".csv":
                (out["same values"] if _table(x.decode()) == _table(y.decode()) else out["differs"]).append(str(rel))
            elif rel.suffix == ".png":
                out["charts differ"].append(str(rel))
            else:
                out["differs"].append(f"{rel}: bytes")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("a")
    parser.add_argument("b")
    parser.add_argument("--dirs", nargs="+", default=["data", "models"])
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    result = compare(Path(args.a).resolve(), Path(args.b).resolve(), args.dirs)
    for name, items in result.items():
        print(f"{name}: {len(items)}")
        if name in ("differs", "only in one", "charts differ"):
            for item in items:
                print(f"  {item}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 1 if result["differs"] or result["only in one"] else 0


if __name__ == "__main__":
    sys.exit(main())
