"""Benchmark: the clean stage on lmforge's two executors (this machine's process pool, Ray tasks)
and datatrove's LocalPipelineExecutor running its closest pipeline, on the same JSONL corpus, with
1 and 2 workers; and the peak memory of a Ray worker as the corpus grows.

Throughput: wall time of the whole stage, MB of text per second, per worker (one worker per
core: per core) and as GB per CPU-hour, documents kept, the largest worker's peak RSS. Each
measurement runs in a fresh subprocess; each Ray one on a fresh Ray head started here (``ray
start --head --num-cpus N``, its own port and --temp-dir; the stage connects to it, so Ray's
start-up is not in the stage's time, it is shown apart; its own token for Ray's token
authentication) and stopped afterwards by killing that head's process group only (never ``ray
stop``, which would stop every Ray on the machine).

datatrove's pipeline (``benchmarks/_datatrove_clean.py``, run with ``--datatrove-python``, a
separate venv): C4QualityFilter with lmforge's C4 numbers (3 sentences a page, 5 words a line),
C4BadWordsFilter and its four MinHash stages (5-grams, 14 buckets x 8 hashes, as lmforge). Its
language filter downloads fastText's lid.176 model at first use, so it is left out (offline
machine; ``--datatrove-language`` adds it where the model can be had); its bad-words list is
also a download, so lmforge's packaged copy of the same LDNOOBW list is put in datatrove's asset
cache first. lmforge also runs URL dedup, line dedup and language ID (cld2), which datatrove's
pipeline here does not: the row "lmforge local, datatrove's steps" turns those three off.

Memory: lmforge on Ray, 2 workers, the corpus 1x, 2x, 4x (``--memory-sizes``), a fresh Ray head
each; the peak RSS (``VmHWM``) of every Ray worker process is read every 0.1 s while the stage
runs. Dedup works one on-disk partition at a time, so the largest worker's peak must stay flat.
As in ``clean_stage.py`` the partition sizes are scaled down (``--part-docs``, ``--part-bytes``;
0 keeps lmforge's defaults) so these small corpora span several partitions, as a large corpus
would with the defaults; the throughput runs use the same sizes.

    python3 -m venv ../dtvenv && ../dtvenv/bin/pip install 'datatrove[processing]==0.10.1' spacy orjson aiohttp
    .venv/bin/python benchmarks/clean_executors.py --json benchmarks/results/clean_executors.json

Options: --docs 40000 (throughput corpus), --memory-sizes 20000 40000 80000, --workers 1 2,
--skip local ray datatrove matched memory. Linux only (reads /proc). Takes about 8 minutes on 2
cores, most of it datatrove's (spaCy sentence and word splitting).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RAY_BIN = Path(sys.executable).parent / "ray"
RAY_AGENTS = ("ray::DashboardAgent", "ray::RuntimeEnvAgent")


# ----------------------------------------------------------------------------- the measured run (child)


def child_run(spec: dict) -> dict:
    """One clean stage in this (fresh) process, as ``spec`` says; the numbers for the parent."""
    from lmforge.cleaning import stage
    from lmforge.config import CleanConfig, ExecutorConfig

    if spec["part_docs"]:
        stage._PART_DOCS = spec["part_docs"]  # partition counts are decided in the driver and passed on
    if spec["part_bytes"]:
        stage._PART_BYTES = spec["part_bytes"]
    overrides = {}
    if spec.get("datatrove_steps"):  # only the steps datatrove's pipeline has
        overrides = {"urls": {"dedup": False}, "line_dedup": {"mode": "off"}, "language": {"enabled": False}}
    cfg = CleanConfig.model_validate({"inputs": [spec["input"]], "output": spec["output"], "workers": spec["workers"],
                                      **overrides})
    executor = ExecutorConfig(kind=spec["kind"], ray_address=spec.get("address"))
    t0 = time.perf_counter()
    log: list[str] = []
    result = stage.run_clean(cfg, log=lambda m: log.append(f"{time.perf_counter() - t0:7.2f}s {m}"), executor=executor)
    wall = time.perf_counter() - t0
    st = result.stats
    return {
        "wall_s": wall,
        "documents_in": st["documents_in"],
        "bytes_in": st["bytes_in"],
        "documents_out": st["documents_out"],
        "dropped": {k: v["documents"] for k, v in st["dropped"].items()},
        "execution": result.execution,
        "log": log,
        "driver_peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "children_peak_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,  # the local pool
    }


# ----------------------------------------------------------------------------- process memory


def _hwm_mb(pid: int) -> float | None:
    """A process's peak resident memory so far (VmHWM), MB; None if it is gone."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError):
        return None
    return None


