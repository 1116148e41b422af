"""The table of the default run for BENCHMARKS.md, from data/report/evaluation/*.json (after `make run`).

Usage: .venv/bin/python benchmarks/default_run.py [PROJECT_DIR]
"""
import json, sys
from pathlib import Path
root = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
order = ["gpt", "bert", "albert", "ernie", "elmo", "transformer_xl", "xlnet", "bart", "t5", "switch"]
print("| architecture | objective | steps | pretrain s | val loss at start | val loss after | unigram baseline | ln V | bits/byte | token acc. | fine-tune s | test acc. | macro-F1 | majority | bag of words |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for a in order:
    e = json.loads((root / "data/report/evaluation" / f"{a}.json").read_text())
    p = e["pretrain"]; v = p["validation"]; s = p["validation_start"]
    ft = next(iter(e["finetune"].values()))
    b = ft["baselines"]
    print(f"| {a} | {e['objective']} | {p['steps']} | {p['seconds']:.0f} | {s['loss']:.3f} | {v['loss']:.3f} | {v['unigram_loss']:.3f} | {v['uniform_loss']:.3f} | "
          f"{v['bits_per_byte']:.3f} | {v['accuracy']:.3f} | {ft['seconds']:.0f} | {ft['test']['accuracy']:.3f} | {ft['test']['macro_f1']:.3f} | "
          f"{b['majority']['accuracy']:.3f} | {b['bag_of_words']['accuracy']:.3f} |")
