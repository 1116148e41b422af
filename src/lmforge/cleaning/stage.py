"""The clean stage: ingest (``ingest.py``) -> URL dedup -> the C4 rules, language ID, bad words -> line dedup ->
MinHash near-dup dedup (and the copies of earlier outputs' documents) -> the final shards, ``stats.json`` and
the kept documents' signatures. This module runs the phases
(each resumable, shard by shard or partition by partition, on an executor: a process pool or Ray tasks) and
publishes the output; the units are the phases' own: ``filter_phase.py``, the cross-document passes in
``dedup/``, ``decontaminate_phase.py``, ``write_phase.py`` (which also writes ``stats.json``). See docs/CLEANING.md.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..artifacts import atomic_write_bytes, atomic_write_json, fingerprint, finished, staged_dir
from ..config import CleanConfig, ExecutorConfig
from ..corpus.document import CorpusError
from ..corpus.readers import is_uri
from ..corpus.sources import resolve_inputs
from ..corpus.stdlib import CORPUS_VERSION
from ..executors import open_executor
from ..executors.base import execution_report, run_phase
from . import decontaminate as dc
from . import decontaminate_phase as dp
from .dedup.lines import dedup_apply, dedup_map, dedup_reduce
from .dedup.minhash import cluster_sizes, minhash_map, minhash_reduce, near_duplicates
from .dedup.prior import (Prior, open_priors, own_map, prior_exact_reduce, prior_ids, prior_map, prior_matches,
                          prior_near_reduce, prior_units)
from .dedup.urls import url_map, url_reduce
from .filter_phase import filter_shard
from .filters import build_steps
from .ingest import ingest
from .shards import shard_name
from .write_phase import outputs_intact, publish_index, write_final, write_stats

_PART_BYTES = 32 << 20  # line-dedup partition: about this much text per partition
_PART_DOCS = 1_000_000  # URL and MinHash partitions: about this many documents each


@dataclass
class CleanResult:
    output: Path
    stats: dict[str, Any]
    seconds: float
    skipped: bool = False
    execution: dict[str, Any] | None = None  # the executor and each phase's units, time and workers


def _package_versions(selection: bool | list[str]) -> list[list[str]]:
    """[top-level package, its distributions' versions] for the selected installed packages."""
    if not selection:
        return []
    from importlib import metadata

    owners = metadata.packages_distributions()
    names = sorted(owners) if selection is True else list(selection)
    out = []
    for name in names:
        versions = []
        for dist in sorted(set(owners.get(name, []))):
            try:
                versions.append(f"{dist}=={metadata.version(dist)}")
            except metadata.PackageNotFoundError:
                continue
        out.append([name, *versions])
    return out


def _fingerprint(cfg: CleanConfig, priors: list[Prior] | None = None, evaluation: dc.EvaluationSets | None = None) -> str:
    """Identifies the inputs and parameters (and the prior outputs deduped against: a changed
    one is a changed input; and the evaluation texts): work left by a run with another
    fingerprint is discarded."""
    items: list[Any] = [cfg.model_dump(mode="json", exclude={"workers", "keep_work", "output"})]
    items += [p.identity() for p in priors or []]
    if cfg.decontaminate.enabled and evaluation is not None:
        items.append(evaluation.fingerprint())
    return fingerprint(*items, *input_versions(cfg.inputs, cfg.include_site_packages))


def input_versions(specs: list[str], include_site_packages: bool | list[str] = False) -> list[Any]:
    """What identifies the contents of input ``specs`` (files' sizes and modification times, an
    object store's ETags, the interpreter and packages the demo corpus reads), for a fingerprint."""
    items: list[Any] = []
    for spec in specs:
        p = Path(spec)
        if p.is_file():
            st = p.stat()
            items.append([spec, st.st_size, st.st_mtime_ns])
        elif p.is_dir():
            for f in sorted(q for q in p.rglob("*") if q.is_file()):
                st = f.stat()
                items.append([str(f), st.st_size, st.st_mtime_ns])
        elif is_uri(spec):  # an object store's files: their sizes and ETags (or modification times)
            try:
                items.append([[i.label, i.size, i.version] for i in resolve_inputs([spec])])
            except CorpusError:
                items.append(spec)  # reported (or skipped) when the stage reads its inputs
        elif spec == "stdlib":
            items.append([spec, sys.version, CORPUS_VERSION])  # the demo corpus changes with the interpreter
            items.append(_package_versions(include_site_packages))  # ... and with the packages it reads
        else:
            items.append(spec)
    return items


def run_clean(cfg: CleanConfig, log: Callable[[str], None] = print, executor: ExecutorConfig | None = None,
              evaluation: dc.EvaluationSets | None = None) -> CleanResult:
    """Run the clean stage to completion (resuming unfinished work) and return its stats.
    ``executor``: where the units run (default: this machine's process pool); the output is the
    same on every executor. ``evaluation``: what ``clean.decontaminate`` removes overlap with
    (None: nothing; the stage passes the configured tasks and the corpus's held-out split)."""
    t0 = time.perf_counter()
    output = Path(cfg.output)
    wd = work_dir(output)
    priors = open_priors(cfg) if cfg.near_dedup.enabled else []  # checked before anything is written
    fp = _fingerprint(cfg, priors, evaluation)
    prev = None if wd.exists() else finished(output / "stats.json", fp, intact=lambda stats: outputs_intact(output, stats))
    if prev is not None:
        log(f"clean: {output} is up to date (same inputs and parameters)")
        return CleanResult(output, prev, time.perf_counter() - t0, skipped=True)
    fp_path = wd / "fingerprint"
    if wd.exists() and (not fp_path.exists() or fp_path.read_text().strip() != fp):
        log("clean: discarding unfinished work from a run with other inputs or parameters")
        shutil.rmtree(wd)
    if not wd.exists():
        wd.mkdir(parents=True)
        atomic_write_bytes(fp_path, fp.encode())
    build_steps(cfg)  # fail fast on a bad word list or a missing language backend

    workers = cfg.workers or os.cpu_count() or 1
    work = str(wd.resolve())  # the units may run in other processes, on other machines, in other folders
    cfg_json = _task_config(cfg).model_dump_json()
    with open_executor(executor or ExecutorConfig(), workers, log) as ex:
        manifest = ingest(cfg, wd, ex, workers, log)
        n_shards = manifest["shards"]

        def run_all(fn: Callable[..., bool], args: list[tuple]) -> None:
            run_phase(ex, fn, args, "clean", log)

        n_url_parts = 0
        if cfg.urls.dedup:
            n_url_parts = max(1, math.ceil(manifest["documents"] / _PART_DOCS))
            run_all(url_map, [(work, s, cfg_json, n_url_parts) for s in range(n_shards)])
            run_all(url_reduce, [(work, p, n_shards, cfg.shard_size) for p in range(n_url_parts)])
        run_all(filter_shard, [(work, s, cfg_json, n_url_parts) for s in range(n_shards)])
        log("filter: done")

        source = "filter"
        if cfg.line_dedup.mode != "off":
            n_parts = max(1, math.ceil(manifest["bytes"] / _PART_BYTES))
            run_all(dedup_map, [(work, s, cfg.line_dedup.mode, cfg.line_dedup.span_sentences, n_parts) for s in range(n_shards)])
            run_all(dedup_reduce, [(work, p, n_shards, cfg.shard_size) for p in range(n_parts)])
            run_all(dedup_apply, [(work, s, cfg_json, n_parts) for s in range(n_shards)])
            source = "dedup"
            log(f"line dedup ({cfg.line_dedup.mode}): done")

        near_drops: dict[int, int] = {}
        prior_drops: dict[int, tuple[str, dict]] = {}
        clusters: dict[int, int] | None = None
        if cfg.near_dedup.enabled:
            nd = cfg.near_dedup
            prior_docs = sum(p.manifest["documents"] for p in priors)
            n_parts = max(1, math.ceil((manifest["documents"] + prior_docs) / _PART_DOCS))
            run_all(minhash_map, [(work, s, cfg_json, source, n_parts) for s in range(n_shards)])
            run_all(minhash_reduce, [(work, u, n_shards, nd.verify_threshold) for u in range(nd.bands * n_parts)])
            near_drops = near_duplicates(wd, nd.bands * n_parts)
            clusters = cluster_sizes(near_drops)
            log(f"near dedup: {len(near_drops)} near-duplicates")
            if priors:
                units = prior_units(priors)
                run_all(own_map, [(work, s, cfg_json, source, n_parts) for s in range(n_shards)])
                run_all(prior_map, [(work, k, root, s, cfg_json, n_parts) for k, root, s in units])
                run_all(prior_near_reduce, [(work, u, n_shards, units, nd.verify_threshold) for u in range(nd.bands * n_parts)])
                run_all(prior_exact_reduce, [(work, p, n_shards, units) for p in range(n_parts)])
                prior_drops = _prior_drops(priors, prior_matches(wd, nd.bands * n_parts, n_parts))
                counts = Counter(reason for reason, _of in prior_drops.values())
                log(f"dedup against {len(priors)} prior output(s): {counts['prior_exact_duplicate']} exact and "
                    f"{counts['prior_near_duplicate']} near copies")

        per_shard: list[dict[int, int]] = [{} for _ in range(n_shards)]
        for o, root in near_drops.items():
            per_shard[o // cfg.shard_size][o] = root
        per_shard_prior: list[dict[int, tuple[str, dict]]] = [{} for _ in range(n_shards)]
        for o, drop in prior_drops.items():
            per_shard_prior[o // cfg.shard_size][o] = drop
        gone = [sorted({*per_shard[s], *per_shard_prior[s]}) for s in range(n_shards)]  # not in the corpus
        contaminated: list[dict[int, list[int]]] = [{} for _ in range(n_shards)]
        decon = cfg.decontaminate
        decontaminating = decon.enabled and evaluation is not None
        n_windows = 0
        if decontaminating:
            split_json = evaluation.split.model_dump_json()
            dp.decon_dir(work).mkdir(exist_ok=True)
            parts = [dc.registered(texts, decon.ngram, decon.min_words, dc.WordHashes())
                     for texts in evaluation.texts.values()]
            if decon.held_out:
                run_all(dp.held_out_windows, [(work, s, source, cfg_json, split_json, gone[s])
                                            for s in range(n_shards)])
                parts += [dc.GramSet.load(dp.decon_dir(work) / f"held-{shard_name(s)}.npz").by_length
                          for s in range(n_shards)]
            registered = dc.GramSet.union(parts)
            registered.save(dp.decon_dir(work) / "evaluation.npz")
            n_windows = len(registered)
            run_all(dp.scan_training, [(work, s, source, split_json, gone[s]) for s in range(n_shards)])
            for s in range(n_shards):
                verdicts = json.loads((dp.decon_dir(work) / f"scan-{shard_name(s)}.json").read_text(encoding="utf-8"))
                contaminated[s] = {int(o): lines for o, lines in verdicts["verdicts"].items()}
            log(f"decontamination: {sum(map(len, contaminated))} training documents overlap the {n_windows} "
                f"windows of the evaluation texts ({decon.ngram} words)")

        (wd / "final").mkdir(exist_ok=True)
        run_all(write_final, [(work, s, source, per_shard[s], per_shard_prior[s], cfg.dropped_samples,
                                cfg.near_dedup.enabled, contaminated[s], decon.mode) for s in range(n_shards)])
        if decontaminating:  # what is left: read back, not assumed
            run_all(dp.scan_training, [(work, s, "final", split_json, [], True) for s in range(n_shards)])

        # Publish: the shards, stats.json, the dropped samples and the charts go into a staged
        # folder that replaces the output whole; then the work folder (beside the output) goes,
        # unless it is to be kept.
        with staged_dir(output) as staged:
            for s in range(n_shards):
                os.replace(wd / "final" / f"{shard_name(s)}.parquet", staged / f"{shard_name(s)}.parquet")
            report = None
            if decontaminating:
                report = dp.report(cfg, wd, n_shards, evaluation, staged, n_windows)
                atomic_write_json(staged / "decontamination.json", report)
            index = publish_index(cfg, wd, staged, n_shards) if cfg.near_dedup.enabled else None
            stats = write_stats(cfg, wd, staged, manifest, n_shards, source, fp, clusters, index, priors, report)
            # the pictures of stats.json, drawn side by side by the workers (the charts are
            # imported only here, where they are drawn)
            from ..charts import write_chart
            from ..charts.corpus import clean_charts

            drawings = [(str(staged.resolve()), name, draw) for name, draw in clean_charts(stats).items() if draw is not None]
            for warning in ex.map(write_chart, drawings, "clean: charts"):
                if warning is not None:
                    log(warning)
        execution = execution_report(ex)
    if not cfg.keep_work:
        shutil.rmtree(wd, ignore_errors=True)
    return CleanResult(output, stats, time.perf_counter() - t0, execution=execution)


def _task_config(cfg: CleanConfig) -> CleanConfig:
    """The configuration the units read, with its one file path made absolute: a unit may run in
    another folder or on another machine (which must see the same path)."""
    if cfg.bad_words.path is None:
        return cfg
    return cfg.model_copy(update={"bad_words": cfg.bad_words.model_copy(update={"path": str(Path(cfg.bad_words.path).resolve())})})


def work_dir(output: Path) -> Path:
    """``<output>/../.<output name>.work``: where a run works until it publishes, beside the
    output rather than in it, so that a run that fails or is stopped leaves the finished output
    (and what DVC records of it) as it was."""
    return output.with_name(f".{output.name}.work")


def _prior_drops(priors: list[Prior], matches: dict[int, tuple[str, tuple[int, int, int], float]]) -> dict[int, tuple[str, dict]]:
    """ordinal -> (drop reason, the prior document it copies: the prior output, its id, shard and
    row, and the signatures' similarity)."""
    ids = prior_ids(priors, {(k, s) for _reason, (k, s, _r), _sim in matches.values()})
    out = {}
    for o, (reason, (k, s, r), sim) in sorted(matches.items()):
        out[o] = (reason, {"output": priors[k].path, "id": ids[(k, s)][r], "shard": priors[k].shards[s]["name"], "row": r,
                           "similarity": round(sim, 4)})
    return out
