"""Benchmark: what the clean stage's saved signatures (``<output>/dedup/``, for a later run's
``clean.near_dedup.against``) cost.

``run``: one clean run of the project in the current folder (its ``params.yaml``; the output
is removed first), printed as JSON: the stage's seconds, the CPU seconds of the driver and its
pool workers, each phase's wall seconds and sum of unit seconds, and the bytes of the output,
of its shards and of ``dedup/``. Run it from the code before and after (``PYTHONPATH``) and
compare.

``micro OUTPUT``: the per-document CPU time of the added work, measured alone (best of 5):
the exact hash, and the truncation and writing of the signatures, against the MinHash
signatures themselves; on the kept documents of a clean OUTPUT and on generated pages.

    cd my-project && PYTHONPATH=src .venv/bin/python benchmarks/clean_saved_signatures.py run
    PYTHONPATH=src .venv/bin/python benchmarks/clean_saved_signatures.py micro my-project/data/clean
"""

from __future__ import annotations

import argparse
import io
import json
import random
import resource
import shutil
import time
from pathlib import Path


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.exists() else 0


def run() -> dict:
    from lmforge.cleaning.stage import run_clean
    from lmforge.config import load_params

    params = load_params("params.yaml")
    out = Path(params.clean.output)
    shutil.rmtree(out, ignore_errors=True)
    result = run_clean(params.clean, log=lambda message: None, executor=params.executor)
    cpu = sum(getattr(resource.getrusage(who), f) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
              for f in ("ru_utime", "ru_stime"))
    return {"seconds": round(result.seconds, 2), "cpu_seconds": round(cpu, 2),
            "phases": {k: [round(v["seconds"], 2), v["unit_seconds_total"]] for k, v in result.execution["phases"].items()},
            "output_bytes": _size(out), "shard_bytes": sum(f.stat().st_size for f in out.glob("shard-*.parquet")),
            "dedup_bytes": _size(out / "dedup"), "documents_out": result.stats["documents_out"]}


def micro(output: str) -> list[dict]:
    import numpy as np
    import pyarrow.parquet as pq

    from lmforge.cleaning.dedup.exact import exact_hashes
    from lmforge.cleaning.dedup.minhash import permutation_seeds, shard_signatures
    from lmforge.cleaning.dedup.prior import saved_signatures
    from lmforge.testing.documents import page

    def best(fn, n: int = 5) -> float:
        times = []
        for _ in range(n):
            t0 = time.process_time()
            fn()
            times.append(time.process_time() - t0)
        return min(times)

    corpora = {f"{output} (kept documents)": [t for f in sorted(Path(output).glob("shard-*.parquet"))
                                              for t in pq.read_table(f, columns=["text"]).column("text").to_pylist()],
               "generated pages (2,000)": [page(random.Random(i), lines=8) for i in range(2000)]}
    seeds = permutation_seeds(14 * 8, 1)
    rows = []
    for name, texts in corpora.items():
        n = len(texts)
        sig_s = best(lambda: shard_signatures(texts, 5, seeds))
        exact_s = best(lambda: exact_hashes(texts))
        sigs, _ = shard_signatures(texts, 5, seeds)
        hashes = exact_hashes(texts)

        def save() -> None:
            buffer = io.BytesIO()
            np.save(buffer, saved_signatures(sigs))
            np.save(buffer, hashes)

        save_s = best(save)
        rows.append({"corpus": name, "documents": n, "MB": round(sum(len(t.encode()) for t in texts) / 1e6, 2),
                     "signatures_us_per_doc": round(sig_s / n * 1e6, 1), "exact_hash_us_per_doc": round(exact_s / n * 1e6, 2),
                     "truncate_and_save_us_per_doc": round(save_s / n * 1e6, 2)})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    sub.add_parser("run")
    m = sub.add_parser("micro")
    m.add_argument("output")
    args = parser.parse_args()
    for row in ([run()] if args.what == "run" else micro(args.output)):
        print(json.dumps(row))


if __name__ == "__main__":
    main()
