"""The quality filter on data no one wrote for it: the GNU manuals installed on this machine
(``/usr/share/info``, one document per Info node) as the reference, against the docstring corpus
of the standard library and a few installed packages (the demo corpus, cleaned by the clean
stage). Prints the classifier's held-out figures, the time of each step, the n-grams it leans on,
the highest and lowest scored documents and what the filter keeps, by module.

    PYTHONPATH=src python benchmarks/quality_filter.py --work /tmp/quality-demo \\
        --packages numpy,pandas,sklearn,networkx --keep-fraction 0.5

Everything is written under ``--work`` (the reference JSONL, the clean and quality outputs)."""

from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
import time
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq

from lmforge.cleaning.quality_stage import run_quality
from lmforge.cleaning.stage import run_clean
from lmforge.config import parse_params

_SKIP_NODES = re.compile(r"index|copying|licen[cs]e|gnu (fdl|gpl|lgpl)\b|gnu free documentation", re.IGNORECASE)
_UNDERLINE = re.compile(r"^\s*([*=\-.])\1{2,}\s*$")


def info_documents(folder: Path, min_words: int = 40) -> list[dict]:
    """One document per node of each Info manual under ``folder``: its text without the node
    header line, the menus and the title underlines; index, licence and copying nodes left out."""
    docs = []
    for path in sorted(folder.glob("*.info*.gz")):
        manual = path.name.split(".info")[0]
        raw = gzip.decompress(path.read_bytes()).decode("utf-8", errors="replace")
        for chunk in raw.split("\x1f"):
            chunk = chunk.lstrip("\n")
            if not chunk.startswith("File: "):
                continue
            header, _, body = chunk.partition("\n")
            node = re.search(r"Node: ([^,]+)", header)
            name = node.group(1).strip() if node else "?"
            if _SKIP_NODES.search(name):
                continue
            lines = [line for line in body.splitlines()
                     if not _UNDERLINE.match(line) and not line.startswith("* ") and line.strip() != "* Menu:"]
            text = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
            if len(text.split()) >= min_words:
                docs.append({"id": f"{manual}:{name}", "text": text})
    return docs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--info", type=Path, default=Path("/usr/share/info"))
    ap.add_argument("--packages", default="numpy,pandas,sklearn,networkx", help="site packages whose docstrings join the corpus")
    ap.add_argument("--keep-fraction", type=float, default=0.5)
    ap.add_argument("--show", type=int, default=5, help="top and bottom documents printed")
    args = ap.parse_args()
    work = args.work.resolve()
    (work / "reference").mkdir(parents=True, exist_ok=True)

    t = time.perf_counter()
    manuals = info_documents(args.info)
    ref_file = work / "reference" / "gnu-info.jsonl"
    ref_file.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in manuals), encoding="utf-8")
    by_manual = Counter(d["id"].split(":")[0] for d in manuals)
    print(f"reference: {len(manuals)} Info nodes from {len(by_manual)} manuals "
          f"({sum(len(d['text']) for d in manuals):,} characters) in {time.perf_counter() - t:.1f}s")

    packages = [p for p in args.packages.split(",") if p]
    params = parse_params({
        "clean": {"inputs": ["stdlib"], "include_site_packages": packages or False, "output": str(work / "clean")},
        "quality": {"enabled": True, "reference": [str(ref_file)], "output": str(work / "quality"),
                    "keep_fraction": args.keep_fraction},
    })
    t = time.perf_counter()
    clean = run_clean(params.clean, log=lambda _: None)
    print(f"clean: {clean.stats['documents_in']} docstring documents in, {clean.stats['documents_out']} kept "
          f"({time.perf_counter() - t:.1f}s{', up to date' if clean.skipped else ''})")

    t, cpu = time.perf_counter(), time.process_time()
    result = run_quality(params, log=print)
    seconds, cpu = time.perf_counter() - t, time.process_time() - cpu
    s = result.stats
    v = s["classifier"]["validation"]
    print(f"quality stage: {seconds:.1f}s wall, {cpu:.1f}s CPU{' (up to date)' if result.skipped else ''}")
    print(json.dumps({"validation": v, "cut_score": s["cut_score"], "score_quantiles": s["score_quantiles"],
                      "documents_in": s["documents_in"], "documents_out": s["documents_out"],
                      "bytes_kept_fraction": s["bytes_kept_fraction"]}, indent=1))
    for side in ("reference", "corpus"):
        print(f"n-grams towards {side}: " + ", ".join(g for g, _ in s["classifier"]["top_features"][side][:20]))

    # the documents, highest and lowest scored, and what is kept by module and by kind of docstring
    texts, meta = {}, {}
    for shard in sorted((work / "clean").glob("shard-*.parquet")):
        for row in pq.read_table(shard, columns=["id", "text", "source", "metadata"]).to_pylist():
            texts[row["id"]] = row["text"]
            meta[row["id"]] = (row["source"], json.loads(row["metadata"]).get("module", "?"))
    scores = sorted(pq.read_table(work / "quality" / "scores.parquet").to_pylist(), key=lambda r: (-r["score"], r["id"]))

    def show(rows: list[dict], title: str) -> None:
        print(f"\n{title}")
        for r in rows:
            snippet = " ".join(texts[r["id"]].split())[:240]
            print(f"  {r['score']:.3f}  {r['id']}  [{meta[r['id']][0]}]  {snippet}")

    for t in (0.5, 0.8):
        print(f"documents scoring at least {t}: {sum(r['score'] >= t for r in scores)} of {len(scores)}")
    show(scores[:args.show], "highest scored:")
    show(scores[-args.show:], "lowest scored:")
    top = lambda rows: Counter(meta[r["id"]][1].split(".")[0] for r in rows)  # noqa: E731
    kept, dropped = [r for r in scores if r["kept"]], [r for r in scores if not r["kept"]]
    print("\nkept share by top-level module (modules with 20 documents or more):")
    k, d = top(kept), top(dropped)
    for mod in sorted(set(k) | set(d), key=lambda m: -(k[m] / (k[m] + d[m]))):
        if k[mod] + d[mod] >= 20:
            print(f"  {mod:20s} {k[mod]:5d} of {k[mod] + d[mod]:5d}  {k[mod] / (k[mod] + d[mod]):.0%}")
    kinds_k, kinds_d = Counter(meta[r["id"]][0] for r in kept), Counter(meta[r["id"]][0] for r in dropped)
    print("kept share by kind of docstring: " + ", ".join(
        f"{kind} {kinds_k[kind]}/{kinds_k[kind] + kinds_d[kind]}" for kind in sorted(set(kinds_k) | set(kinds_d))))

    # does it lean on length, or on the Info format's own words? The rank correlation of score and
    # length, and the filter again with "GNU" and Info's "*note" cross-references taken out of the
    # reference: how much of the kept half stays the same
    import numpy as np
    from scipy.stats import spearmanr

    from lmforge.cleaning.quality import keep_mask, score, train

    ids = [r["id"] for r in scores]
    first = np.array([r["score"] for r in scores])
    lengths = np.array([len(texts[i]) for i in ids])
    print(f"\nSpearman correlation of score and length (characters) over the corpus: {spearmanr(first, lengths)[0]:.3f}")
    artefacts = re.compile(r"\bGNU\b|\*[Nn]ote\b")
    stripped = [artefacts.sub(" ", d["text"]) for d in manuals]
    t = time.perf_counter()
    again = train(stripped, [texts[i] for i in sorted(texts)], params.quality)
    second = score(again.model, [texts[i] for i in ids], params.quality)
    both = keep_mask(first, ids, params.quality) & keep_mask(second, ids, params.quality)
    print(f"reference without 'GNU' and '*note': held-out accuracy {again.validation['accuracy']:.3f}, balanced "
          f"{again.validation['balanced_accuracy']:.3f}, AUC {again.validation['auc']:.3f}; Spearman of the two scores "
          f"{spearmanr(first, second)[0]:.3f}; kept by both {int(both.sum())} of {int(keep_mask(first, ids, params.quality).sum())} "
          f"({time.perf_counter() - t:.1f}s)")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
