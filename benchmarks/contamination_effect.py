"""What contamination did to a finished run: each fine-tuned model's test accuracy on the test
examples whose text the pretraining corpus also held (a 13-word run shared with a training
document, the clean stage's decontamination rule) against the rest, pretrained and from scratch.

Run it in a project whose clean stage ran with ``clean.decontaminate.enabled: false`` (or before
decontamination existed), after ``lmforge run``:

    python benchmarks/contamination_effect.py --project DIR [--task docstring_kind] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def overlapping_examples(params, task, ngram: int, min_words: int) -> list[bool]:
    """For each test example: does a training document of the clean corpus share a run with it."""
    import pyarrow.parquet as pq

    from lmforge.cleaning import decontaminate as dc
    from lmforge.finetuning.tasks.evaluation_texts import example_text
    from lmforge.layout import corpus_dir
    from lmforge.splits import split_of

    word_hashes = dc.WordHashes()
    texts = [example_text(e) for e in task.splits["test"]]
    grams = dc.GramSet(dc.registered(texts, ngram, min_words, word_hashes))
    found = []
    for shard in sorted(corpus_dir(params).glob("shard-*.parquet")):
        table = pq.read_table(shard, columns=["id", "text"])
        for doc_id, text in zip(table.column("id").to_pylist(), table.column("text").to_pylist()):
            if split_of(doc_id, params.split) == "train":
                verdict = dc.scan(text or "", grams, word_hashes)
                if verdict is not None:
                    found.append(verdict.matched)
    seen = dc.GramSet.union(found)
    return [dc.overlap([t], seen, ngram, min_words, word_hashes).overlapping == 1 for t in texts]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--project", default=".")
    parser.add_argument("--task", default="docstring_kind")
    parser.add_argument("--json")
    args = parser.parse_args(argv)

    import os

    os.chdir(args.project)
    from lmforge.config import load_params
    from lmforge.finetuning.tasks import load_task
    from lmforge.inference.loading import load
    from lmforge.inference.predict import predict

    params = load_params("params.yaml")
    d = params.clean.decontaminate
    task = load_task(args.task, params, max_eval=None)
    test = task.splits["test"]
    flags = overlapping_examples(params, task, d.ngram, d.min_words)
    n_in = sum(flags)
    print(f"{args.task}: {len(test)} test examples, {n_in} share a {d.ngram}-word run with a training document")
    rows = []
    for arch in params.train.architectures:
        row = {"architecture": arch}
        for arm, folder in (("pretrained", args.task), ("scratch", f"{args.task}-scratch")):
            directory = Path(params.train.output) / arch / folder / "model"
            if not directory.exists():
                break
            predictions = predict(load(directory), [e.text for e in test],
                                  [e.text_pair for e in test] if task.pair else None)
            right = [p.label == e.label for p, e in zip(predictions, test)]
            inside = [r for r, f in zip(right, flags) if f]
            outside = [r for r, f in zip(right, flags) if not f]
            row[arm] = {"in_corpus": sum(inside) / max(len(inside), 1), "not_in_corpus": sum(outside) / max(len(outside), 1),
                        "all": sum(right) / len(right)}
        else:
            rows.append(row)
    print("| architecture | pretrained: in corpus | pretrained: not in corpus | scratch: in corpus | scratch: not in corpus "
          "| gain in corpus | gain not in corpus |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        p, s = r["pretrained"], r["scratch"]
        print(f"| {r['architecture']} | {100 * p['in_corpus']:.1f} | {100 * p['not_in_corpus']:.1f} | "
              f"{100 * s['in_corpus']:.1f} | {100 * s['not_in_corpus']:.1f} | "
              f"{100 * (p['in_corpus'] - s['in_corpus']):+.1f} | {100 * (p['not_in_corpus'] - s['not_in_corpus']):+.1f} |")
    if args.json:
        Path(args.json).write_text(json.dumps({"task": args.task, "test": len(test), "in_corpus": n_in, "rows": rows},
                                              indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
