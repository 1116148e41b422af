"""Benchmark: the whole clean stage (all phases) on generated corpora of growing size.

Measures wall time, documents/s and MB/s for the stage end to end, its CPU time (the driver's
and its pool workers'), GB per CPU-hour both ways (wall x workers, and CPU time), and the peak resident
memory of the driver and of the largest worker, to show that memory stays flat while the
corpus grows: dedup works one on-disk partition at a time. The partition sizes are scaled
down with ``--part-docs`` so that the small corpora here span several partitions, as a large
corpus would with the defaults.

    .venv/bin/python benchmarks/clean_stage.py --sizes 20000 80000 --workers 2
    .venv/bin/python benchmarks/clean_stage.py --sizes 80000 --workers 2 --files 40   # 40 input files

``--files N`` splits each corpus into N JSONL files of consecutive documents (the stage reads
input files in parallel, a single file in one unit).

Each size runs in a fresh subprocess so that peak-memory readings do not carry over.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lmforge.testing.documents import sentence  # the generator the tests use


def make_corpus(path: Path, n: int, seed: int = 0) -> int:
    """English-like pages; 5% carry a boilerplate line, 5% are near-copies of an earlier page."""
    rng = random.Random(seed)
    boiler = [sentence(rng) + " " + sentence(rng) for _ in range(20)]
    pages: list[str] = []
    size = 0
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(n):
            if pages and rng.random() < 0.05:
                lines = []
                for line in rng.choice(pages[-1000:]).split("\n"):  # one word changed on every line,
                    words = line.split(" ")  # so line dedup leaves the copy to MinHash
                    words[rng.randrange(len(words))] = "changed"
                    lines.append(" ".join(words))
                text = "\n".join(lines)
            else:
                lines = [" ".join(sentence(rng) for _ in range(2)) for _ in range(rng.randint(3, 8))]
                if rng.random() < 0.05:
                    lines.append(rng.choice(boiler))
                text = "\n".join(lines)
                pages.append(text)
            row = {"id": f"doc{i}", "url": f"https://site{i % (n // 2)}.example/p{i}", "text": text}
            line = json.dumps(row) + "\n"
            size += len(text.encode("utf-8"))
            fh.write(line)
    return size


def one_run(corpus: str, out: str, workers: int, part_docs: int, part_bytes: int) -> dict:
    from lmforge.cleaning import stage
    from lmforge.config import CleanConfig

    stage._PART_DOCS = part_docs  # partition counts are decided in the driver and passed on
    stage._PART_BYTES = part_bytes
    cfg = CleanConfig(inputs=[corpus], output=out, workers=workers)
    def cpu(who: int) -> float:
        u = resource.getrusage(who)
        return u.ru_utime + u.ru_stime

    cpu0 = cpu(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    marks: list[tuple[str, float]] = []  # (phase, seconds since start) from the stage's log lines
    result = stage.run_clean(cfg, log=lambda m: marks.append((m.split(":")[0].split(" (")[0], time.perf_counter() - t0)))
    wall = time.perf_counter() - t0
    # CPU time of the stage: this process's since the start, and its pool's workers' (children
    # that have exited: the pool is shut down when the stage returns)
    cpu_s = cpu(resource.RUSAGE_SELF) - cpu0 + cpu(resource.RUSAGE_CHILDREN)
    phases, last = {}, 0.0
    for name, t in marks:
        phases[name] = round(t - last, 2)
        last = t
    return {
        "wall_s": wall,
        "cpu_s": cpu_s,
        "documents_in": result.stats["documents_in"],
        "bytes_in": result.stats["bytes_in"],
        "documents_out": result.stats["documents_out"],
        "near_duplicates": result.stats["dropped"].get("near_duplicate", {}).get("documents", 0),
        "driver_peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "worker_peak_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
        "phase_seconds": phases,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[20_000, 80_000])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--part-docs", type=int, default=10_000, help="documents per URL/MinHash partition")
    ap.add_argument("--part-bytes", type=int, default=4 << 20, help="text bytes per line-dedup partition")
    ap.add_argument("--files", type=int, default=1, help="input JSONL files per corpus (1: one file)")
    ap.add_argument("--child", nargs=3, metavar=("CORPUS", "OUT", "JSON"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        res = one_run(args.child[0], args.child[1], args.workers, args.part_docs, args.part_bytes)
        Path(args.child[2]).write_text(json.dumps(res))
        return
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.sizes:
            corpus = Path(tmp) / f"corpus-{n}.jsonl"
            make_corpus(corpus, n)
            if args.files > 1:  # the same documents, in the same order, as a folder of files
                lines = corpus.read_text(encoding="utf-8").splitlines(keepends=True)
                corpus.unlink()
                corpus.mkdir()
                per = -(-len(lines) // args.files)
                for i in range(args.files):
                    (corpus / f"part-{i:04d}.jsonl").write_text("".join(lines[i * per:(i + 1) * per]), encoding="utf-8")
            res_path = Path(tmp) / f"res-{n}.json"
            subprocess.run(
                [sys.executable, __file__, "--workers", str(args.workers), "--part-docs", str(args.part_docs),
                 "--part-bytes", str(args.part_bytes), "--child", str(corpus), str(Path(tmp) / f"out-{n}"), str(res_path)],
                check=True,
            )
            r = json.loads(res_path.read_text())
            r["size"] = n
            rows.append(r)
    print(f"workers={args.workers}, {args.files} input file(s), partitions of {args.part_docs} documents / {args.part_bytes >> 20} MiB of text\n")
    print("| documents | MB | wall s | docs/s | MB/s | MB/s per worker | GB per CPU-hour (wall x workers) | CPU s "
          "| GB per CPU-hour (CPU time) | kept | near-dups | driver peak RSS MB | largest worker peak RSS MB |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        mb = r["bytes_in"] / 1e6
        print(
            f"| {r['documents_in']:,} | {mb:.1f} | {r['wall_s']:.1f} | {r['documents_in'] / r['wall_s']:,.0f} | "
            f"{mb / r['wall_s']:.2f} | {mb / r['wall_s'] / args.workers:.2f} | {mb / r['wall_s'] / args.workers * 3.6:.1f} | "
            f"{r['cpu_s']:.1f} | {mb / r['cpu_s'] * 3.6:.1f} | {r['documents_out']:,} | {r['near_duplicates']:,} | "
            f"{r['driver_peak_rss_mb']:.0f} | {r['worker_peak_rss_mb']:.0f} |"
        )
    print("\nseconds per phase (to the end of the phase's log line; 'near dedup' includes clustering):\n")
    names = list(rows[0]["phase_seconds"])
    print("| documents | " + " | ".join(names) + " |")
    print("|---:|" + "---:|" * len(names))
    for r in rows:
        print(f"| {r['documents_in']:,} | " + " | ".join(f"{r['phase_seconds'].get(n, 0):.1f}" for n in names) + " |")
    out = Path(__file__).parent / "results" / "clean_stage.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
