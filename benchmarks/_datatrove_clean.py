"""datatrove's side of ``benchmarks/clean_executors.py``: the pipeline closest to lmforge's clean
stage, on datatrove's LocalPipelineExecutor. Runs in a venv with datatrove (not lmforge's):

    /work/dtvenv/bin/python benchmarks/_datatrove_clean.py --input DIR --work DIR --workers 2 --result OUT.json

Stages (one LocalPipelineExecutor each, each waiting for the one before; ``--tasks`` tasks over
the input's JSONL files, ``--workers`` processes):

1. read JSONL -> C4QualityFilter (lmforge's C4 numbers: at least 3 sentences, 5 words a line)
   -> C4BadWordsFilter -> [LanguageFilter, only with --language] -> write the kept documents
   -> MinHash signatures (5-grams, 14 buckets x 8 hashes, as lmforge's near dedup);
2. MinHash buckets (one task per bucket); 3. MinHash clusters (one task);
4. read the kept documents again -> MinhashDedupFilter -> write the final JSONL.

datatrove downloads the bad-words list from GitHub the first time the filter runs. Offline, pass
``--badwords FILE`` (lmforge's packaged copy of the same LDNOOBW English list): it is put into
datatrove's asset cache (``HF_ASSETS_CACHE``, a scratch folder the caller sets) first. Without it
and without the internet the bad-words filter is left out. The language filter needs fastText's
lid.176 model, also downloaded at first use: it is included only with ``--language``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from importlib import metadata
from pathlib import Path


def seed_badwords(word_file: str) -> str:
    """Put ``word_file`` where C4BadWordsFilter looks for its downloaded English list; return a note."""
    from fsspec.core import strip_protocol
    from huggingface_hub import cached_assets_path

    from datatrove.pipeline.filters import c4_filters

    url = c4_filters._EN_BADWORDS_URL  # the pinned LDNOOBW 'en' file datatrove would download
    folder = cached_assets_path(library_name="datatrove", namespace="filters", subfolder="c4_badwords")
    local = os.path.join(folder, strip_protocol(url).replace("/", "_"))
    words = [w.strip() for w in Path(word_file).read_text(encoding="utf-8").splitlines()]
    Path(local).write_text("".join(w + "\n" for w in words if w and not w.startswith("#")), encoding="utf-8")
    Path(local + ".completed").touch()  # datatrove's marker that the download finished
    return f"bad words: lmforge's copy of the LDNOOBW en list ({sum(1 for w in words if w and not w.startswith('#'))} entries) seeded into datatrove's asset cache"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--input", required=True, help="folder of JSONL files with a 'text' field")
    ap.add_argument("--work", required=True, help="scratch folder (created; must not hold an earlier run)")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--tasks", type=int, default=0, help="tasks of the per-file stages (0: one per input file)")
    ap.add_argument("--badwords", help="word list to seed datatrove's bad-words cache with (offline)")
    ap.add_argument("--no-badwords", action="store_true")
    ap.add_argument("--language", action="store_true", help="add LanguageFilter (needs fastText's lid.176 model)")
    ap.add_argument("--min-sentences", type=int, default=3)
    ap.add_argument("--min-words-per-line", type=int, default=5)
    ap.add_argument("--result", required=True)
    args = ap.parse_args()

    from datatrove.pipeline.filters import C4BadWordsFilter, C4QualityFilter
    from datatrove.pipeline.readers import JsonlReader
    from datatrove.pipeline.writers import JsonlWriter

    from _datatrove_minhash import minhash_config, minhash_stages, run_stages  # this script's folder

    inp, work = Path(args.input), Path(args.work)
    files = sorted(p for p in inp.rglob("*.jsonl"))
    tasks = args.tasks or len(files)
    work.mkdir(parents=True, exist_ok=False)
    notes = []
    steps_used = ["C4QualityFilter"]

    filters = [C4QualityFilter(min_num_sentences=args.min_sentences, min_words_per_line=args.min_words_per_line)]
    if not args.no_badwords:
        try:
            if args.badwords:
                notes.append(seed_badwords(args.badwords))
            filters.append(C4BadWordsFilter(default_language="en"))
            steps_used.append("C4BadWordsFilter")
        except Exception as exc:  # noqa: BLE001  (datatrove's internals moved: run without it, say so)
            notes.append(f"bad words: left out ({type(exc).__name__}: {exc})")
    if args.language:
        from datatrove.pipeline.filters import LanguageFilter

        filters.append(LanguageFilter(languages=["en"]))
        steps_used.append("LanguageFilter")
    steps_used += ["MinHash signatures", "MinHash buckets", "MinHash cluster", "MinHash filter"]

    mh = minhash_config(seed=1)
    kept, final = str(work / "kept"), str(work / "final")

    def reader(folder: str):
        return JsonlReader(folder, glob_pattern="*.jsonl", text_key="text", id_key="id")

    stages = minhash_stages(
        mh, [reader(str(inp)), *filters, JsonlWriter(kept, output_filename="${rank}.jsonl", compression=None)],
        reader(kept), [JsonlWriter(final, output_filename="${rank}.jsonl", compression=None)], work, tasks, args.workers)
    t0 = time.perf_counter()
    stage_seconds = run_stages(stages)
    wall = time.perf_counter() - t0

    def count(folder: str) -> int:
        return sum(sum(1 for _ in open(p, "rb")) for p in Path(folder).glob("*.jsonl"))

    self_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    child_rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    Path(args.result).write_text(json.dumps({
        "wall_s": wall, "documents_after_filters": count(kept), "documents_out": count(final),
        "tasks": tasks, "workers": args.workers, "steps": steps_used, "notes": notes,
        "stage_wall_seconds": stage_seconds, "driver_peak_rss_mb": self_rss,
        # workers=1 runs the tasks in this process: its own peak is then the worker's
        "worker_peak_rss_mb": child_rss if args.workers > 1 else self_rss,
        "datatrove_version": metadata.version("datatrove"),
        "python": sys.version.split()[0],
    }, indent=2))


if __name__ == "__main__":
    main()
