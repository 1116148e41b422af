"""datatrove's MinHash near-dedup alone, for ``benchmarks/near_dup_quality.py``; its four-stage
builder is shared with ``benchmarks/_datatrove_clean.py``. Runs in a venv with datatrove (not
lmforge's):

    /work/dtvenv/bin/python benchmarks/_datatrove_minhash.py --input FILE.jsonl --work DIR --result OUT.json

Stages (one LocalPipelineExecutor each): 1. read the JSONL -> MinHash signatures (5-grams,
14 buckets x 8 hashes, as lmforge's near dedup; ``--seed``); 2. buckets (one task per bucket);
3. clusters (one task, cluster ids kept); 4. read the JSONL again -> MinhashDedupFilter ->
the kept and the removed documents, each with its cluster id.

The result names every document in a cluster (``clusters``: id -> cluster id) and the removed
ones (``removed``). With ``--tokens-for IDS.json``, it also holds datatrove's words of those
documents (``simplify_text`` then the English word tokenizer, spaCy's, as its signature step
splits them), for the caller to compare with lmforge's; ``--tokens-only`` gives only those.
"""

from __future__ import annotations

import argparse
import json
import time
from importlib import metadata
from pathlib import Path


def minhash_config(seed: int = 1):
    """lmforge's near-dedup shape: 5-grams, 14 buckets x 8 hashes, 64-bit hashes."""
    from datatrove.pipeline.dedup.minhash import MinhashConfig
    from datatrove.utils.hashing import HashConfig

    return MinhashConfig(n_grams=5, num_buckets=14, hashes_per_bucket=8, seed=seed, hash_config=HashConfig(precision=64))


def minhash_stages(mh, first_steps: list, second_reader, last_steps: list, work: Path, tasks: int, workers: int,
                   save_cluster_id: bool = False, exclusion_writer=None) -> list:
    """The four stages as (name, executor), each depending on the one before: ``first_steps``
    then the signatures; buckets; clusters; ``second_reader`` -> the filter -> ``last_steps``."""
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.dedup import MinhashDedupBuckets, MinhashDedupCluster, MinhashDedupFilter, MinhashDedupSignature

    sigs, buckets, clusters = (str(work / d) for d in ("signatures", "buckets", "clusters"))
    logs = work / "logs"
    stage1 = LocalPipelineExecutor(
        [*first_steps, MinhashDedupSignature(output_folder=sigs, config=mh, language="en")],
        tasks=tasks, workers=workers, logging_dir=str(logs / "1-signatures"))
    stage2 = LocalPipelineExecutor(
        [MinhashDedupBuckets(input_folder=sigs, output_folder=buckets, config=mh)],
        tasks=mh.num_buckets, workers=workers, logging_dir=str(logs / "2-buckets"), depends=stage1)
    stage3 = LocalPipelineExecutor(
        [MinhashDedupCluster(input_folder=buckets, output_folder=clusters, config=mh, save_cluster_id=save_cluster_id)],
        tasks=1, workers=1, logging_dir=str(logs / "3-cluster"), depends=stage2)
    stage4 = LocalPipelineExecutor(
        [second_reader, MinhashDedupFilter(input_folder=clusters, exclusion_writer=exclusion_writer, load_cluster_ids=save_cluster_id),
         *last_steps],
        tasks=tasks, workers=workers, logging_dir=str(logs / "4-dedup-filter"), depends=stage3)
    return [("signatures", stage1), ("buckets", stage2), ("cluster", stage3), ("dedup filter", stage4)]


def run_stages(stages: list) -> dict:
    """Run the stages in order; each one's wall seconds."""
    seconds = {}
    for name, st in stages:
        t = time.perf_counter()
        st.run()  # a stage runs its dependencies first: they are done by now, so it skips them
        seconds[name] = round(time.perf_counter() - t, 2)
    return seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--input", required=True, help="a JSONL file with 'id' and 'text' fields")
    ap.add_argument("--work", required=True, help="scratch folder (created; must not hold an earlier run)")
    ap.add_argument("--seed", type=int, default=1, help="MinhashConfig's seed (its hash functions)")
    ap.add_argument("--tokens-for", help="JSON list of document ids whose datatrove words go into the result")
    ap.add_argument("--tokens-only", action="store_true", help="only the words of --tokens-for: no dedup run")
    ap.add_argument("--result", required=True)
    args = ap.parse_args()

    from datatrove.pipeline.readers import JsonlReader
    from datatrove.pipeline.writers import JsonlWriter

    inp, work = Path(args.input), Path(args.work)
    work.mkdir(parents=True, exist_ok=False)
    mh = minhash_config(args.seed)

    def reader():
        return JsonlReader(str(inp.parent), glob_pattern=inp.name, text_key="text", id_key="id")

    def writer(folder: str):
        return JsonlWriter(str(work / folder), output_filename="${rank}.jsonl", compression=None)

    stages = minhash_stages(mh, [reader()], reader(), [writer("kept")], work, tasks=1, workers=1,
                            save_cluster_id=True, exclusion_writer=writer("removed"))
    t0 = time.perf_counter()
    seconds = run_stages(stages) if not args.tokens_only else {}
    wall = time.perf_counter() - t0

    clusters: dict[str, int] = {}
    removed: list[str] = []
    for folder in ("kept", "removed") if not args.tokens_only else ():
        for path in sorted((work / folder).glob("*.jsonl")):
            for line in open(path, encoding="utf-8"):
                row = json.loads(line)
                cluster = row.get("metadata", {}).get("minhash_cluster_id", -1)
                if cluster != -1:
                    clusters[row["id"]] = cluster
                if folder == "removed":
                    removed.append(row["id"])

    tokens = {}
    if args.tokens_for:
        from datatrove.pipeline.dedup import MinhashDedupSignature

        wanted = set(json.loads(Path(args.tokens_for).read_text()))
        step = MinhashDedupSignature(output_folder=str(work / "unused"), config=mh, language="en")
        from datatrove.utils.text import simplify_text

        for line in open(inp, encoding="utf-8"):
            row = json.loads(line)
            if row["id"] in wanted:
                tokens[row["id"]] = step.word_tokenizer.word_tokenize(simplify_text(row["text"], mh.norm_config))

    Path(args.result).write_text(json.dumps({
        "wall_s": wall, "stage_wall_seconds": seconds, "seed": args.seed, "removed": removed, "clusters": clusters,
        "tokens": tokens, "datatrove_version": metadata.version("datatrove"),
    }))


if __name__ == "__main__":
    main()