class PeakSampler:
    """Every ``every`` s, the peak RSS of each process ``find()`` names (pid -> label): kept per
    pid, so a worker that exits between two readings loses at most its last 0.1 s."""

    def __init__(self, find: Callable[[], dict[int, str]], every: float = 0.1):
        self.find, self.every = find, every
        self.peaks: dict[int, tuple[str, float]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while True:
            self.sample()
            if self._stop.wait(self.every):
                self.sample()
                return

    def sample(self) -> None:
        try:
            procs = self.find()
        except Exception:  # noqa: BLE001  (a process tree changing under psutil)
            return
        for pid, label in procs.items():
            mb = _hwm_mb(pid)
            if mb is not None and mb >= self.peaks.get(pid, ("", 0.0))[1]:
                self.peaks[pid] = (label, mb)

    def __enter__(self) -> PeakSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def largest(self) -> tuple[float, int]:
        """(the largest peak in MB, how many processes were seen)."""
        return max((mb for _, mb in self.peaks.values()), default=0.0), len(self.peaks)


def descendants(pid: int) -> Callable[[], dict[int, str]]:
    import psutil

    def find() -> dict[int, str]:
        try:
            return {p.pid: " ".join(p.cmdline())[:80] for p in psutil.Process(pid).children(recursive=True)}
        except psutil.NoSuchProcess:
            return {}

    return find


# ----------------------------------------------------------------------------- a Ray head of our own


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RayHead:
    """``ray start --head --block`` in a process group of its own, with its own ports, temp dir and
    token (Ray's token authentication: ``env`` is for every process that talks to it), as the
    executor tests start theirs; ``stop()`` kills that process group only."""

    def __init__(self, cpus: int, log_dir: Path):
        self.cpus = cpus
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.temp_dir = tempfile.mkdtemp(prefix="lmfray", dir="/tmp")  # short: Ray's socket paths must fit 107 bytes
        self.env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(16),
                    "RAY_USAGE_STATS_ENABLED": "0"}
        cmd = [str(RAY_BIN), "start", "--head", "--block", f"--num-cpus={cpus}", f"--port={self.port}",
               "--include-dashboard=false", f"--temp-dir={self.temp_dir}", "--node-ip-address=127.0.0.1",
               "--disable-usage-stats", f"--ray-client-server-port={free_port()}",
               f"--dashboard-agent-listen-port={free_port()}", f"--metrics-export-port={free_port()}",
               f"--runtime-env-agent-port={free_port()}"]
        self.log_path = log_dir / f"ray-head-{self.port}.log"
        t0 = time.perf_counter()
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(cmd, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        probe = f"import ray\nray.init(address={self.address!r}, log_to_driver=False)\nassert ray.cluster_resources()['CPU'] == {cpus}\n"
        try:  # up once a driver can connect and sees its CPUs
            subprocess.run([sys.executable, "-c", probe], env=self.env, timeout=120, check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        except (subprocess.SubprocessError, OSError):
            self.stop()
            raise RuntimeError(f"the Ray head did not start; its log {self.log_path} ends:\n" + tail(self.log_path))
        self.start_s = time.perf_counter() - t0

    def _processes(self) -> list:
        """The head's processes: its process group, and their descendants (Ray's worker
        processes, children of the raylet, each start a session of their own)."""
        import psutil

        group = []
        for p in psutil.process_iter():
            try:
                if os.getpgid(p.pid) == self.proc.pid:
                    group.append(p)
            except OSError:
                continue
        procs = {p.pid: p for p in group}
        for p in group:
            try:
                procs.update({c.pid: c for c in p.children(recursive=True)})
            except psutil.Error:
                continue
        return list(procs.values())

    def workers(self) -> dict[int, str]:
        """The head's worker processes (``ray::...``), not its agents."""
        import psutil

        out = {}
        for p in self._processes():
            try:
                title = " ".join(p.cmdline()).strip()
            except psutil.Error:
                continue
            if title.startswith("ray::") and not title.startswith(RAY_AGENTS):
                out[p.pid] = title[:80]
        return out

    def stop(self) -> None:
        import psutil

        procs = self._processes()  # the workers too: they are not in the group
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            pass
        try:  # whatever the graceful stop left (raylet, GCS): the whole group
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        _, alive = psutil.wait_procs([p for p in procs if p.pid != self.proc.pid], timeout=5)
        for p in alive:  # and any worker that outlived its raylet, by its pid
            try:
                p.kill()
            except psutil.Error:
                pass
        self.proc.wait()
        shutil.rmtree(self.temp_dir, ignore_errors=True)


# ----------------------------------------------------------------------------- the parent


def write_corpus(folder: Path, n: int, file_docs: int) -> int:
    """``make_corpus`` (clean_stage.py's generator) written as JSONL files of ``file_docs``
    documents each: datatrove spreads its tasks over files, lmforge reads the folder."""
    sys.path.insert(0, str(ROOT))
    from benchmarks.clean_stage import make_corpus

    folder.mkdir(parents=True)
    whole = folder.with_suffix(".jsonl")
    text_bytes = make_corpus(whole, n)
    with open(whole, encoding="utf-8") as src:
        out, i = None, 0
        for i, line in enumerate(src):
            if i % file_docs == 0:
                if out:
                    out.close()
                out = open(folder / f"part-{i // file_docs:05d}.jsonl", "w", encoding="utf-8")
            out.write(line)
        if out:
            out.close()
    whole.unlink()
    return text_bytes


def run_lmforge(tmp: Path, name: str, spec: dict, head: RayHead | None) -> dict:
    spec_path, res_path, log_path = tmp / f"{name}.spec.json", tmp / f"{name}.result.json", tmp / f"{name}.log"
    spec = {**spec, "output": str(tmp / f"out-{name}"), "result": str(res_path)}
    spec_path.write_text(json.dumps(spec))
    with open(log_path, "w") as log:
        proc = subprocess.Popen([sys.executable, __file__, "--child", str(spec_path)], stdout=log, stderr=subprocess.STDOUT,
                                cwd=ROOT, env={**(head.env if head else os.environ), "LMFORGE_VERBOSITY": "quiet"})
        find = head.workers if head else descendants(proc.pid)
        with PeakSampler(find) as sampler:
            rc = proc.wait()
    if rc != 0:
        raise RuntimeError(f"{name}: the run failed (rc {rc}); its log {log_path} ends:\n" + tail(log_path))
    r = json.loads(res_path.read_text())
    peak, seen = sampler.largest()
    if not head:  # the pool's processes, reaped by the child: its RUSAGE_CHILDREN saw them whole
        peak = max(peak, r["children_peak_rss_mb"])
    r.update(worker_peak_rss_mb=peak, worker_processes_seen=seen)
    shutil.rmtree(spec["output"], ignore_errors=True)
    return r


def tail(path: Path, n: int = 30) -> str:
    return "".join(path.read_text(errors="replace").splitlines(keepends=True)[-n:])


def datatrove_ok(python: str) -> str | None:
    """None if ``python`` imports datatrove; else why not."""
    if not Path(python).exists():
        return f"{python} not found"
    probe = subprocess.run([python, "-c", "import datatrove, spacy, xxhash, orjson, aiohttp"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"{python} cannot import datatrove and its filters' needs: {probe.stderr.strip().splitlines()[-1:]}"
    return None


def run_datatrove(tmp: Path, python: str, corpus: Path, workers: int, language: bool) -> dict:
    name = f"datatrove-{workers}"
    res_path, log_path = tmp / f"{name}.result.json", tmp / f"{name}.log"
    cmd = [python, str(ROOT / "benchmarks" / "_datatrove_clean.py"), "--input", str(corpus), "--work", str(tmp / f"work-{name}"),
           "--workers", str(workers), "--result", str(res_path),
           "--badwords", str(ROOT / "src" / "lmforge" / "resources" / "badwords" / "en.txt")]
    if language:
        cmd.append("--language")
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    if not language:  # a scratch asset cache, where the bad-words list is put (the user's cache is left alone)
        env["HF_ASSETS_CACHE"] = str(tmp / "datatrove-assets")
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
        with PeakSampler(descendants(proc.pid)) as sampler:
            rc = proc.wait()
    if rc != 0:
        raise RuntimeError(f"{name}: failed (rc {rc}); its log {log_path} ends:\n" + tail(log_path))
    r = json.loads(res_path.read_text())
    peak, seen = sampler.largest()
    if workers > 1:
        r["worker_peak_rss_mb"] = max(peak, r["worker_peak_rss_mb"])
    r["worker_processes_seen"] = seen
    shutil.rmtree(tmp / f"work-{name}", ignore_errors=True)
    return r


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, default=40_000, help="documents in the throughput corpus")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--memory-sizes", type=int, nargs="+", default=[20_000, 40_000, 80_000])
    ap.add_argument("--memory-workers", type=int, default=2)
    ap.add_argument("--file-docs", type=int, default=2000, help="documents per input JSONL file")
    ap.add_argument("--part-docs", type=int, default=10_000, help="documents per URL/MinHash partition (0: lmforge's default)")
    ap.add_argument("--part-bytes", type=int, default=4 << 20, help="text bytes per line-dedup partition (0: lmforge's default)")
    ap.add_argument("--datatrove-python", default=str(ROOT.parent / "dtvenv" / "bin" / "python"))
    ap.add_argument("--datatrove-language", action="store_true", help="add datatrove's LanguageFilter (downloads a model)")
    ap.add_argument("--skip", nargs="*", default=[], choices=["local", "ray", "datatrove", "matched", "memory"])
    ap.add_argument("--tmp", help="scratch folder (default: a new one under the system's temp dir, removed at the end)")
    ap.add_argument("--json", help="write the numbers here")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        spec = json.loads(Path(args.child).read_text())
        Path(spec["result"]).write_text(json.dumps(child_run(spec)))
        return
    if not RAY_BIN.exists() and not {"ray", "memory"} <= set(args.skip):
        sys.exit(f"{RAY_BIN} not found: run with lmforge's venv python (Ray installed), or --skip ray memory")

    tmp = Path(args.tmp or tempfile.mkdtemp(prefix="clean-executors-"))
    tmp.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()
    notes: list[str] = []
    rows: list[dict] = []
    memory: list[dict] = []
    base = {"part_docs": args.part_docs, "part_bytes": args.part_bytes}
    t_all = time.perf_counter()
    try:
        corpus = tmp / f"corpus-{args.docs}"
        text_bytes = write_corpus(corpus, args.docs, args.file_docs)
        print(f"corpus: {args.docs:,} documents, {text_bytes / 1e6:.1f} MB of text, "
              f"{len(list(corpus.glob('*.jsonl')))} JSONL files", flush=True)

        def add(executor: str, workers: int, r: dict, **extra) -> None:
            row = {"executor": executor, "workers": workers, "mb_in": text_bytes / 1e6, "wall_s": r["wall_s"],
                   "documents_out": r["documents_out"], "worker_peak_rss_mb": r.get("worker_peak_rss_mb"),
                   "driver_peak_rss_mb": r.get("driver_peak_rss_mb"), **extra, "detail": r}
            rows.append(row)
            print(f"  {executor}, {workers} worker(s): {r['wall_s']:.1f} s, {r['documents_out']:,} documents kept", flush=True)

        spec = {**base, "input": str(corpus)}
        if "local" not in args.skip:
            for w in args.workers:
                add("lmforge local", w, run_lmforge(tmp, f"local-{w}", {**spec, "kind": "local", "workers": w}, None))
        if "ray" not in args.skip:
            for w in args.workers:
                head = RayHead(w, tmp)
                try:
                    r = run_lmforge(tmp, f"ray-{w}", {**spec, "kind": "ray", "workers": w, "address": head.address}, head)
                finally:
                    head.stop()
                add("lmforge ray", w, r, ray_start_s=head.start_s)
        if "matched" not in args.skip:
            w = max(args.workers)
            add("lmforge local, datatrove's steps", w,
                run_lmforge(tmp, f"matched-{w}", {**spec, "kind": "local", "workers": w, "datatrove_steps": True}, None))
        if "datatrove" not in args.skip:
            why = datatrove_ok(args.datatrove_python)
            if why:
                notes.append(f"datatrove skipped: {why}")
                print(f"  datatrove skipped: {why}", flush=True)
            else:
                for w in args.workers:
                    add("datatrove local", w, run_datatrove(tmp, args.datatrove_python, corpus, w, args.datatrove_language))
        shutil.rmtree(corpus, ignore_errors=True)

        if "memory" not in args.skip:
            for n in args.memory_sizes:
                folder = tmp / f"corpus-{n}"
                size = write_corpus(folder, n, args.file_docs)
                head = RayHead(args.memory_workers, tmp)
                try:
                    r = run_lmforge(tmp, f"memory-{n}", {**base, "input": str(folder), "kind": "ray",
                                                          "workers": args.memory_workers, "address": head.address}, head)
                finally:
                    head.stop()
                shutil.rmtree(folder, ignore_errors=True)
                phases = r["execution"]["phases"]
                memory.append({"documents": n, "mb": size / 1e6, "wall_s": r["wall_s"],
                               "worker_peak_rss_mb": r["worker_peak_rss_mb"], "driver_peak_rss_mb": r["driver_peak_rss_mb"],
                               "ray_worker_processes": r["worker_processes_seen"],
                               "minhash_reduce_units": phases.get("clean: minhash reduce", {}).get("units")})
                print(f"  memory, {n:,} documents: largest Ray worker {r['worker_peak_rss_mb']:.0f} MB, "
                      f"driver {r['driver_peak_rss_mb']:.0f} MB", flush=True)
    finally:
        if not args.tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    total_s = time.perf_counter() - t_all
    report(args, rows, memory, notes, load_before, total_s)


def report(args, rows: list[dict], memory: list[dict], notes: list[str], load_before, total_s: float) -> None:
    def per_core(r: dict) -> float:
        return r["mb_in"] / r["wall_s"] / r["workers"]

    print(f"\n{platform.node()}: {os.cpu_count()} CPUs; load average {load_before[0]:.2f} before, "
          f"{os.getloadavg()[0]:.2f} after; {total_s / 60:.1f} min in all")
    parts = (f"{args.part_docs:,} documents / {args.part_bytes / 2**20:g} MiB of text per partition"
             if args.part_docs or args.part_bytes else "lmforge's default partition sizes")
    print(f"lmforge: {parts}; input: JSONL files of {args.file_docs:,} documents\n")
    print("| executor | workers | MB in | wall s | MB/s | MB/s per worker (core) | GB per CPU-hour | documents kept | largest worker peak RSS MB |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        mbs = r["mb_in"] / r["wall_s"]
        peak = f"{r['worker_peak_rss_mb']:.0f}" if r.get("worker_peak_rss_mb") else "-"
        print(f"| {r['executor']} | {r['workers']} | {r['mb_in']:.1f} | {r['wall_s']:.1f} | {mbs:.2f} | {per_core(r):.2f} | "
              f"{per_core(r) * 3.6:.1f} | {r['documents_out']:,} | {peak} |")
    by = {(r["executor"], r["workers"]): r for r in rows}
    print()
    ratios = {}
    if ("lmforge ray", 1) in by and ("lmforge ray", 2) in by:
        ratios["ray_2_over_1"] = by["lmforge ray", 1]["wall_s"] / by["lmforge ray", 2]["wall_s"]
        print(f"- Ray, 2 workers / 1 worker: {ratios['ray_2_over_1']:.2f}x the throughput")
    if ("lmforge local", 1) in by and ("lmforge local", 2) in by:
        ratios["local_2_over_1"] = by["lmforge local", 1]["wall_s"] / by["lmforge local", 2]["wall_s"]
        print(f"- local, 2 workers / 1 worker: {ratios['local_2_over_1']:.2f}x the throughput")
    starts = [f"{r['ray_start_s']:.1f} s" for r in rows if "ray_start_s" in r]
    if starts:
        print(f"- starting the Ray head (not in the times above): {', '.join(starts)}")
    for w in args.workers:
        dt = by.get(("datatrove local", w))
        if dt is None:
            continue
        for name in ("lmforge local", "lmforge ray", "lmforge local, datatrove's steps"):
            if (name, w) in by:
                x = per_core(by[name, w]) / per_core(dt)
                ratios[f"{name} / datatrove, {w} workers, per core"] = x
                print(f"- {name} / datatrove local, {w} worker(s), MB/s per core: {x:.1f}x")
    dts = [r for r in rows if r["executor"] == "datatrove local"]
    if dts:
        d = dts[0]["detail"]
        print(f"\ndatatrove {d.get('datatrove_version')} steps: {', '.join(d['steps'])}; tasks per file stage: {d['tasks']}")
        for n in d["notes"]:
            print(f"- {n}")
        if "LanguageFilter" not in d["steps"]:
            print("- language ID: left out of datatrove's pipeline: its LanguageFilter downloads fastText's lid.176 model "
                  "at first use and this machine is offline (--datatrove-language adds it where the model can be had)")
        print("- lmforge's full stage also runs URL dedup, line dedup and language ID (cld2); "
              "\"lmforge local, datatrove's steps\" turns those three off")
    for n in notes:
        print(f"- {n}")
    if memory:
        print(f"\nmemory: lmforge on Ray, {args.memory_workers} workers, a fresh Ray head per size; "
              "peak RSS (VmHWM) of every Ray worker process, read every 0.1 s\n")
        print("| documents | MB | wall s | largest worker peak RSS MB | driver peak RSS MB | Ray worker processes | MinHash reduce units |")
        print("|---:|---:|---:|---:|---:|---:|---:|")
        for m in memory:
            print(f"| {m['documents']:,} | {m['mb']:.1f} | {m['wall_s']:.1f} | {m['worker_peak_rss_mb']:.0f} | "
                  f"{m['driver_peak_rss_mb']:.0f} | {m['ray_worker_processes']} | {m['minhash_reduce_units']} |")
        peaks = [m["worker_peak_rss_mb"] for m in memory]
        if len(peaks) > 1 and peaks[0] > 0:
            print(f"\nlargest worker peak, largest size / smallest size: {peaks[-1] / peaks[0]:.2f}x "
                  f"for {memory[-1]['mb'] / memory[0]['mb']:.1f}x the data")
    if args.json:
        out = Path(args.json)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"machine": {"node": platform.node(), "cpus": os.cpu_count(),
                                               "load_before": load_before, "load_after": os.getloadavg()},
                                   "args": {k: v for k, v in vars(args).items() if k != "child"},
                                   "throughput": rows, "ratios": ratios, "memory": memory, "notes": notes,
                                   "total_s": total_s}, indent=2))
        print(f"\nwritten: {out}")


if __name__ == "__main__":
    main()
